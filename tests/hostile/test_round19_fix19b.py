"""Round 19, fix 19b: a SIGTERM inside the probe's flush; a diff's copy of vLLM's op
registrations (the other CustomOp, new names); a segment renamed to another process."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import forensics

PROBE_TESTS = Path(__file__).parents[1] / "probe"

# ------------------------------------- 1. a SIGTERM while the engine's thread is in a flush

FLUSHING_CHILD = textwrap.dedent("""
    import sys
    from pathlib import Path
    from forensics.probe import plugin
    from forensics.probe.session import ProbeSession
    from forensics.probe.settings import Settings

    sys.path.insert(0, sys.argv[3])
    from probe_fakes import record_batch_changes

    capture = Path(sys.argv[1])
    session = plugin.start(Settings(directory=capture.parent, capture=capture, ring=64,
                                    flush_every=1000, handoff="batch", writer=sys.argv[2]))
    real = ProbeSession.take_ready

    def take_ready(self, wait, upto=None):
        ProbeSession.take_ready = real  # this flush only
        print("flushing", flush=True)
        sys.stdin.readline()  # the parent's SIGTERM arrives here, inside the flush
        return real(self, wait, upto)

    record_batch_changes(session, [[0, 1], [1, 0], [0, 0]])
    ProbeSession.take_ready = take_ready
    session.flush(wait=True)
    print("went on", flush=True)  # the process must have died of SIGTERM before this
""")


@pytest.mark.parametrize("writer", ["thread", "process"])
def test_a_sigterm_inside_a_flush_closes_the_session_once_the_flush_ends(
        tmp_path: Path, writer: str) -> None:
    """An engine process (SIGTERM at its default action) whose main thread is inside one of
    the probe's flushes when SIGTERM comes: the handler must not re-enter the flush, and it
    returned early, re-raising SIGTERM: the process died in the flush, its records unwritten
    and no ``probe_stop`` (the capture reads as "died"). The close now waits for the flush to
    end, then closes (every record, ``probe_stop``) and the process dies of SIGTERM."""
    capture = tmp_path / "child.capture"
    child = subprocess.Popen([sys.executable, "-c", FLUSHING_CHILD, str(capture), writer,
                              str(PROBE_TESTS)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdin is not None and child.stdout is not None
    try:
        assert child.stdout.readline().strip() == "flushing"
        child.send_signal(signal.SIGTERM)  # a real signal, from another process
        child.stdin.write("go\n")
        child.stdin.flush()
        rest = child.stdout.read()
        code = child.wait(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert code == -signal.SIGTERM and "went on" not in rest
    loaded = forensics.load(capture)
    assert [r.step for r in loaded] == [0, 1, 2]
    assert [e["kind"] for e in loaded.events].count("probe_stop") == 1


def test_a_sigterm_inside_a_flush_calls_the_engine_handler_after_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's own SIGTERM handler (a graceful shutdown) is called once the flush it came
    in ends, not inside it (where a handler that raises would leave the flush half done), and
    once; the records are all written and the probe goes on recording."""
    import os

    from forensics.probe import plugin
    from forensics.probe.session import ProbeSession
    from forensics.probe.settings import Settings

    monkeypatch.syspath_prepend(str(PROBE_TESTS))
    from probe_fakes import record_batch_changes

    seen: list[bool] = []
    original = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(
        plugin.session() is not None and plugin.session().busy))
    capture = tmp_path / "in.capture"
    try:
        session = plugin.start(Settings(directory=tmp_path, capture=capture, ring=64,
                                        flush_every=1000, handoff="batch", writer="thread"))
        real = ProbeSession.take_ready
        sent: list[int] = []

        def take_ready(self: ProbeSession, wait: bool, upto: int | None = None) -> list:
            if not sent:  # handled in this thread, inside the flush
                sent.append(signal.SIGTERM)
                os.kill(os.getpid(), signal.SIGTERM)
            return real(self, wait, upto)

        record_batch_changes(session, [[0, 1], [1, 0]])
        monkeypatch.setattr(ProbeSession, "take_ready", take_ready)
        session.flush(wait=True)
        assert seen == [False]
        record_batch_changes(session, [[0, 0]])
    finally:
        plugin.stop()
        signal.signal(signal.SIGTERM, original)
    assert [r.step for r in forensics.load(capture)] == [0, 1, 2]
