"""Round 23, attack 23b: the probe's signals as its hold ends, its ring drops and its close
begins; a forked copy's counts."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PROBE_TESTS = Path(__file__).parents[1] / "probe"

#: the head of the child scripts below: the probe's test fakes on the path (argv[2]); the
#: engine's SIGTERM handler returns and says so; Python's own SIGINT handler; ``started`` (the
#: probe's session) and ``signalling`` (a call made to send a signal), for the scripts
CHILD_HEAD = textwrap.dedent("""
    import json, os, signal, sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[2])
    from probe_fakes import record_batch_changes

    signal.signal(signal.SIGTERM, lambda signum, frame: print("engine", signum, flush=True))
    signal.signal(signal.SIGINT, signal.default_int_handler)


    def started(**given):  # the probe's session on the capture argv[1]: a ring of 64, a
        # flush every 64 records, the writer argv[3], unless given says
        from forensics.probe import plugin
        from forensics.probe.settings import Settings

        capture = Path(sys.argv[1])
        chosen = {"ring": 64, "flush_every": 64, **given}
        if "writer" not in chosen:
            chosen["writer"] = sys.argv[3]
        return plugin.start(Settings(directory=capture.parent, capture=capture, **chosen))


    def signalling(real, signum):  # real, whose first call sends this process signum
        armed = [1]

        def call(*args):
            if armed:
                armed.clear()
                os.kill(os.getpid(), signum)  # handled as this call returns
            return real(*args)
        return call
""")


def _child(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` (after :data:`CHILD_HEAD`) in a fresh interpreter."""
    return subprocess.run([sys.executable, "-c", CHILD_HEAD + script, *args], timeout=300,
                          capture_output=True, text=True)


def _stops(capture: Path) -> list[dict[str, object]]:
    """The ``probe_stop`` events of every events file of the capture."""
    return [event for path in sorted(capture.glob("events-*.jsonl"))
            for event in map(json.loads, path.read_text().splitlines())
            if event["kind"] == "probe_stop"]


# ------------------------------- T141a: a SIGINT that comes as a hold's handlers are put back
#: the engine's main thread holds its signals (a flush's hold); as the hold ends and
#: SIGINT's handler is put back (Python's: ``KeyboardInterrupt``), a SIGINT comes; later a
#: SIGTERM
RELEASED = textwrap.dedent("""
    from forensics.probe import held

    real, armed = signal.signal, [1]

    def put(signum, handler):
        old = real(signum, handler)
        if signum == signal.SIGINT and handler is signal.default_int_handler and armed:
            armed.clear()
            os.kill(os.getpid(), signal.SIGINT)  # handled as this call returns
        return old

    signal.signal = put
    try:
        with held.signals_held():
            pass
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    signal.signal = real
    os.kill(os.getpid(), signal.SIGTERM)
    print("went on", flush=True)
""")


def test_a_sigint_as_a_holds_handlers_are_put_back_leaves_none_replaced() -> None:
    """T141a: a SIGINT whose handler raises (``KeyboardInterrupt``) as the handlers a hold
    replaced are put back is raised once every one is back: it cut the putting back short,
    and every later signal (SIGTERM) kept the hold's handler that only notes it, for good: the
    engine's SIGTERM handler never ran again."""
    child = _child(RELEASED, "", str(PROBE_TESTS))
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.splitlines() == ["interrupted", "engine 15", "went on"], child.stdout


# ----------------------------------- T141b: a signal's handler raises as the ring drops one
#: a ring of 4 records; as the fifth record drops the oldest (argv[3]: the writer), a SIGINT
#: comes (Python's handler raises ``KeyboardInterrupt``)
DROPPED = textwrap.dedent("""
    from collections import deque
    from forensics.probe import plugin
    from forensics.probe.settings import Settings

    class Ring(deque):
        armed = False

        def popleft(self):
            oldest = super().popleft()
            if Ring.armed:
                Ring.armed = False
                os.kill(os.getpid(), signal.SIGINT)  # handled as this call returns
            return oldest

    capture = Path(sys.argv[1])
    session = plugin.start(Settings(directory=capture.parent, capture=capture, ring=4,
                                    flush_every=64, writer=sys.argv[3], handoff="batch"))
    session._ring = Ring()
    record_batch_changes(session, [[0, 1]] * 4)
    Ring.armed = True
    try:
        record_batch_changes(session, [[0, 1]])
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    plugin.stop()
""")


@pytest.mark.parametrize("writer", ["thread", "process"])
def test_a_record_the_ring_drops_as_a_handler_raises_is_counted(tmp_path: Path,
                                                                writer: str) -> None:
    """T141b: the record a full ring drops as a signal's handler raises is counted dropped:
    ``probe_stop`` said 5 records, 4 written and none dropped."""
    capture = tmp_path / "x.capture"
    child = _child(DROPPED, str(capture), str(PROBE_TESTS), writer)
    assert child.returncode == 0, child.stderr[-3000:]
    assert "interrupted" in child.stdout.splitlines(), child.stdout
    (stop,) = _stops(capture)
    assert (stop["records"], stop["written"], stop["dropped"]) == (5, 4, 1)


# ------------------------------------------------ T141c: a signal as the probe's close begins
#: 6 records (argv[3]: the writer), then the exit's close; a SIGTERM (argv[4]; the probe's
#: handler, which closes the session and ends the process) or a SIGINT comes at the start of
#: the first call the close makes that marks a thread as inside a flush
CLOSING = textwrap.dedent("""
    from forensics.probe.busy import FlushMarks

    if sys.argv[4] == "SIGTERM":
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    session = started(flush_every=4)
    record_batch_changes(session, [[0, 1]] * 6)
    FlushMarks.enter_flush = signalling(FlushMarks.enter_flush, getattr(signal, sys.argv[4]))
    try:
        session.close()  # as atexit does
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    session.close()
""")


@pytest.mark.parametrize("writer", ["thread", "process"])
@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_a_signal_as_the_close_begins_waits_for_its_probe_stop(tmp_path: Path, writer: str,
                                                               signame: str) -> None:
    """T141c: a SIGTERM (the probe's handler closes the session and ends the process) or a
    SIGINT (``KeyboardInterrupt``) that comes as the close begins is handled once it is over:
    the records and ``probe_stop`` are kept. The SIGTERM found the session stopping, returned
    at once and ended the process with nothing written; the SIGINT left it stopping, and no
    later close closed it."""
    capture = tmp_path / "x.capture"
    child = _child(CLOSING, str(capture), str(PROBE_TESTS), writer, signame)
    assert child.returncode == (-15 if signame == "SIGTERM" else 0), child.stderr[-3000:]
    assert ("interrupted" in child.stdout.splitlines()) == (signame == "SIGINT"), child.stdout
    (stop,) = _stops(capture)
    assert (stop["records"], stop["written"], stop["dropped"]) == (6, 6, 0)


# ------------------------------------------ T141d: a forked copy of a session that lost records
#: the writer process with each record handed off; a SIGINT cuts one record out of its
#: hand-off (T131f), then the engine forks a copy that records 3 of its own
FORKED = textwrap.dedent("""
    from forensics.probe import channel, plugin
    from forensics.probe.settings import Settings

    capture = Path(sys.argv[1])
    session = plugin.start(Settings(directory=capture.parent, capture=capture, ring=64,
                                    flush_every=64, writer="process", handoff="record"))
    record_batch_changes(session, [[0, 1]] * 2)
    session.flush(wait=True)
    armed = [1]
    for name in ("put_block", "put_record"):
        def put(self, *args, real=getattr(channel.WriterChannel, name)):
            if armed:
                armed.clear()
                os.kill(os.getpid(), signal.SIGINT)  # handled as this call returns
            return real(self, *args)
        setattr(channel.WriterChannel, name, put)
    try:
        record_batch_changes(session, [[0, 1]])
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    if (pid := os.fork()) == 0:
        record_batch_changes(session, [[0, 1]] * 3)
        plugin.stop()
        os._exit(0)
    os.waitpid(pid, 0)
    print(pid, flush=True)
    plugin.stop()
""")


def test_a_forked_copy_never_counts_its_parents_records_lost_to_a_signal(
        tmp_path: Path) -> None:
    """T141d: a forked copy's ``probe_stop`` counts its own records lost to a signal (none),
    never its parent's: it said ``lost_to_signal: 1`` of 3 records it wrote all 3 of, and
    logged that it lost one."""
    capture = tmp_path / "x.capture"
    child = _child(FORKED, str(capture), str(PROBE_TESTS))
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.splitlines()[0] == "interrupted", child.stdout
    copy = int(child.stdout.splitlines()[1])
    stops = {stop["pid"]: stop for stop in _stops(capture)}
    assert stops[copy]["records"] == stops[copy]["written"] == 3
    assert "lost_to_signal" not in stops[copy]
    parent = next(stop for pid, stop in stops.items() if pid != copy)
    assert (parent["records"], parent["written"], parent["lost_to_signal"]) == (3, 2, 1)
    assert child.stderr.count("record(s) lost to a signal") == 1, child.stderr


# ------------------------------------------- T141e: a copy forked while its parent closes
#: the writer (argv[3]) with 2 records; as the close runs, another thread forks a copy (here
#: the close itself): the copy records 3 of its own and closes
FORKED_CLOSING = textwrap.dedent("""
    from forensics.probe import plugin
    from forensics.probe.session import ProbeSession

    session = started(flush_every=4)
    record_batch_changes(session, [[0, 1]] * 2)
    real, parent = ProbeSession._close, os.getpid()

    def _close(self):
        if os.getpid() == parent and (pid := os.fork()) == 0:
            record_batch_changes(self, [[0, 1]] * 3)
            self.close()
            print(os.getpid(), flush=True)
            os._exit(0)
        if os.getpid() == parent:
            os.waitpid(pid, 0)
        return real(self)

    ProbeSession._close = _close
    plugin.stop()
""")


@pytest.mark.parametrize("writer", ["thread", "process"])
def test_a_copy_forked_as_its_parent_closes_keeps_its_own_records(tmp_path: Path,
                                                                   writer: str) -> None:
    """T141e: a copy of the engine forked (by another thread) while its parent's probe closes
    starts its session afresh, open: its close keeps its records and ``probe_stop``. It took
    the parent's close for its own: its close waited 60 s for it to end, then kept nothing,
    its 3 records written nowhere and counted nowhere."""
    capture = tmp_path / "x.capture"
    child = _child(FORKED_CLOSING, str(capture), str(PROBE_TESTS), writer)
    assert child.returncode == 0, child.stderr[-3000:]
    copy = int(child.stdout.splitlines()[0])
    stops = {stop["pid"]: stop for stop in _stops(capture)}
    assert len(stops) == 2 and copy in stops  # the parent's and the copy's
    assert (stops[copy]["records"], stops[copy]["written"], stops[copy]["dropped"]) == (3, 3, 0)


# --------------------------- T141f: a copy that ends before its parent's first write
#: the writer (argv[3]); 2 records queued, none written yet (the folder empty); a forked copy
#: ends as Python ends (its exit's close runs); then 2 more records and the parent's close
ENDED_EARLY = textwrap.dedent("""
    from forensics.probe import plugin

    session = started()
    record_batch_changes(session, [[0, 1]] * 2)
    if os.fork() == 0:
        sys.exit(0)
    os.wait()
    record_batch_changes(session, [[0, 1]] * 2)
    plugin.stop()
""")


@pytest.mark.parametrize("writer", ["thread", "process"])
def test_a_copy_ending_before_its_parents_first_write_leaves_its_folder(tmp_path: Path,
                                                                        writer: str) -> None:
    """T141f: a forked copy never removes the capture folder its parent made: one that ended
    (its exit's close) before the parent's first write removed it, empty, and the parent's
    capture was lost, its records dropped ("No such file or directory")."""
    capture = tmp_path / "x.capture"
    child = _child(ENDED_EARLY, str(capture), str(PROBE_TESTS), writer)
    assert child.returncode == 0, child.stderr[-3000:]
    (stop,) = _stops(capture)
    assert (stop["records"], stop["written"], stop["dropped"]) == (4, 4, 0)


# ------------------------------- T141g: the first process ends before its forked copy writes
#: the writer (argv[3]); a forked copy (a worker) queues 2 records, none written yet; then the
#: first process, which recorded nothing, closes (its folder empty); then the copy
PARENT_FIRST = textwrap.dedent("""
    from forensics.probe import plugin

    session = started()
    (read, write), (queued, told) = os.pipe(), os.pipe()
    if (pid := os.fork()) == 0:
        record_batch_changes(session, [[0, 1]] * 2)
        os.write(told, b"x")
        os.read(read, 1)  # the first process has closed
        plugin.stop()
        os._exit(0)
    os.read(queued, 1)  # the copy runs, its records queued
    plugin.stop()
    os.write(write, b"x")
    os.waitpid(pid, 0)
""")


@pytest.mark.parametrize("writer", ["thread", "process"])
def test_a_forked_copy_keeps_its_folder_when_the_first_process_ends_first(
        tmp_path: Path, writer: str) -> None:
    """T141g: a forked copy of the engine (a worker) leaves its join mark as it starts afresh,
    as a joining process does, so the first process ending before the copy's first write no
    longer removes the folder as empty: the copy's records and ``probe_stop`` are kept. Its
    records were dropped ("opening the capture ... failed: FileNotFoundError")."""
    capture = tmp_path / "x.capture"
    child = _child(PARENT_FIRST, str(capture), str(PROBE_TESTS), writer)
    assert child.returncode == 0, child.stderr[-3000:]
    (stop,) = _stops(capture)
    assert (stop["records"], stop["written"], stop["dropped"]) == (2, 2, 0)
