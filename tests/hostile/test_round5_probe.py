"""Hostile input, round 5: the live-capture side (claim T27p of docs/threat-model.md).

A full disk cuts a write short (the kernel writes part of it, then refuses: a soft
``RLIMIT_FSIZE`` stands in for the disk, as it gives the same short write and error), then
space comes back; a ``FORENSICS_DIR`` the system refuses to look at; a writer process that
stalls (SIGSTOP). Each test runs the probe's real pieces in this process (no vLLM engine).
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "probe"))
from probe_fakes import make_settings, record_batch_changes, resume_writer  # noqa: E402

import forensics  # noqa: E402
from forensics.errors import ConfigurationError  # noqa: E402
from forensics.probe import session as session_module  # noqa: E402
from forensics.probe.channel import WriterChannel  # noqa: E402
from forensics.probe.session import ProbeSession, ProcessBackend, ThreadBackend  # noqa: E402
from forensics.probe.settings import from_env  # noqa: E402
from forensics.records import Record  # noqa: E402
from forensics.store.events import EventLog  # noqa: E402
from forensics.store.writer import CaptureWriter  # noqa: E402


@contextlib.contextmanager
def disk_full_past(path: Path, extra: int) -> Iterator[None]:
    """Writes past ``extra`` more bytes than ``path`` holds are cut short and then refused
    (``EFBIG``, as ``ENOSPC`` is), until the block ends: space comes back."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (path.stat().st_size + extra, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


def embedding_records(steps: int) -> list[Record]:
    """One small ``embedding`` record per step."""
    return [Record("embedding", step, 0, {"input_ids": np.arange(4, dtype=np.int64),
                                          "num_embeddings": 100}) for step in range(steps)]


def test_a_batch_cut_short_by_a_full_disk_leaves_every_other_batch_readable(
        tmp_path: Path) -> None:
    """The disk fills in the middle of a batch, then frees up: the batches before and after
    it are read; the one cut short is reported to the writer's caller, not left in the way."""
    root = tmp_path / "full.capture"
    records = embedding_records(steps=3)
    writer = CaptureWriter(root, {"notes": "full disk"}, process="p1")
    writer.append(records[0])
    writer.flush()
    (segment,) = root.glob("*.arrows")
    writer.append(records[1])
    with disk_full_past(segment, 40), pytest.raises(OSError):
        writer.flush()
    writer.append(records[2])
    writer.flush()
    writer.close()
    assert [r.step for r in forensics.load(root)] == [0, 2]


def test_an_event_cut_short_by_a_full_disk_leaves_the_events_readable(tmp_path: Path) -> None:
    """An event line the disk cut short is never followed by the next event on its line;
    a writer reopening a sidecar that ends in a cut line starts on a line of its own."""
    root = tmp_path / "events.capture"
    writer = CaptureWriter(root, {"notes": "full disk"}, process="p1")
    writer.add_event({"kind": "first", "step": 0})
    sidecar = root / "events-p1.jsonl"
    with disk_full_past(sidecar, 10), pytest.raises(OSError):
        writer.add_event({"kind": "cut", "step": 1, "error": "x" * 200})
    writer.add_event({"kind": "after", "step": 2})
    writer.close()
    with sidecar.open("ab") as handle:  # a writer killed in the middle of a line
        handle.write(b'{"kind": "killed", "st')
    again = EventLog(root, "p1")  # the in-process writer taking over the sidecar
    again.append({"kind": "taken over", "step": 3})
    again.close()
    kinds = [e["kind"] for e in forensics.load(root).events]
    assert kinds == ["first", "after", "taken over"]


@pytest.mark.parametrize("directory", ["/tmp/" + "d" * 5000, "/tmp/" + "d" * 300 + "/c",
                                       "~no-such-user-of-this-machine/captures"],
                         ids=["path too long", "name too long", "unknown user"])
def test_a_directory_the_system_refuses_is_one_configuration_line(directory: str) -> None:
    """``FORENSICS_DIR`` that cannot even be looked at: a ConfigurationError of one short line
    naming the variable (the engine refuses to start with it), never an OSError traceback."""
    with pytest.raises(ConfigurationError) as caught:
        from_env({"FORENSICS_DIR": directory})
    message = str(caught.value)
    assert message.startswith("FORENSICS_DIR=") and "\n" not in message
    assert len(message) < 600


@pytest.mark.parametrize("name", ["FORENSICS_RING", "FORENSICS_MODE", "FORENSICS_SITES"])
def test_a_very_long_setting_is_named_in_a_short_line(name: str) -> None:
    """A bad value of 100,000 characters is shown shortened: the error stays one short line."""
    with pytest.raises(ConfigurationError) as caught:
        from_env({"FORENSICS_DIR": "/tmp/captures", name: "9x" * 50_000})
    message = str(caught.value)
    assert message.startswith(f"{name}=") and "\n" not in message and len(message) < 600


@pytest.mark.parametrize("engine_id", ["e" * 131_000, "a\x1b[2Jb", "line\nbreak", "e\udcff"],
                         ids=["past the command line", "escape", "newline", "not UTF-8"])
def test_an_engine_id_no_manifest_should_hold_is_one_configuration_line(
        engine_id: str) -> None:
    """``FORENSICS_ENGINE_ID`` goes into every manifest and onto the writer process's command
    line (one argument holds at most 128 KiB: a longer one left the engine writing in its own
    process): a huge one, or one holding a control or a byte that is not UTF-8, is refused in
    one short line naming the variable; a uuid-like one is kept."""
    env = {"FORENSICS_DIR": "/tmp/captures"}
    with pytest.raises(ConfigurationError) as caught:
        from_env({**env, "FORENSICS_ENGINE_ID": engine_id})
    message = str(caught.value)
    assert message.startswith("FORENSICS_ENGINE_ID=") and len(message) < 600
    assert "\n" not in message and "\x1b" not in message
    settings = from_env({**env, "FORENSICS_ENGINE_ID": "engine-7_a.b"})
    assert settings is not None and settings.engine_id == "engine-7_a.b"


def test_a_stalled_writer_process_costs_the_engine_one_wait(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer process stops (SIGSTOP: a disk that no longer answers): once one wait for
    it timed out, the engine's calls drop and count instead of waiting again, until the writer
    moves; when it does, the records framed before the stall are all written."""
    monkeypatch.setattr(session_module, "RING_WAIT_SECONDS", 0.2)
    monkeypatch.setattr(session_module, "FLUSH_SECONDS", 0.2)
    path = tmp_path / "stalled.capture"
    session = ProbeSession(make_settings(tmp_path, capture=path, ring=64, flush_every=4))
    backend = session.backend
    assert isinstance(backend, ProcessBackend)
    backend.channel = WriterChannel(size=16 * 1024)
    record_batch_changes(session, [[0, 1]] * 4)
    assert session.drain(timeout=30)
    waited = [0.0]
    real_wait = WriterChannel.wait

    def timed_wait(self: WriterChannel, timeout: float, *, poke: bool = True) -> bool:
        start = time.monotonic()
        try:
            return real_wait(self, timeout, poke=poke)
        finally:
            waited[0] += time.monotonic() - start

    monkeypatch.setattr(WriterChannel, "wait", timed_wait)
    proc = backend.channel.proc
    assert proc is not None
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        record_batch_changes(session, [[0, 1, 2, 3]] * 200)  # the ring fills early on
        for number in range(5):  # a kernel launch handed off each (FORENSICS_KERNELS_KEEP=all)
            session.keep_event("kernel_launch", ordinal=number)
        assert session.counts["dropped"] > 0
        assert waited[0] < 4 * 0.2  # one timed-out wait (and a little), not one per call
    finally:
        resume_writer(session, proc.pid)
    monkeypatch.setattr(session_module, "FLUSH_SECONDS", 30.0)  # the close's own wait, too
    session.close()
    counts = session.counts
    assert counts["written"] + counts["dropped"] == counts["records"] == 204
    assert len(list(forensics.load(path))) == counts["written"] >= 4


def _fn(ids, out, n):  # a kernel's signature
    """A stand-in kernel function in a vLLM worker module."""


_fn.__module__ = "vllm.v1.worker.gpu.stand_in"


class _Jit:
    """What the flight recorder reads of a Triton kernel object."""

    fn = staticmethod(_fn)


@pytest.mark.parametrize("budget", [64, 10**15], ids=["default budget", "huge budget"])
def test_a_launch_copies_no_more_than_one_event_holds(budget: int) -> None:
    """An integer view of 20 MB expanded from one element of a 5 MB storage, and a float
    storage past what one event line holds (even under a huge ``FORENSICS_KERNELS_BUDGET``):
    the recorder notes their shapes and copies neither on the launch path."""
    import torch

    from forensics.probe import kernels

    recorder = kernels.FlightRecorder(("*",), 2, budget, None)
    recorder._torch = torch
    expanded = torch.zeros(5 << 20, dtype=torch.int8)[:1].expand(20 << 20)
    floats = torch.ones(1 << 20, dtype=torch.float32)  # 4 MB: more than one event line
    pending = recorder.before(recorder.kernel(_Jit()), (expanded, floats, 3), {}, (1,))
    assert pending is not None and pending.views == [] and pending.before is None
    assert {info["contents"] for info in pending.tensors.values()} == {"none"}
    assert "one event line" in pending.tensors["ids"]["reason"]
    recorder.after(pending)
    fields = kernels.event_fields(pending)
    assert fields["tensors"]["ids"]["shape"] == [20 << 20]


@pytest.mark.parametrize("rank", ["-1", "1234567", str(2**70), "zero"])
def test_a_rank_no_segment_name_holds_is_not_given_to_records(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        rank: str) -> None:
    """``$RANK`` that is no rank a capture can hold (a segment name has six digits at most):
    the records say rank 0 and one log line says why, so every record written is read back
    (before, the in-process writer counted them written into a segment no reader opens)."""
    monkeypatch.setenv("RANK", rank)
    path = tmp_path / "rank.capture"
    session = ProbeSession(make_settings(tmp_path, capture=path, writer="thread", ring=64,
                                         flush_every=4))
    record_batch_changes(session, [[0, 1]] * 6)
    session.close()
    loaded = forensics.load(path)
    assert session.counts["written"] == 6 == len(list(loaded))
    assert {r.rank for r in loaded} == {0}
    assert {e["kind"] for e in loaded.events} >= {"probe_start", "probe_stop"}
    assert sum("is not a rank" in r.getMessage() for r in caplog.records) == 1


class _FullDisk:
    """A capture writer on a full disk: every write fails with ENOSPC."""

    def add_event(self, event: dict) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    def flush(self) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_is_one_line_on_the_engines_stderr_not_one_per_record(
        capfd: pytest.CaptureFixture[str]) -> None:
    """The writer process on a full disk: each record it cannot write is a ``probe_error`` it
    cannot keep either; its stderr (the engine's) says so once, the count holds them all."""
    from forensics.probe.writer_process import WriterChild

    read, write = os.pipe()
    try:
        child = WriterChild(memoryview(bytearray(64)), _FullDisk(), write, os.getpid(), {})
        for number in range(50):
            child.error(OSError(errno.ENOSPC, "No space left on device"), f"batch {number}")
    finally:
        os.close(read)
        os.close(write)
    lines = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and "No space left on device" in lines[0]
    assert child.counts["errors"] == 100  # each failure and each event lost with it


@pytest.mark.parametrize(("mode", "warned"), [(0o777, True), (0o770, True), (0o1777, False),
                                              (0o755, False)])
def test_a_capture_directory_others_may_write_is_said_in_one_line(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, mode: int, warned: bool) -> None:
    """``FORENSICS_DIR`` where other users may rename entries (group or world writable
    without the sticky bit): the probe still makes its private folder there, and one log line
    says its name may be taken away; a sticky or private directory is said nothing of."""
    from forensics.probe import owned

    directory = tmp_path / "shared"
    directory.mkdir()
    os.chmod(directory, mode)
    settings = from_env({"FORENSICS_DIR": str(directory)})
    assert settings is not None
    made = owned.claim(settings)
    assert made.capture.parent == directory and made.capture.is_dir()
    lines = [r.getMessage() for r in caplog.records if "other users may" in r.getMessage()]
    assert len(lines) == int(warned)
    assert all(str(directory) in line and "FORENSICS_DIR" in line for line in lines)


class _HungDisk:
    """A capture writer whose flush hangs (a disk that no longer answers) until released."""

    def __init__(self) -> None:
        import threading

        self.release = threading.Event()
        self.records = 0

    def append(self, record: Record, *, validated: bool = False) -> None:
        self.records += 1

    def flush(self) -> None:
        self.release.wait(60)

    def add_event(self, event: dict) -> None:
        """Events are kept nowhere."""

    def close(self) -> None:
        """Nothing to close."""


def test_a_hung_writer_thread_costs_the_engine_one_bounded_wait(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-process writer (``FORENSICS_WRITER=thread``, or after the writer process was
    lost) hangs in a flush: a call that finds the ring full waits a bounded time once, then
    the ring drops and counts the oldest records; it waited for ever before."""
    import threading

    from forensics.probe import thread_backend

    monkeypatch.setattr(thread_backend, "RING_WAIT_SECONDS", 0.2)  # the in-process writer's
    disk = _HungDisk()
    session = ProbeSession(make_settings(tmp_path, ring=8, flush_every=4),
                           writer_factory=lambda s: disk)
    done, timed_out = threading.Event(), [0]
    real_drain = ThreadBackend.drain

    def counted_drain(self: ThreadBackend, timeout: float | None) -> bool:
        drained = real_drain(self, timeout)
        timed_out[0] += not drained
        return drained

    monkeypatch.setattr(ThreadBackend, "drain", counted_drain)

    def engine() -> None:
        record_batch_changes(session, [[0, 1]] * 60)
        done.set()

    thread = threading.Thread(target=engine, daemon=True)
    thread.start()
    finished = done.wait(30)
    disk.release.set()
    thread.join(30)
    session.close()
    assert finished, "the engine's calls hung on the writer thread"
    assert timed_out[0] == 1  # one timed-out wait, not one per call
    assert session.counts["dropped"] > 0
    assert session.counts["records"] == 60
