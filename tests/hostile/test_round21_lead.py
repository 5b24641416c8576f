"""Round 21 of hostile input, the lead's: an imported crash at a step the log never said is at
step "unknown" in the events table too; a shrunk capture says what it was shrunk from."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.hostile.test_round2 import run_cli
from tests.hostile.test_round20_fix20b import _imported

# ------------------------------ T125a: the events table says the step is unknown


def test_the_events_table_says_a_step_the_log_never_said_is_unknown(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An event whose step is only the log lines' order (``step_known`` false) shows step
    ``unknown`` in :func:`forensics.events_table`, never ``0``; a step the log named stays."""
    import forensics

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    unknown = forensics.load(_imported(tmp_path / "a", capsys))
    table = forensics.events_table(unknown.summary()["events"])
    assert list(table["step"]) == ["unknown", "unknown"], table
    named = forensics.load(_imported(tmp_path / "b", capsys, " step=7"))
    table = forensics.events_table(named.summary()["events"])
    assert list(table["step"]) == [7, 7], table


# ------------------------------ T125b: a shrunk capture says it was shrunk


def test_a_shrunk_capture_says_what_it_was_shrunk_from(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A shrunk capture's notes (``simulate``'s: "placeholder_leak 3 times") speak of the
    capture it was shrunk from; its write-up, replay and ``inspect`` say how many records that
    held, so a reader does not take them for its own."""
    whole, part = tmp_path / "whole.capture", tmp_path / "part.capture"
    code, _, err = run_cli(capsys, "simulate", "clamped-placeholder", "-o", whole,
                           "--steps", "60")
    assert code == 0, err
    code, _, err = run_cli(capsys, "shrink", whole, "-o", part)
    assert code == 0, err
    sentence = "It was shrunk from a capture of 240 record(s) (forensics shrink)"
    for command in (("summary", "--format", "text"), ("replay",)):
        code, out, err = run_cli(capsys, *command, part)
        assert code in (0, 1), err
        assert sentence in " ".join(out.split()), out
    assert "placeholder_leak 3 times" in " ".join(out.split())  # replay quotes its notes
    code, out, err = run_cli(capsys, "inspect", part)
    assert code == 0 and "  records before shrinking: 240\n" in out, out
    code, out, err = run_cli(capsys, "summary", "--format", "text", whole)
    assert code in (0, 1) and "shrunk" not in out, out


# ------------------------------ T125c: redact says what its "*" stands for


def test_redact_says_what_a_field_it_does_not_name_is(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A manifest field of a name forensics does not write is dropped unnamed (its name may
    be private) and listed as ``*``: the line says what ``*`` stands for, never read as
    "everything dropped"; ``simulate``'s own ``clamps`` flag is kept, not dropped as such."""
    import shutil

    source = tmp_path / "leak.capture"
    shutil.copytree(Path(__file__).parents[2] / "data" / "placeholder-leak.capture", source)
    code, out, err = run_cli(capsys, "redact", source, "-o", tmp_path / "a.capture")
    # simulate's fault names are names of ours too (T142d): nothing of it is dropped unnamed
    assert code == 0 and "dropped: creator, notes, simulation.regenerate (" in out, out
    assert json.loads((tmp_path / "a.capture" / "manifest.json").read_text())["clamps"] is True
    says_a_foreign_field_is_dropped(capsys, source, tmp_path / "b.capture", "creator,")


def says_a_foreign_field_is_dropped(capsys: pytest.CaptureFixture[str], source: Path,
                                    output: Path, named: str) -> None:
    """``redact`` of ``source`` with a manifest field of a name forensics never writes drops
    it as ``*`` before the names in ``named``, and says what ``*`` is."""
    manifest = json.loads((source / "manifest.json").read_text())
    (source / "manifest.json").write_text(json.dumps({**manifest, "alice_laptop": 1}))
    code, out, err = run_cli(capsys, "redact", source, "-o", output)
    assert code == 0 and f"dropped: *, {named}" in out, out
    assert ("(*: fields of names redact does not know as ones forensics writes (a name may be "
            "private), not named here)") in out, out


# ------------------------------ T125d: "no known signature matches" names what was not judged


def test_no_match_names_the_signatures_not_judged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A capture whose crash dump's drafts are unknown (its line cut) matches no signature and
    leaves the all-placeholder race not judged (T127a): the paragraph's "No known signature
    matches" says so, never "a reason to file a new issue" alone; a capture every signature
    was judged on says nothing more."""
    from tests.hostile.test_round21_fix21b import _cut_dump

    code, out, err = run_cli(capsys, "known", _cut_dump(capsys, tmp_path))
    said = " ".join(out.split()).replace("- ", "-")  # a wrap at a hyphen
    assert code == 0, err
    assert ("No known signature matches (2 known signature(s) not judged, their facts not in "
            "the capture: all-placeholder-drafts-race, negative-draft-id-verified; `forensics "
            "known` says which): a reason to file a new issue if those do not apply") in said, said
    code, out, err = run_cli(capsys, "known", Path(__file__).parents[2] / "data" /
                             "clean.capture")
    assert code == 0 and "not judged" not in out, out


# ------------------------------ T125e: the crash dumps' drafts are gathered in linear time


def test_the_crash_dumps_drafts_are_gathered_in_linear_time(tmp_path: Path) -> None:
    """``known`` judges each crash dump on its own (T123e); the list of the dumps' drafts was
    built by copying it whole at each dump (quadratic in the dumps a log holds)."""
    from tests.instructions import assert_scales_linearly

    assert_scales_linearly(__file__, "dumps", 2000, tmp_path)


def make_work(case: str, scale: int, scratch: Path) -> Callable[[], object]:
    """Gathering the drafts of ``scale`` crash-dump events (run by :mod:`tests.instructions`)."""
    from forensics.known.evidence import spec_tokens_of

    events = [{"kind": "crash_dump", "line": k, "scheduled_spec_decode_tokens": {"r": [-1]}}
              for k in range(scale)]
    return lambda: spec_tokens_of(events)


# ------------------------------ T125f: what the probe finds in place of its new folder


def test_a_folder_found_in_place_of_the_new_one_keeps_its_mode(tmp_path: Path) -> None:
    """An old capture of this user's put at the name between the probe's ``mkdir`` and its
    open is not the probe's and is left untouched: its mode too (T129f's order made it
    ``0700`` first, then saw it was not empty)."""
    import os
    import stat

    from forensics.probe.owned import _opened_new

    old = tmp_path / "old.capture"
    old.mkdir()
    (old / "manifest.json").write_text("{}")
    os.chmod(old, 0o755)
    assert _opened_new(old) is None
    assert stat.S_IMODE(os.stat(old).st_mode) == 0o755
    new = tmp_path / "new.capture"
    new.mkdir(mode=0o755)
    assert _opened_new(new) is not None and stat.S_IMODE(os.stat(new).st_mode) == 0o700
