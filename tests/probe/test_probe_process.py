"""The writer process (forensics.probe.channel, frames, writer_process) against the in-process
writer: the same bytes, the same checks, and what happens when either process dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from probe_fakes import (
    FakeEvent,
    add_bad_batch_change,
    fake_device_copier,
    make_settings,
    record_batch_changes,
    resume_writer,
    segment_bytes,
)

import forensics
from forensics.probe import session as session_module
from forensics.probe.channel import WriterChannel
from forensics.probe.session import ProbeSession, ProcessBackend, ThreadBackend
from forensics.store.writer import CaptureWriter

CALLS = [[0], [1, -1, 0], [-1, -1], [3, 2, 1, 0], [0, 1]] * 3


def _process(session: ProbeSession) -> ProcessBackend:
    """The session's writer-process backend (it has not been swapped for a thread)."""
    assert isinstance(session.backend, ProcessBackend)
    return session.backend


def with_request_ids(session: ProbeSession) -> None:
    """A runner stand-in whose batch gives each batch_change record request ids (the fields
    read from vLLM's Python state: RECORD frames, the per-record write path)."""
    batch = SimpleNamespace(req_ids=["a", "b", "c", "d"], prev_req_id_to_index={"a": 0, "z": 1})
    session.runner = SimpleNamespace(input_batch=batch)


@pytest.mark.parametrize("ids", [False, True], ids=["joined", "request-ids"])
def test_the_writer_process_writes_the_bytes_of_the_in_process_writer(
        tmp_path: Path, ids: bool) -> None:
    written = {}
    for name, factory in (("thread", lambda s: CaptureWriter(s.settings.capture,
                                                             process=s.process)),
                          ("process", None)):
        path = tmp_path / f"{name}.capture"
        # one flush at close: batch bounds do not depend on when either writer ran
        session = ProbeSession(make_settings(tmp_path, capture=path, ring=64, flush_every=64),
                               writer_factory=factory)
        assert isinstance(session.backend, ProcessBackend) == (factory is None)
        if ids:
            with_request_ids(session)
        record_batch_changes(session, CALLS)
        session.close()
        assert session.counts["written"] == len(CALLS) and session.counts["dropped"] == 0
        written[name] = segment_bytes(path)
    assert written["process"] and written["process"] == written["thread"]
    loaded = list(forensics.load(tmp_path / "process.capture"))
    assert [r["prev_positions"].tolist() for r in loaded] == CALLS
    assert ("req_ids" in loaded[0]) == ids
    if ids:
        assert loaded[1]["req_ids"] == ["a", "b", "c"]
        assert loaded[1]["prev_req_id_to_index"] == {"a": 0, "z": 1}


def test_the_thread_writer_setting_keeps_the_capture_in_process(tmp_path: Path) -> None:
    path = tmp_path / "thread.capture"
    session = ProbeSession(make_settings(tmp_path, capture=path, writer="thread"))
    assert isinstance(session.backend, ThreadBackend)
    record_batch_changes(session, CALLS[:3])
    session.close()
    assert session.counts["written"] == 3
    assert len(list(forensics.load(path))) == 3


def test_device_copies_cross_once_their_event_completed(tmp_path: Path) -> None:
    """Records waiting for a device copy stay in the session's ring, never waited for in
    record mode, and are framed at the first flush after their events completed."""
    FakeEvent.done, FakeEvent.recorded = False, 0
    path = tmp_path / "dev.capture"
    session = ProbeSession(make_settings(tmp_path, capture=path, ring=64, flush_every=64),
                           copier=fake_device_copier())
    record_batch_changes(session, CALLS[:5])
    assert FakeEvent.recorded == 5 and session.flush() == 0  # copies "in flight"
    FakeEvent.done = True
    session.flush()
    assert session.drain(timeout=30) and session.counts["written"] == 5
    session.close()
    assert [r["prev_positions"].tolist() for r in forensics.load(path)] == CALLS[:5]


def test_a_record_the_writer_process_rejects_is_counted_and_kept_as_an_event(
        tmp_path: Path) -> None:
    path = tmp_path / "bad.capture"
    session = ProbeSession(make_settings(tmp_path, capture=path, ring=64, flush_every=64))
    record_batch_changes(session, [[0, -1]] * 3)
    add_bad_batch_change(session)
    session.close()
    capture = forensics.load(path)
    assert [r.step for r in capture.records()] == [0, 1, 2]
    assert session.counts["written"] == 3 and session.counts["dropped"] == 1
    assert session.counts["errors"] == 1
    (error,) = [e for e in capture.events if e["kind"] == "probe_error"]
    assert "appending a batch_change record (step 2)" in error["where"]
    assert "num_accepted_tokens" in error["error"] and error["pid"] == os.getpid()
    (stop,) = [e for e in capture.events if e["kind"] == "probe_stop"]
    assert stop["written"] == 3 and "writer_cpus" in stop


def test_the_writer_process_loads_neither_torch_nor_vllm(tmp_path: Path) -> None:
    session = ProbeSession(make_settings(tmp_path, ring=8, flush_every=4))
    record_batch_changes(session, CALLS[:4])
    assert session.drain(timeout=30)
    channel = _process(session).channel
    assert channel is not None and channel.proc is not None
    maps = Path(f"/proc/{channel.proc.pid}/maps").read_text()
    session.close()
    assert "pyarrow" in maps  # it did write
    assert "libtorch" not in maps and "vllm" not in maps


def test_a_dead_writer_process_is_noticed_and_the_session_writes_in_process(
        tmp_path: Path) -> None:
    path = tmp_path / "lost.capture"
    session = ProbeSession(make_settings(tmp_path, capture=path, ring=64, flush_every=4,
                                         handoff="batch"))  # 4 framed, unpoked
    record_batch_changes(session, CALLS[:4])
    assert session.drain(timeout=30) and session.counts["written"] == 4
    channel = _process(session).channel
    assert channel is not None and channel.proc is not None
    channel.proc.kill()
    channel.proc.wait(timeout=30)
    record_batch_changes(session, CALLS[4:12])  # framed, then the poke finds the pipe broken
    assert isinstance(session.backend, ThreadBackend)
    session.close()
    assert session.counts["records"] == 12
    # the 4 it never read are still in the ring: written again in process (T32l)
    assert session.counts["written"] == 12 and session.counts["dropped"] == 0
    capture = forensics.load(path)
    assert [r.step for r in capture.records()] == list(range(12))
    (lost,) = [e for e in capture.events if e["kind"] == "probe_writer_lost"]
    assert lost["dropped"] == 0 and lost["recovered"] == 4
    assert [e["kind"] for e in capture.events].count("probe_start") == 1


def test_a_full_ring_drops_and_counts_without_hanging(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer process stopped (SIGSTOP): once the ring is full each record waits a bounded
    time, then is dropped and counted; the records framed before are all written."""
    monkeypatch.setattr(session_module, "RING_WAIT_SECONDS", 0.01)
    path = tmp_path / "full.capture"
    session = ProbeSession(make_settings(tmp_path, capture=path, ring=64, flush_every=4))
    _process(session).channel = WriterChannel(size=16 * 1024)
    record_batch_changes(session, CALLS[:4])
    assert session.drain(timeout=30)
    proc = _process(session).channel.proc
    assert proc is not None
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        record_batch_changes(session, CALLS * 10)
        dropped = session.counts["dropped"]
        assert dropped > 0 and isinstance(session.backend, ProcessBackend)
    finally:
        resume_writer(session, proc.pid)
    session.close()
    counts = session.counts
    assert counts["written"] + counts["dropped"] == counts["records"] == 4 + len(CALLS) * 10
    assert len(list(forensics.load(path))) == counts["written"]


ENGINE = textwrap.dedent("""
    import os, signal, sys, torch
    from pathlib import Path
    from forensics.probe import hooks, plugin
    from forensics.probe.settings import Settings
    sys.path.insert(0, sys.argv[2])
    from probe_fakes import batch_args, plain_batch_change

    capture = Path(sys.argv[1])
    session = plugin.start(Settings(directory=capture.parent, capture=capture, ring=64,
                                    flush_every=4))
    wrapped = hooks.wrap_batch_change(plain_batch_change)
    for _ in range(10):
        session.begin_step()
        wrapped(*batch_args([0, 1]))
    session.flush()  # a poke: no wait for the writer process
    os.kill(os.getpid(), signal.SIGKILL)
""")


def test_records_poked_before_the_engine_is_killed_reach_the_capture(tmp_path: Path) -> None:
    """The engine pokes and dies at once: the writer process writes what it was poked for at
    the end of its pipe, and exits."""
    capture = tmp_path / "killed.capture"
    engine = subprocess.run([sys.executable, "-c", ENGINE, str(capture),
                             str(Path(__file__).parent)], timeout=120)
    assert engine.returncode == -signal.SIGKILL
    for _ in range(600):  # the writer process outlives the engine a moment
        try:
            if len(list(forensics.load(capture))) == 10:
                break
        except Exception:  # a segment being written
            pass
        time.sleep(0.1)
    assert [r.step for r in forensics.load(capture)] == list(range(10))
