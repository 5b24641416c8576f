"""Round 21 of hostile input, the lead's: an imported crash at a step the log never said is at
step "unknown" in the events table too (the notebooks' and report's raw events)."""

from __future__ import annotations

from pathlib import Path

import pytest

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
