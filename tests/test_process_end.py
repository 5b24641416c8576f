"""How a process ended, in words (:mod:`forensics.process_end`), and the four callers that say
it: each case from a real process where one can end so (an exit, a named signal, signal 35: a
real-time signal that Python's ``signal.Signals`` has no member for)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from forensics.process_end import (
    MEMORY_SIGNALS,
    by_memory_signal,
    how_ended,
    returncode,
    signal_name,
)

#: a signal number Linux has (SIGRTMIN + 1) and ``signal.Signals`` has no member for
NAMELESS = 35


def _no_core() -> None:
    """No core file of a process a signal kills (SIGBUS dumps one where the limit allows)."""
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def popen_ended(how: str) -> subprocess.Popen[bytes]:
    """A reaped process that ended ``how``: ``exit N``, ``signal N``, or ``running``."""
    kind, _, number = how.partition(" ")
    if kind == "exit":
        proc = subprocess.Popen([sys.executable, "-c", f"raise SystemExit({number})"])
    else:
        proc = subprocess.Popen(["sleep", "30"], preexec_fn=_no_core)
        if kind == "signal":
            proc.send_signal(int(number))
    if kind != "running":
        proc.wait(30)
    return proc


def wait_status(how: str) -> int:
    """The raw :func:`os.waitpid` status of a forked child that ended ``how`` (as above)."""
    kind, _, number = how.partition(" ")
    pid = os.fork()
    if pid == 0:  # the child
        if kind == "exit":
            os._exit(int(number))
        time.sleep(30)
        os._exit(0)
    if kind == "signal":
        os.kill(pid, int(number))
    return os.waitpid(pid, 0)[1]


def test_signal_names_are_named_and_a_nameless_number_is_its_number() -> None:
    assert NAMELESS not in signal.Signals._value2member_map_
    assert signal_name(9) == "SIGKILL" and signal_name(11) == "SIGSEGV"
    assert signal_name(NAMELESS) == f"signal {NAMELESS}"
    assert signal_name(77) == "signal 77"


@pytest.mark.parametrize(("how", "words", "numbered"), [
    ("exit 0", "exited with status 0", "exited with status 0"),
    ("exit 3", "exited with status 3", "exited with status 3"),
    ("signal 9", "was killed by SIGKILL", "was killed by signal 9 (SIGKILL)"),
    (f"signal {NAMELESS}", f"was killed by signal {NAMELESS}",
     f"was killed by signal {NAMELESS}"),
    ("running", "is still running", "is still running")])
def test_how_a_process_ended_is_worded_from_its_returncode_and_its_wait_status(
        how: str, words: str, numbered: str) -> None:
    proc = popen_ended(how)
    try:
        assert how_ended(proc.poll()) == words
        assert how_ended(proc.poll(), numbered=True) == numbered
        if how != "running":
            assert returncode(wait_status(how)) == proc.returncode
    finally:
        proc.kill()
        proc.wait(30)


def test_a_number_past_every_signal_is_worded_not_raised() -> None:
    assert how_ended(-77) == "was killed by signal 77"
    assert how_ended(-77, numbered=True) == "was killed by signal 77"
    assert returncode(77) == -77  # a raw status of signal 77, as a wait would give it


def test_only_a_memory_signal_is_one() -> None:
    assert {signal.SIGSEGV, signal.SIGBUS} == set(MEMORY_SIGNALS)
    assert by_memory_signal(-signal.SIGSEGV) and by_memory_signal(-signal.SIGBUS)
    for code in (None, 0, signal.SIGSEGV, -signal.SIGKILL, -NAMELESS, -77):
        assert not by_memory_signal(code), code  # exit status 11 is no SIGSEGV


# ------------------------------------------------- the callers, on a nameless signal's death


def test_the_probe_writer_killed_by_a_nameless_signal_is_said_so() -> None:
    from forensics.probe.channel import ended

    assert ended(popen_ended("signal 9")) == "it was killed by signal 9 (SIGKILL)"
    assert ended(popen_ended(f"signal {NAMELESS}")) == f"it was killed by signal {NAMELESS}"
    assert ended(popen_ended("exit 5")) == "it exited with status 5"


def test_a_pool_process_killed_by_a_nameless_signal_is_no_negative_exit_code() -> None:
    """The fleet's row said ``exit code -35`` of a process a signal killed."""
    from forensics.fleet.runners import _deaths

    class Ended:
        def __init__(self, exitcode: int) -> None:
            self.exitcode = exitcode

        def join(self, timeout: float) -> None:
            pass

    codes = [-9, -NAMELESS, 4, 0, -signal.SIGTERM]
    processes = {100 + i: Ended(popen_ended(f"signal {-c}" if c < 0 else f"exit {c}").returncode)
                 for i, c in enumerate(codes)}
    dead = _deaths(list(range(5)), {100 + i: i for i in range(5)}, processes)
    assert dead == {0: "signal SIGKILL", 1: f"signal {NAMELESS}", 2: "exit code 4"}


@pytest.mark.parametrize(("how", "said"), [
    ("exit 3", "the notebook's process exited with status 3 in cell 2 without an answer"),
    (f"signal {NAMELESS}",
     f"the notebook's process was killed by signal {NAMELESS} in cell 2 without an answer")])
def test_the_notebook_process_is_worded_from_its_wait_status(how: str, said: str) -> None:
    from forensics.present.notebook_process import _why_ended

    assert _why_ended(wait_status(how), 2) == said


@pytest.mark.parametrize(("how", "said"), [
    (f"signal {NAMELESS}", f"(it was killed by signal {NAMELESS}): not explained"),
    ("signal 9", "(it was killed by SIGKILL): not explained"),
    ("exit 3", "(it exited with status 3): not explained")])
def test_the_kernel_worker_killed_by_a_nameless_signal_is_said_so(how: str, said: str) -> None:
    from forensics.outcome import ERROR, INDEX_ERROR
    from forensics.variants.triton_kernels import _death

    outcome = _death(popen_ended(how))  # type: ignore[arg-type]
    assert outcome.status == ERROR and said in outcome.message, outcome
    crashed = _death(popen_ended("signal 7"))  # type: ignore[arg-type]
    assert crashed.status == INDEX_ERROR and "(SIGBUS: an illegal memory access)" in \
        crashed.message, crashed


def test_the_words_live_in_one_module() -> None:
    """No caller names a signal by itself any longer."""
    root = Path(__file__).resolve().parents[1] / "forensics"
    for name in ("probe/channel.py", "fleet/runners.py", "present/notebook_process.py",
                 "variants/triton_kernels.py"):
        text = (root / name).read_text(encoding="utf-8")
        assert "Signals(" not in text and "WTERMSIG" not in text, name
