"""One probe per process: the step counter, the ring of pending records and the capture writer.

By default (``FORENSICS_WRITER=process``) the capture is written by a **writer process**
(:mod:`forensics.probe.channel`, :mod:`forensics.probe.writer_process`), so that its Python
never runs under the engine's interpreter lock. Records wait in the session's ring
(``FORENSICS_RING`` records at most; the oldest are dropped and counted when it overflows).
As each record is queued (``FORENSICS_HANDOFF=record``, the default: a SIGSEGV, SIGABRT or
SIGKILL of the engine then loses at most the record in flight; with ``batch``, every
``FORENSICS_FLUSH_EVERY`` records) the wrapped call frames the records whose copies
completed (``event.query()``, never a wait) into a shared-memory ring (runs of joined records
as blocks: :mod:`forensics.probe.frames`), pokes the writer process (one non-blocking write)
and returns. A final flush (exit, SIGTERM, an exception in a wrapped call, a guard finding)
waits for the copies, frames them, and waits (bounded) for the writer process's
acknowledgement that the capture holds them, fsynced (:class:`ProcessBackend`). If the writer
process dies, the session swaps in the in-process writer below, which first writes again the
frames the process never read (still in the ring); the others it had not acknowledged are
counted as dropped, their steps said (:meth:`ProbeSession.writer_lost`).

The in-process writer (:class:`~forensics.probe.thread_backend.ThreadBackend`:
``FORENSICS_WRITER=thread``, a ``writer_factory`` given, as tests do, or after the writer
process was lost): every N records the call wakes the session's writer thread, which hands
the records whose copies completed to :class:`~forensics.probe.writing.BatchWriter` (the one
write path, also the writer process's). A final flush runs in the calling thread, after the
batch the writer thread may be writing (waited for a bounded time). The probe's own errors
(any thread or process) are counted, written as events, never raised into vLLM.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from bisect import bisect_right
from collections import deque
from collections.abc import Callable
from operator import attrgetter
from typing import Any, Protocol

from forensics.probe import channel as channel_module
from forensics.probe import forked, frames, handed, late, owed, owned, tags
from forensics.probe.busy import FlushMarks
from forensics.probe.channel import Ack, WriterChannel
from forensics.probe.copy import Copier, PendingRecord
from forensics.probe.guard import Violation, bounds_error, passed_on_message
from forensics.probe.held import signals_held
from forensics.probe.rank import RankTracker
from forensics.probe.settings import Settings
from forensics.probe.thread_backend import (
    FLUSH_SECONDS,
    RING_WAIT_SECONDS,
    ThreadBackend,
    default_writer,
)
from forensics.probe.writer_process import Salvaged, salvage
from forensics.probe.writing import error_text

LOG = logging.getLogger("forensics.probe")
_SEQ = attrgetter("seq")
WriterFactory = Callable[["ProbeSession"], Any]


class WriterBackend(Protocol):
    """Who writes a session's records: the writer process or a thread of this process. The
    session keeps the ring and the counters and holds one backend; it swaps the process
    backend for a thread backend when the writer process is lost."""

    #: every record goes to the writer as it is queued (``record_added(True)`` each time)
    hands_off_each: bool

    def record_added(self, due: bool) -> None:
        """A record was queued (``due``: ``FLUSH_EVERY`` records since the last flush, or
        every record when :attr:`hands_off_each`)."""

    def flush(self, wait: bool) -> int:
        """Write (or frame and poke) the ready records; how many were written meanwhile."""

    def drain(self, timeout: float | None) -> bool:
        """Wait until every batch asked of the writer is written (False on ``timeout``)."""

    def event(self, event: dict[str, Any]) -> bool:
        """Keep ``event``; False when there is nowhere to keep it yet (or it failed)."""

    def accepts_events(self) -> bool:
        """Whether an event would have somewhere to go now."""

    def open(self) -> None:
        """Make sure the capture can be written (an engine failure is about to be kept)."""

    def settle(self) -> None:
        """Wait for the batch being written (the session's lock held): closing follows."""

    def stop(self) -> None:
        """Stop the writer's worker after the final flush (before ``probe_stop``)."""

    def close(self) -> None:
        """Close the capture (after ``probe_stop``); never raises."""


class ProbeSession(FlushMarks):
    """The probe's state in one process (see the module docstring): the step and rank, the
    ring of pending records, the counters, and one :class:`WriterBackend`."""

    def __init__(self, settings: Settings, *, writer_factory: WriterFactory | None = None,
                 copier: Copier | None = None) -> None:
        self.made_folder = not settings.owner  #: this process made the capture folder
        self.settings = settings = owned.claim(settings)
        self._folder: owned.OwnedFolder | None = None
        self._hold_folder()
        self.guard = settings.guard  #: guard mode (read at every recorded call)
        self.copier = copier or Copier()
        self._tag = (os.getpid(), tags.unclaimed(self))
        self.runner: Any = None
        self.counts = {"records": 0, "written": 0, "dropped": 0, "errors": 0, "violations": 0,
                       "timeouts": 0}
        self.lost_to_signal, self.owed = 0, owed.OwedEvents()  # see handed.py, owed.py
        self._started_event = False
        self.recording: Callable[[], list[str] | None] = lambda: None  #: recorded kernels
        #: whether the last waited flush (a guard finding's, a failed call's) lost nothing
        self.kept = True
        self._step = -1
        self._ranks = RankTracker()
        self._ring: deque[PendingRecord] = deque()
        self._since_flush = 0
        self._lock = threading.RLock()  # the ring, the counts and the writer thread's state
        self._cv = threading.Condition(self._lock)
        self._flushers: dict[int, int] = {}  # threads inside a flush (or close): how deep
        self._deferred = None  # a signal handler's work that came inside a flush (FlushMarks)
        self.due_upto = 0  # the last record of the last due flush (a writer thread's bound)
        self._stopping = False
        self._closer: int | None = None  # the thread inside close(); _ended once it is over
        self._ended = False
        self._warned = False
        self._passed_on_warned: set[str] = set()  # sites whose passed-on finding was logged
        self.started = time.time()  # probe_start reports the start, not the first write
        self._start_step = self.step
        self.cpus: dict[str, list[int]] = {}  # the writer thread's CPUs and the engine's
        self._closed = False
        self._writer_factory = writer_factory or default_writer
        process = writer_factory is None and settings.writer == "process" \
            and channel_module.available()
        self.backend: WriterBackend = ProcessBackend(self) if process else \
            ThreadBackend(self, self._writer_factory)
        forked.follow(self)  # a forked copy starts afresh (its own counts, events, files)

    @property
    def process(self) -> str:
        """This process's segment tag (``host-pid``): a forked copy of the engine takes its
        own, so its segments and events are never counted or read as this process's (a
        killed writer's "found" once counted a copy's records)."""
        if self._tag[0] != os.getpid():
            self._tag = (os.getpid(), tags.unclaimed(self))
        return self._tag[1]

    def _hold_folder(self) -> None:
        """Hold the capture folder open from the start (:meth:`folder`), so that another
        user renaming or replacing its name while the engine loads, before its first record,
        costs no record; a name that no longer leads to it is said at the first write."""
        try:
            self.folder()
        except OSError:
            pass

    def folder(self) -> owned.OwnedFolder:
        """The capture folder, held open once checked (:class:`~forensics.probe.owned.
        OwnedFolder`). Raises PermissionError when the name no longer leads to it."""
        if self._folder is None or self._folder.fd < 0:
            self._folder = owned.OwnedFolder(self.settings.capture, self.settings.owner)
        return self._folder

    # -- steps and ranks -------------------------------------------------------------------
    @property
    def step(self) -> int:
        """The current engine step: model executions so far in this process, minus one."""
        return max(self._step, 0)

    def begin_step(self, runner: Any = None) -> int:
        """Count one model execution (``GPUModelRunner.execute_model``); return the new step."""
        self._step += 1
        if runner is not None:
            self.runner = runner
        return self._step

    @property
    def rank(self) -> int:
        """The global rank (torch.distributed once initialised, else ``$RANK``, else 0)."""
        return self._ranks.at(self._step)

    def wants(self, site: str) -> bool:
        """True when ``site`` is recorded (``VLLM_FORENSICS_SITES``) and the probe is open."""
        return not self._closed and site in self.settings.sites

    # -- records ---------------------------------------------------------------------------
    def new_record(self, site: str) -> PendingRecord:
        """Start a record of ``site`` at the current step and rank."""
        return PendingRecord(site, self._step if self._step > 0 else 0, self.rank)

    def add(self, pending: PendingRecord, *, failed: bool = False) -> None:
        """Queue a finished record; every N records poke the writer process (or wake the
        writer thread; the call returns at once); flush at once, waiting, if ``failed``.
        One that comes after the close is said in the log (:mod:`~forensics.probe.late`)."""
        if self._closed:
            return late.said(self, pending, failed)
        handed.room(self)  # a signal as it waits for room: counted lost to it
        with handed.queueing(self, pending), self._lock:  # a signal as it waits: the same
            if self._closed:  # closed meanwhile
                return late.said(self, pending, failed)
            self.counts["records"] += 1
            pending.seq = self.counts["records"]
            self._ring.append(pending)
            self._since_flush += 1
            while len(self._ring) > self.settings.ring:  # counted first, no call between: a
                self.counts["dropped"] += 1  # handler raising after popleft leaves it counted
                self._ring.popleft()
            due = self._since_flush >= self.settings.flush_every
            if due:
                self._since_flush = 0
                self.due_upto = pending.seq
        try:
            if failed:
                before = dict(self.counts)
                self.flush(wait=True)
                self.kept = self._lost_nothing(before)
            elif due or self.backend.hands_off_each:
                self.backend.record_added(True)
        finally:  # a signal's handling that came inside the flush (defer)
            if self._deferred is not None:
                self._run_deferred()

    def _lost_nothing(self, before: dict[str, int]) -> bool:
        """Whether a waited flush since ``before`` (the counts then) wrote records and dropped
        none, with no error of the writer's (a guard message says where its records are)."""
        counts = self.counts
        return counts["written"] > before["written"] and counts["dropped"] == before["dropped"] \
            and counts["errors"] == before["errors"]

    @property
    def handoff(self) -> str:
        """When records leave this process, as its writer does it (what a manifest or event
        states): ``record`` only where the writer process hands off each; a thread of this
        process (``FORENSICS_WRITER=thread``, a system with no writer process, one lost) takes
        them in batches whatever ``FORENSICS_HANDOFF`` says."""
        return "record" if self.backend.hands_off_each else "batch"

    def flush(self, *, wait: bool = False) -> int:
        """Write the records whose copies completed (all of them if ``wait``) now, in this
        thread, after any batch the writer thread is writing; return how many were written.
        With the writer process: frame them and poke it; with ``wait``, wait (bounded) for
        its acknowledgement; return how many it wrote meanwhile."""
        try:
            return self.backend.flush(wait)
        finally:
            self._run_deferred()

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until the writer thread (or process) has written every batch asked of it so
        far; return False on ``timeout``. Without a live writer thread, flush here instead."""
        try:
            return self.backend.drain(timeout)
        finally:
            self._run_deferred()

    def take_ready(self, wait: bool, upto: int | None = None) -> list[PendingRecord]:
        """Take the ready records (all if ``wait``) numbered ``upto`` or less (the ring is in
        their order; the lock held); the others stay, in order."""
        ring = self._ring
        count = len(ring) if upto is None else bisect_right(ring, upto, key=_SEQ)
        head = [ring.popleft() for _ in range(count)]
        if not any([pending.events for pending in head]):  # host copies: all ready
            return head
        ready: list[PendingRecord] = []
        keep: list[PendingRecord] = []
        for pending in head:
            try:
                if wait:
                    pending.wait()
                (ready if pending.ready() else keep).append(pending)
            except Exception as exc:  # a device error: its copies will never complete
                self.counts["dropped"] += 1
                self.error(exc, f"waiting for the copies of a {pending.site} record")
        ring.extendleft(reversed(keep))  # records not ready stay first, in order
        return ready

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.counts[name] += n

    def writer_lost(self, unacked: int, detail: str,
                    salvage: Callable[[Any], Salvaged] | None = None, found: int = 0) -> None:
        """The writer process died (or never started: ``detail`` says how, on one line),
        ``unacked`` records not acknowledged, ``found`` of them in the capture all the same
        (written before it died): go on with a writer thread of this process, which first
        writes again what ``salvage`` can of them (those still in the ring that the process
        never read); the others are counted as dropped, their steps said in one log line and
        a ``probe_writer_lost`` event."""
        self.backend = backend = ThreadBackend(self, self._writer_factory)
        backend.open()
        saved = Salvaged()
        if salvage is not None and backend.writer is not None:
            try:
                saved = salvage(backend.writer)
            except Exception as exc:
                self.error(exc, "writing again the records a lost writer process left")
        lost = max(unacked - saved.records - found, 0)
        with self._lock:
            self.counts["dropped"] += lost + saved.dropped
            self.counts["written"] += saved.written + found
            self.counts["errors"] += saved.errors
        steps = f" (steps {saved.unsure[0]} to {saved.unsure[-1]})" if saved.unsure else ""
        LOG.warning("forensics probe: the writer process was lost (%s); of the %d records it "
                    "had not acknowledged, %d were found in the capture, %d were written "
                    "again from the ring and %d are dropped%s; writing in this process from "
                    "now on", detail, unacked, found, saved.written, lost, steps)
        if backend.accepts_events():
            self._event("probe_writer_lost", error=detail, unacknowledged=unacked,
                        found=found, recovered=saved.written, dropped=lost,
                        unsure_steps=saved.unsure[:1] + saved.unsure[-1:])

    def start_event(self) -> None:
        """Keep the ``probe_start`` event, once per session."""
        if not self._started_event:
            self._started_event, settings = True, self.settings
            self._event("probe_start", step=self._start_step, started=self.started,
                        first_write_step=self.step, mode=settings.mode, ring=settings.ring,
                        sites=list(settings.sites), flush_every=settings.flush_every,
                        handoff=self.handoff, kernels=self.recording())

    # -- errors and findings ---------------------------------------------------------------
    def error(self, exc: BaseException, where: str) -> None:
        """Count one of the probe's own errors and keep it as an event; never raises."""
        self._count("errors")
        detail = error_text(exc)
        if not self._event("probe_error", where=where, error=detail,
                           errors=self.counts["errors"]) and not self._warned:
            self._warned = True
            LOG.warning("forensics probe: %s failed: %s (further errors are only counted)",
                        where, detail)

    def _event(self, kind: str, **fields: Any) -> bool:
        backend = self.backend
        if not backend.accepts_events():
            return False
        try:
            return backend.event({"kind": kind, "time": time.time(), "pid": os.getpid(),
                                  "rank": self.rank, "step": self.step, **fields})
        finally:  # a signal's handling that came as the event was framed (defer)
            self._run_deferred()

    def engine_failed(self, exc: BaseException, where: str) -> None:
        """An exception left vLLM's ``where``: keep it as an event and flush; never raises."""
        try:
            self._flushed_event("engine_exception", where=where, error=error_text(exc)[:2000])
        except Exception as inner:
            self._count("errors")
            LOG.warning("forensics probe: flushing after %s failed: %s", where, inner)

    def keep_event(self, kind: str, **fields: Any) -> None:
        """Keep an event ``kind``, opening the capture for it if no record did yet (flushes
        what is queued first); never raises."""
        try:
            self._flushed_event(kind, **fields)
        except Exception as inner:
            self._count("errors")
            LOG.warning("forensics probe: keeping a %s event failed: %s", kind, inner)

    def _flushed_event(self, kind: str, **fields: Any) -> None:
        """Flush (waiting), open the capture if need be and keep an event ``kind``; one that
        comes after the close is said in the log (:mod:`~forensics.probe.late`), no writer
        started for it."""
        if not self._closed:
            self.flush(wait=True)
        with signals_held():  # a SIGTERM's close waits for the capture and the event
            with self._lock:
                if self._closed:
                    return late.event_said(kind, fields)
                self.backend.open()
            if not self._event(kind, **fields) and self._closed:  # closed meanwhile
                late.event_said(kind, fields)

    def violation(self, pending: PendingRecord, found: Violation) -> BaseException:
        """Guard finding: queue ``pending``, flush and wait, keep an event; return the error."""
        self._count("violations")
        self.add(pending, failed=True)
        error = bounds_error(found, pending.step, pending.rank, self.settings.capture,
                             self.kept)
        self._event("guard_violation", site=found.site, row=found.row, tensor=found.tensor,
                    value=found.value, bound=found.upper, message=str(error))
        return error

    def passed_on(self, pending: PendingRecord, found: Violation) -> None:
        """Guard finding on a value the call only wrote or passed on (already recorded and
        flushed): keep an event; the first of each site is also logged as a warning."""
        self._count("violations")
        message = passed_on_message(found, pending.step, pending.rank, self.settings.capture,
                                    self.kept)
        self._event("guard_passed_on", site=found.site, row=found.row, tensor=found.tensor,
                    value=found.value, bound=found.upper, message=message)
        if found.site not in self._passed_on_warned:
            self._passed_on_warned.add(found.site)
            LOG.warning("%s", message)

    def close(self) -> None:
        """Final flush (waits for copies and the writer's batch), a summary event, and close
        the writer; the writer thread (or process) ends. Never raises. Called while another
        thread closes it (a SIGTERM's handler), wait for that close (bounded: its final flush
        and the writer's end; the lock let go meanwhile, even by the thread interrupted)."""
        with signals_held():  # a signal's handler runs once the close is over (held.py)
            if began := self._begin_close():
                try:
                    self._close()
                finally:
                    with self._cv:
                        self.leave_flush()
                        self._ended = True
                        self._cv.notify_all()
        with self._cv:  # another thread's close: wait for it (its flush and writer's end)
            if not began and self._closer != threading.get_ident():
                self._cv.wait_for(lambda: self._ended, 2 * FLUSH_SECONDS)
        self._run_deferred()

    def _begin_close(self) -> bool:
        """Mark the session stopping, this thread its closer and busy to the end (a SIGTERM
        meanwhile waits for it: defer); False when a close began already. Signals held: a
        SIGTERM's close that came once it was stopping and not yet busy returned at once and
        killed the process, its records and ``probe_stop`` never written."""
        if self._stopping:  # another's close: waited for, its lock too, outside the hold
            return False
        with self._cv:
            if self._stopping:
                return False
            self.enter_flush()
            self._stopping, self._closer = True, threading.get_ident()
            return True

    def _close(self) -> None:
        """The body of :meth:`close`, once the session is stopping."""
        self.flush(wait=True)
        with self._cv:
            self.backend.settle()
            self.counts["dropped"] += len(self._ring)  # what no writer took (a stalled disk)
            self._ring.clear()
            self._closed = True
        self.backend.stop()
        stop = {**self.counts, **self.cpus, **handed.note(self), **self.owed.note()}
        self._event("probe_stop", **stop)
        self.backend.close()
        self._let_go()

    def _let_go(self) -> None:
        """Close the held capture folder; remove it when this process made it and nothing
        was written into it (an engine that recorded nothing leaves no empty capture)."""
        if self._folder is not None:
            tags.let_go(self, self._folder.fd)
            self._folder.close()
        if self.made_folder:
            try:
                os.rmdir(self.settings.capture)  # only ever removes an empty folder
            except OSError:
                pass


class ProcessBackend:
    """The writer process (:mod:`forensics.probe.channel`): ready records are framed into a
    shared-memory ring and the process is poked; its acknowledgements bring the counts."""

    def __init__(self, session: ProbeSession) -> None:
        self.session = session
        #: ``FORENSICS_HANDOFF=record``: each ready record is framed and the writer process
        #: poked as the record is queued, so that a crash of the engine (SIGSEGV, SIGABRT,
        #: SIGKILL) loses at most the record in flight
        self.hands_off_each = session.settings.handoff == "record"
        self.channel: WriterChannel | None = None
        self._acked = Ack()  # the writer process's counts as last added to the session's
        #: this process's segment files when its writer process started (None: unknown)
        self._before: frozenset[str] | None = None

    def record_added(self, due: bool) -> None:
        """Start the writer process at the first record; poke it when a flush is due."""
        if due:
            self.flush(False)
        elif self.channel is None:
            self._launch()

    def flush(self, wait: bool) -> int:
        """Frame the ready records and poke the writer process; with ``wait``, wait
        (bounded) for its acknowledgement. Signals are held (held.py) but for each record's."""
        session = self.session
        with session._lock, signals_held(wait or not self.hands_off_each):
            if not session.enter_flush():
                return 0
            try:
                handed.frame(self, wait)  # records a signal cuts out counted
                session._since_flush = len(session._ring)
                if session.backend is not self:  # lost while framing: the thread writes
                    return 0
                if (channel := self._started_channel()) is None:
                    return 0
                written = session.counts["written"]
                done = channel.wait(FLUSH_SECONDS) if wait else channel.poke()
                self._check_channel(channel, done, wait)
                return session.counts["written"] - written
            finally:
                session.leave_flush()

    def drain(self, timeout: float | None) -> bool:
        """Wait for the last poke's acknowledgement."""
        with self.session._lock:
            channel = self.channel
            if channel is None or not channel.started:
                return True
            done = channel.wait(FLUSH_SECONDS if timeout is None else timeout, poke=False)
            self._check_channel(channel, done, False)
            return done

    def accepts_events(self) -> bool:
        """Whether the writer process runs."""
        return self.channel is not None and self.channel.started

    def event(self, event: dict[str, Any]) -> bool:
        """Frame ``event`` after those waiting for room (owed.py); poke the writer (no wait)."""
        if (channel := self.channel) is None:
            return False
        try:
            with self.session._lock:
                if late.refused(self.session, event):
                    return False
                self.session.enter_framing()  # a recorder's dump on a signal waits (held.py)
                try:
                    return owed.framed(self.session.owed, channel, event)
                finally:
                    self.session.leave_flush()
        except Exception:
            return False

    def open(self) -> None:
        """Start the writer process if it is not running (a thread writes if it cannot)."""
        self._started_channel(create=True)
        if self.session.backend is not self:
            self.session.backend.open()

    def settle(self) -> None:
        """Nothing: a flush with ``wait`` already waited for the acknowledgement."""

    def stop(self) -> None:
        """Nothing: the writer process ends when its channel closes."""

    def close(self) -> None:
        """End the writer process once the last records and events were framed; what it
        did not acknowledge is counted as dropped."""
        channel, self.channel = self.channel, None
        if channel is None or not channel.started:
            return
        done = channel.close()
        self._take_counts(channel)
        if not done:
            found = self._found(channel)
            self.session.counts["written"] += found
            self.session.counts["dropped"] += channel.framed - channel.ack.records - found
            self.session.counts["timeouts"] += 1

    def _frame(self, ready: list[PendingRecord]) -> None:
        """Frame ready records into the ring (the lock held): runs of joined records as
        blocks, the others one by one. A ring the writer process has not freed: wait for it
        (bounded) once, then drop and count."""
        if not ready:
            return
        try:
            channel = self._new_channel()
        except Exception as exc:  # no shared memory here: the in-process writer
            self._lost(exc)
            self.session._ring.extendleft(reversed(ready))
            return
        for parts, run in frames.runs(ready):
            taken = self._put(channel, parts, run)
            if taken < len(run) and channel.started and channel.wait(RING_WAIT_SECONDS):
                taken += self._put(channel, parts, run[taken:])
            self.session.counts["dropped"] += len(run) - taken

    def _put(self, channel: WriterChannel, parts: Any, run: list[PendingRecord]) -> int:
        """Frame one run (:func:`~forensics.probe.frames.runs`); how many records it took."""
        try:
            if parts is not None:
                return channel.put_block(parts, run)
            return int(channel.put_record(run[0]))
        except Exception as exc:  # a value that cannot cross: the record is dropped
            self.session.error(exc, f"framing a {run[0].site} record (step {run[0].step})")
            return 0

    def _new_channel(self) -> WriterChannel:
        """The channel, its ring made at the first record (or the first in a forked copy of
        this process); the writer process starts later (:meth:`_started_channel`)."""
        channel = self.channel
        if channel is None or channel.pid != os.getpid():
            channel = self.channel = WriterChannel()
        return channel

    def _launch(self) -> None:
        """Start the writer process at the first record (the lock taken), so that its
        start (its imports) is over by the first poke; never raises."""
        with self.session._lock:
            try:
                self._started_channel(create=True, announce=False)
            except Exception as exc:  # no shared memory here: the in-process writer
                self._lost(exc)

    def _started_channel(self, *, create: bool = False,
                         announce: bool = True) -> WriterChannel | None:
        """The channel with its writer process started, or None when there is none (nothing
        framed yet unless ``create``, or it could not start: the session then writes in
        process). With ``announce`` (the first poke) keep the ``probe_start`` event once."""
        channel = self._new_channel() if create else self.channel
        if channel is None:
            return None
        if not channel.started:
            try:
                from forensics.probe.manifest import build_manifest
                from forensics.store.manifest import build_manifest as full_manifest

                self._before = self._own_segments()
                channel.start(self.session.folder().fd, self.session.process,
                              full_manifest(build_manifest(self.session)))  # this process's
            except Exception as exc:
                self._lost(exc)
                return None
        if announce:
            self.session.start_event()
        return channel

    def _check_channel(self, channel: WriterChannel, done: bool, waited: bool) -> None:
        """Take the writer process's counts (a dead one replaced by a writer thread; a wait
        that timed out counted); frame the events waiting for room in its ring (owed.py)."""
        alive = channel.read_acks() and channel.alive()
        self._take_counts(channel)
        if not alive:
            self._lost(None)
            return
        owed.frame_waiting(self.session, channel)
        if waited and not done:
            self.session.counts["timeouts"] += 1

    def _own_segments(self) -> frozenset[str] | None:
        """The names of this process's segment files in the capture now (None when the
        folder cannot be listed)."""
        from forensics.store.paths import parse_segment_name

        try:
            names = os.listdir(self.session.folder().fd)
        except OSError:
            return None
        return frozenset(entry for entry in names if (name := parse_segment_name(entry))
                         is not None and name.process == self.session.process)

    def _found(self, channel: WriterChannel) -> int:
        """The records the ended writer process of ``channel`` wrote after its last
        acknowledgement (killed, or dead, between a write and its ack): those the capture
        holds, as a reader reads them, in the segments of this process made since it started,
        past the records it acknowledged as written; at most those it did not acknowledge.
        0 while it may still write, or when the segments cannot be listed or read."""
        unacked = channel.framed - channel.ack.records
        if unacked <= 0 or channel.alive() or self._before is None:
            return 0
        from forensics.store.reader import records_in

        try:
            now = self._own_segments()
            if now is None:
                return 0
            on_disk = records_in(self.session.folder().path, sorted(now - self._before))
        except Exception as exc:  # a segment a reader refuses: counted as before, said
            self.session.error(exc, "counting the records a lost writer process left")
            return 0
        return max(0, min(on_disk - channel.ack.written, unacked))

    def _take_counts(self, channel: WriterChannel) -> None:
        ack, last, counts = channel.ack, self._acked, self.session.counts
        counts["written"] += ack.written - last.written
        counts["dropped"] += ack.dropped - last.dropped
        counts["errors"] += ack.errors - last.errors
        self._acked = ack

    def _lost(self, exc: BaseException | None) -> None:
        """The writer process died (or never started): count what it had not written as
        dropped; the session goes on with a writer thread."""
        channel, self.channel = self.channel, None
        if channel is None:
            self.session.writer_lost(0, " ".join(error_text(exc).split()) if exc else "it ended")
            return
        channel.read_acks()
        channel.close(timeout=1.0)  # it reads the last acknowledgements
        self._take_counts(channel)
        detail = channel_module.ended(channel.proc) if exc is None else error_text(exc)
        self.session.writer_lost(channel.framed - channel.ack.records, " ".join(detail.split()),
                                 lambda writer: self._salvage(channel, writer),
                                 self._found(channel))

    @staticmethod
    def _salvage(channel: WriterChannel, writer: Any) -> Salvaged:
        """What ``writer`` (in this process) wrote again of the lost ``channel``'s ring."""
        return salvage(channel.ring.view, [layout.announce for layout in channel.layouts.values()],
                       channel.ack.done, channel.unread(), channel.head, writer)
