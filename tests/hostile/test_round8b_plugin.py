"""Hostile input, round 8 (front B): the pytest plugin's item ids.

Two capture folders whose names differ only where :func:`forensics.escaping.terminal` writes an
escape (one holding ESC, one the four characters ``\\x1b``) became two items of one id: pytest
listed two results under one name, and ``--deselect`` of it took both. Each item's id and name
now tell them apart.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cases import capture

pytest_plugins = ["pytester"]


def test_captures_whose_names_escape_alike_get_ids_of_their_own(
        tmp_path: Path, pytester: pytest.Pytester) -> None:
    fleet = tmp_path / "fleet"
    escaped, literal = capture(fleet, name="a\x1b"), capture(fleet, name="a\\x1b")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--collect-only", "-q",
                                          "-o", "forensics_captures=",
                                          "--forensics-captures", str(fleet))
    ids = [line for line in result.outlines if line.endswith(".capture")]
    assert len(ids) == 2 and len(set(ids)) == 2, ids
    assert all("\x1b" not in line for line in result.outlines)
    assert {i.rsplit("/", 1)[-1] for i in ids} == {"a\\x1b.capture", "a\\\\x1b.capture"}, ids
    shown = next(i for i in ids if i.endswith("a\\x1b.capture"))
    deselected = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--collect-only", "-q", "-o", "forensics_captures=",
        "--forensics-captures", str(fleet), "--deselect", shown)
    left = [line for line in deselected.outlines if line.endswith(".capture")]
    assert len(left) == 1 and left[0] != shown, left
    assert escaped.is_dir() and literal.is_dir()


@pytest.mark.parametrize("regen", [False, True])
def test_a_capture_reached_through_a_planted_link_is_not_written(
        tmp_path: Path, pytester: pytest.Pytester, regen: bool) -> None:
    """A link planted in the folder of captures (``planted.capture`` -> a capture elsewhere,
    another user's) was collected, and its first run (or ``--forensics-regen``) wrote
    ``expected.json`` into the folder it points to: outside the folder pytest was given. Its
    item now fails in one line saying so, writing nothing; the folder's own captures are
    written as before."""
    fleet, elsewhere = tmp_path / "fleet", tmp_path / "elsewhere"
    target = capture(elsewhere, name="real")
    (target / "expected.json").unlink()
    fleet.mkdir()
    (fleet / "planted.capture").symlink_to(target, target_is_directory=True)
    own = capture(fleet, name="own")
    (own / "expected.json").unlink()
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rA", "-o",
                                          "forensics_captures=", "--forensics-captures",
                                          str(fleet), *(["--forensics-regen"] if regen else []))
    assert sorted(p.name for p in target.iterdir()) == [
        "embedding.r0.w0.0000.arrows", "embedding.r0.w0.0000.arrows.idx", "manifest.json"]
    assert (own / "expected.json").is_file()
    text = "\n".join(result.outlines)
    assert "planted.capture: is a link (to " in text, text
    assert "expected.json is not written through a link" in text
    result.assert_outcomes(failed=1 if regen else 2, passed=1 if regen else 0)


def test_a_linked_captures_comparison_writes_nothing_through_the_link(
        tmp_path: Path, pytester: pytest.Pytester) -> None:
    """The comparison of a capture reached through a planted link wrote
    ``expected.obtained.json`` into the folder it points to on a difference (and removed one
    on a match); it is compared and reported, and nothing there is written or removed."""
    fleet, elsewhere = tmp_path / "fleet", tmp_path / "elsewhere"
    target = capture(elsewhere, name="real")  # its expected.json differs from a replay
    before = sorted(p.name for p in target.iterdir())
    fleet.mkdir()
    (fleet / "planted.capture").symlink_to(target, target_is_directory=True)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-o",
                                          "forensics_captures=", "--forensics-captures",
                                          str(fleet))
    result.assert_outcomes(failed=1)
    assert "replay differs from expected.json" in "\n".join(result.outlines)
    assert sorted(p.name for p in target.iterdir()) == before
