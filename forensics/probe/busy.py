"""Which threads of a probe session are inside a flush, and what a signal's handler left to
run once they are out (:class:`FlushMarks`, a part of
:class:`~forensics.probe.session.ProbeSession`).

A handler of the probe's own that writes (the kernel flight recorder's dump on SIGINT and
SIGTERM: :func:`~forensics.probe.held.unless_flushing`) must not run while the thread it
interrupts is framing records or an event for the writer process: its own frames would be
written where the interrupted one was, and the writer process would read the ring no more.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class FlushMarks:
    """The threads inside a flush, the close or the framing of an event (:attr:`busy`), and
    the one action a signal's handler deferred until its thread is out (:meth:`defer`)."""

    _flushers: dict[int, int]  # threads inside a flush (or close): how deep
    #: a signal handler's work that came inside a flush, and the thread to run it after
    _deferred: tuple[int, Callable[[], None]] | None
    _closed: bool

    @property
    def busy(self) -> bool:
        """True inside a flush, the close or the framing of an event of the calling thread (see
        :meth:`defer`)."""
        return threading.get_ident() in self._flushers

    def enter_flush(self) -> bool:
        """Count the calling thread as in a flush (:attr:`busy`; lock held), unless closed."""
        if not self._closed:
            self.enter_framing()
        return not self._closed

    def enter_framing(self) -> None:
        """Count the calling thread as :attr:`busy` (lock held) while it frames an event,
        closed or not; :meth:`leave_flush` ends it."""
        ident = threading.get_ident()
        self._flushers[ident] = self._flushers.get(ident, 0) + 1

    def leave_flush(self) -> None:
        """The calling thread's flush is over (:meth:`enter_flush`; lock held)."""
        ident = threading.get_ident()
        depth = self._flushers.pop(ident, 0) - 1
        if depth > 0:
            self._flushers[ident] = depth

    def defer(self, action: Callable[[], None]) -> None:
        """Run ``action`` (a signal handler's work that came while the calling thread was
        :attr:`busy`) in this thread once its flush or close is over, as the session's call
        that flushed returns; one at a time (a second while one waits is dropped)."""
        if self._deferred is None:
            self._deferred = (threading.get_ident(), action)

    def _run_deferred(self) -> None:
        """Run the deferred action (:meth:`defer`) if it is the calling thread's and that
        thread is no longer in a flush or close."""
        deferred = self._deferred
        if deferred is not None and deferred[0] == threading.get_ident() and not self.busy:
            self._deferred = None
            deferred[1]()
