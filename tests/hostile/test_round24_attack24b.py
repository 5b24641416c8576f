"""Round 24, attack 24b: what a forked copy of the engine's process inherits of its parent's
probe session."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.hostile.test_round23_attack23b import PROBE_TESTS, _child, _stops

# ------------------------------- T149a: a live copy held its parent's writer process's stdin
#: the first process records 3 (its writer process started), forks a copy that lives on
#: (a pool's worker) and closes; the copy ends once told to
COPY_LIVES = textwrap.dedent("""
    from forensics.probe import plugin
    from forensics.probe.settings import Settings

    capture = Path(sys.argv[1])
    session = plugin.start(Settings(directory=capture.parent, capture=capture, ring=64,
                                    flush_every=64, writer="process"))
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
