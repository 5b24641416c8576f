"""A forked copy of the engine's process (a pool's worker forked after the probe recorded):
its probe session starts afresh in the copy (:func:`follow`).

What the copy inherits of its parent's session is its parent's: the records queued in the
ring (the parent writes them), the counts (the copy's ``probe_stop`` counted the parent's
records as its own: ``records`` 15 where it wrote 8 and dropped none), the ``probe_start``
already kept (the copy wrote none, so a copy killed after it recorded was never said to have
died), the locks (one held by another thread at the fork is never released in the copy) and
the writer (the writer thread's open segment and events files: the copy appended its records
and ``probe_stop`` to its parent's files, whose index then no longer matched: the capture
could not be read). The inherited writer and channel are kept, never closed (closing one would
write into the parent's files), and never used; the copy lets go of its end of the parent's
writer process's stdin alone (:func:`let_go_of_writer`).
"""

from __future__ import annotations

import itertools
import os
import threading
import time
import weakref
from collections import deque
from typing import TYPE_CHECKING, Any

from forensics.probe import owned
from forensics.probe.owed import OwedEvents
from forensics.probe.thread_backend import ThreadBackend

if TYPE_CHECKING:
    from forensics.probe.session import ProbeSession

#: the backends forked copies inherited (never collected: nothing of them runs in the copy)
_INHERITED: list[Any] = []
#: the join mark left for the copy each thread is forking (:func:`leave_mark`), by thread,
#: with the pipe that tells its parent whether the copy was made (:func:`check_made`)
_LEFT: dict[int, tuple[str, int, int]] = {}
#: numbers the join marks left for copies, each unique in this process
_FORKS = itertools.count()


def follow(session: ProbeSession) -> None:
    """Start ``session`` afresh in each forked copy of this process (``os.register_at_fork``),
    its join mark left for it before the fork (:func:`leave_mark`)."""
    ref = weakref.ref(session)

    def before() -> None:
        held = ref()
        if held is not None:
            leave_mark(held)

    def in_parent() -> None:
        left = _LEFT.pop(threading.get_ident(), None)  # the copy's now: it takes it as its own
        held = ref()
        if left is not None and held is not None:
            check_made(held, *left)

    def in_child() -> None:
        held = ref()
        if held is not None:
            afresh(held)

    if hasattr(os, "register_at_fork"):
        os.register_at_fork(before=before, after_in_parent=in_parent, after_in_child=in_child)


def leave_mark(session: ProbeSession) -> None:
    """Leave a join mark in the capture folder for the copy about to be forked (by this
    thread), which takes it as its own: a parent closing right after the fork, before the
    copy's at-fork hook ran, removed the folder as empty, the copy's records all dropped."""
    settings = session.settings
    if settings.owner:
        name = f"{owned.JOINED_MARK}{os.getpid()}-fork-{next(_FORKS)}"
        if owned.leave_mark(settings.capture, settings.owner, name) is None:
            read, write = os.pipe()
            os.set_blocking(read, False)
            _LEFT[threading.get_ident()] = (name, read, write)


def check_made(session: ProbeSession, name: str, read: int, write: int) -> None:
    """Remove the join mark ``name`` when the fork it was left for failed (``os.fork``'s
    parent hook runs then too): only a copy holds the pipe's ``write`` end open, until it has
    taken the mark, so a read that finds the pipe ended finds no copy or the mark taken."""
    os.close(write)
    try:
        ended = os.read(read, 1) == b""
    except BlockingIOError:  # a copy holds it and has not taken the mark yet
        ended = False
    finally:
        os.close(read)
    if ended:
        owned.drop_mark(session.settings.capture, session.settings.owner, name)


def take_mark(session: ProbeSession) -> None:
    """Make the join mark left for this copy before its fork its own (``.joined-PID``), or
    leave one, as a joining process does (owned.py), when none was left or it cannot be
    taken: the first process, ending before the copy wrote, removed the folder as empty."""
    settings = session.settings
    left = _LEFT.pop(threading.get_ident(), None)
    if left is None or owned.take_mark(settings.capture, settings.owner, left[0]) is not None:
        owned.mark_joined(settings.capture, settings.owner)
    if left is not None:  # the parent may now read the pipe's end (:func:`check_made`)
        os.close(left[1])
        os.close(left[2])


def let_go_of_writer(inherited: Any) -> None:
    """Point the copy's descriptor of its parent's writer process's stdin at ``/dev/null``
    (nothing of it written: its buffer goes nowhere), so that the parent's close ends that
    process: it ends at the end of its stdin, which a live copy held open. The parent's close
    waited 10 s for it and killed it, its capture left unclosed, and a parent killed left it
    running as long as the copy ran."""
    proc = getattr(getattr(inherited, "channel", None), "proc", None)
    stdin = getattr(proc, "stdin", None)
    if stdin is None:
        return
    try:
        null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.dup2(null, stdin.fileno(), inheritable=False)
        finally:
            os.close(null)
    except (OSError, ValueError):  # already closed in the parent (its channel ended)
        pass


def afresh(session: ProbeSession) -> None:
    """Make ``session`` (inherited by a forked copy) the copy's own: no record, count or event
    of the parent's, new locks, a backend of the parent's kind with no writer yet."""
    _INHERITED.append(session.backend)
    let_go_of_writer(session.backend)
    session.counts = dict.fromkeys(session.counts, 0)
    session.lost_to_signal = 0  # the parent's: the copy's probe_stop said it lost them
    session.owed = OwedEvents()  # the parent's events waiting for its writer: not the copy's
    #: the parent's writer thread's CPUs (the copy's probe_stop said them, its own writer
    #: thread never run) and its warnings given once (the copy's first went unsaid)
    session.cpus, session._warned, session._passed_on_warned = {}, False, set()
    session.kept = True  # the parent's last waited flush, not the copy's
    session._ring = deque()
    session._since_flush = session.due_upto = 0
    session._started_event = False
    session._flushers, session._deferred, session._closer = {}, None, None
    #: the parent's close, if another thread forked as it ran, is not the copy's: the copy's
    #: close waited 60 s for it to end, then kept nothing of its own
    session._stopping = session._ended = session._closed = False
    #: the parent made the folder: a copy that ended before the parent's first write removed
    #: it (empty), and the parent's capture with it
    session.made_folder = False
    if session.settings.owner:
        take_mark(session)
    session._lock = threading.RLock()
    session._cv = threading.Condition(session._lock)
    session.started, session._start_step = time.time(), session.step
    inherited = session.backend
    process_backend: Any = type(inherited)  # a new one of its kind: it takes the session alone
    session.backend = ThreadBackend(session, session._writer_factory) \
        if isinstance(inherited, ThreadBackend) else process_backend(session)
