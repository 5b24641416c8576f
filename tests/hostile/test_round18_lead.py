"""Hostile input, round 18 (the lead's): one word, one meaning on one page."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2] / "data"

# ------------------------------------------ T103a: "resolved" says which of its two meanings


def test_replays_resolved_count_is_not_the_conclusions_resolves(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Incident B's page said "1 findings (1 resolved)" of ``patched`` above "resolves 2 of 2
    upstream out-of-bounds findings": two meanings of one word (a sink finding whose origin's
    replay no longer writes its value; a baseline finding the patch made go away). The first
    now says "resolved at their origin", and no line uses the bare count."""
    from forensics.cli import main

    assert main(["replay", str(DATA / "incident-b-vocab-sentinel.capture")]) == 0
    out = capsys.readouterr().out
    patched = next(line for line in out.splitlines() if line.startswith("patched: "))
    assert "1 findings (1 resolved at their origin)" in patched
    assert "resolves 2 of 2 upstream out-of-bounds findings" in out
    assert " resolved)" not in out and " resolved," not in out
