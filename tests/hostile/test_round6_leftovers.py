"""Hostile input, round 6: the defects the last round left open in the probe's writing path and
in the commands that take a capture path (claim T32l), attacked as a hostile local user (a
FIFO, a device, a file or a loop of links where a capture should be; a writer whose disk is
full or stalled; a writer process that cannot start or is killed) would.

No test here imports vLLM or torch or starts an engine: the probe's session is driven with
host copies and a stand-in writer, the writer process with its real module.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from forensics.cli import main
from forensics.escaping import terminal
from forensics.probe.channel import CLOSE_SECONDS
from forensics.probe.copy import PendingRecord
from tests.conftest import embedding_records

# ------------------------------------------- a command given a path that is no capture folder

#: every command that takes a capture path, with the output it would write
COMMANDS = {"check": [], "inspect": [], "summary": [], "findings": [], "replay": [],
            "report": ["-o", "{out}/r.html"], "plot": ["-o", "{out}/p.png"], "known": [],
            "kernels": [], "repro": ["-o", "{out}/r.py"], "shrink": ["-o", "{out}/s.capture"],
            "redact": ["-o", "{out}/x.capture"]}
#: a name a terminal would act on (a new line, an escape sequence)
BAD_NAME = "bad\nname\x1b[31m"


@pytest.fixture(scope="module")
def not_folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One of each kind of path that is no capture folder, and a folder of mode 000."""
    root = tmp_path_factory.mktemp("paths")
    os.mkfifo(root / "fifo")
    (root / "plain").write_text("hi\n")
    (root / "loop1").symlink_to(root / "loop2")
    (root / "loop2").symlink_to(root / "loop1")
    (root / "locked").mkdir(mode=0o000)
    os.mkfifo(root / BAD_NAME)
    paths = {"fifo": root / "fifo", "device": Path(os.devnull), "file": root / "plain",
             "loop": root / "loop1", "mode 000": root / "locked", "bad name": root / BAD_NAME}
    yield paths
    (root / "locked").chmod(0o700)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", ["fifo", "device", "file", "loop", "mode 000", "bad name"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_command_given_no_capture_folder_says_so_in_one_line(
        not_folders: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        command: str, kind: str) -> None:
    """``forensics check FIFO`` said "no expected results", ``report`` and ``repro`` of a link
    loop an internal error (Python's RuntimeError of ``Path.resolve``), every command "does
    not exist" of a loop: now each command names the path (escaped) and what it is in one
    line, exit 2, without opening it (a FIFO's open would wait for a writer)."""
    path = not_folders[kind]
    extra = [arg.format(out=tmp_path) for arg in COMMANDS[command]]
    code = main([command, str(path), *extra])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "Traceback" not in err and "internal error" not in err and "\x1b" not in err, err
    assert terminal(path) in err, err  # a line break as \x0a: never read as a space
    if kind != "mode 000":  # root reads a folder of mode 000: it is then "not a capture"
        assert "not a capture folder" in err, err
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_command_given_a_path_that_does_not_exist_says_so_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    """``forensics check MISSING`` (and every other command): one line naming the path, that it
    does not exist and the fix, exit 2 (bad input), never "no expected results"."""
    path = tmp_path / "gone.capture"
    out = tmp_path / "out"
    out.mkdir()
    code = main([command, str(path), *(arg.format(out=out) for arg in COMMANDS[command])])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert f"capture '{path}' does not exist; give a NAME.capture directory" in err, err
    assert "no expected results" not in err and "Traceback" not in err, err
    assert not path.exists() and not any(out.iterdir())


@pytest.mark.parametrize("command", ["inspect", "check"])
def test_a_folder_this_user_cannot_read_is_said_to_be_one(
        not_folders: dict[str, Path], capsys: pytest.CaptureFixture[str], command: str) -> None:
    """A capture folder of mode 000 (or under a folder this user cannot search): one line
    saying it cannot be read, not "has no manifest.json" nor "no expected results". Root
    reads any folder: the check runs with nobody's rights then (``seteuid``)."""
    from forensics.cli import build_parser
    from forensics.store import paths  # noqa: F401  (imported while the sources can be read)

    build_parser()  # every command's module imported before the rights are dropped
    locked = not_folders["mode 000"]
    root = os.geteuid() == 0
    if root:
        os.seteuid(65534)
    try:
        code = main([command, str(locked)])
    finally:
        if root:
            os.seteuid(0)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Permission denied" in err, err
    assert terminal(str(locked)) in err and "manifest" not in err and "expected" not in err


# ------------------------------------------------- a full disk as the capture writer closes


def _open_fds() -> set[str]:
    """The descriptors this process holds open (their numbers)."""
    return set(os.listdir("/proc/self/fd"))


def _disk_full_under(monkeypatch: pytest.MonkeyPatch, folder: Path, call: str) -> None:
    """``os.<call>`` (``write`` or ``fsync``: what the store's writers call on a descriptor)
    of any file under ``folder`` fails as a full disk does; other files are left alone."""
    real = getattr(os, call)

    def full(fd: int, *args: object) -> object:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        if target.startswith(str(folder)):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, *args)

    monkeypatch.setattr(os, call, full)


@pytest.mark.parametrize("call", ["write", "fsync"])
@pytest.mark.parametrize("buffered", [True, False], ids=["records buffered", "all flushed"])
def test_a_full_disk_at_close_leaks_no_descriptor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  call: str, buffered: bool) -> None:
    """``CaptureWriter.close()`` stopped at the first segment whose end-of-stream marker the
    disk refused: that segment's descriptor, its index's and every other file's stayed open
    (a probe that reopens after each failure runs out of descriptors). Now every file it
    opened is closed whatever fails, and the failure is raised once, one line."""
    from forensics.store.writer import CaptureWriter

    capture = tmp_path / "c.capture"
    before = _open_fds()
    writer = CaptureWriter(capture, {"notes": "full disk"}, process="w0")
    for rank in (0, 1):  # two segments, two index files
        writer.extend(replace(record, rank=rank) for record in embedding_records())
    writer.flush()
    writer.add_event({"kind": "note"})  # the events file
    if buffered:  # close() flushes them first: that write fails too
        writer.extend(embedding_records())
    assert len(_open_fds() - before) == 5
    _disk_full_under(monkeypatch, capture, call)
    with pytest.raises(OSError) as failed:
        writer.close()
    assert _open_fds() == before
    assert failed.value.errno == errno.ENOSPC and "\n" not in str(failed.value)
    writer.close()  # closing twice is harmless (nothing closed twice: no EBADF)


def test_a_full_disk_as_a_segment_is_made_leaks_no_descriptor(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A segment whose header (or its index's magic number) the disk refuses: the segment's
    descriptor and its index's are closed before the failure is raised."""
    from forensics.store.writer import CaptureWriter

    capture = tmp_path / "c.capture"
    before = _open_fds()
    writer = CaptureWriter(capture, {"notes": "full disk"}, process="w0")
    writer.extend(embedding_records())
    _disk_full_under(monkeypatch, capture, "write")
    with pytest.raises(OSError):
        writer.flush()
    writer.close()  # the failed flush made no segment: nothing left to close but the events
    assert _open_fds() == before


# ------------------------------------------- a writer thread hung in fsync (a stalled disk)


class _StalledDisk:
    """A capture writer whose flush (its fsync) hangs until released: a disk that no longer
    answers."""

    def __init__(self) -> None:
        self.entered, self.release = threading.Event(), threading.Event()
        self.closed = False

    def append(self, record: object, *, validated: bool = False) -> None:
        """Buffered: nothing reaches the disk yet."""

    def flush(self) -> None:
        self.entered.set()
        self.release.wait(60)

    def add_event(self, event: dict[str, object]) -> None:
        """Kept nowhere."""

    def close(self) -> None:
        self.closed = True


def _host_record(step: int) -> PendingRecord:
    """A queued ``embedding`` record of host values (no device copy to wait for)."""
    return PendingRecord("embedding", step, 0, {"input_ids": np.arange(4, dtype=np.int64),
                                                "num_embeddings": 100})


@pytest.mark.timeout(30)
def test_a_writer_thread_hung_in_fsync_costs_the_engine_one_bounded_wait(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The in-process writer's thread hangs in a batch's fsync: the engine's final flush,
    a guard finding's flush and ``close()`` waited for it without a deadline (the engine
    hung at exit). Now the first wait is bounded, said in one log line, and not repeated
    until the writer finishes a batch; what it could not take is counted as dropped."""
    from forensics.probe import rank as rank_module
    from forensics.probe import thread_backend
    from forensics.probe.session import ProbeSession
    from forensics.probe.settings import Settings

    monkeypatch.setattr(thread_backend, "WRITE_WAIT_SECONDS", 0.3)
    monkeypatch.setattr(rank_module, "_DIST", False)  # no torch.distributed: no torch import
    disk = _StalledDisk()
    settings = Settings(directory=tmp_path, capture=tmp_path / "t-1.capture", ring=64,
                        flush_every=4, writer="thread")
    session = ProbeSession(settings, writer_factory=lambda s: disk)
    for step in range(4):  # the fourth wakes the writer thread, which hangs in the fsync
        session.begin_step()
        session.add(_host_record(step))
    assert disk.entered.wait(10)
    done = threading.Event()

    def engine() -> None:
        for step in range(4, 10):
            session.begin_step()
            session.add(_host_record(step), failed=step == 5)  # a guard finding: flush, wait
        session.keep_event("engine_dead", reason="test")
        session.close()
        done.set()

    with caplog.at_level("WARNING", logger="forensics.probe"):
        threading.Thread(target=engine, daemon=True).start()
        finished = done.wait(10)
    disk.release.set()
    assert finished, "the engine waited for the hung writer thread without a deadline"
    # one timed-out wait, not one per flush: counted below (``timeouts``), not timed
    lines = [r.getMessage() for r in caplog.records if "did not finish a batch" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0], lines
    counts = session.counts
    assert counts["timeouts"] == 1 and counts["records"] == 10
    assert counts["dropped"] == 6  # the records queued after the hung batch
    assert not disk.closed  # the writer in use by the hung thread is left to it


# ------------------------------------------------------- a writer process that cannot start


def _writer_process(tmp_path: Path, what: str) -> subprocess.Popen[bytes]:
    """The probe's writer process started as the session starts it, with one thing wrong:
    ``ring`` (a descriptor that is not open), ``folder`` (the capture descriptor is a file),
    ``manifest`` (not JSON)."""
    if what == "folder":
        folder = os.open(tmp_path / "plain", os.O_RDONLY | os.O_CREAT, 0o600)
    else:
        (tmp_path / "c.capture").mkdir()
        folder = os.open(tmp_path / "c.capture", os.O_RDONLY | os.O_DIRECTORY)
    ring = os.memfd_create("test-ring")
    os.ftruncate(ring, 1 << 16)
    read, write = os.pipe()
    manifest = os.memfd_create("test-manifest")
    os.write(manifest, b"{" if what == "manifest" else b"{}")
    args = ["--ring-fd", str(ring if what != "ring" else 999), "--ring-bytes", str(1 << 16),
            "--ack-fd", str(write), "--capture-fd", str(folder), "--process", "p1",
            "--engine-pid", str(os.getpid()), "--manifest-fd", str(manifest)]
    try:
        return subprocess.Popen([sys.executable, "-m", "forensics.probe.writer_process", *args],
                                stdin=subprocess.PIPE, stderr=subprocess.PIPE,
                                pass_fds=(ring, write, folder, manifest))
    finally:
        for fd in (ring, read, write, folder, manifest):
            os.close(fd)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("what", ["ring", "folder", "manifest"])
def test_a_writer_process_that_cannot_start_says_why_in_one_line(tmp_path: Path,
                                                                  what: str) -> None:
    """The writer process failing at its start (a ring it cannot map, a capture it cannot
    open, a manifest it cannot read) printed a Python traceback on the engine's stderr, and
    the engine's line said only "it ended". Now the child says why in one line and exits 3,
    and the engine's line says it could not start (the session then writes in process)."""
    from forensics.probe.channel import START_FAILED, ended

    proc = _writer_process(tmp_path, what)
    _, err = proc.communicate(timeout=50)
    lines = err.decode().splitlines()
    assert proc.returncode == START_FAILED, err
    assert len(lines) == 1 and lines[0].startswith("forensics probe writer: could not start: "), err
    assert "Traceback" not in lines[0]
    assert ended(proc).startswith("it could not start")


def test_a_killed_writer_process_is_named_by_its_signal() -> None:
    """The engine's one line says how its writer process ended: by which signal."""
    from forensics.probe.channel import ended

    proc = subprocess.Popen(["sleep", "30"])
    proc.kill()
    proc.wait(10)
    assert ended(proc) == "it was killed by signal 9 (SIGKILL)"


# ---------------------------------------- what a lost writer process left in the shared ring


class _HostRing:
    """The session's shared ring without its torch view (host records need none): a memfd
    mapped here, as :class:`forensics.probe.channel.Ring` maps it."""

    def __init__(self, size: int) -> None:
        import mmap

        self.fd = os.memfd_create("test-ring", os.MFD_CLOEXEC)
        os.ftruncate(self.fd, size)
        self.map = mmap.mmap(self.fd, size)
        self.view = memoryview(self.map)
        self.ints = np.frombuffer(self.map, np.int64)


@pytest.fixture
def host_ring(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe's channel and session without torch (no torch.distributed rank either)."""
    from forensics.probe import channel, rank

    monkeypatch.setattr(channel, "Ring", _HostRing)
    monkeypatch.setattr(rank, "_DIST", False)


def test_the_frames_a_lost_writer_never_read_are_written_again_the_others_named(
        tmp_path: Path, host_ring: None) -> None:
    """Frames from the last acknowledged position to the last poke may be in the capture
    (the process may have written them before it died): only their steps are read; the
    frames after the last poke it never read are written again, in this process."""
    from forensics.probe.channel import WriterChannel
    from forensics.probe.writer_process import salvage
    from forensics.store.reader import load
    from forensics.store.writer import CaptureWriter

    channel = WriterChannel(size=1 << 16)
    for step in range(3):
        assert channel.put_record(_host_record(step))
    poked = channel.head
    for step in range(3, 8):
        assert channel.put_record(_host_record(step))
    writer = CaptureWriter(tmp_path / "c.capture", {"notes": "salvage"}, process="p1")
    saved = salvage(channel.ring.view, [], 0, poked, channel.head, writer)
    writer.close()
    assert (saved.records, saved.written, saved.dropped, saved.unsure) == (5, 5, 0, [0, 1, 2])
    assert [r.step for r in load(tmp_path / "c.capture")] == [3, 4, 5, 6, 7]


@pytest.mark.timeout(60)
def test_a_writer_process_that_could_not_start_loses_no_record(
        tmp_path: Path, host_ring: None, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """The writer process starts, takes the first records' frames and pokes, and exits
    without reading one (it could not open the capture): those records were counted as
    dropped (``lost N``) though the ring still held them. Now the session writes them
    again in process: the capture holds every record, the event and the log line say so."""
    from forensics.probe.channel import WriterChannel
    from forensics.probe.session import ProbeSession, ProcessBackend
    from forensics.probe.settings import Settings
    from forensics.store.reader import load

    plain = os.open(tmp_path / "plain", os.O_RDONLY | os.O_CREAT, 0o600)
    real_start = WriterChannel.start
    monkeypatch.setattr(WriterChannel, "start", lambda self, folder, process, manifest:
                        real_start(self, plain, process, manifest))  # not a folder: exit 3
    capture = tmp_path / "t-1.capture"
    session = ProbeSession(Settings(directory=tmp_path, capture=capture, ring=64, flush_every=4))
    assert isinstance(session.backend, ProcessBackend)
    try:
        with caplog.at_level("WARNING", logger="forensics.probe"):
            for step in range(8):
                session.begin_step()
                session.add(_host_record(step))
                time.sleep(0.05 if step == 2 else 0)  # the child dies meanwhile, or later
            session.close()
    finally:
        os.close(plain)
    counts = session.counts
    assert counts["records"] == counts["written"] == 8 and counts["dropped"] == 0, counts
    loaded = load(capture)
    assert [r.step for r in loaded] == list(range(8))
    (lost,) = [e for e in loaded.events if e["kind"] == "probe_writer_lost"]
    assert lost["dropped"] == 0 and lost["recovered"] == lost["unacknowledged"] > 0
    assert "could not start" in lost["error"]
    lines = [r.getMessage() for r in caplog.records if "writer process was lost" in r.getMessage()]
    assert len(lines) == 1 and "0 are dropped" in lines[0], lines


@pytest.mark.timeout(30)
def test_a_writer_thread_hung_opening_the_capture_never_blocks_the_engine(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer thread made the capture (a mkdir, the manifest, its fsync) holding the
    session's lock: a disk that no longer answers then blocked every recorded call of the
    engine (each queues its record under that lock), without a deadline. Now the capture is
    made outside that lock: the calls go on, and ``close()`` waits once, bounded."""
    from forensics.probe import rank as rank_module
    from forensics.probe import thread_backend
    from forensics.probe.session import ProbeSession
    from forensics.probe.settings import Settings

    monkeypatch.setattr(thread_backend, "WRITE_WAIT_SECONDS", 0.3)
    monkeypatch.setattr(rank_module, "_DIST", False)
    disk, opening = _StalledDisk(), threading.Event()

    def stalled_open(session: object) -> _StalledDisk:
        opening.set()
        disk.release.wait(60)
        return disk

    settings = Settings(directory=tmp_path, capture=tmp_path / "t-1.capture", ring=64,
                        flush_every=4, writer="thread")
    session = ProbeSession(settings, writer_factory=stalled_open)
    for step in range(4):  # the fourth wakes the writer thread, which opens the capture
        session.begin_step()
        session.add(_host_record(step))
    assert opening.wait(10)
    done = threading.Event()

    def engine() -> None:
        for step in range(4, 10):
            session.begin_step()
            session.add(_host_record(step))
        session.close()
        done.set()

    threading.Thread(target=engine, daemon=True).start()
    finished = done.wait(10)
    disk.release.set()
    assert finished, "the engine's calls waited for the capture to be made"
    assert session.counts["records"] == 10 and session.counts["timeouts"] == 1


@pytest.mark.timeout(60)
def test_closing_with_a_stalled_writer_process_costs_no_second_wait(
        tmp_path: Path, host_ring: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer process stops (SIGSTOP: a disk that no longer answers): the final flush's
    wait times out once; ``close()`` then waited :data:`~forensics.probe.channel.
    CLOSE_SECONDS` more for it to exit. Now a writer that has not moved since a wait timed
    out is not waited for again: it is ended at once, and what it had not acknowledged is
    counted as dropped."""
    import signal

    from forensics.probe import session as session_module
    from forensics.probe.session import ProbeSession, ProcessBackend
    from forensics.probe.settings import Settings

    monkeypatch.setattr(session_module, "FLUSH_SECONDS", 0.3)
    session = ProbeSession(Settings(directory=tmp_path, capture=tmp_path / "t-1.capture",
                                    ring=64, flush_every=4))
    backend = session.backend
    assert isinstance(backend, ProcessBackend)
    for step in range(4):
        session.begin_step()
        session.add(_host_record(step))
    assert session.drain(timeout=30) and session.counts["written"] == 4
    assert backend.channel is not None and backend.channel.proc is not None
    proc = backend.channel.proc
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        for step in range(4, 8):
            session.begin_step()
            session.add(_host_record(step))
        start = time.monotonic()
        session.close()
        took = time.monotonic() - start
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)
    # the flush's one wait, then the kill: not CLOSE_SECONDS more (a bound with room for a
    # loaded machine; the two cases differ by 10 s)
    assert took < CLOSE_SECONDS, took
    counts = session.counts
    assert counts["written"] == 4 and counts["dropped"] == 4 and counts["timeouts"] >= 1
