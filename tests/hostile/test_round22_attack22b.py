"""Round 22, attack 22b: the probe's signals (held around its flushes, its events' framing)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PROBE_TESTS = Path(__file__).parents[1] / "probe"

#: the head of the child scripts below: the probe's test fakes on the path (argv[2]); the
#: engine's SIGTERM handler returns and says so; ``both()`` sends a SIGINT and a SIGTERM that
#: come together (both pending as the process next runs Python)
CHILD_HEAD = textwrap.dedent("""
    import json, os, signal, sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[2])
    from probe_fakes import record_batch_changes

    signal.signal(signal.SIGTERM, lambda signum, frame: print("engine", signum, flush=True))

    def both(*signums):
        signal.pthread_sigmask(signal.SIG_BLOCK, set(signums))
        for signum in signums:
            os.kill(os.getpid(), signum)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, set(signums))
""")


def _events(capture: Path) -> list[dict[str, object]]:
    """The events of the capture's one events file."""
    (events,) = capture.glob("events-*.jsonl")
    return [json.loads(line) for line in events.read_text().splitlines()]


def _stop(capture: Path) -> tuple[object, object, object]:
    """The records, written and dropped counts of the capture's ``probe_stop``."""
    (stop,) = [e for e in _events(capture) if e["kind"] == "probe_stop"]
    return stop["records"], stop["written"], stop["dropped"]


# -------------------------------------------- T133a: two signals held, the first one raises
#: the writer thread backend (argv[3] "thread") or the writer process with its batch hand-off
#: ("process"); a SIGINT (Python's handler: ``KeyboardInterrupt``) and a SIGTERM come together
#: as the engine's main thread flushes 6 records, its signals held
TWO_SIGNALS = CHILD_HEAD + textwrap.dedent("""
    from forensics.probe import frames, plugin
    from forensics.probe.settings import Settings
    from forensics.probe.thread_backend import default_writer

    signal.signal(signal.SIGINT, signal.default_int_handler)

    class Interrupted:
        def __init__(self, real):
            self.real, self.sent = real, False

        def flush(self):
            self.real.flush()
            if not self.sent:  # the signals come as the fsync returns
                self.sent = True
                both(signal.SIGINT, signal.SIGTERM)

        def __getattr__(self, name):
            return getattr(self.real, name)

    real_put, sent = frames.put_block, []

    def put_block(*args, **kwargs):
        if not sent:  # the signals come as the block is framed
            sent.append(1)
            both(signal.SIGINT, signal.SIGTERM)
        return real_put(*args, **kwargs)

    capture = Path(sys.argv[1])
    if sys.argv[3] == "thread":
        session = plugin.start(Settings(directory=capture.parent, capture=capture, ring=64,
                                        flush_every=64, writer="thread"),
                               writer_factory=lambda s: Interrupted(default_writer(s)))
    else:
        frames.put_block = put_block
        session = plugin.start(Settings(directory=capture.parent, capture=capture,
                                        ring=1 << 10, flush_every=64, writer="process",
                                        handoff="batch"))
    record_batch_changes(session, [[0, 1]] * 6)
    try:
        session.flush(wait=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    plugin.stop()
""")


@pytest.mark.parametrize("writer", ["thread", "process"])
def test_a_sigterm_held_with_a_sigint_is_handled_when_the_sigints_handler_raises(
        tmp_path: Path, writer: str) -> None:
    """T133a: a SIGINT and a SIGTERM that come together while the engine's main thread flushes
    (its signals held) are both handled once the flush is over, though the SIGINT's handler
    raises ``KeyboardInterrupt``; as Python itself does. The SIGTERM's handler never ran: the
    engine was never told of it (nor did the kernel recorder dump on it)."""
    capture = tmp_path / "x.capture"
    child = subprocess.run([sys.executable, "-c", TWO_SIGNALS, str(capture), str(PROBE_TESTS),
                            writer], timeout=300, capture_output=True, text=True)
    assert child.returncode == 0, child.stderr[-3000:]
    assert {"interrupted", "engine 15"} <= set(child.stdout.splitlines()), child.stdout
    assert _stop(capture) == (6, 6, 0)


# ---------------------------------- T133b: the recorder's dump while the probe frames an event
#: the writer process (argv[3]: the hand-off), FORENSICS_KERNELS on where argv[4] says
#: "kernels": 6 records written, 3 more queued, then a SIGTERM comes as the engine's thread
#: frames an event of the probe's (its ``probe_error``), then 6 more records
EVENT_INTERRUPTED = CHILD_HEAD + textwrap.dedent("""
    if sys.argv[4] == "kernels":
        os.environ["FORENSICS_KERNELS"] = "all"
    from forensics.probe import channel, plugin
    from forensics.probe.settings import Settings

    real_room, armed = channel.WriterChannel._room, []

    def room(self, size):
        offset = real_room(self, size)
        if armed:  # the signal comes once the event's place in the ring is taken
            armed.clear()
            os.kill(os.getpid(), signal.SIGTERM)
        return offset

    channel.WriterChannel._room = room
    capture = Path(sys.argv[1])
    session = plugin.start(Settings(directory=capture.parent, capture=capture, ring=1 << 10,
                                    flush_every=64, writer="process", handoff=sys.argv[3]))
    record_batch_changes(session, [[0, 1]] * 6)
    session.flush(wait=True)
    record_batch_changes(session, [[0, 1]] * 3)
    armed.append(1)
    session.error(RuntimeError("the event framed"), "an attack")
    record_batch_changes(session, [[0, 1]] * 6)
    plugin.stop()
""")


@pytest.mark.parametrize(("handoff", "recorder"), [("record", "kernels"), ("batch", "kernels"),
                                                    ("batch", "plain")])
def test_a_sigterms_flush_and_dump_wait_for_an_event_being_framed(
        tmp_path: Path, handoff: str, recorder: str) -> None:
    """T133b: a SIGTERM that comes while the engine's thread frames one of the probe's events
    for the writer process has the kernel recorder's dump (``FORENSICS_KERNELS``) and the
    probe's flush run once that event is framed: the event is kept and every record written.
    They ran inside the framing: their frames went where the interrupted one was going, the
    writer process read "a frame of 0 bytes", the event was lost and so were the records
    after it, neither written nor dropped."""
    capture = tmp_path / "x.capture"
    child = subprocess.run([sys.executable, "-c", EVENT_INTERRUPTED, str(capture),
                            str(PROBE_TESTS), handoff, recorder], timeout=300, capture_output=True,
                           text=True)
    assert child.returncode == 0, child.stderr[-3000:]
    assert "engine 15" in child.stdout.splitlines(), child.stdout
    kept = _events(capture)
    errors = [e["error"] for e in kept if e["kind"] == "probe_error"]
    assert errors == ["RuntimeError: the event framed"]
    reasons = [e.get("reason") for e in kept if e["kind"] == "kernel_summary"]
    assert ("signal SIGTERM" in reasons) == (recorder == "kernels"), reasons
    assert _stop(capture) == (15, 15, 0)


# ------------------------------------- T133c: records never written because their write failed
#: the writer thread backend: 8 records written, then the file size limit (RLIMIT_FSIZE) set
#: under what the capture holds: every later write fails with EFBIG (a full disk does the same)
WRITES_FAIL = CHILD_HEAD + textwrap.dedent("""
    import resource
    from forensics.probe import plugin
    from forensics.probe.settings import Settings

    capture = Path(sys.argv[1])
    session = plugin.start(Settings(directory=capture.parent, capture=capture, ring=1 << 12,
                                    flush_every=8, writer="thread"))
    record_batch_changes(session, [[0, 1]] * 8)
    session.flush(wait=True)
    resource.setrlimit(resource.RLIMIT_FSIZE, (9000, 9000))
    record_batch_changes(session, [[0, 1]] * 40)
    plugin.stop()
""")


def test_records_whose_write_failed_are_not_said_lost_to_a_full_ring(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """T133c: ``summary`` of a capture whose probe's writes failed (``EFBIG`` past the file
    size limit; a full disk) says its records were never written, the ring full or the writer
    stalled or failing. It said "(its ring full, or its writer stalled)": the ring was never
    full and the writer never stalled."""
    from tests.hostile.test_round2 import run_cli

    capture = tmp_path / "x.capture"
    child = subprocess.run([sys.executable, "-c", WRITES_FAIL, str(capture), str(PROBE_TESTS)],
                           timeout=300, capture_output=True, text=True)
    assert child.returncode == 0, child.stderr[-3000:]
    records, written, dropped = _stop(capture)
    assert (records, written) == (48, 8) and dropped == 40
    assert [e for e in _events(capture) if e["kind"] == "probe_error"]
    code, out, err = run_cli(capsys, "summary", capture, "--format", "text")
    assert code == 0, err
    assert ("not read: 40 record(s) recorded by the probe and never written (its ring full, or "
            "its writer stalled or failing)") in " ".join(out.split()), out
