"""Round 23, fix 23c: a forked copy's join mark against its parent's close."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.hostile.test_round23_attack23b import PROBE_TESTS, _child, _stops

# ------------------------------- T144a: the first process closes before its copy's at-fork hook
#: the writer (argv[3]); an at-fork hook registered before the probe's holds the copy, before
#: the probe's own hook runs in it, until the first process (which recorded nothing) has
#: closed; then the copy queues 2 records and closes
CLOSED_FIRST = textwrap.dedent("""
    from forensics.probe import plugin

    read, write = os.pipe()
    os.register_at_fork(after_in_child=lambda: os.read(read, 1))  # runs before the probe's
    capture = Path(sys.argv[1])
    session = started()
    if (pid := os.fork()) == 0:
        record_batch_changes(session, [[0, 1]] * 2)
        plugin.stop()
        os._exit(0)
    plugin.stop()  # the first process closes as its copy is being forked
    os.write(write, b"x")
    os.waitpid(pid, 0)
    print(sorted(name for name in os.listdir(capture) if name.startswith(".joined-")), pid)
""")


@pytest.mark.parametrize("writer", ["thread", "process"])
def test_a_first_process_closing_as_it_forks_leaves_its_copy_the_folder(
        tmp_path: Path, writer: str) -> None:
    """T144a: the first process leaves its forked copy's join mark before the fork (the copy
    takes it as its own), so its close right after the fork, before the copy's at-fork hook
    ran, no longer removes the folder as empty: the copy's records and ``probe_stop`` are
    kept, and its mark is its own (``.joined-PID``). They were all dropped ("opening the
    capture ... failed: FileNotFoundError")."""
    capture = tmp_path / "x.capture"
    child = _child(CLOSED_FIRST, str(capture), str(PROBE_TESTS), writer)
    assert child.returncode == 0, child.stderr[-3000:]
    (stop,) = _stops(capture)
    assert (stop["records"], stop["written"], stop["dropped"]) == (2, 2, 0)
    marks, pid = child.stdout.rsplit(maxsplit=1)
    assert marks == f"['.joined-{pid}']"


# ------------------------------- T144b: a SIGINT as the close's hold is being put in place
#: the writer (argv[3]); 2 records queued; the script ends, and atexit's close begins: a
#: SIGINT comes as its hold asks the first signal's handler, before SIGINT's is replaced
HOLD_TAKEN = textwrap.dedent("""
    from forensics.probe import held

    session = started()
    record_batch_changes(session, [[0, 1]] * 2)
    held._getsignal = signalling(held._getsignal, signal.SIGINT)
""")


@pytest.mark.parametrize("writer", ["thread", "process"])
def test_a_sigint_as_the_closes_hold_is_taken_loses_no_probe_stop(
        tmp_path: Path, writer: str) -> None:
    """T144b: a SIGINT (Python's handler: ``KeyboardInterrupt``) that comes as the close's
    signal hold is being put in place is raised once the close is over, as one that comes
    inside the hold: atexit's close keeps its records and ``probe_stop``. It ended the close
    there, nothing of it written."""
    capture = tmp_path / "x.capture"
    child = _child(HOLD_TAKEN, str(capture), str(PROBE_TESTS), writer)
    assert "KeyboardInterrupt" in child.stderr
    (stop,) = _stops(capture)
    assert (stop["records"], stop["written"], stop["dropped"]) == (2, 2, 0)
