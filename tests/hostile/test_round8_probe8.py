"""Hostile input, round 8: the writer process's close and a capture's probe stops (claims T39p
and T39q of docs/threat-model.md).

A writer process that stalled (SIGSTOP) until a wait for it timed out, then was resumed
(SIGCONT) just before the engine closed: the close looks for it moving before it ends it, so
its records are written and counted; one still stopped is ended without the close's full
wait. Each test runs the probe's real pieces in this process (no vLLM engine).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "probe"))
from probe_fakes import make_settings, record_batch_changes  # noqa: E402

import forensics  # noqa: E402
from forensics.probe import channel as channel_module  # noqa: E402
from forensics.probe import session as session_module  # noqa: E402
from forensics.probe.channel import WriterChannel  # noqa: E402
from forensics.probe.session import ProbeSession, ProcessBackend  # noqa: E402

#: records: 4 written before the stall, 200 framed or dropped while it lasts
BEFORE, DURING = 4, 200


def _stalled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[ProbeSession, Any]:
    """A session whose writer process was stopped (SIGSTOP) until a wait for it timed out:
    the session and the writer's process."""
    monkeypatch.setattr(session_module, "RING_WAIT_SECONDS", 0.05)
    monkeypatch.setattr(session_module, "FLUSH_SECONDS", 0.05)
    session = ProbeSession(make_settings(tmp_path, capture=tmp_path / "s.capture", ring=64,
                                         flush_every=4))
    backend = session.backend
    assert isinstance(backend, ProcessBackend)
    backend.channel = WriterChannel(size=16 * 1024)
    record_batch_changes(session, [[0, 1]] * BEFORE)
    assert session.drain(timeout=30)
    proc = backend.channel.proc
    assert proc is not None
    os.kill(proc.pid, signal.SIGSTOP)
    record_batch_changes(session, [[0, 1, 2, 3]] * DURING)  # the ring fills, a wait times out
    assert backend.channel.stalled()
    return session, proc


def _on_disk_as_counted(session: ProbeSession) -> None:
    """Every record is counted written or dropped, and the capture holds the written ones."""
    counts = session.counts
    assert counts["written"] + counts["dropped"] == counts["records"] == BEFORE + DURING
    assert len(forensics.load(session.settings.capture)) == counts["written"] >= BEFORE


def test_a_writer_resumed_just_before_the_close_writes_what_it_was_given(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGCONT, then the close at once (the writer not scheduled yet): it was killed in the
    middle of its write, the records it had been given counted as dropped (those it had
    written among them); now the close sees it run and gives it the normal close."""
    session, proc = _stalled(tmp_path, monkeypatch)
    dropped = session.counts["dropped"]
    os.kill(proc.pid, signal.SIGCONT)
    session.close()
    assert proc.returncode == 0  # it ended at the end of its input, not killed
    assert session.counts["dropped"] == dropped  # the close dropped nothing it had framed
    _on_disk_as_counted(session)


def test_a_writer_still_stopped_at_the_close_is_ended_after_one_short_look(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer stays stopped: the close looks for it moving at most LOOK_SECONDS (a tenth
    of the close's own wait or less), then kills it without waiting for it again; what it
    had not acknowledged is dropped and counted."""
    session, proc = _stalled(tmp_path, monkeypatch)
    timeouts = session.counts["timeouts"]
    looks: list[tuple[float, bool]] = []
    waits: list[float | None] = []
    real_moves, real_wait = WriterChannel.moves, subprocess.Popen.wait

    def moves(self: WriterChannel, seconds: float) -> bool:
        looks.append((seconds, real_moves(self, seconds)))
        return looks[-1][1]

    def wait(self: subprocess.Popen[bytes], timeout: float | None = None) -> int:
        if self is proc:
            waits.append(timeout)
        return real_wait(self, timeout)

    monkeypatch.setattr(WriterChannel, "moves", moves)
    monkeypatch.setattr(subprocess.Popen, "wait", wait)
    try:
        session.close()
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
    assert looks == [(channel_module.LOOK_SECONDS, False)]
    assert channel_module.LOOK_SECONDS * 10 <= channel_module.CLOSE_SECONDS
    assert waits[0] == 0.0  # not the close's CLOSE_SECONDS: it is not waited for twice
    assert proc.returncode == -signal.SIGKILL
    assert session.counts["timeouts"] == timeouts + 2  # the last flush's and the close's
    _on_disk_as_counted(session)


def _capture(path: Path, files: dict[str, list[dict[str, Any]]]) -> Path:
    """A capture at ``path`` with one record per events file of ``files`` (process -> the
    events its events file holds, as written there)."""
    import numpy as np

    from forensics.records import Record
    from forensics.store.writer import CaptureWriter

    path.mkdir()
    for number, (process, events) in enumerate(files.items()):
        with CaptureWriter(path, {}, process=process) as writer:
            writer.append(Record("embedding", number, 0, {
                "input_ids": np.arange(4, dtype=np.int64), "num_embeddings": 100}))
            for event in events:
                writer.add_event(event)
    return path


def _said(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """What ``forensics ARGV`` printed (its exit status 0)."""
    from forensics.cli import main

    assert main(argv) == 0
    return " ".join(capsys.readouterr().out.split())  # as one line, however it was wrapped


START = {"kind": "probe_start", "step": 0, "rank": 0}
STOP = {"kind": "probe_stop", "step": 9, "rank": 0}


def test_a_stop_in_another_process_events_file_does_not_hide_a_death(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Process h-1 started and died; process h-2's events file also holds a ``probe_stop``
    naming ``process`` h-1. It was read as h-1's stop: no death in ``known`` or ``summary``
    (nor the report's header, which says what ``summary`` says). Now an event's process is the
    one whose events file holds it; and ``triage``'s row counts a process that died without
    the probe's stop as a crash (it said "clean" for any such capture)."""
    from forensics.fleet.facts import capture_facts
    from forensics.known.evidence import unstopped

    path = _capture(tmp_path / "two.capture", {
        "h-1": [START], "h-2": [START, STOP, {**STOP, "process": "h-1"}]})
    events = forensics.load(path).events
    assert [e["process"] for e in events] == ["h-1", "h-2", "h-2", "h-2"]
    assert unstopped(events) == ["h-1"]
    assert "1 process(es) died without the probe's stop" in _said(["known", str(path)], capsys)
    assert "stopped without the probe's stop" in _said(["summary", str(path)], capsys)
    assert capture_facts(forensics.load(path))["crashed"]  # triage's row: not "clean"


def test_a_capture_written_again_keeps_each_process_and_a_planted_file_claims_none(
        tmp_path: Path) -> None:
    """A capture written again (one events file, ``w0``, every event naming its process)
    keeps each process's start and stop; a planted events file claiming one of them does
    not stop it."""
    from forensics.known.evidence import unstopped

    again = [{**START, "process": "h-1"}, {**START, "process": "h-2"},
             {**STOP, "process": "h-2"}]
    path = _capture(tmp_path / "again.capture", {"w0": again + [{**STOP, "process": "h-1"}]})
    assert unstopped(forensics.load(path).events) == []
    planted = _capture(tmp_path / "planted.capture", {
        "w0": again, "h-9": [{**STOP, "process": "h-1"}, {**STOP, "process": "w0"}]})
    events = forensics.load(planted).events
    assert [e["process"] for e in events] == ["h-9", "h-9", "h-1", "h-2", "h-2"]
    assert unstopped(events) == ["h-1"]


def _acks_lost_after(session: ProbeSession, monkeypatch: pytest.MonkeyPatch, calls: int) -> Any:
    """The writer process writes ``calls`` more records, but its acknowledgements of them
    never reach the engine (as when it is killed between a write and its ack): the engine's
    channel keeps the ack it had. Returns the writer's process once the capture holds them."""
    channel = session.backend.channel
    frozen, real = channel.ack, WriterChannel.read_acks
    sent = [frozen]  # the writer's latest ack, which the engine does not take

    def read_acks(self: WriterChannel) -> bool:
        alive = real(self)
        if self.ack is not frozen:  # one came
            sent[0], self.ack = self.ack, frozen
        return alive

    monkeypatch.setattr(WriterChannel, "read_acks", read_acks)
    record_batch_changes(session, [[0, 1]] * calls)  # poked every 4
    deadline = time.monotonic() + 60
    while sent[0].written < BEFORE + calls:  # written and fsynced, then acknowledged
        assert time.monotonic() < deadline, "the writer process wrote nothing in 60 s"
        time.sleep(0.02)
        channel.read_acks()
    assert len(forensics.load(session.settings.capture)) == BEFORE + calls
    return channel.proc


def _session(tmp_path: Path) -> ProbeSession:
    """A session whose writer process wrote and acknowledged BEFORE records."""
    session = ProbeSession(make_settings(tmp_path, capture=tmp_path / "k.capture", ring=64,
                                         flush_every=4))
    assert isinstance(session.backend, ProcessBackend)
    record_batch_changes(session, [[0, 1]] * BEFORE)
    assert session.drain(timeout=30)
    return session


def test_records_a_killed_writer_wrote_after_its_last_ack_are_counted_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer process wrote 8 records, then was killed (SIGKILL) before their ack reached
    the engine: they are in the capture, and were counted as dropped. Now the engine counts
    what the segments that process made hold."""
    session = _session(tmp_path)
    proc = _acks_lost_after(session, monkeypatch, 8)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    session.close()
    counts = session.counts
    assert counts["records"] == BEFORE + 8 and counts["dropped"] == 0
    assert len(forensics.load(session.settings.capture)) == counts["written"] == BEFORE + 8
    events = forensics.load(session.settings.capture).events
    (lost,) = [e for e in events if e["kind"] == "probe_writer_lost"]
    assert lost["unacknowledged"] == 8 and lost["found"] == 8 and lost["dropped"] == 0


def test_records_a_stalled_writer_wrote_before_the_close_killed_it_are_counted_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer process wrote 8 records and stopped (SIGSTOP) before their ack reached the
    engine; a wait for it timed out, and the close killed it: the 8 in the capture are
    counted written, not dropped."""
    monkeypatch.setattr(session_module, "FLUSH_SECONDS", 0.05)
    session = _session(tmp_path)
    proc = _acks_lost_after(session, monkeypatch, 8)
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        assert not session.drain(timeout=0.05)  # the wait times out: the writer is stalled
        session.close()
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL
    counts = session.counts
    assert counts["records"] == BEFORE + 8 and counts["dropped"] == 0
    assert len(forensics.load(session.settings.capture)) == counts["written"] == BEFORE + 8
