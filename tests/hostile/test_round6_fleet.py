"""Hostile input, round 6, on fleets (T36f): a task that kills its worker process is its own
row and the tasks beside it keep theirs; a task run in this process (one worker) has the
deadline too; a triage of thousands of captures in one group is written out in time linear in
them; a capture's column whose name folds (case, Unicode) onto one of ours is namespaced, so a
case-insensitive query (DuckDB) of the documented columns reads ours."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from forensics.fleet.runners import run_local
from forensics.fleet.tasks import Task


def _rows(out: list[bytes]) -> list[dict[str, Any]]:
    return [pa.ipc.open_stream(data).read_all().to_pylist()[0] for data in out]


# ------------------------------------------------ 1. a task that kills its process is its own row


def test_a_task_that_kills_its_worker_leaves_the_other_rows(tmp_path: Path) -> None:
    """Of five tasks on two local processes, the one whose process dies abruptly (``os._exit``:
    what a SIGBUS or the OOM killer does) is its row ``task failed: BrokenProcessPool``; the
    four others come back as their own rows (a broken pool once failed every task in it)."""
    from round6_fleet_piece import piece

    names = ["a", "dies", "b", "c", "d"]
    rows = _rows(run_local([Task(str(tmp_path / n)) for n in names], workers=2, piece=piece))
    assert [r["name"] for r in rows] == names
    errors = {r["name"]: r["error"] for r in rows}
    assert errors.pop("dies").startswith("task failed: BrokenProcessPool"), rows
    assert errors == dict.fromkeys(["a", "b", "c", "d"]), rows


# ---------------------------------------------- 2. a task run in this process has its deadline


def test_a_task_on_one_worker_has_the_deadline(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """``--workers 1`` (and a triage of one capture) runs its task in this process: it is
    ended at the deadline as the pool's tasks are (it once ran without one, for ever)."""
    from round6_fleet_piece import piece

    monkeypatch.setenv("FORENSICS_CHILD_TIMEOUT", "1")
    (row,) = _rows(run_local([Task(str(tmp_path / "slow"))], workers=1, piece=piece))
    assert (row["name"], row["error"]) == ("slow", "timed out after 1 s")
    (row,) = _rows(run_local([Task(str(tmp_path / "quick"))], workers=1, piece=piece))
    assert (row["name"], row["error"]) == ("quick", None)
