"""How the Ray runner times its tasks (:func:`forensics.fleet.runners._gather`), on a stand-in
for Ray whose clock moves only when the runner waits: a task's backstop counts from when it
started running (its first answer), not from when it was sent; a task never started is said to
be not started, never to have timed out. The real Ray runs these in tests/fleet/test_fleet_200.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from forensics.fleet import runners
from forensics.fleet.piece import to_ipc
from forensics.fleet.tasks import Task


class Clock:
    """Seconds that pass only when the runner waits on the stand-in."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


class Stream:
    """A task's answers, each ready at its second on the clock (None: never)."""

    def __init__(self, clock: Clock, answers: list[tuple[float | None, bytes]]) -> None:
        self.clock, self.answers, self.cancelled = clock, answers, False

    def ready(self) -> bool:
        return bool(self.answers) and self.answers[0][0] is not None \
            and self.answers[0][0] <= self.clock.now

    def __next__(self) -> bytes:
        return self.answers.pop(0)[1]

    def __iter__(self) -> Iterator[bytes]:
        return self


class FakeRay:
    """Just what :func:`runners._gather` asks of Ray."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def cluster_resources(self) -> dict[str, float]:
        return {"CPU": 2.0}

    def wait(self, streams: list[Stream], num_returns: int, timeout: float
             ) -> tuple[list[Stream], list[Stream]]:
        ready = [s for s in streams if s.ready()][:num_returns]
        if not ready:
            self.clock.now += timeout
        return ready, [s for s in streams if s not in ready]

    def get(self, answer: bytes) -> bytes:
        return answer

    def cancel(self, stream: Stream, force: bool) -> None:
        stream.cancelled = force


#: the row of a task ended at the backstop: its deadline, and why it was ended from outside
BACKSTOP = ("timed out after 3 s (no row came back by the backstop, over 8 s after it started: "
            "ended from outside)")


def _row(name: str) -> bytes:
    return to_ipc([{"capture": name, "name": name, "start": None, "stop": None, "error": None}])


def _gather(monkeypatch: pytest.MonkeyPatch, plans: dict[str, list[tuple[float | None, bytes]]]
            ) -> tuple[list[Any], dict[str, Stream]]:
    clock = Clock()
    monkeypatch.setattr(runners.time, "monotonic", clock.monotonic)
    monkeypatch.setenv("FORENSICS_CHILD_TIMEOUT", "3")
    monkeypatch.setattr(runners, "BACKSTOP_GRACE", 2.0)  # backstop: 2 x 3 + 2 = 8 s
    streams = {name: Stream(clock, plan) for name, plan in plans.items()}
    tasks = [Task(name) for name in plans]
    out = runners._gather(FakeRay(clock), lambda t: streams[t.path], tasks, None)
    return [pa.ipc.open_stream(o).read_all().to_pylist()[0]["error"] for o in out], streams


def test_a_task_slow_to_start_is_timed_from_its_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """Started 20 s after it was sent (a worker slow to start), answering 1 s later: its row;
    before, its backstop of 8 s counted from when it was sent and it was 'timed out'."""
    errors, streams = _gather(monkeypatch, {"slow": [(20, runners.STARTED), (21, _row("slow"))]})
    assert errors == [None] and not streams["slow"].cancelled


def test_a_started_task_past_its_backstop_is_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    errors, streams = _gather(monkeypatch, {"deaf": [(20, runners.STARTED), (None, b"")],
                                            "ok": [(0, runners.STARTED), (1, _row("ok"))]})
    assert errors == [BACKSTOP, None] and streams["deaf"].cancelled


def test_a_task_never_started_is_said_not_started(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runners, "RAY_START_WAIT", 30.0)
    errors, streams = _gather(monkeypatch, {"never": [(None, runners.STARTED)]})
    assert errors == ["not started on Ray after 30 s"] and streams["never"].cancelled
