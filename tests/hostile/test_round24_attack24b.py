"""Round 24, attack 24b: what a forked copy of the engine's process inherits of its parent's
probe session."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.hostile.test_round23_attack23b import PROBE_TESTS, _child, _stops

# ------------------------------- T149a: a live copy held its parent's writer process's stdin
#: the first process records 3 (its writer process started), forks a copy that lives on
#: (a pool's worker) and closes; the copy ends once told to
COPY_LIVES = textwrap.dedent("""
    from forensics.probe import plugin

    capture = Path(sys.argv[1])
    session = started(writer="process")
    record_batch_changes(session, [[0, 1]] * 3)
    proc = session.backend.channel.proc
    read, write = os.pipe()
    if (pid := os.fork()) == 0:
        os.close(write)
        os.read(read, 1)
        os._exit(0)
    plugin.stop()
    print(proc.returncode)
    os.write(write, b"x")
    os.waitpid(pid, 0)
""")


def test_a_live_forked_copy_lets_its_parents_writer_process_end(tmp_path: Path) -> None:
    """T149a: a forked copy does not hold its parent's writer process's stdin open, so the
    parent's close ends that process as it should (exit status 0, the capture closed); it
    waited 10 s for it, then killed it (-9), its segments left without their end marker."""
    capture = tmp_path / "x.capture"
    child = _child(COPY_LIVES, str(capture), str(PROBE_TESTS))
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.split() == ["0"]
    (stop,) = _stops(capture)
    assert (stop["records"], stop["written"], stop["dropped"]) == (3, 3, 0)
    (segment,) = capture.glob("*.arrows")
    assert segment.read_bytes().endswith(b"\xff\xff\xff\xff\x00\x00\x00\x00")


# ------------------------------- T149b: the copy's probe_stop and warnings were its parent's
#: the first process's writer thread runs (a due flush) and a guard finding of batch_change is
#: passed on (warned once); a copy forked then records one record (no due flush: no writer
#: thread of its own) and passes on a finding of the same site, and closes
COPY_OWN = textwrap.dedent("""
    import numpy as np
    from forensics.probe import plugin
    from forensics.probe.guard import check_ids

    capture = Path(sys.argv[1])
    session = started(flush_every=2, writer="thread")
    record_batch_changes(session, [[0, 1]] * 2)
    session.drain()

    def pass_on():
        found = check_ids("batch_change", "prev_positions", np.array([7]), 3)
        session.passed_on(session.new_record("batch_change"), found)

    pass_on()
    if (pid := os.fork()) == 0:
        record_batch_changes(session, [[0, 1]])
        pass_on()
        plugin.stop()
        os._exit(0)
    os.waitpid(pid, 0)
    plugin.stop()
    print(pid)
""")


def test_a_forked_copys_probe_stop_and_warnings_are_its_own(tmp_path: Path) -> None:
    """T149b: a forked copy's ``probe_stop`` says no writer thread's CPUs where the copy ran
    none (it said its parent's ``engine_cpus`` and ``writer_cpus``), and the copy's first guard
    finding passed on at a site is warned of in its log (its parent's warning of that site
    kept the copy's unsaid)."""
    capture = tmp_path / "x.capture"
    child = _child(COPY_OWN, str(capture), str(PROBE_TESTS))
    assert child.returncode == 0, child.stderr[-3000:]
    copy = int(child.stdout.split()[-1])
    stops = {stop["pid"]: stop for stop in _stops(capture)}
    (parent,) = [pid for pid in stops if pid != copy]
    assert "writer_cpus" in stops[parent]
    assert "writer_cpus" not in stops[copy] and "engine_cpus" not in stops[copy]
    assert child.stderr.count("wrote prev_positions[0] value 7") == 2, child.stderr[-3000:]


# ------------------------------- T149c: a record that comes after the close
#: the writer (argv[3]); 2 records; another thread is inside a recorded call (past the
#: session's ``wants``) as the main thread closes the probe; its record comes after the close
LATE = textwrap.dedent("""
    import threading
    from forensics.probe import hooks, plugin
    from probe_fakes import batch_args, plain_batch_change

    capture = Path(sys.argv[1])
    session = started()
    record_batch_changes(session, [[0, 1]] * 2)
    inside, go = threading.Event(), threading.Event()

    def slow(*args, **kwargs):
        inside.set()
        go.wait()
        return plain_batch_change(*args, **kwargs)

    wrapped = hooks.wrap_batch_change(slow)
    hooks.activate(session)

    def engine():
        session.begin_step()
        wrapped(*batch_args([0, 1]))

    thread = threading.Thread(target=engine)
    thread.start()
    inside.wait()
    plugin.stop()
    go.set()
    thread.join()
    print(session.counts["records"], getattr(session.backend, "channel", None))
""")


@pytest.mark.parametrize("writer", ["thread", "process"])
def test_a_record_that_comes_after_the_close_is_said(tmp_path: Path, writer: str) -> None:
    """T149c: a record whose thread was inside a recorded call as the probe closed is said in
    the log to be in no capture and counted in no ``probe_stop``, and starts no writer; it was
    queued into a ring no one read (the writer process started anew for it), unsaid."""
    capture = tmp_path / "x.capture"
    child = _child(LATE, str(capture), str(PROBE_TESTS), writer)
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.split() == ["2", "None"]
    (stop,) = _stops(capture)
    assert (stop["records"], stop["written"], stop["dropped"]) == (2, 2, 0)
    assert ("a batch_change record (step 2, rank 0) came after the probe closed"
            in child.stderr), child.stderr[-3000:]


#: 2 records; the probe closes; a guard finding's record comes after the close
LATE_GUARD = textwrap.dedent("""
    import numpy as np
    from forensics.probe import plugin
    from forensics.probe.guard import check_ids

    capture = Path(sys.argv[1])
    session = started(writer="thread")
    record_batch_changes(session, [[0, 1]] * 2)
    session.close()
    found = check_ids("batch_change", "prev_positions", np.array([7]), 3)
    print(session.violation(session.new_record("batch_change"), found))
""")


def test_a_guard_finding_after_the_close_is_not_said_recorded(tmp_path: Path) -> None:
    """T149c: a guard finding whose record comes after the close says its records could not
    all be written (the log line says why), never "recorded in" the capture."""
    capture = tmp_path / "x.capture"
    child = _child(LATE_GUARD, str(capture), str(PROBE_TESTS))
    assert child.returncode == 0, child.stderr[-3000:]
    assert "records up to this call could not all be written" in child.stdout
    assert "came after the probe closed" in child.stderr


# ------------------------------- T149d: a signal as the engine waits for room in a full ring
#: a writer thread's ring of 1; its writer blocks on the first record (a slow disk); the
#: second fills the ring; the third waits for room, and a SIGINT comes as it waits
RING_WAIT = textwrap.dedent("""
    import threading
    from forensics.probe import plugin
    from forensics.probe.settings import Settings
    from probe_fakes import FakeWriter

    entered, release = threading.Event(), threading.Event()

    class Slow(FakeWriter):
        def flush(self):
            entered.set()
            release.wait()
            super().flush()

    writer = Slow()
    capture = Path(sys.argv[1])
    session = plugin.start(Settings(directory=capture.parent, capture=capture, ring=1,
                                    flush_every=1), writer_factory=lambda session: writer)
    record_batch_changes(session, [[0, 1]])
    entered.wait()
    record_batch_changes(session, [[0, 1]])
    backend = session.backend
    real = backend.drain

    def drain(timeout):
        os.kill(os.getpid(), signal.SIGINT)  # handled as the wait begins
        return real(timeout)

    backend.drain = drain
    try:
        record_batch_changes(session, [[0, 1]])
    except KeyboardInterrupt:
        print("interrupted")
    backend.drain = real
    release.set()
    plugin.stop()
    (stop,) = [event for event in writer.events if event["kind"] == "probe_stop"]
    print(json.dumps([stop[key] for key in ("records", "written", "dropped")]
                     + [stop.get("lost_to_signal")]))
""")


def test_a_record_a_signal_cuts_out_of_its_wait_for_room_is_counted(tmp_path: Path) -> None:
    """T149d: a record whose wait for room in a writer thread's full ring a signal's handler
    cuts short (``KeyboardInterrupt``) is counted lost to a signal (``records`` 3, 2 written,
    ``lost_to_signal`` 1, and the log line); it was counted nowhere (``records`` 2)."""
    child = _child(RING_WAIT, str(tmp_path / "x.capture"), str(PROBE_TESTS))
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.splitlines() == ["interrupted", "[3, 2, 0, 1]"], child.stdout
    assert "1 record(s) lost to a signal" in child.stderr, child.stderr[-3000:]


#: the writer (argv[3]); 2 records; a SIGINT comes as the third call's outputs are copied
OUTPUTS_CUT = textwrap.dedent("""
    from forensics.probe import plugin
    from forensics.probe.copy import Copier
    from forensics.probe.settings import Settings

    joins = [0]

    class Interrupted(Copier):
        def join(self, tensors):
            joins[0] += 1
            if joins[0] == 6:  # the third call's outputs
                os.kill(os.getpid(), signal.SIGINT)  # handled as this call returns
            return super().join(tensors)

    capture = Path(sys.argv[1])
    session = plugin.start(Settings(directory=capture.parent, capture=capture, ring=64,
                                    flush_every=64, writer=sys.argv[3]), copier=Interrupted())
    try:
        record_batch_changes(session, [[0, 1]] * 3)
    except KeyboardInterrupt:
        print("interrupted")
    plugin.stop()
""")


@pytest.mark.parametrize("writer", ["thread", "process"])
def test_a_record_a_signal_cuts_out_of_its_outputs_copy_is_counted(
        tmp_path: Path, writer: str) -> None:
    """T149d: a record whose outputs a signal's handler cuts short as they are copied (after
    the engine's call ran) is counted lost to a signal; it was counted nowhere."""
    capture = tmp_path / "x.capture"
    child = _child(OUTPUTS_CUT, str(capture), str(PROBE_TESTS), writer)
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.split() == ["interrupted"]
    (stop,) = _stops(capture)
    assert (stop["records"], stop["written"], stop["dropped"], stop.get("lost_to_signal")) \
        == (3, 2, 0, 1)
