"""The events a probe's writer could not take when they came (:class:`OwedEvents`).

A writer thread stalled in the disk, or a writer process whose ring it has not freed, took no
event: the engine's thread dropped it, counted nowhere (an ``engine_exception`` lost, the
capture saying the engine never failed). Such an event waits here, in a small bounded queue
of its own, and is written before the next event the writer takes (``probe_stop`` at the
latest) or once the stalled batch is written; one that finds the queue full is counted
(``events_unwritten`` of ``probe_stop``) and said in the log.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

LOG = logging.getLogger("forensics.probe")

#: the most events that wait for a stalled writer (the next is counted, not kept)
OWED_EVENTS = 256


class OwedEvents:
    """Events waiting for a writer that could not take them (oldest first), and how many
    found no room (:attr:`unwritten`)."""

    def __init__(self) -> None:
        self._queue: deque[dict[str, Any]] = deque()
        self._lock = threading.Lock()  # taken without a wait: never held across a write
        self.unwritten = 0  #: events that found the queue full: lost, counted

    def __len__(self) -> int:
        return len(self._queue)

    def keep(self, event: dict[str, Any]) -> bool:
        """Keep ``event`` until the writer takes it; False (counted) when the queue is full
        (a ``probe_stop``, the last, is kept all the same: it says the count)."""
        with self._lock:
            if len(self._queue) < OWED_EVENTS or event.get("kind") == "probe_stop":
                self._queue.append(event)
                return True
            self.unwritten += 1
        if self.unwritten == 1:
            LOG.warning("forensics probe: %d events wait for a stalled writer; the next ones "
                        "are lost and counted (events_unwritten in probe_stop)", OWED_EVENTS)
        return False

    def pass_on(self, write: Callable[[dict[str, Any]], bool]) -> bool:
        """Hand the waiting events to ``write`` in order (one thread at a time: the caller's
        lock), until it cannot take one now (False: it stays, first); whether none is left."""
        while True:
            with self._lock:
                if not self._queue:
                    return True
                event = self._queue[0]
            if not write(event):
                return False
            with self._lock:
                if self._queue and self._queue[0] is event:
                    self._queue.popleft()

    def note(self) -> dict[str, int]:
        """``{"events_unwritten": N}`` for ``probe_stop``, and one log line, when ``N`` events
        were lost; nothing when none. Those still waiting (``probe_stop`` after them) are
        said in one line: written only if the writer answers before the process ends."""
        if self._queue:
            LOG.warning("forensics probe: %d event(s) wait for a writer that does not answer "
                        "(probe_stop after them): they are written only if it answers before "
                        "this process ends", len(self._queue))
        if not self.unwritten:
            return {}
        from forensics.store.events import UNWRITTEN_WHY

        LOG.warning("forensics probe: %d event(s) lost: %s", self.unwritten, UNWRITTEN_WHY)
        return {"events_unwritten": self.unwritten}


def framed(owed: OwedEvents, channel: Any, event: dict[str, Any]) -> bool:
    """Frame the events waiting, then ``event``, into the writer process's ring (``channel``)
    and poke it; one its ring has no room for waits in ``owed`` (the lock held)."""
    if _frame_waiting(owed, channel) and _put(channel, event, False):
        return bool(channel.poke())
    return owed.keep(event)


def frame_waiting(session: Any, channel: Any) -> None:
    """Frame the events waiting in ``session``'s queue into the writer process's ring (the
    session's lock held; the thread marked busy meanwhile, so that a signal's handler that
    writes waits: :mod:`~forensics.probe.busy`)."""
    if len(session.owed):
        session.enter_framing()
        try:
            _frame_waiting(session.owed, channel)
        finally:
            session.leave_flush()


def _frame_waiting(owed: OwedEvents, channel: Any) -> bool:
    """Frame the events waiting in ``owed`` into ``channel``'s ring and poke the writer
    process when one was; whether none is left waiting."""
    if not len(owed):
        return True
    left = owed.pass_on(lambda event: _put(channel, event, True))
    channel.poke()
    return left


def _put(channel: Any, event: dict[str, Any], waited: bool) -> bool:
    """Frame ``event``; whether the ring took it. One that cannot be framed (a value that
    cannot cross) is not kept waiting (True when it ``waited``), it raises otherwise."""
    from forensics.probe import frames

    try:
        return bool(channel.put_bytes(frames.blob(frames.EVENT, event)))
    except Exception:
        if waited:
            return True
        raise
