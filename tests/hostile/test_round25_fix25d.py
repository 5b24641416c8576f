"""Round 25, fix 25d: an engine's crash event as the probe's writer is stalled; a launch a
signal cuts as the kernel recorder copies its arguments."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.hostile.test_round23_attack23b import PROBE_TESTS, _child

# ------------------------------- T163a: an event as the writer thread is stalled in the disk
#: the capture argv[1]; a writer thread whose first batch blocks in the disk until released; a
#: record; an engine's thread that times out waiting for it (the stall), then an engine's
#: exception (and, with argv[4], that many guard_passed_on events past the bounded queue);
#: the disk released, the probe stopped; the writer's events printed as JSON
STALLED_THREAD = textwrap.dedent("""
    import threading
    from probe_fakes import FakeWriter
    from forensics.probe import plugin, thread_backend
    from forensics.probe.settings import Settings

    thread_backend.WRITE_WAIT_SECONDS = 0.5
    gate, blocked = threading.Event(), threading.Event()

    class Stuck(FakeWriter):  # its first batch's fsync does not return until released
        first = True

        def flush(self):
            if Stuck.first:
                Stuck.first = False
                blocked.set()
                gate.wait()
            super().flush()

    writer = Stuck()
    capture = Path(sys.argv[1])
    session = plugin.start(Settings(directory=capture.parent, capture=capture, flush_every=1,
                                    writer="thread"), writer_factory=lambda s: writer)
    record_batch_changes(session, [[0, 1]])
    assert blocked.wait(30)
    session.flush(wait=True)  # times out: the writer is stalled
    session.engine_failed(RuntimeError("CUDA error: device-side assert triggered"),
                          "execute_model")
    for number in range(int(sys.argv[4])):
        session._event("guard_passed_on", site="batch_change", row=number)
    gate.set()
    session.drain(5)
    plugin.stop()
    print(json.dumps(writer.events))
""")


def _events(script: str, capture: Path, *args: str) -> tuple[list[dict[str, object]], str]:
    """The events the child ``script`` printed, and its stderr."""
    child = _child(script, str(capture), str(PROBE_TESTS), "thread", *args)
    assert child.returncode == 0, child.stderr[-3000:]
    return json.loads(child.stdout.splitlines()[-1]), child.stderr


def test_an_engine_exception_as_the_writer_thread_is_stalled_is_kept(tmp_path: Path) -> None:
    """T163a: an ``engine_exception`` that comes while the writer thread is stalled in the disk
    (an engine's thread timed out waiting for its batch) was dropped, counted nowhere: the
    events were ``probe_start`` and ``probe_stop``. It waits its turn and is written once the
    writer answers, before ``probe_stop``, which counts nothing lost."""
    events, _ = _events(STALLED_THREAD, tmp_path / "x.capture", "0")
    assert [e["kind"] for e in events] == ["probe_start", "engine_exception", "probe_stop"]
    assert "device-side assert" in str(events[1]["error"])
    assert events[-1]["timeouts"] == 1 and "events_unwritten" not in events[-1], events[-1]


def test_the_events_past_the_bounded_wait_are_counted_apart(tmp_path: Path) -> None:
    """T163a: past :data:`~forensics.probe.owed.OWED_EVENTS` waiting events, the next are lost
    and counted in ``probe_stop``'s ``events_unwritten`` (never ``events_dropped``, said of a
    full events file), the log saying so; the engine's exception, first, is kept."""
    from forensics.probe.owed import OWED_EVENTS

    events, stderr = _events(STALLED_THREAD, tmp_path / "x.capture", str(OWED_EVENTS + 5))
    kinds = [e["kind"] for e in events]
    assert kinds[:2] == ["probe_start", "engine_exception"] and kinds[-1] == "probe_stop"
    assert kinds.count("guard_passed_on") == OWED_EVENTS - 1
    assert events[-1]["events_unwritten"] == 6 and "events_dropped" not in events[-1]
    assert "6 event(s) lost: the probe's stalled writer could not take them" in stderr


# ------------------------------- T163a: the writer process's ring with no room for the event
#: the writer process; a record; an engine's exception as its ring has no room (put_bytes
#: refuses the event frame once), then the probe stopped
RING_FULL = textwrap.dedent("""
    from forensics.probe import plugin

    session = started(flush_every=1, handoff="record")
    record_batch_changes(session, [[0, 1]])
    channel = session.backend.channel
    real, refused = channel.put_bytes, []

    def full(frame, **kw):  # the ring has no room, once
        if not refused:
            refused.append(1)
            return False
        return real(frame, **kw)

    channel.put_bytes = full
    session.engine_failed(RuntimeError("CUDA error: device-side assert triggered"),
                          "execute_model")
    assert refused
    plugin.stop()
""")


def test_an_engine_exception_the_writer_process_ring_refuses_is_kept(tmp_path: Path) -> None:
    """T163a: an ``engine_exception`` whose frame the writer process's ring has no room for
    (a writer process stalled in the disk) was dropped, counted nowhere; it waits and is
    framed at the next flush or event (``probe_stop`` at the latest)."""
    capture = tmp_path / "x.capture"
    child = _child(RING_FULL, str(capture), str(PROBE_TESTS), "process")
    assert child.returncode == 0, child.stderr[-3000:]
    kinds = [json.loads(line)["kind"] for path in sorted(capture.glob("events-*.jsonl"))
             for line in path.read_text().splitlines()]
    assert "engine_exception" in kinds and kinds[-1] == "probe_stop", kinds


@pytest.mark.parametrize("stop", [{"events_unwritten": 7}, {"events_unwritten": True}])
def test_readers_say_the_events_the_stalled_writer_could_not_take(stop: dict[str, object]) -> None:
    """T163a: the events a ``probe_stop`` counts in ``events_unwritten`` are said as lost to a
    stalled writer, never as left out of a full events file; a count that is no count, not."""
    from forensics.kernels.sanitizer import _dropped_note
    from forensics.store.unjudged import stated_counts, unjudged, unjudged_text

    text = unjudged_text(unjudged(None, None, stated_counts(
        [{"kind": "probe_stop", **stop}], {})))
    note = _dropped_note([{"kind": "probe_stop", **stop}])
    if stop["events_unwritten"] is True:
        assert text == note == ""
    else:
        assert text == "7 event(s) lost: the probe's stalled writer could not take them"
        assert note.startswith("the probe lost 7 event(s) its stalled writer could not take: "
                               "kernel launches among them were not recorded"), note
        assert "events file was full" not in note


# ------------------------------- T163b: a launch whose argument copy a signal cuts
#: the kernel tests on the path (argv[4]); a recorder keeping 2 steps (or, with argv[5] "all",
#: handing each launch off); a launch whose argument copy a SIGINT cuts (it never runs), then
#: one that runs; what ran, the summary and the launches kept printed as JSON
CUT_COPY = textwrap.dedent("""
    import torch
    sys.path.insert(0, sys.argv[4])
    from test_kernel_records import Jit, Session
    from forensics.probe import kernels as K

    keep = None if sys.argv[5] == "all" else 2
    recorder = K.FlightRecorder(("*",), keep, 64, Session())
    recorder._torch = torch
    K.RECORDER = recorder
    real_join, armed, ran = K._join, [1], []

    def join(views):  # the first launch's copy of its arguments: a Ctrl-C comes
        if armed:
            armed.clear()
            os.kill(os.getpid(), signal.SIGINT)  # handled as this call returns
        return real_join(views)

    K._join = join
    run = K.wrap_run(lambda self, *args, grid, warmup: ran.append(args[2]))
    for n in (1, 2):
        try:
            run(Jit(), torch.zeros(2, dtype=torch.int32), torch.zeros(2), n, grid=(1,),
                warmup=False)
        except KeyboardInterrupt:
            print("interrupted", n, flush=True)
    kept = [(p.step, p.ordinal, p.scalars["n"]) for p in recorder.take()]
    handed = [(f["step"], f["ordinal"], f["scalars"]["n"]) for _, f in recorder.session.events]
    print(json.dumps({"ran": ran, "seen": recorder.summary(0)["kernels_seen"],
                      "launches": kept or handed}))
""")


@pytest.mark.parametrize("keep", ["2", "all"])
def test_a_launch_a_signal_cuts_as_its_arguments_are_copied_is_not_counted(
        tmp_path: Path, keep: str) -> None:
    """T163b: a Ctrl-C as the kernel recorder copies a launch's arguments ends the call before
    the launch runs; it was counted in ``kernels_seen`` (2 of a kernel that ran once) and the
    launch that ran was numbered 1 of its step, as if one ran before it. It is counted, numbered
    and kept only once it ran: ``kernels_seen`` 1, the launch that ran numbered 0."""
    child = _child(CUT_COPY, str(tmp_path), str(PROBE_TESTS), "thread",
                   str(Path(__file__).parents[1] / "kernels"), keep)
    assert child.returncode == 0, child.stderr[-3000:]
    lines = child.stdout.splitlines()
    assert lines[0] == "interrupted 1", lines
    out = json.loads(lines[-1])
    assert out["ran"] == [2], out
    assert out["seen"] == {"vllm.v1.worker.gpu.stand_in._fn": 1}, out
    assert out["launches"] == [[0, 0, 2]], out
