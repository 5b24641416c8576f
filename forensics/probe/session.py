"""One probe per process: the step counter, the ring of pending records and the capture writer.

Records wait in a ring (``VLLM_FORENSICS_RING`` records at most; the oldest are dropped and
counted when it overflows). Every ``VLLM_FORENSICS_FLUSH_EVERY`` records, the ring hands the
records whose device copies completed to the writer and flushes it, without waiting for any
event. A final flush (exit, SIGTERM, an exception in a wrapped call, a guard finding) waits.
The probe's own errors are counted and written as events; they never reach vLLM.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from typing import Any

from forensics.probe.copy import Copier, PendingRecord
from forensics.probe.guard import Violation, bounds_error
from forensics.probe.settings import Settings, process_tag

LOG = logging.getLogger("forensics.probe")
WriterFactory = Callable[["ProbeSession"], Any]


def _default_writer(session: ProbeSession) -> Any:
    from forensics.probe.manifest import build_manifest
    from forensics.store.writer import CaptureWriter

    manifest = build_manifest(session)
    return CaptureWriter(session.settings.capture, manifest, process=session.process)


class ProbeSession:
    """The probe's state in one process (see the module docstring)."""

    def __init__(self, settings: Settings, *, writer_factory: WriterFactory = _default_writer,
                 copier: Copier | None = None) -> None:
        self.settings = settings
        self.copier = copier or Copier()
        self.process = process_tag()
        self.runner: Any = None
        self.counts = {"records": 0, "written": 0, "dropped": 0, "errors": 0, "violations": 0}
        self._writer_factory = writer_factory
        self._writer: Any = None
        self._step = -1
        self._rank: int | None = None
        self._ring: deque[PendingRecord] = deque()
        self._since_flush = 0
        self._lock = threading.RLock()
        self._warned = False
        self._closed = False
        self.busy = False  # inside flush: a signal handler must not re-enter it

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
        if self._rank is None:
            rank, final = _current_rank()
            if not final:
                return rank
            self._rank = rank
        return self._rank

    def wants(self, site: str) -> bool:
        """True when ``site`` is recorded (``VLLM_FORENSICS_SITES``) and the probe is open."""
        return not self._closed and site in self.settings.sites

    # -- records ---------------------------------------------------------------------------
    def new_record(self, site: str) -> PendingRecord:
        """Start a record of ``site`` at the current step and rank."""
        return PendingRecord(site=site, step=self.step, rank=self.rank)

    def add(self, pending: PendingRecord, *, failed: bool = False) -> None:
        """Queue a finished record; flush every N records, and at once (waiting) if ``failed``."""
        with self._lock:
            self._ring.append(pending)
            self.counts["records"] += 1
            self._since_flush += 1
            while len(self._ring) > self.settings.ring:
                self._ring.popleft()
                self.counts["dropped"] += 1
            due = self._since_flush >= self.settings.flush_every
        if failed:
            self.flush(wait=True)
        elif due:
            self.flush(wait=False)

    def flush(self, *, wait: bool = False) -> int:
        """Write the records whose copies completed (all of them if ``wait``); return how many."""
        with self._lock:
            self.busy, self._since_flush = True, 0
            try:
                ready = self._take_ready(wait)
                if not ready and (not wait or self._writer is None):
                    return 0
                writer = self._open_writer()
                if writer is None:
                    self.counts["dropped"] += len(ready)
                    return 0
                return self._write(writer, ready)
            finally:
                self.busy = False

    def _take_ready(self, wait: bool) -> list[PendingRecord]:
        ready: list[PendingRecord] = []
        keep: deque[PendingRecord] = deque()
        while self._ring:
            pending = self._ring.popleft()
            try:
                if wait:
                    pending.wait()
                if pending.ready():
                    ready.append(pending)
                else:
                    keep.append(pending)
            except Exception as exc:  # a device error: its copies will never complete
                self.counts["dropped"] += 1
                self.error(exc, f"waiting for the copies of a {pending.site} record")
        self._ring = keep
        return ready

    def _write(self, writer: Any, ready: list[PendingRecord]) -> int:
        written = 0
        for pending in ready:
            try:
                writer.append(pending.to_record())
                written += 1
            except Exception as exc:
                self.counts["dropped"] += 1
                self.error(exc, f"appending a {pending.site} record (step {pending.step})")
        try:
            writer.flush()
        except Exception as exc:
            self.counts["dropped"] += written
            self.error(exc, "flushing the capture")
            return 0
        self.counts["written"] += written
        return written

    def _open_writer(self) -> Any:
        if self._writer is None:
            try:
                self._writer = self._writer_factory(self)
                self._event("probe_start", mode=self.settings.mode,
                            sites=list(self.settings.sites), ring=self.settings.ring,
                            flush_every=self.settings.flush_every)
            except Exception as exc:
                self.error(exc, f"opening the capture {self.settings.capture}")
        return self._writer

    # -- errors and findings ---------------------------------------------------------------
    def error(self, exc: BaseException, where: str) -> None:
        """Count one of the probe's own errors and keep it as an event; never raises."""
        self.counts["errors"] += 1
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        if not self._event("probe_error", where=where, error=detail,
                           errors=self.counts["errors"]) and not self._warned:
            self._warned = True
            LOG.warning("forensics probe: %s failed: %s (further errors are only counted)",
                        where, detail)

    def _event(self, kind: str, **fields: Any) -> bool:
        if self._writer is None:
            return False
        event = {"kind": kind, "time": time.time(), "pid": os.getpid(), "rank": self.rank,
                 "step": self.step, **fields}
        try:
            self._writer.add_event(event)
            return True
        except Exception:
            return False

    def engine_failed(self, exc: BaseException, where: str) -> None:
        """An exception left vLLM's ``where``: keep it as an event and flush; never raises."""
        try:
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            self.flush(wait=True)
            self._open_writer()
            self._event("engine_exception", where=where, error=detail[:2000])
        except Exception as inner:
            self.counts["errors"] += 1
            LOG.warning("forensics probe: flushing after %s failed: %s", where, inner)

    def violation(self, pending: PendingRecord, found: Violation) -> BaseException:
        """Guard finding: queue ``pending``, flush and wait, keep an event; return the error."""
        self.counts["violations"] += 1
        self.add(pending, failed=True)
        error = bounds_error(found, pending.step, pending.rank, self.settings.capture)
        self._event("guard_violation", site=found.site, row=found.row, tensor=found.tensor,
                    value=found.value, bound=found.upper, message=str(error))
        return error

    def close(self) -> None:
        """Final flush (waits for copies), a summary event, and close the writer; never raises."""
        with self._lock:
            if self._closed:
                return
            self.flush(wait=True)
            self._closed = True
            self._event("probe_stop", **self.counts)
            if self._writer is not None:
                try:
                    self._writer.close()
                except Exception as exc:
                    self.counts["errors"] += 1
                    LOG.warning("forensics probe: closing the capture failed: %s", exc)


def _current_rank() -> tuple[int, bool]:
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return int(dist.get_rank()), True
    except Exception:  # an uninitialised or torn-down process group
        pass
    try:
        return int(os.environ.get("RANK", "0")), False
    except ValueError:
        return 0, False
