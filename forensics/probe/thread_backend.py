"""The in-process writer of a probe session (:class:`ThreadBackend`): a thread of the engine's
process that writes the session's records (``FORENSICS_WRITER=thread``, a ``writer_factory``
given, or after the writer process was lost; see :mod:`forensics.probe.session`).

No engine's thread waits for it without a deadline: a batch stuck in the disk (an fsync that
does not return) costs the engine one wait of :data:`WRITE_WAIT_SECONDS`, then none until
the batch is done (:class:`~forensics.probe.channel.Stall`, the writer process's rule too).
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Any

from forensics.probe import late
from forensics.probe.affinity import leave_engine_cores
from forensics.probe.channel import Stall
from forensics.probe.held import signals_held
from forensics.probe.writing import BatchWriter

if TYPE_CHECKING:
    from forensics.probe.session import ProbeSession, WriterFactory

LOG = logging.getLogger("forensics.probe")


def default_writer(session: ProbeSession) -> Any:
    """The capture writer of ``session``'s process (its folder, manifest and segment tag)."""
    from forensics.probe.manifest import build_manifest
    from forensics.store.writer import CaptureWriter

    manifest = build_manifest(session)
    return CaptureWriter(session.folder().path, manifest, process=session.process)


class ThreadBackend:
    """A writer in this process (``FORENSICS_WRITER=thread``, a ``writer_factory`` given, or
    after the writer process was lost): every N records the call wakes a writer thread,
    which hands the ready records to :class:`~forensics.probe.writing.BatchWriter`; a final
    flush runs in the calling thread, after the batch the writer thread may be writing."""

    hands_off_each = False  #: a thread of this process dies with it: records go in batches

    def __init__(self, session: ProbeSession, factory: WriterFactory) -> None:
        self.session = session
        self._factory = factory
        self.writer: Any = None
        self._event_lock = threading.RLock()  # both threads keep events
        self._open_lock = threading.Lock()  # the capture is made once (outside the session's)
        self._writing = False  # a batch is being encoded and written (outside the lock)
        self.thread: threading.Thread | None = None
        self._thread_pid = 0
        self._requested, self._done = 0, 0  # flushes asked of the writer thread, done
        self._finished = 0  # batches written, in any thread: the writer's progress
        self._stall = Stall()  # of ``_finished``: a disk that no longer answers

    def record_added(self, due: bool) -> None:
        """Wake the writer thread when a flush is due; when it lags a whole ring behind, wait
        for it (bounded; not again after a timeout until it ends a flush) rather than drop."""
        if due:
            self._kick()
        elif len(self.session._ring) >= self.session.settings.ring \
                and self._done < self._requested and not self._stalled() \
                and not self.drain(RING_WAIT_SECONDS):
            self._timed_out(RING_WAIT_SECONDS)  # the ring drops and counts meanwhile

    def flush(self, wait: bool, upto: int | None = None) -> int:
        """Write the ready records (those numbered ``upto`` or less) in this thread, after
        any batch being written; in the main thread with its signals held until the batch is
        written and counted (:func:`~forensics.probe.held.signals_held`)."""
        with signals_held():
            try:
                return self._flush(wait, upto)
            finally:
                self._pass_on_owed()  # the events a stall kept waiting, once it is over

    def _flush(self, wait: bool, upto: int | None) -> int:
        """The body of :meth:`flush`."""
        session = self.session
        with session._cv:
            if not session.enter_flush():
                return 0
            writing = False
            try:
                if not self._wait_writing():  # one batch at a time, in order
                    return 0  # the records stay in the ring (dropped when it overflows)
                ready = session.take_ready(wait, upto)
                if upto is None:  # a whole flush: the count restarts at the records left
                    session._since_flush = len(session._ring)
                if not ready and (not wait or self.writer is None):
                    return 0
                self._writing = writing = True
            finally:
                if not writing:
                    session.leave_flush()
        try:  # making the capture, encoding and fsync outside the lock
            writer = self._open_writer()
            if writer is None:
                session._count("dropped", len(ready))
                return 0
            return BatchWriter(writer, session.error, session._count).write(ready)
        finally:
            with session._cv:
                self._writing = False
                self._finished += 1
                session.leave_flush()
                session._cv.notify_all()

    def drain(self, timeout: float | None) -> bool:
        """Wait for the writer thread's batches (``timeout`` or :data:`FLUSH_SECONDS`);
        without a live thread, flush here."""
        if not self._thread_alive():
            self.flush(False)
            return True
        with self.session._cv:
            target = self._requested
            return self.session._cv.wait_for(
                lambda: self._done >= target or not self._thread_alive(),
                FLUSH_SECONDS if timeout is None else timeout)

    def accepts_events(self) -> bool:
        """Whether the capture is open (a writer that no longer answers keeps them waiting:
        :meth:`event`)."""
        return self.writer is not None

    def event(self, event: dict[str, Any]) -> bool:
        """Append ``event`` to this process's events file, after those waiting; while its
        writer does not answer (an event written to a disk that no longer answers would hang
        the engine's thread) it waits (:class:`~forensics.probe.owed.OwedEvents`): it was
        dropped, counted nowhere (an ``engine_exception`` lost)."""
        if late.refused(self.session, event):  # probe_stop written: never after it
            return False
        if self._stalled() or not self._acquire(self._event_lock):
            return self.session.owed.keep(event)
        try:
            self.session.owed.pass_on(self._taken)
            return self._taken(event, True)
        finally:
            self._event_lock.release()

    def _taken(self, event: dict[str, Any], said: bool = False) -> bool:
        """Write ``event`` (the event lock held); whether it was written when ``said``, else
        True: one the writer refuses (its events file full counts it) is not kept waiting."""
        try:
            self.writer.add_event(event)
            return True
        except Exception:
            return not said

    def _pass_on_owed(self) -> None:
        """Write the events kept waiting while the writer did not answer, once it does."""
        if len(self.session.owed) and self.writer is not None and not self._stalled() \
                and self._acquire(self._event_lock):
            try:
                self.session.owed.pass_on(self._taken)
            finally:
                self._event_lock.release()

    def open(self) -> None:
        """Open the capture if it is not open; in the main thread with its signals held until
        it is (a SIGTERM's close that came as the capture was being made found no writer: it
        kept no ``probe_stop``, and the folder, left empty, was removed)."""
        with signals_held():
            self._open_writer()

    def settle(self) -> None:
        """Wait (bounded) for the batch the writer thread is writing (the session's lock
        held)."""
        self._wait_writing()

    def stop(self) -> None:
        """Wait (a bounded time) for the writer thread to end once it was told to stop: a
        daemon thread still running as the interpreter exits can abort the process
        (``terminate called without an active exception``, seen in benchmark scripts)."""
        thread = self.thread
        if thread is not None and thread is not threading.current_thread() \
                and self._thread_alive() and not self._stalled():
            thread.join(timeout=WRITER_JOIN_SECONDS)

    def close(self) -> None:
        """Close the capture writer, unless a batch is stuck in it (a disk that no longer
        answers: the files stay as they are, every batch before it whole)."""
        if self.writer is not None and not self._stalled():
            try:
                self.writer.close()
            except Exception as exc:
                self.session._count("errors")
                LOG.warning("forensics probe: closing the capture failed: %s", exc)

    def _wait_writing(self) -> bool:
        """Wait (the session's lock held) until no batch is being written: the writer thread
        waits as long as it takes; the engine's threads :data:`WRITE_WAIT_SECONDS` at most,
        and not again until that batch is done (:class:`~forensics.probe.channel.Stall`).
        False when a batch is still being written."""
        cv = self.session._cv
        if not self._writing or threading.current_thread() is self.thread:
            return cv.wait_for(lambda: not self._writing)
        if self._stalled():
            return False
        if cv.wait_for(lambda: not self._writing, WRITE_WAIT_SECONDS):
            return True
        self._timed_out(WRITE_WAIT_SECONDS)
        return False

    def _stalled(self) -> bool:
        """True while no batch was written since a wait for the writer timed out."""
        return self._stall.holds(self._finished)

    def _timed_out(self, waited: float) -> None:
        """A wait of ``waited`` s for the writer timed out: counted, said in one line, and
        not waited for again until it writes a batch."""
        self._stall.timed_out(self._finished)
        self.session._count("timeouts")
        LOG.warning("forensics probe: the capture writer did not finish a batch within %g s "
                    "(a disk that no longer answers?); the engine goes on without waiting "
                    "for it until it does, and the records it cannot take are dropped and "
                    "counted", waited)

    def _thread_alive(self) -> bool:
        thread = self.thread
        return thread is not None and thread.is_alive() and self._thread_pid == os.getpid()

    def _kick(self) -> None:
        """Ask the writer thread for a flush (start it if needed; inline if it cannot run)."""
        if not self._thread_alive():
            try:
                thread = threading.Thread(target=self._writer_loop, daemon=True,
                                          name="forensics-probe-writer")
                self.thread, self._thread_pid = thread, os.getpid()  # known before it runs
                thread.start()
            except RuntimeError:  # interpreter shutting down: flush here
                self.flush(False)
                return
        with self.session._cv:
            self._requested += 1
            self.session._cv.notify_all()

    def _writer_loop(self) -> None:
        session = self.session
        session.cpus = leave_engine_cores()  # off the core vLLM pinned the worker to, if it can
        while True:
            with session._cv:
                session._cv.wait_for(lambda: self._requested > self._done or session._stopping)
                if self._requested <= self._done:
                    return
                target = self._requested
            try:
                self.flush(False, session.due_upto)
            except Exception as exc:  # never let the thread die silently
                session.error(exc, "the probe's writer thread")
            with session._cv:
                self._done = max(self._done, target)
                session._cv.notify_all()

    def _open_writer(self) -> Any:
        """The capture writer, made at the first call (a folder, a manifest, their fsync:
        never under the session's lock, which the engine's calls take); None when it could
        not be made, or an engine's thread timed out waiting for another to make it."""
        if self.writer is not None:
            return self.writer
        if not self._acquire(self._open_lock):
            return None
        try:
            if self.writer is None:
                try:
                    self.writer = self._factory(self.session)
                    self.session.start_event()
                except Exception as exc:
                    self.session.error(exc, f"opening the capture {self.session.settings.capture}")
            return self.writer
        finally:
            self._open_lock.release()

    def _acquire(self, lock: Any) -> bool:
        """Take ``lock``, which a thread holds while it writes to the disk: the writer
        thread waits as long as it takes, an engine's thread :data:`WRITE_WAIT_SECONDS` at
        most and not again until a batch is done (see :meth:`_wait_writing`)."""
        if threading.current_thread() is self.thread:
            return bool(lock.acquire())
        if self._stalled():
            return bool(lock.acquire(blocking=False))
        if lock.acquire(timeout=WRITE_WAIT_SECONDS):
            return True
        self._timed_out(WRITE_WAIT_SECONDS)
        return False


#: how long ``close()`` waits for the writer thread to end after its last flush
WRITER_JOIN_SECONDS = 1.0
#: how long a final flush waits for the writer process's acknowledgement
FLUSH_SECONDS = 30.0
#: how long an engine's thread waits for the batch the writer thread is writing
WRITE_WAIT_SECONDS = 30.0
#: how long a record waits for the writer process to free a full ring before it is dropped
RING_WAIT_SECONDS = 5.0
