"""Fakes shared by the probe tests: a capture writer, a device event, settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from forensics.probe.copy import Copier
from forensics.probe.reference import batch_change_reference
from forensics.probe.settings import Settings
from forensics.records import Record
from forensics.validate import validate_record


class FakeWriter:
    """Stands in for CaptureWriter: validates like it, keeps records and events in memory."""

    def __init__(self, fail_flush: int = 0) -> None:
        self.buffered: list[Record] = []
        self.flushed: list[Record] = []
        self.events: list[dict[str, Any]] = []
        self.fail_flush = fail_flush
        self.closed = False

    def append(self, record: Record, *, validated: bool = False) -> None:
        self.buffered.append(validate_record(record, "fake"))  # always checks, even trusted

    def flush(self) -> None:
        if self.fail_flush:
            self.fail_flush -= 1
            self.buffered.clear()
            raise OSError(28, "No space left on device")
        self.flushed.extend(self.buffered)
        self.buffered.clear()

    def add_event(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def close(self) -> None:
        self.flush()
        self.closed = True


class FakeEvent:
    """A device event whose completion the test controls; synchronize() fails the test."""

    done = False
    recorded = 0

    def record(self, stream: Any = None) -> None:
        FakeEvent.recorded += 1

    def query(self) -> bool:
        return FakeEvent.done

    def synchronize(self) -> None:
        raise AssertionError("synchronize() called on the recording path")


def fake_device_copier() -> Copier:
    """A Copier that treats every tensor as a device tensor, with FakeEvent events."""
    import torch

    return Copier(is_device=lambda t: True,
                  empty_pinned=lambda t: torch.empty(tuple(t.shape), dtype=t.dtype),
                  new_event=FakeEvent)


def make_settings(tmp_path: Path, **overrides: Any) -> Settings:
    """Settings writing under ``tmp_path``."""
    values: dict[str, Any] = dict(directory=tmp_path, capture=tmp_path / "t-1.capture")
    values.update(overrides)
    return Settings(**values)


#: vLLM 0.33.0's function body, for tests that must not import vLLM
plain_batch_change = batch_change_reference


def batch_args(prev: list[int], valid_rows: int = 4):
    i32 = torch.int32
    return (torch.arange(8, dtype=i32) * 10, torch.ones(len(prev), dtype=i32),
            torch.tensor(prev, dtype=torch.int64), torch.full((valid_rows,), 2, dtype=i32),
            torch.ones(8, dtype=i32), torch.full((len(prev),), 7, dtype=i32))


def record_batch_changes(session: Any, calls: list[list[int]]) -> None:
    """One wrapped batch_change call per item of ``calls`` (its prev_positions) into
    ``session``, each at a new step."""
    from forensics.probe import hooks

    wrapped = hooks.wrap_batch_change(plain_batch_change)
    hooks.activate(session)
    try:
        for prev in calls:
            session.begin_step()
            wrapped(*batch_args(prev))
    finally:
        hooks.activate(None)


def segment_bytes(path: Path) -> dict[str, bytes]:
    """The bytes of every segment and index file of the capture at ``path``, by name."""
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())
            if p.suffix in (".arrows", ".idx")}


def add_bad_batch_change(session: Any) -> None:
    """Queue a joined batch_change record whose ``num_accepted_tokens`` has 3 rows for 2
    ``prev_positions``: the site's rules reject it, naming that field."""
    from forensics.probe import hooks

    bad = session.new_record("batch_change")
    args = list(batch_args([0, -1]))
    args[1] = torch.ones(3, dtype=torch.int32)  # num_accepted_tokens: 3 rows for 2
    bad.joined.append((hooks._BATCH_CHANGE_INPUTS, session.copier.join(
        (args[2], args[3], args[0], args[4], args[1], args[5]))))
    session.add(bad)


def resume_writer(session: Any, pid: int, seconds: float = 60.0) -> None:
    """SIGCONT the stopped writer process ``pid`` of ``session`` and wait (at most ``seconds``)
    until it is seen moving again, so that the test's next steps find it moving. (The close
    itself looks for a resumed writer moving, a bounded while, before it ends one that has
    not moved since a wait for it timed out: tests/hostile/test_round8_probe8.py.)"""
    import os
    import signal
    import time

    os.kill(pid, signal.SIGCONT)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with session._lock:
            if not session.backend.channel.stalled():
                return
        time.sleep(0.02)
