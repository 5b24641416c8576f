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

