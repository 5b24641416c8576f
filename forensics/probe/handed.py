"""Records a signal's handler cut out of their hand-off to the writer process.

With ``FORENSICS_HANDOFF=record`` (the default) each record is framed as it is queued, its
signals not held (:mod:`forensics.probe.held`: a hold took 41 us of CPU a call over the
hand-off's 104, 1.4x, in one run of ``benchmarks/handoff_held.py``): a handler that raises
there (``KeyboardInterrupt``, vLLM's ``SystemExit``) ends the hand-off with records taken from
the session's ring and neither framed nor dropped. :func:`frame` counts them
(``lost_to_signal``), and the session's ``probe_stop`` says so (:func:`note`); they stay
counted, neither written nor dropped (T119c).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

LOG = logging.getLogger("forensics.probe")


def frame(backend: Any, wait: bool) -> None:
    """Take the session's ready records (all if ``wait``) and frame them (``backend``: the
    session's :class:`~forensics.probe.session.ProcessBackend`); when a signal's handler
    raises meanwhile, count those taken and neither framed nor dropped, then let it go on."""
    session = backend.session
    before = _tally(backend)
    try:
        backend._frame(session.take_ready(wait))
    except BaseException:
        session.lost_to_signal += _untallied(backend, before)
        raise


def room(session: Any) -> None:
    """Wait for room in the session's ring (its backend's ``record_added(False)``: a writer
    thread's full ring); when a signal's handler raises meanwhile (a Ctrl-C as the engine
    waits), the record, never queued, is counted lost to a signal, then it goes on: it was
    counted nowhere, ``probe_stop`` saying 2 records of an engine that made 3."""
    try:
        session.backend.record_added(False)
    except BaseException:
        cut(session)
        raise


@contextmanager
def queueing(session: Any, pending: Any) -> Iterator[None]:
    """Around the queueing of ``pending`` (its wait for the session's lock included): a
    signal's handler that raises before it is numbered (as the thread waits for the lock, held
    by another thread's hand-off or flush: a Ctrl-C) counts it lost to a signal; it was
    counted nowhere, ``probe_stop`` saying 2 records of an engine that made 3. The lock is
    the caller's own ``with`` (never held past a raise)."""
    try:
        yield
    except BaseException:
        if not pending.seq and not session._closed:
            cut(session)
        raise


def sealed(session: Any) -> Any:
    """The event that marks a record's outputs copied (its copier's ``seal``); a signal's
    handler that raises as it is made counts the record lost to a signal (see :func:`cut`)."""
    try:
        return session.copier.seal()
    except Exception:
        raise
    except BaseException:
        cut(session)
        raise


def cut(session: Any) -> None:
    """Count a record a signal's handler cut short before it was queued (its outputs being
    recorded, or its wait for room: :func:`room`) as one of the session's records, lost to a
    signal."""
    with session._lock:
        session.counts["records"] += 1
        session.lost_to_signal += 1


def _tally(backend: Any) -> tuple[int, Any, int, int]:
    """Where a hand-off's records stand before it: those in the session's ring, the channel
    and the records it framed, those dropped."""
    channel = backend.channel
    return (len(backend.session._ring), channel, 0 if channel is None else channel.framed,
            backend.session.counts["dropped"])


def _untallied(backend: Any, before: tuple[int, Any, int, int]) -> int:
    """The records that left the session's ring since ``before`` (:func:`_tally`) and were
    neither framed nor dropped."""
    ring, channel, framed, dropped = before
    now, session = backend.channel, backend.session
    framed_now = 0 if now is None else now.framed - (framed if now is channel else 0)
    return max(ring - len(session._ring) - framed_now - (session.counts["dropped"] - dropped),
               0)


def note(session: Any) -> dict[str, int]:
    """``{"lost_to_signal": N}`` for the session's ``probe_stop``, and one log line, when a
    signal's handler cut ``N`` records out of their hand-off; nothing when none."""
    lost = getattr(session, "lost_to_signal", 0)
    if not lost:
        return {}
    LOG.warning("forensics probe: %d record(s) lost to a signal: its handler raised "
                "(KeyboardInterrupt, SystemExit) as their outputs were copied, or as they were "
                "handed to the writer or waited for room in its ring or for its lock; "
                "counted, neither written nor dropped", lost)
    return {"lost_to_signal": lost}
