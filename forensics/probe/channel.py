"""The engine's side of the writer process: a shared-memory ring of frames, a poke, an ack.

The ring is a ``memfd`` (no name in ``/dev/shm``: nothing is left behind, whatever kills
either process) mapped by both processes. The engine's thread writes frames
(:mod:`forensics.probe.frames`) at the ring's head and, every so many records, *pokes* the
writer process: it writes the new head (8 bytes) to the child's stdin, without blocking. The
child writes the frames up to that head to the capture, fsyncs, and acknowledges on a pipe of
its own: the byte position it is done with and its counts (:data:`ACK`). Space behind an
acknowledged position is free again.

Nothing here waits unless asked to (:meth:`WriterChannel.wait`, bounded), and a dead child is
noticed (a broken pipe, an end of file on the acks, its exit status), never raised.
"""

from __future__ import annotations

import json
import mmap
import os
import select
import struct
import subprocess
import sys
import time
from typing import Any

import numpy as np

from forensics.probe import frames
from forensics.probe.copy import PendingRecord
from forensics.process_end import how_ended

#: the child's acknowledgement: bytes done, records done, written, dropped, errors (its counts)
ACK = struct.Struct("<5Q")
POKE = struct.Struct("<Q")
#: the ring's size in bytes, mapped with its pages populated (a page the engine's thread
#: touched first would cost it a fault); a small ring is recycled, hot, as the writer
#: process frees it
RING_BYTES = 16 << 20
#: a block of records takes at most this share of the ring (a larger one is split)
BLOCK_SHARE = 4
#: how long the engine waits for the child to start reading before it counts it as dead
CLOSE_SECONDS = 10.0
#: how long the close looks for a stalled child moving before it ends it (one resumed, as by
#: SIGCONT, just before the close may not have been scheduled yet); well under CLOSE_SECONDS
LOOK_SECONDS = 0.5
#: the child's exit status when it could not start (its one line on stderr says why)
START_FAILED = 3
#: its exit status when it stopped on an error of its own after starting (one line too)
FAILED = 4


def ended(proc: subprocess.Popen[bytes] | None) -> str:
    """How the writer process ``proc`` ended, in words, for the one log line saying it was
    lost."""
    code = None if proc is None else proc.poll()
    if code is None:
        return "it stopped answering"
    if code == START_FAILED:
        return f"it could not start (exit status {code}; its line on stderr says why)"
    if code == FAILED:
        return f"it stopped on an error (exit status {code}; its line on stderr says why)"
    return f"it {how_ended(code, numbered=True)}"


def run_time(pid: int) -> int | None:
    """The CPU time process ``pid`` has run so far, in nanoseconds (``/proc/PID/schedstat``;
    clock ticks of ``/proc/PID/stat`` where the kernel keeps no schedstat); None when neither
    can be read. A process that is stopped, or blocked on a disk that no longer answers, adds
    none."""
    try:
        with open(f"/proc/{pid}/schedstat", "rb") as file:
            return int(file.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            fields = file.read().rpartition(b")")[2].split()
        return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    except (OSError, ValueError, IndexError):
        return None


def available() -> bool:
    """True when this platform can run the writer process (Linux: ``memfd_create``)."""
    return hasattr(os, "memfd_create") and sys.platform.startswith("linux")



def manifest_file(manifest: dict[str, Any]) -> int:
    """A descriptor of an unnamed file (a ``memfd``) holding ``manifest`` as JSON, read from
    its start by the writer process: on its command line, the model, engine id, host and pid
    were shown to every local user (``ps``)."""
    fd = os.memfd_create("forensics-probe-manifest", os.MFD_CLOEXEC)
    try:
        os.write(fd, json.dumps(manifest, default=str).encode("utf-8"))
    except BaseException:
        os.close(fd)
        raise
    return fd

class Ack:
    """The child's latest acknowledgement (all zero before the first)."""

    __slots__ = ("done", "records", "written", "dropped", "errors")

    def __init__(self, values: tuple[int, ...] = (0, 0, 0, 0, 0)) -> None:
        self.done, self.records, self.written, self.dropped, self.errors = values


class Stall:
    """The probe's one rule for a writer that stops answering (a stopped process, a disk that
    no longer answers): once a wait for it timed out, it is not waited for again until it
    moves, so that it costs the engine one bounded wait, not one per call. ``progress`` is
    any count the writer raises as it works (the bytes it acknowledged, the batches it
    wrote)."""

    __slots__ = ("_at",)

    def __init__(self) -> None:
        self._at: int | None = None  # the writer's progress when a wait last timed out

    def timed_out(self, progress: int) -> None:
        """A wait for the writer timed out with it at ``progress``."""
        self._at = progress

    @property
    def suspected(self) -> bool:
        """True when a wait timed out and the writer was not seen moving since (no need to
        look at its progress otherwise)."""
        return self._at is not None

    def holds(self, progress: int) -> bool:
        """True while the writer is still at the ``progress`` a wait timed out at."""
        if self._at is not None and progress != self._at:
            self._at = None
        return self._at is not None


class Ring:
    """The shared memory: a ``memfd`` of ``size`` bytes (``fd``, handed to the child) mapped
    here as a memoryview (``view``), int64 items (``ints``) and a torch uint8 tensor
    (``tensor``, made outside inference mode so that any code may write into it)."""

    def __init__(self, size: int) -> None:
        import torch

        self.torch = torch
        self.fd = os.memfd_create("forensics-probe-ring", os.MFD_CLOEXEC)
        os.ftruncate(self.fd, size)
        self.map = mmap.mmap(self.fd, size, flags=mmap.MAP_SHARED | getattr(
            mmap, "MAP_POPULATE", 0))
        self.view = memoryview(self.map)
        self.ints = np.frombuffer(self.map, np.int64)
        with torch.inference_mode(False):
            self.tensor = torch.frombuffer(self.map, dtype=torch.uint8)


class WriterChannel:
    """A ring of ``size`` bytes and, once :meth:`start`\\ ed, the writer process reading it.

    ``head``: bytes framed so far; ``poked``: the head last sent to the child; ``framed``:
    records framed so far. Not thread-safe: the session calls it under its lock.

    A frame is published in one statement, its records counted (``framed``) and then its
    bytes (``head``), no call between the two stores: CPython 3.11 runs a signal's handler
    only after a call, at a function's start or at a loop's jump back, so one that raises
    never leaves a frame published and uncounted (then counted lost to a signal, yet
    written: T137b)."""

    def __init__(self, size: int = RING_BYTES) -> None:
        self.ring = Ring(size)
        self.size = size
        self.head = self.poked = self.framed = 0
        self.ack = Ack()
        self.layouts: dict[tuple[str, Any], frames.Layout] = {}
        self.proc: subprocess.Popen[bytes] | None = None
        self._acks = -1
        self.pid = os.getpid()  # a forked copy of the engine must not share the child
        self._stall = Stall()  # of ``ack.done``

    # -- the child process ----------------------------------------------------------------
    def start(self, folder: int, process: str, manifest: dict[str, Any]) -> None:
        """Spawn the writer process for the capture folder held open as ``folder`` (a
        descriptor it inherits: :class:`~forensics.probe.owned.OwnedFolder`; segments named
        by ``process``).

        Raises OSError when it cannot be started."""
        read, write = os.pipe()
        facts = manifest_file(manifest)
        try:
            self.proc = subprocess.Popen(
                # -P: nothing from the engine's working directory (a shared folder where
                # another user planted `argparse.py` or `forensics/`) is imported
                [sys.executable, "-P", "-m", "forensics.probe.writer_process", "--ring-fd",
                 str(self.ring.fd), "--ring-bytes", str(self.size), "--ack-fd", str(write),
                 "--capture-fd", str(folder), "--process", process, "--engine-pid",
                 str(os.getpid()), "--manifest-fd", str(facts)],
                stdin=subprocess.PIPE, pass_fds=(self.ring.fd, write, folder, facts),
                close_fds=True)
        except BaseException:
            os.close(read)
            raise
        finally:
            os.close(write)
            os.close(facts)
        os.set_blocking(read, False)
        assert self.proc.stdin is not None
        os.set_blocking(self.proc.stdin.fileno(), False)
        self._acks = read

    def unread(self) -> int:
        """The ring position from which the writer process provably read no frame: where it
        last acknowledged when none ran or it could not start, else the last head it was
        poked with (it reads no further)."""
        if self.proc is None or self.proc.poll() == START_FAILED:
            return self.ack.done
        return max(self.poked, self.ack.done)

    @property
    def started(self) -> bool:
        """True once the child was spawned (in this process)."""
        return self.proc is not None

    def alive(self) -> bool:
        """True while the child runs (it may still die at any moment)."""
        return self.proc is not None and self.proc.poll() is None

    # -- frames ---------------------------------------------------------------------------
    def put_block(self, parts: tuple[Any, ...], pendings: list[PendingRecord]) -> int:
        """Frame ``pendings`` (ready records of one site whose joined copies are ``parts``:
        :func:`~forensics.probe.frames.runs`) as ``BLOCK`` frames; return how many the ring
        took (a block larger than a share of the ring is split)."""
        key = (pendings[0].site, parts)
        layout = self.layouts.get(key)
        if layout is None:
            layout = frames.Layout(len(self.layouts), pendings[0].site, parts)
            if not self.put_bytes(layout.announce):
                return 0
            self.layouts[key] = layout
        size, buffers, nbytes = frames.block_size(layout, pendings)
        if size > self.size // BLOCK_SHARE and len(pendings) > 1:
            half = len(pendings) // 2
            taken = self.put_block(parts, pendings[:half])
            return taken + self.put_block(parts, pendings[half:]) if taken == half else taken
        offset = self._room(size)
        if offset < 0:
            return 0
        count = len(pendings)
        frames.put_block(self.ring, offset, size, layout, pendings, buffers, nbytes)
        self.framed, self.head = self.framed + count, self.head + size  # see the class
        return count

    def put_record(self, pending: PendingRecord) -> bool:
        """Frame ``pending`` (its copies completed) as a ``RECORD`` frame; False when the
        ring has no room. Raises what encoding raises (a value JSON cannot hold)."""
        return self.put_bytes(frames.record_blob(pending), record=True)

    def put_bytes(self, frame: bytes, *, record: bool = False) -> bool:
        """Frame ready bytes (a ``RECORD``, ``LAYOUT`` or ``EVENT`` frame); False when the
        ring has no room."""
        size = len(frame)
        offset = self._room(size)
        if offset < 0:
            return False
        self.ring.view[offset:offset + size] = frame
        self.framed, self.head = self.framed + record, self.head + size  # see the class
        return True

    def _room(self, size: int) -> int:
        """The ring offset where a frame of ``size`` bytes goes (after a ``PAD`` frame when
        it would cross the end), or -1 when the child has not freed enough of the ring."""
        offset = self.head % self.size
        tail = self.size - offset
        need = size + (tail if size > tail else 0)
        if self.head + need - self.ack.done > self.size:
            self.read_acks()
            if self.head + need - self.ack.done > self.size:
                return -1
        if size > tail:
            frames.HEAD.pack_into(self.ring.view, offset, tail, frames.PAD)
            self.head += tail
            offset = 0
        return offset

    # -- pokes and acknowledgements --------------------------------------------------------
    def poke(self) -> bool:
        """Tell the child to write everything framed so far (never blocks); False when the
        child is gone."""
        if self.proc is None or self.proc.stdin is None:
            return False
        if self.poked == self.head:
            return self.alive()
        try:
            os.write(self.proc.stdin.fileno(), POKE.pack(self.head))
        except BlockingIOError:  # the child is far behind: the next poke says more
            return True
        except OSError:  # a broken pipe: the child died
            return False
        self.poked = self.head
        return True

    def read_acks(self) -> bool:
        """Take the child's acknowledgements waiting on the pipe (never blocks); False when
        the pipe reached its end (the child is gone)."""
        if self._acks < 0:
            return False
        chunk = ACK.size * 256
        while True:
            try:
                data = os.read(self._acks, chunk)
            except BlockingIOError:
                return True
            except OSError:
                return False
            if not data:
                return False
            last = len(data) // ACK.size * ACK.size  # writes of an ack are atomic
            if last:
                self.ack = Ack(ACK.unpack_from(data, last - ACK.size))
            if len(data) < chunk:
                return True

    def wait(self, timeout: float, *, poke: bool = True) -> bool:
        """Poke, then wait until the child acknowledged everything framed so far (without
        ``poke``: everything poked so far), at most ``timeout`` seconds; False on a timeout
        or a dead child. A child that acknowledged nothing since a wait timed out is
        :meth:`stalled`: not waited for again (the engine's calls go on at once)."""
        if poke and not self.poke():
            return False
        target = self.poked
        if self.stalled():
            return self.ack.done >= target
        deadline = time.monotonic() + timeout
        while self.ack.done < target:
            left = deadline - time.monotonic()
            if left <= 0:
                self._stall.timed_out(self.ack.done)
                return False
            readable, _, _ = select.select([self._acks], [], [], min(left, 0.5))
            if not readable and not self.alive():
                return self.read_acks() and self.ack.done >= target
            if readable and not self.read_acks():  # the child ended, maybe done
                return self.ack.done >= target
        return True

    def stalled(self) -> bool:
        """True when the child has acknowledged nothing since a :meth:`wait` for it timed out
        (a stopped process, a disk that no longer answers); False again once it moves."""
        if not self._stall.suspected:
            return False
        self.read_acks()
        return self._stall.holds(self.ack.done)

    def moves(self, seconds: float) -> bool:
        """Whether the child, :meth:`stalled`, is seen moving within ``seconds``: it
        acknowledged more, ended, or ran on a CPU (one resumed just before, not scheduled
        yet, runs as soon as it is; a stopped one, or one blocked on a dead disk, does not)."""
        assert self.proc is not None
        start = run_time(self.proc.pid)
        deadline = time.monotonic() + seconds
        while self.stalled() and self.proc.poll() is None:
            now = run_time(self.proc.pid)
            if start is not None and now is not None and now != start:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True

    def close(self, timeout: float = CLOSE_SECONDS) -> bool:
        """Poke, close the child's stdin (it writes what it was given, then exits) and wait
        for it, at most ``timeout`` seconds, then kill it. A :meth:`stalled` child is not
        waited for twice: unless it :meth:`moves` within :data:`LOOK_SECONDS`, it is killed
        after that look. True when it acknowledged every frame."""
        proc = self.proc
        done = True
        if proc is not None:
            if self.stalled() and not self.moves(LOOK_SECONDS):
                timeout = 0.0
            self.poke()
            try:
                assert proc.stdin is not None
                proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                try:
                    proc.wait(1.0)
                except subprocess.TimeoutExpired:  # blocked in the kernel (a dead disk)
                    pass
            self.read_acks()
            done = self.ack.done >= self.head
        if self._acks >= 0:
            os.close(self._acks)
            self._acks = -1
        os.close(self.ring.fd)  # the mapping stays valid until the channel is collected
        return done
