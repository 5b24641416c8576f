"""Round 13's held-out attack (B): a hostile capture author and a hostile local user against
``report``, ``triage``, ``check``, ``shrink``, ``plot`` and ``repro``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from forensics.cli import main

ROOT = Path(__file__).resolve().parents[2]
INCIDENT_B = ROOT / "data" / "incident-b-vocab-sentinel.capture"


def _copy(source: Path, to: Path) -> Path:
    shutil.copytree(source, to)
    return to


def _nest_first_event(capture: Path, depth: int) -> None:
    """Give the first event of ``capture`` a value nested so that the line is ``depth`` deep
    (written as text: this test's own stack is too deep to parse it)."""
    path = capture / "events-w0.jsonl"
    first, rest = path.read_text().split("\n", 1)
    nested = "[" * (depth - 1) + "]" * (depth - 1)
    path.write_text(first[:-1] + f', "extra": {nested}}}\n' + rest)


def test_json_nested_deep_is_refused_alike_by_every_command(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An event (or manifest) nested ~990 deep was read by ``inspect``, ``replay``, ``shrink``
    and ``summary``, but was "not valid JSON: maximum recursion depth exceeded" in a triage
    worker and a report's notebook, whose stacks are deeper: whether a capture read depended
    on the caller's stack. Now one depth (``json_in.MAX_DEPTH``) holds for every reader: past
    it, one line naming the file and how deep; at it, every command reads it."""
    from forensics.fleet.triage import triage
    from forensics.store.json_in import MAX_DEPTH

    deep = _copy(INCIDENT_B, tmp_path / "deep.capture")
    _nest_first_event(deep, 990)
    assert main(["inspect", str(deep)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "events-w0.jsonl' line 1" in err and "nested 990 deep" in err
    row = triage([deep], workers=1).rows[0]
    assert "nested 990 deep" in row["error"] and "not JSON" not in row["error"], row["error"]

    at_cap = _copy(INCIDENT_B, tmp_path / "at-cap.capture")
    _nest_first_event(at_cap, MAX_DEPTH)
    assert main(["inspect", str(at_cap)]) == 0
    assert not triage([at_cap], workers=1).rows[0]["error"]
