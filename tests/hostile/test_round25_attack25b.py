"""Round 25, attack 25b: the probe's records that a signal cuts short between their outputs and
their place in the ring."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.hostile.test_round23_attack23b import PROBE_TESTS, _child, _stops

pytest_plugins = ["pytester"]

# ------------------------------- T159a: a signal as a record waits for the session's lock
#: the writer (argv[3]); 2 records; as the third call's record waits for the session's lock
#: (another thread's hand-off or flush holds it), a SIGINT comes
LOCK_WAIT = textwrap.dedent("""
    from forensics.probe import plugin

    class Interrupting:  # the session's lock; the first wait for it is cut by a SIGINT
        def __init__(self, real):
            self.real, self.armed = real, [1]

        def acquire(self, *args):
            if self.armed:
                self.armed.clear()
                os.kill(os.getpid(), signal.SIGINT)  # handled as the wait begins
            return self.real.acquire(*args)

        def release(self):
            self.real.release()

        def __enter__(self):
            return self.acquire()

        def __exit__(self, *exc):
            self.release()

    session = started()
    record_batch_changes(session, [[0, 1]] * 2)
    real = session._lock
    session._lock = Interrupting(real)
    try:
        record_batch_changes(session, [[0, 1]])
    except KeyboardInterrupt:
        print("interrupted")
    session._lock = real
    plugin.stop()
""")

#: the writer (argv[3]); device copies (stand-ins whose events are done); 2 records; a SIGINT
#: comes as the third call's record is sealed (the event marking its outputs' copies made)
SEAL_CUT = textwrap.dedent("""
    import torch
    from forensics.probe import plugin
    from forensics.probe.copy import Copier

    class Done:  # a device event, complete at once
        def record(self, stream=None):
            pass

        def query(self):
            return True

        def synchronize(self):
            pass

    seals = [0]

    class Interrupted(Copier):
        def seal(self):
            seals[0] += 1
            if seals[0] == 3:  # the third call's record
                os.kill(os.getpid(), signal.SIGINT)  # handled as this call returns
            return super().seal()

    session = started()
    session.copier = Interrupted(is_device=lambda t: True, new_event=Done,
                                 empty_pinned=lambda t: torch.empty(tuple(t.shape), dtype=t.dtype))
    try:
        record_batch_changes(session, [[0, 1]] * 3)
    except KeyboardInterrupt:
        print("interrupted")
    plugin.stop()
""")


@pytest.mark.parametrize("script", [LOCK_WAIT, SEAL_CUT], ids=["lock", "seal"])
@pytest.mark.parametrize("writer", ["thread", "process"])
def test_a_record_a_signal_cuts_before_it_is_queued_is_counted(
        tmp_path: Path, writer: str, script: str) -> None:
    """T159a: a record whose wait for the session's lock (held by another thread's hand-off),
    or whose seal (the event that marks its outputs' device copies made), a signal's handler
    cuts short is counted lost to a signal (``records`` 3, 2 written, ``lost_to_signal`` 1, the
    log line); it was counted nowhere: ``probe_stop`` said 2 records of an engine that made 3."""
    capture = tmp_path / "x.capture"
    child = _child(script, str(capture), str(PROBE_TESTS), writer)
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.split() == ["interrupted"], child.stdout
    (stop,) = _stops(capture)
    assert (stop["records"], stop["written"], stop["dropped"], stop.get("lost_to_signal")) \
        == (3, 2, 0, 1), stop
    assert "1 record(s) lost to a signal" in child.stderr, child.stderr[-3000:]
    assert "or waited for room in its ring or for its lock" in child.stderr


# ------------------------------- T159b: the pytest plugin's capture swapped for a link mid-replay
@pytest.mark.parametrize("regen", [False, True])
def test_a_capture_swapped_for_a_link_during_its_replay_is_not_written_through(
        tmp_path: Path, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        regen: bool) -> None:
    """T159b: a capture of the folder of captures that another user swaps for a link (to a
    capture elsewhere) while the plugin replays it, after its check for a link: its first run
    (or ``--forensics-regen``) wrote ``expected.json`` into the folder the link points to,
    and a comparison's difference ``expected.obtained.json``. Nothing is written or removed
    there; the item fails in one line saying why."""
    from cases import capture

    from forensics.share import expectations

    fleet, elsewhere = tmp_path / "fleet", tmp_path / "elsewhere"
    target = capture(elsewhere, name="real")
    (target / "expected.json").unlink()
    before = sorted(p.name for p in target.iterdir())
    swapped = capture(fleet, name="swapped")
    if regen:
        (swapped / "expected.json").unlink()  # its first run writes it
    else:  # a difference: the comparison writes expected.obtained.json
        (swapped / "expected.json").write_text(
            (swapped / "expected.json").read_text().replace('"ok"', '"index_error"'))
    real = expectations.obtain

    def obtain(path: Path, variants: object) -> object:
        got = real(path, variants)  # type: ignore[arg-type]
        swapped.rename(fleet / "moved")  # as the replay ends, another user swaps it
        swapped.symlink_to(target, target_is_directory=True)
        return got

    monkeypatch.setattr(expectations, "obtain", obtain)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rA", "-o",
                                          "forensics_captures=", "--forensics-captures",
                                          str(swapped))
    assert sorted(p.name for p in target.iterdir()) == before
    result.assert_outcomes(failed=1)
    if regen:
        assert "its folder is no longer the one checked before the replay" in "\n".join(
            result.outlines)


# ------------------------------- T159c: a launch whose wait the overall deadline cuts
@pytest.mark.parametrize("starts", [True, False], ids=["answers-late", "starts-late"])
def test_a_launch_the_overall_deadline_cuts_is_not_run_not_unreplayable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        starts: bool) -> None:
    """T159c: ``forensics kernels --deadline 1`` of launches whose replay worker answers (or
    starts) later than that, well within ``FORENSICS_CHILD_TIMEOUT``: the launch whose wait
    the overall deadline cut read ``not_replayable``, "timed out after 0.99 s" (or "the replay
    worker did not start: timed out after 0.99 s", said of every launch after it and in the
    report's note), as if the launch, or vLLM's kernels here, could not be replayed. It is
    ``not_run``, "not run: the overall deadline of 1 s passed", as the launches after it."""
    import json
    import sys

    from test_round4_kernels import KERNEL, MODULE, STAND_IN, launch
    from test_round4_kernels import write_capture as write_events

    from forensics.cli import main
    from forensics.kernels import sanitizer

    late = [sys.executable, "-P", str(STAND_IN)] if starts else \
        [sys.executable, "-c", "import time; time.sleep(120)"]  # never answers (or starts)
    capture = write_events(tmp_path / "late.capture", [launch(1) for _ in range(3)])
    monkeypatch.setenv("FORENSICS_CHILD_TIMEOUT", "120")
    monkeypatch.setattr(sanitizer.Worker, "command", lambda self: late)
    monkeypatch.setattr(sanitizer, "installed_kernels", lambda: [(MODULE, KERNEL)])
    code = main(["kernels", str(capture), "--json", "--deadline", "1"])
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert code == 2 and captured.err.count("\n") == 1, captured.err
    assert [(r["status"], r["reason"]) for r in out["launches"]] == (
        [("not_run", "not run: the overall deadline of 1 s passed")] * 3), out["launches"]
    assert "did not start" not in captured.out + captured.err
