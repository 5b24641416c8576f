"""How a child process ended, in words: the one wording of every caller that reports a death
(the probe's writer process, a fleet pool's process, a report's notebook process, the V2
kernel worker).

A status is a ``Popen.returncode`` (or ``multiprocessing.Process.exitcode``): ``None`` while
the process runs, ``-N`` when signal ``N`` killed it, else its exit status; a raw wait status
of :func:`os.waitpid` becomes one with :func:`returncode`. A signal number no signal of this
system has (a real-time one, say) is worded as its number, never an error. Standard library
only: the worker processes and the probe import it.
"""

from __future__ import annotations

import os
import signal

#: signals a process gets for an access to memory it does not hold: on a CPU, what a GPU's
#: illegal memory access is
MEMORY_SIGNALS = (signal.SIGSEGV, signal.SIGBUS)


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9; ``signal N`` for a number no signal has."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def returncode(wait_status: int) -> int:
    """The returncode (``-N`` for signal ``N``) of a raw wait status of :func:`os.waitpid`."""
    return os.waitstatus_to_exitcode(wait_status)


def how_ended(code: int | None, numbered: bool = False) -> str:
    """How a process of returncode ``code`` ended, as a verb phrase: ``was killed by SIGKILL``
    (``numbered``: ``was killed by signal 9 (SIGKILL)``), ``was killed by signal 77`` (a number
    no signal has), ``exited with status 3``, ``is still running`` (``None``)."""
    if code is None:
        return "is still running"
    if code >= 0:
        return f"exited with status {code}"
    name = signal_name(-code)
    if numbered and not name.startswith("signal "):
        name = f"signal {-code} ({name})"
    return f"was killed by {name}"


def by_memory_signal(code: int | None) -> bool:
    """Whether a process of returncode ``code`` was killed by one of :data:`MEMORY_SIGNALS`."""
    return code is not None and code < 0 and -code in MEMORY_SIGNALS
