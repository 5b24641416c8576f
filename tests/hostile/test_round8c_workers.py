"""Round 8c (T41c): ``triage --workers N`` is capped.

``--workers`` had no upper limit (``--workers 100000`` asked for one process per task, however
many tasks) and ``workers=0`` from Python meant "the default" while ``-1`` failed deep inside
the process pool. Now a value outside 1 to :data:`~forensics.fleet.runners.WORKERS_PER_CPU` x
the CPUs is one line naming the option, the value and the cap, before anything runs; and a
triage never starts more processes than tasks.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from forensics.cli import main
from forensics.errors import ConfigurationError
from forensics.fleet.runners import WORKERS_PER_CPU, run_local
from forensics.fleet.tasks import Task

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = ROOT / "data" / "incident-b-vocab-sentinel.capture"


@pytest.mark.parametrize("value", ["9", "100000", "0", "-3"])
def test_triage_refuses_workers_past_the_cap_or_below_one(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        value: str) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # the cap: 8
    assert main(["triage", str(CAPTURE), "--workers", value]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    lines = out.err.strip().splitlines()
    assert len(lines) == 1, lines
    assert f"--workers '{value}'" in lines[0] and "1 to 8" in lines[0], lines


@pytest.mark.parametrize("workers", [0, -1, 10**9, True, 2.0])
def test_run_local_refuses_workers_outside_the_cap_before_running(workers: object) -> None:
    def never(path: str, start: int | None, stop: int | None,
              window: tuple[tuple[int, int], ...] | None = None) -> bytes:
        raise AssertionError("a task ran")

    cap = WORKERS_PER_CPU * (os.cpu_count() or 1)
    with pytest.raises(ConfigurationError, match=rf"^workers {workers!r}: give 1 to {cap} "):
        run_local([Task("a")], workers=workers, piece=never)  # type: ignore[arg-type]


def test_never_more_processes_than_tasks(tmp_path: Path) -> None:
    """At the cap (at least 4 processes), three tasks run in at most three processes, none of
    them this one."""
    from round8c_pid_piece import piece

    cap = WORKERS_PER_CPU * (os.cpu_count() or 1)
    out = run_local([Task(str(tmp_path / n)) for n in "abc"], workers=cap, piece=piece)
    pids = {pa.ipc.open_stream(data).read_all().to_pylist()[0]["error"] for data in out}
    assert 1 <= len(pids) <= 3 and str(os.getpid()) not in pids, pids
