"""Signals held off while the engine's main thread writes records itself.

A Python signal handler runs in the main thread between any two bytecodes: vLLM's workers
raise ``SystemExit`` from theirs on SIGTERM and SIGINT, Python's own SIGINT handler raises
``KeyboardInterrupt``. Raised inside a flush of the probe's writer thread backend (run in the
main thread: a waited flush, the exit's close, no writer thread), it cut the flush between the
capture's fsync and the count of what it wrote: the records were in the capture, the
``probe_stop`` said none of them was written, and every command said they were "never written"
and not judged. :func:`signals_held` puts a handler that only notes the signal in place of
each Python handler for the flush, and calls the handler it replaced once the flush and its
counts are whole. (Blocking the signals would not do: the kernel gives a signal to any
thread that does not block it, and Python runs its handler in the main thread all the same.)

A handler of the probe's own that writes (the kernel flight recorder's dump on SIGINT and
SIGTERM) is never run inside one of the probe's flushes either (:func:`unless_flushing`): run
inside the writer process's framing, it framed its events where the interrupted frame was
being written; the ring no longer read as frames, and every record after was lost.
"""

from __future__ import annotations

import os
import signal
import threading
from _signal import getsignal as _getsignal
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from types import FrameType
from typing import Any

#: a Python signal handler
Handler = Callable[[int, FrameType | None], Any]
#: the handlers each hold of this process replaced, the outermost first
_HOLDS: list[dict[int, Handler]] = []


def signals_held(hold: bool = True) -> AbstractContextManager[None]:
    """Inside, in the main thread (with ``hold``), note every signal that has a Python handler
    instead of handling it (see the module); as the block ends, the handlers are put back and
    those of the signals that came are called, once each, in the order they came, each
    whatever the ones before it raise (a SIGINT's ``KeyboardInterrupt`` does not lose a
    SIGTERM that came with it)."""
    if not hold or threading.current_thread() is not threading.main_thread():
        return _NOTHING
    return _held()


#: what :func:`signals_held` is where nothing is held (reusable: no cost on a hot path)
_NOTHING: AbstractContextManager[None] = nullcontext()


@contextmanager
def _held() -> Iterator[None]:
    """The hold of :func:`signals_held` (in the main thread)."""
    came: list[tuple[int, FrameType | None]] = []

    def note(signum: int, frame: FrameType | None) -> None:
        if signum not in [number for number, _ in came]:
            came.append((signum, frame))

    previous: dict[int, Handler] = {}
    _HOLDS.append(previous)
    early: BaseException | None = None
    try:  # a signal that comes while the handlers are put in place: those put are put back
        early = _put_in_place(previous, note)
        yield
    finally:
        _HOLDS.remove(previous)
        raised = _put_back(previous)
        _run_all([_reraise(exc) for exc in (early,) if exc is not None]
                 + [_call(previous[signum], signum, frame) for signum, frame in came]
                 + ([_reraise(raised)] if raised is not None else []))


def _put_in_place(previous: dict[int, Handler], note: Handler) -> BaseException | None:
    """Put ``note`` in place of every Python handler, each replaced kept in ``previous``; what
    a handler not yet replaced raised meanwhile (a SIGINT as the hold is taken:
    ``KeyboardInterrupt``), caught to put the rest in place and raised again as the hold ends:
    it ended the close that took it, its records and ``probe_stop`` never written."""
    def put(number: int, handler: Handler) -> None:
        previous[number] = handler
        signal.signal(number, note)
    return _each(_handled, put)


def _put_back(previous: dict[int, Handler]) -> BaseException | None:
    """Put back every handler of ``previous``; what a handler put back raised meanwhile (a
    SIGINT that came as they were put back: ``KeyboardInterrupt``), caught to put back the
    rest: it left every later one noting its signal for good, a SIGTERM never handled."""
    return _each(lambda: list(previous.items()), signal.signal)


def _each(pairs_of: Callable[[], list[tuple[int, Handler]]],
          put: Callable[[int, Handler], Any]) -> BaseException | None:
    """Call ``put`` on each (signal, handler) of ``pairs_of()``, whatever a signal's handler
    raises meanwhile: the first such raise is caught, the pairs left are put, and it is
    returned (None when none raised)."""
    raised, pairs, done = None, None, 0
    while True:
        try:  # the loop inside: a handler runs after a call or at the jump back
            pairs = pairs_of() if pairs is None else pairs
            while done < len(pairs):
                put(*pairs[done])
                done += 1  # a raise before it puts the same pair again (no harm: the same)
            return raised
        except BaseException as exc:  # raised again by the caller once all are put
            raised = raised or exc


def _reraise(exc: BaseException) -> Callable[[], None]:
    """An action raising ``exc`` again (:func:`_run_all`)."""
    def again() -> None:
        raise exc
    return again


def _call(handler: Handler, signum: int, frame: FrameType | None) -> Callable[[], None]:
    """``handler`` called for ``signum``, to run later (:func:`_run_all`)."""
    return lambda: handler(signum, frame)


#: the signals this platform has, taken once: ``signal.valid_signals()`` took about 100 µs a
#: call, in every flush of the engine's main thread
_VALID = tuple(sorted(int(number) for number in signal.valid_signals()))


def _handled() -> list[tuple[int, Handler]]:
    """The signals whose handler is a Python function (what can raise between bytecodes),
    with that handler (asked of ``_signal``, as ``signal.getsignal`` does without turning
    each answer into an enum: 62 of those took about 30 µs, these about 2)."""
    handled = []
    for number in _VALID:
        try:
            handler = _getsignal(number)
        except (ValueError, OSError):  # a signal Python cannot name here (the C library's)
            continue
        if callable(handler):
            handled.append((int(number), handler))
    return handled


def unless_flushing(session_of: Callable[[], Any], handler: Handler) -> Handler:
    """``handler``, run at once, or, when the calling thread is inside a flush (the close, the
    framing of an event) of the session ``session_of()`` (its ``busy``), once that is over
    (its ``defer``), after those of the other signals that came meanwhile (a SIGINT then a
    SIGTERM: both run)."""

    def run(signum: int, frame: FrameType | None) -> None:
        session = session_of()
        if session is not None and session.busy:
            _WAITING.append(lambda: handler(signum, frame))
            session.defer(_run_waiting)
        else:
            handler(signum, frame)

    return run


#: the handlers :func:`unless_flushing` put off until the flush is over, in the order they came
_WAITING: list[Callable[[], None]] = []


def _run_waiting() -> None:
    """Run the handlers put off (:data:`_WAITING`), each once, in order."""
    waiting = list(_WAITING)
    _WAITING.clear()
    _run_all(waiting)


def _run_all(actions: list[Callable[[], None]]) -> None:
    """Run ``actions`` in order, each whatever the ones before it raise."""
    if actions:
        try:
            actions[0]()
        finally:
            _run_all(actions[1:])


def _put_back_in_child() -> None:
    """In a copy forked (by another thread) while the main thread held its signals: the
    handlers the outermost hold replaced, put back (the copy never ends that hold)."""
    _WAITING.clear()  # the parent's to run
    if _HOLDS:
        for number, handler in _HOLDS[0].items():
            signal.signal(number, handler)
        _HOLDS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_put_back_in_child)
