"""Round 24, fix 24c: what the probe did with an event that came after its close."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.hostile.test_round23_attack23b import PROBE_TESTS, _child

# ------------------------------- T152a: an engine's exception that comes after the close
#: 2 records; the probe closes; the engine's exception comes after (argv[3]: the writer;
#: argv[4]: "meanwhile" closes the session as the event's writer is opened, after the check
#: that it was open; "stopped" too, the writer closed only after the event: probe_stop written)
LATE_EVENT = textwrap.dedent("""
    from forensics.probe import plugin
    from forensics.probe.settings import Settings

    capture = Path(sys.argv[1])
    session = plugin.start(Settings(directory=capture.parent, capture=capture, ring=64,
                                    flush_every=64, writer=sys.argv[3]))
    record_batch_changes(session, [[0, 1]] * 2)
    backend = session.backend
    closing, opened = backend.close, backend.open
    if sys.argv[4] == "stopped":
        backend.close = lambda: None

    def open_then_closed():
        opened()
        session.close()

    if sys.argv[4] == "closed":
        session.close()
    else:
        backend.open = open_then_closed
    session.engine_failed(RuntimeError("CUDA error: an illegal memory access"), "execute_model")
    if sys.argv[4] == "stopped":
        closing()
    print(session.counts["records"], getattr(session.backend, "channel", None))
""")


def _kinds(capture: Path) -> list[str]:
    """The kinds of every event of the capture, file by file, in order."""
    return [event["kind"] for path in sorted(capture.glob("events-*.jsonl"))
            for event in map(json.loads, path.read_text().splitlines())]


@pytest.mark.parametrize("when", ["closed", "meanwhile", "stopped"])
@pytest.mark.parametrize("writer", ["thread", "process"])
def test_an_engine_exception_after_the_close_is_said(tmp_path: Path, writer: str,
                                                     when: str) -> None:
    """T152a: an engine's exception that comes after the probe's close (or as it closes,
    once its writer was opened; once ``probe_stop`` was written, the writer not yet closed) is
    said in one log line and starts no writer; the writer
    process was started anew for it and wrote it after ``probe_stop``, and the writer thread's
    capture dropped it without a word."""
    capture = tmp_path / "x.capture"
    child = _child(LATE_EVENT, str(capture), str(PROBE_TESTS), writer, when)
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.split() == ["2", "None"]
    assert _kinds(capture) == ["probe_start", "probe_stop"]
    said = ("forensics probe: event engine_exception (execute_model) came after the probe "
            "closed: it is in no capture")
    assert child.stderr.count(said) == 1, child.stderr[-3000:]


# ------------------------------- T152b: a pid reused inside one capture
#: a process given pid 4242 joins the capture argv[1] (argv[4]: its owner, none for the first,
#: which makes it), records 2 (argv[5]: the batch's second position) and closes
REUSED_PID = textwrap.dedent("""
    os.getpid = lambda: 4242  # the pid of the process before (ended): a pid reused
    from forensics.probe import plugin
    from forensics.probe.settings import Settings

    capture = Path(sys.argv[1])
    session = plugin.start(Settings(directory=capture.parent, capture=capture, ring=64,
                                    flush_every=64, writer=sys.argv[3], owner=sys.argv[4]))
    record_batch_changes(session, [[0, int(sys.argv[5])]] * 2)
    plugin.stop()
    print(session.settings.capture, session.settings.owner, session.process)
""")


@pytest.mark.parametrize("writer", ["thread", "process"])
def test_a_reused_pid_appends_to_no_earlier_processs_events(tmp_path: Path,
                                                           writer: str) -> None:
    """T152b: a process given the pid of an earlier process of the capture (ended) writes an
    events file and segments of its own (``host-2-pid``), never appending to the earlier's: it
    appended its ``probe_start`` and ``probe_stop`` to the earlier's events file."""
    first = _child(REUSED_PID, str(tmp_path / "x.capture"), str(PROBE_TESTS), writer, "", "1")
    assert first.returncode == 0, first.stderr[-3000:]
    capture, owner, tag = first.stdout.split()
    later = _child(REUSED_PID, capture, str(PROBE_TESTS), writer, owner, "2")
    assert later.returncode == 0, later.stderr[-3000:]
    host, pid = tag.rsplit("-", 1)
    assert pid == "4242" and later.stdout.split() == [capture, owner, f"{host}-2-4242"]
    files = sorted(Path(capture).glob("events-*.jsonl"))
    assert [path.name for path in files] == [f"events-{host}-2-4242.jsonl",
                                             f"events-{tag}.jsonl"]
    for path in files:
        kinds = [json.loads(line)["kind"] for line in path.read_text().splitlines()]
        assert kinds == ["probe_start", "probe_stop"], path.name
    assert len(list(Path(capture).glob(f"*.{host}-2-4242.*.arrows"))) == 1
