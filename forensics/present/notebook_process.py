"""Run a notebook in a child process of its own process group, with each cell's deadline
enforced from outside it.

The cells of a report's notebook run through IPython's shell (:mod:`forensics.present.
notebook_exec`), in a child forked from the calling process (so nothing is imported twice).
The child says which cell it starts before running it (a heartbeat) and sends the executed
notebook back as JSON (never pickle) over a pipe. The caller waits for each answer at most
``FORENSICS_CHILD_TIMEOUT`` seconds (:func:`forensics.budget.child_deadline`) plus
:data:`GRACE`, or, past a wait for a child's answer the cell says it began (a heartbeat:
:func:`forensics.budget.waiting`, the kernel worker's), that long past the wait's own deadline:
a cell stuck where no signal handler runs (C code, signals blocked) is ended
from outside with ``SIGKILL`` to the child's whole process group (the processes a cell started
too), and reported as ``timed out after N s``. The same group is killed whenever the caller
stops waiting: an error, ``SIGINT`` (``KeyboardInterrupt``), ``SIGTERM`` or ``SIGHUP`` (each
then delivered again to the caller once the child is gone). Were the caller itself killed
with ``SIGKILL``, the child is ended by the kernel (``PR_SET_PDEATHSIG``, Linux); the processes
its cells started then are not. Where ``fork`` is missing, the cells run in this process (the
in-process deadline only).
"""

from __future__ import annotations

import json
import os
import select
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

from forensics.budget import child_deadline, timed_out, watching_waits
from forensics.errors import DeadlineError
from forensics.libc import libc_function
from forensics.present.notebook_exec import CellError, as_node, execute
from forensics.process_end import how_ended, returncode

#: seconds the caller waits past the deadline, so a cell the in-process alarm can stop ends
#: as that cell's own error first
GRACE = 1.0
#: the least seconds the child has to start its first cell (its shell made, its views set up;
#: slower on a loaded machine than one cell's deadline may allow)
START = 60.0
#: signals that end the caller: on them the child's group is killed first
_ENDING = (signal.SIGTERM, signal.SIGHUP)
_PR_SET_PDEATHSIG = 1
_CHUNK = 1 << 16


class NotebookProcessError(RuntimeError):
    """The notebook's process ended without an answer (a signal, an exit) in cell ``number``."""


class _Ended(BaseException):
    """The caller received an ending signal (:data:`_ENDING`) while its child ran."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def execute_in_child(nb: Any, cwd: Path,
                     around: Callable[[], AbstractContextManager[Any]] = nullcontext) -> Any:
    """Run every code cell of ``nb`` in a forked child, in ``cwd``, inside ``around()``;
    return the executed notebook (:class:`~forensics.present.notebook_exec.Node`).

    Raises:
        CellError: a cell raised (or ran past the in-process deadline).
        DeadlineError: a cell gave no answer within the deadline; its group was killed.
        NotebookProcessError: the child ended without an answer.
    """
    if not hasattr(os, "fork"):
        with around():
            return execute(nb, cwd)
    seconds = child_deadline()
    reader, writer = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(reader)
        _child(nb, cwd, around, writer, parent)
    os.close(writer)
    _own_group(pid)
    try:
        answer = _wait(pid, reader, seconds)
    except _Ended as ended:  # the child is gone: now end as the signal asks
        _deliver_again(ended.signum)
        raise
    return _result(answer)


def _wait(pid: int, reader: int, seconds: float) -> dict[str, Any]:
    """The answer of the child ``pid`` read from ``reader``; its process group is killed
    and the child reaped whatever happens (an answer, an error, a deadline, a signal).

    Raises:
        DeadlineError: a cell gave no answer in time.
        NotebookProcessError: the child ended without an answer.
    """
    reaped = False
    try:
        with _ending_signals_raise():
            answer, cell = _answer(reader, seconds)
        if answer is None:
            status, reaped = os.waitpid(pid, 0)[1], True
            raise NotebookProcessError(_why_ended(status, cell))
        return answer
    finally:
        os.close(reader)
        _end_group(pid, reaped)


def _own_group(pid: int) -> None:
    """Put the child ``pid`` in a process group of its own (the child does so too: whichever
    runs first)."""
    try:
        os.setpgid(pid, pid)
    except OSError:  # the child did it already, or has exec'd or ended
        pass


def _end_group(pid: int, reaped: bool) -> None:
    """Kill the child's process group (the child and whatever its cells started), then reap
    the child unless it was."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:  # nothing left in the group
        pass
    if not reaped:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass


def _answer(reader: int, seconds: float) -> tuple[dict[str, Any] | None, int]:
    """Read the child's messages until its answer (``None`` at end of file); return it and the
    number of the cell last started.

    Raises:
        DeadlineError: no message within ``seconds`` (+ :data:`GRACE`) of the cell's start
            (of the fork for the first cell: at least :data:`START`).
    """
    pending, cell = bytearray(), 0
    began = time.monotonic()
    limit, put_off = began + max(seconds, START) + GRACE, False
    while True:
        left = limit - time.monotonic()
        if left <= 0 or not select.select([reader], [], [], left)[0]:
            ran = round(time.monotonic() - began, 1) if put_off else seconds
            raise DeadlineError(f"cell {cell}: {timed_out(ran)}" if cell else
                                f"no cell started: {timed_out(max(seconds, START))}")
        chunk = os.read(reader, _CHUNK)
        if not chunk:
            return None, cell
        start = len(pending)
        pending += chunk
        while (end := pending.find(b"\n", start)) >= 0:
            message = json.loads(bytes(pending[:end]))
            del pending[:end + 1]
            start = 0
            if "wait" in message:  # a wait of the cell's for a child's answer (a heartbeat)
                wait_end = time.monotonic() + float(message["wait"]) + seconds + GRACE
                limit, put_off = max(limit, wait_end), put_off or wait_end > limit
                continue
            if "cell" not in message:
                return message, cell
            cell, began = int(message["cell"]), time.monotonic()
            limit, put_off = began + seconds + GRACE, False


def _result(answer: dict[str, Any]) -> Any:
    """The executed notebook of the child's answer, or the error it sent raised."""
    if "done" in answer:
        return as_node(answer["done"])
    if "cell_error" in answer:
        raise CellError(*answer["cell_error"])
    raise NotebookProcessError(str(answer.get("failed", "the notebook's process failed")))


def _why_ended(status: int, cell: int) -> str:
    """What ended the child, from its wait ``status``."""
    return (f"the notebook's process {how_ended(returncode(status))} in cell {cell} without "
            "an answer")


@contextmanager
def _ending_signals_raise() -> Iterator[None]:
    """Inside (on the main thread only): :data:`_ENDING` signals raise :class:`_Ended`, so the
    caller kills its child before it ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def ended(signum: int, frame: Any) -> None:
        raise _Ended(signum)

    previous = {signum: signal.signal(signum, ended) for signum in _ENDING}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _deliver_again(signum: int) -> None:
    """Send ``signum`` to this process again, now that its previous handler is back."""
    os.kill(os.getpid(), signum)


def _child(nb: Any, cwd: Path, around: Callable[[], AbstractContextManager[Any]],
           writer: int, parent: int) -> None:
    """The child's whole life: a group of its own, ended with its parent; run the cells,
    sending each cell's number before it runs, then the answer; exit without the parent's
    clean-up (``os._exit``)."""
    status = 1
    try:
        os.setpgid(0, 0)
        _end_with_parent(parent)
        out = os.fdopen(writer, "wb")

        def send(message: dict[str, Any]) -> None:
            out.write(json.dumps(message, default=_plain).encode("ascii") + b"\n")
            out.flush()

        try:
            with around(), watching_waits(lambda wait: send({"wait": wait})):
                send({"done": execute(nb, cwd, on_cell=lambda number: send({"cell": number}))})
        except CellError as exc:
            send({"cell_error": [exc.number, exc.ename, exc.evalue]})
        except BaseException as exc:  # noqa: BLE001  (reported to the parent, in one line)
            send({"failed": f"{type(exc).__name__}: {exc}"})
        status = 0
    finally:
        os._exit(status)


def _plain(value: Any) -> Any:
    """A value JSON has no type for, as a notebook's display shows it: an array or a numpy
    scalar as its Python value, anything else as its text."""
    tolist = getattr(value, "tolist", None)
    return tolist() if callable(tolist) else str(value)


def _end_with_parent(parent: int) -> None:
    """Ask the kernel to kill this process when its parent ends (Linux); end now when the
    parent has already."""
    prctl = libc_function("prctl")
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)
