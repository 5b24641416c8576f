"""The allocation budget: the most bytes any single allocation sized by a record may take.

Every path that sizes an allocation from a capture's numbers (replay's models, the Model Runner
V2 kernel worker, shrink) calls :func:`require_alloc` before it allocates: past the budget it
raises :class:`~forensics.errors.AllocationBudgetError` naming where, the field and its value,
instead of asking the machine for gigabytes; a replay names the capture file first
(:func:`in_capture`). The budget is 1 GiB, or ``FORENSICS_MAX_ALLOC``
bytes (a plain integer, or with a ``K``/``M``/``G`` suffix: ``512M``).

Deadlines of child processes live here too (:func:`child_deadline`): ``FORENSICS_CHILD_TIMEOUT``
seconds (default 600) for any one answer of a kernel worker, notebook cell or fleet task, and
the in-process alarm that ends a block at its deadline (:func:`alarm_deadline`), and the overall
deadline of a command that runs many children's answers (:func:`overall_clock`): ``forensics
kernels`` and a replay's kernel worker wait for each answer at most what is left of it.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from forensics.atomic import capture_folder
from forensics.digits import ascii_int
from forensics.errors import AllocationBudgetError, ConfigurationError, DeadlineError
from forensics.escaping import terminal

#: the default budget of one allocation, in bytes
DEFAULT_MAX_ALLOC = 1 << 30
#: the environment variable that sets the budget
MAX_ALLOC_ENV = "FORENSICS_MAX_ALLOC"
#: the default deadline of one answer of a child process, in seconds
DEFAULT_CHILD_TIMEOUT = 600.0
#: the environment variable that sets it
CHILD_TIMEOUT_ENV = "FORENSICS_CHILD_TIMEOUT"
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
#: the most digits a budget is given in (more than any machine's memory)
MAX_ALLOC_DIGITS = 19


def max_alloc() -> int:
    """The budget of one allocation in bytes (``FORENSICS_MAX_ALLOC``, else 1 GiB).

    Raises:
        ConfigurationError: the variable is not a positive size.
    """
    text = os.environ.get(MAX_ALLOC_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_ALLOC
    unit = text[-1].upper() if text[-1].isalpha() else ""
    number = text[:-1] if unit else text
    value = ascii_int(number, MAX_ALLOC_DIGITS)
    if unit not in _UNITS or not value:
        raise ConfigurationError(f"{MAX_ALLOC_ENV}={text[:120]!r} is not a size; give bytes "
                                 f"(at most {MAX_ALLOC_DIGITS} digits, a K, M or G after "
                                 "them), e.g. 1073741824 or 1G")
    return value * _UNITS[unit]


def require_alloc(nbytes: int, where: str, field: str, value: object,
                  fix: str | None = None) -> int:
    """Return ``nbytes`` when it is within :func:`max_alloc`; the one check every sizing path
    makes before it allocates what a record's ``field`` (of ``value``) asks for. ``fix``: what
    the line tells the user to do, where it is not to fix the record's field.

    Raises:
        AllocationBudgetError: one line naming ``where``, the field, its value and the budget.
    """
    budget = max_alloc()
    if nbytes > budget:
        raise AllocationBudgetError(
            f"{where}: {field!r} is {value}, which would allocate {nbytes} bytes, past the "
            f"allocation budget of {budget} bytes; "
            + (fix or f"fix the record's {field}, or raise {MAX_ALLOC_ENV} if the engine "
                      "really had buffers that large"))
    return nbytes


#: the bytes a replay holds per finding (its dict, then its row of the table), counted against
#: the allocation budget (:func:`require_findings`): 2.3 KB measured for one record of 20,000 to
#: 80,000 out-of-range ids under two variants; a 6.2 MB capture of 800,000 took 3.8 GB before
FINDING_BYTES = 2048


def require_findings(count: int) -> int:
    """Return ``count`` when that many findings (:data:`FINDING_BYTES` each: they become one
    table) are within the budget; checked before a batch's findings are made and as a replay
    keeps them.

    Raises:
        AllocationBudgetError: one line naming the count, the bytes and the budget.
    """
    require_alloc(count * FINDING_BYTES, "the replay's findings", "findings", count,
                  fix=f"raise {MAX_ALLOC_ENV} if this machine has the memory for them "
                      f"({FINDING_BYTES} bytes each)")
    return count


def in_capture(error: AllocationBudgetError, capture: object) -> AllocationBudgetError:
    """``error`` with the capture it came from named first: ``capture`` is a capture path or a
    Capture (its ``path``); records held in memory (no file) leave ``error`` as it is."""
    path = capture_folder(capture)
    if path is None:
        return error
    prefix = f"capture '{terminal(os.fspath(path))}', "
    text = str(error)
    return error if text.startswith(prefix) else AllocationBudgetError(prefix + text)


#: the longest deadline a child may be given (115 days): past it a timer's ``select`` and
#: ``setitimer`` overflow (``1e300`` was an internal error)
LONGEST_CHILD_TIMEOUT = 10_000_000


def child_deadline() -> float:
    """The seconds a child process may take for one answer (``FORENSICS_CHILD_TIMEOUT``,
    else 600; at most :data:`LONGEST_CHILD_TIMEOUT`).

    Raises:
        ConfigurationError: the variable is not a positive number of seconds.
    """
    text = os.environ.get(CHILD_TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_CHILD_TIMEOUT
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= LONGEST_CHILD_TIMEOUT:
        raise ConfigurationError(
            f"{CHILD_TIMEOUT_ENV}={text[:120]!r} is not a number of seconds up to "
            f"{LONGEST_CHILD_TIMEOUT:,}; give one, e.g. 600")
    return seconds


def timed_out(seconds: float) -> str:
    """The message of an ``error`` outcome whose child outlived its deadline (shown as
    ``error: timed out after N s``)."""
    return f"timed out after {seconds:g} s"


#: what :func:`waiting` tells, in this process, of each wait for a child's answer
_WAIT_WATCHERS: list[Callable[[float], None]] = []


def waiting(seconds: float) -> None:
    """Tell what watches this process's progress (a report's notebook cell: its deadline,
    in the cell and in the process that runs the notebook) that a wait of at most ``seconds``
    for a child's answer begins: the child's deadline ends it, so the watcher's must not
    end first (it was one child deadline for a whole cell of a replay's waits)."""
    for watch in tuple(_WAIT_WATCHERS):
        watch(seconds)


@contextmanager
def watching_waits(watch: Callable[[float], None]) -> Iterator[None]:
    """Call ``watch(seconds)`` for each :func:`waiting` in the block."""
    _WAIT_WATCHERS.append(watch)
    try:
        yield
    finally:
        _WAIT_WATCHERS.remove(watch)


@contextmanager
def alarm_deadline(seconds: float, past_waits: bool = False) -> Iterator[None]:
    """Raise DeadlineError (:func:`timed_out`) in the block once it runs ``seconds``
    (``SIGALRM``); ``past_waits``: each wait for a child's answer the block begins
    (:func:`waiting`) puts the alarm off to ``seconds`` past that wait's own deadline, when it
    would ring sooner (the error then says how long the block ran). An alarm set around the
    block goes on after it, less the time the block took. Only on the main thread of a
    system with ``setitimer``; elsewhere the block runs without one."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(
            signal, "setitimer"):
        yield
        return
    began, put_off = time.monotonic(), [False]

    def expire(signum: int, frame: Any) -> None:
        ran = time.monotonic() - began
        raise DeadlineError(timed_out(round(ran, 1) if put_off[0] else seconds))

    def later(wait: float) -> None:
        left = signal.getitimer(signal.ITIMER_REAL)[0]
        if 0 < left < wait + seconds and threading.current_thread() is threading.main_thread():
            signal.setitimer(signal.ITIMER_REAL, wait + seconds)
            put_off[0] = True

    previous = signal.signal(signal.SIGALRM, expire)
    outer = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        with watching_waits(later) if past_waits else nullcontext():
            yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer[0] > 0:  # an alarm set around this block goes on
            signal.setitimer(signal.ITIMER_REAL,
                             max(outer[0] - (time.monotonic() - began), 1e-3), outer[1])


#: the seconds all of a capture's kernel launches may take together in ``forensics kernels``,
#: unless ``--deadline`` says
DEFAULT_OVERALL_DEADLINE = 3600.0
#: the seconds the kernel worker of a replay (the ``vllm`` variants of Model Runner V2 sites)
#: may take for all its records together, unless ``deadline`` (``--deadline``) says: 6 hours.
#: A record takes the worker about 8 ms past its start (300 ordinary ``post_update`` records
#: in 2.4 s), a batch of hundreds of rows a few times that: a capture of a million such
#: records fits, while N records that each run to ``FORENSICS_CHILD_TIMEOUT`` no longer take
#: N times it
DEFAULT_REPLAY_DEADLINE = 21_600.0
#: the seconds all of a ``forensics shrink``'s replays may take together (the original's, the
#: search's, the written capture's), unless ``--deadline`` says: as long as one replay may
DEFAULT_SHRINK_DEADLINE = DEFAULT_REPLAY_DEADLINE
#: the longest overall deadline (seconds: a day)
MAX_OVERALL_DEADLINE = 86_400


def overall_deadline(seconds: float, default: float = DEFAULT_OVERALL_DEADLINE) -> float:
    """``seconds`` when it is a positive number of seconds, at most
    :data:`MAX_OVERALL_DEADLINE` (ConfigurationError, naming ``--deadline``, the command's
    ``default`` and the fix, if not)."""
    if not 0 < seconds <= MAX_OVERALL_DEADLINE:
        raise ConfigurationError(f"--deadline {seconds:g}: give the seconds all the replays "
                                 f"may take together, a positive number up to "
                                 f"{MAX_OVERALL_DEADLINE:,} (default {default:g})")
    return seconds


#: the answers of a command's children that may outlive ``FORENSICS_CHILD_TIMEOUT`` before the
#: command runs no more of them: each such answer costs the deadline and a child's restart
#: (the kernel worker's import of vLLM, about 10 s), so a capture of N records that each hang
#: once made a replay last N times that
MOST_CHILD_TIMEOUTS = 3
#: the answers of a command's children that may be a child's death (an exit, a signal, its
#: output ended) or a line that is no answer before the command runs no more of them: each
#: costs a child's restart (vLLM's import, about 10 s) as a timeout does, and a worker that
#: died on every record was started again for every record
MOST_CHILD_DEATHS = 3


@dataclass
class Clock:
    """A running overall deadline: its ``seconds``, when it ends (``time.monotonic``), how
    many answers it left unjudged (``cut``), how many outlived their child's deadline
    (``timeouts``), how many were a child's death or no answer (``deaths``), why it ended
    early (``why``; "" while it runs to ``end``), and what ``why`` adds of where those counts
    are kept (``kept``: "" for a command's, which end with it)."""

    seconds: float
    end: float
    cut: int = 0
    timeouts: int = 0
    why: str = ""
    deaths: int = 0
    kept: str = ""

    def left(self) -> float:
        """The seconds left before it passes (0 or less: passed, or ended early)."""
        return -1.0 if self.why else self.end - time.monotonic()

    def timed_out(self) -> None:
        """Count an answer that outlived its child's deadline; the
        :data:`MOST_CHILD_TIMEOUTS`-th ends the clock, ``why`` saying so."""
        self.timeouts += 1
        if self.timeouts >= MOST_CHILD_TIMEOUTS and not self.why:
            self.why = (f"{self.timeouts} answers outlived the child deadline of "
                        f"{child_deadline():g} s ({CHILD_TIMEOUT_ENV}), so no more were run")

    def died(self) -> None:
        """Count an answer that was its child's death or a line that is no answer; the
        :data:`MOST_CHILD_DEATHS`-th ends the clock, ``why`` saying so."""
        self.deaths += 1
        if self.deaths >= MOST_CHILD_DEATHS and not self.why:
            self.why = (f"the child died, or answered a line that is not an answer, "
                        f"{self.deaths} times ({DIED_HOW}), so no more were run")

    def wait(self, most: float) -> float:
        """What a wait of at most ``most`` seconds may take of what is left (at least 0)."""
        return min(most, max(self.left(), 0.0))

    def passed(self) -> str:
        """``the overall deadline of N s passed`` (or ``why``): why what it left was not
        judged."""
        if self.why:
            return self.why + self.kept
        return f"the overall deadline of {self.seconds:g} s passed"


def longer(cut: str) -> str:
    """What to lengthen for the answers a clock left (``cut``: its :meth:`Clock.passed`):
    ``--deadline``, or ``FORENSICS_CHILD_TIMEOUT`` when its children's timeouts ended it."""
    return "--deadline" if cut.startswith("the overall deadline ") else CHILD_TIMEOUT_ENV


#: where a clock its children's deaths ended says how each died
DIED_HOW = "what it held each time says how"


def remedy(cut: str) -> str:
    """What to do about the answers a clock left (``cut``: its :meth:`Clock.passed`): give a
    longer :func:`longer`, or, when its children's deaths ended it (no wait would have
    helped), find what ended the child."""
    if DIED_HOW in cut:
        return "find what ended the child"
    return f"give a longer {longer(cut)}"


_CLOCK: ContextVar[Clock | None] = ContextVar("forensics_overall_clock", default=None)


@contextmanager
def overall_clock(seconds: float, default: float = DEFAULT_OVERALL_DEADLINE
                  ) -> Iterator[Clock]:
    """Run the block under an overall deadline of ``seconds`` (checked by
    :func:`overall_deadline`), read by :func:`running_clock`; inside another one it ends no
    later than that one does, and its children's timeouts and deaths count as that one's."""
    overall_deadline(seconds, default)
    clock, outer = Clock(seconds, time.monotonic() + seconds), _CLOCK.get()
    if outer is not None and outer.end < clock.end:
        clock = Clock(outer.seconds, outer.end)
    if outer is not None:  # the timeouts are the outer command's, counted across its blocks
        clock.timeouts, clock.deaths, clock.why = outer.timeouts, outer.deaths, outer.why
    token = _CLOCK.set(clock)
    try:
        yield clock
    finally:
        _CLOCK.reset(token)
        if outer is not None:
            outer.timeouts, outer.deaths, outer.why = clock.timeouts, clock.deaths, clock.why


@contextmanager
def own_limits() -> Iterator[None]:
    """Run the block by the running clock's deadline (if any), its children's timeouts and
    deaths counted from none (:data:`MOST_CHILD_TIMEOUTS`, :data:`MOST_CHILD_DEATHS` of its
    own), not added to the clock's: a shrink's replay of the capture it wrote, whose records
    end the child as often as the original's did, was left none by the search."""
    outer = _CLOCK.get()
    token = _CLOCK.set(None if outer is None else Clock(outer.seconds, outer.end))
    try:
        yield
    finally:
        _CLOCK.reset(token)


def running_clock() -> Clock | None:
    """The overall deadline the caller runs under (:func:`overall_clock`), or None."""
    return _CLOCK.get()
