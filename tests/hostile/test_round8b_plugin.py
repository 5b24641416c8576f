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
