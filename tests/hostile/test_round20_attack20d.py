"""Round 20, attack 20d: triage, redact, report and plot over hostile and odd-but-legal
captures; what no variant judged survives a redaction (T121a)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_round2 import run_cli
from test_round18_attack18b import _dropped_capture

#: what is said of the 1,200 events the probe left out of its full events file
LEFT_OUT = "1200 event(s) left out by the probe, its events file full"


def test_a_redacted_capture_says_the_events_its_probe_left_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`redact` of a capture whose probe left 1,200 events out of its full events file (its
    ``probe_stop``'s ``events_dropped``) dropped that count (no key of the closed
    vocabulary): the redacted capture's replay said "the capture shows no failure to report"
    where the original's says whether it shows one is not known. The count is kept."""
    original = _dropped_capture(tmp_path)
    code, said, err = run_cli(capsys, "redact", original, "-o", tmp_path / "red.capture")
    assert code == 0, err
    for capture in (original, tmp_path / "red.capture"):
        code, said, err = run_cli(capsys, "replay", capture)
        assert code == 0, err
        said = " ".join(said.split())
        assert f"(not judged: {LEFT_OUT})" in said, said
        assert "shows no failure to report" not in said, said
