"""Round 23 of hostile input, attack 23c: false sentences of ``known``, ``summary`` and the
commands that state a crash verdict's grounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile.test_round2 import run_cli

TESTS_DATA = Path(__file__).resolve().parents[1] / "data"


# ------------------------------ T142a: a replay that ran no record raises nothing of it


def test_a_replay_of_summary_records_alone_is_not_said_to_raise_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A log's probe lines import as summary records (a least and a greatest value), which no
    variant runs: the crash verdict's grounds said "the upstream replay raises nothing" of a
    replay that ran none of them. They say it ran none, and why."""
    capture = tmp_path / "s.capture"
    code, _, err = run_cli(capsys, "import", TESTS_DATA / "sm70_engine.log", "-o", capture)
    assert code == 0, err
    code, out, _ = run_cli(capsys, "summary", capture, "--format", "text")
    assert code == 0
    assert "raises nothing" not in out, out
    assert ("the upstream replay runs none of its 3 record(s) (summary records: a log's least "
            "and greatest values, judged by their bounds alone)") in out, out
    code, out, _ = run_cli(capsys, "known", capture, "--json")
    assert code == 0 and "raises nothing" not in out, out
