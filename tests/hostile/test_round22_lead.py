"""Round 22's defects found by the lead (issue 38): each test fails on the code before its fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile.test_round2 import run_cli
from tests.hostile.test_round22_attack22c import DUMP, IMPORTED

# --------------------------- T125g: triage's row says why an imported capture holds no record


def test_triage_says_an_imported_capture_of_no_record_was_imported(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """T134f's sibling: triage's error row for a capture ``forensics import`` made of a crash
    dump alone said it held no records because "the probe saw no call, or its segments were
    removed"; it says the reason its manifest tells."""
    capture = tmp_path / "d.capture"
    code, _, err = run_cli(capsys, "import", DUMP, "-o", capture)
    assert code == 0, err
    code, out, err = run_cli(capsys, "triage", tmp_path, "--workers", 1, "--format", "json")
    text = " ".join((out + err).split())
    assert IMPORTED in text and "the probe saw no call" not in text, text
