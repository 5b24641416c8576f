"""Round 19, fix 19c: triage's rank window of a site taken from each rank's steps of every
site (T113a); a capture naming no vLLM version replayed by the installed one said (T113b); the
probe's SIGTERM handler waiting for another thread's close (T113c)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

import forensics
from forensics.records import Record
from forensics.store.writer import write_capture

PROBE_TESTS = Path(__file__).parents[1] / "probe"

# ------------------------------ T113a: a rank's site held only outside the others' steps


def _moved(root: Path, step: int) -> None:
    """Two rank captures of one engine (``clean`` scenario, 12 steps) whose rank 1 holds its
    embedding records at ``step`` only (one record), its other sites at steps 1-12."""
    from typing import cast

    from forensics.fleet.generate import _manifest, _scenario, without_positions
    from forensics.simulator.runs import simulate

    sc = _scenario("clean", 12, 4, ranks=2)
    records: list[Record] = []
    for record in without_positions(cast(list[Record], simulate(sc, seed=3))):
        if record.site == "embedding" and record.rank == 1:
            if record.step != 1:
                continue
            record = Record(record.site, step, record.rank, record.fields)
        records.append(record)
    root.mkdir()
    for rank in range(2):
        entries = {**_manifest(1, "engine-x", sc, 2, "node-x", rank, "engine-x"),
                   "created": "2026-12-07T05:00:00Z"}
        write_capture(root / f"engine-x-rank{rank}.capture",
                      [r for r in records if r.rank == rank], entries, validated=True)


def test_a_rank_holding_a_site_only_outside_the_others_steps_is_not_compared(
        tmp_path: Path) -> None:
    """Rank 1's embedding record is at step 100 only, rank 0's at steps 1-12, rank 1's other
    sites at steps 1-12: the window of the embedding was taken from its own rows (rank 0's
    steps 1-12 and rank 1's 100: none), so rank 0's ids there were compared with nothing and
    every row read `clean`. The window is now each rank's steps of every site: step 1 is not
    compared, rank 1 holding 0 there."""
    from forensics.fleet.output import render
    from forensics.fleet.triage import triage

    _moved(tmp_path / "fleet", 100)
    result = triage([tmp_path / "fleet"], workers=1)
    assert [r["conclusion"] for r in result.rows] == ["divergence not judged"] * 2, \
        [(r["name"], r["conclusion"]) for r in result.rows]
    out = render(result, "text")
    assert "rank divergence not judged at step 1: embedding input_ids not compared: rank 0 " \
        "(engine-x-rank0.capture) holds 1 record of it, rank 1 (engine-x-rank1.capture) " \
        "holds 0" in out, out
    assert "clean" not in out, out


def make_work(case: str, size: int, scratch: Path) -> Callable[[], object]:
    """The work of ``case`` over an input of ``size`` (run by :mod:`tests.instructions`):
    ``window``, a site's ``size`` rows, one per rank, its window taken from ``size`` ranks'
    steps of every site (the spans :func:`~forensics.fleet.stitch._rank_steps` gives, which
    ``_spans`` requires)."""
    import numpy as np

    from forensics.fleet.stitch import _spans

    steps, ranks = np.zeros(size, np.int64), np.arange(size, dtype=np.int64)
    captures = ["c.capture"] * size
    spans = {rank: (0, size, "c.capture") for rank in range(size)}
    return lambda: _spans(steps, ranks, captures, spans)


def test_the_window_of_every_site_is_found_in_linear_time(tmp_path: Path) -> None:
    """4x the ranks of a site cost under 6x the instructions: its window is one pass over
    its ranks' steps of every site, never a pass over the rows per rank."""
    from tests.instructions import assert_scales_linearly

    assert_scales_linearly(__file__, "window", 5000, tmp_path)


# ------------------------------ T113b: a capture naming no vLLM replayed by the installed one


def _unversioned(tmp_path: Path) -> Path:
    """A copy of ``v2-negative-draft`` whose manifest names no vLLM version."""
    import json
    import shutil

    copy = tmp_path / "unversioned.capture"
    shutil.copytree(Path(__file__).parents[2] / "data" / "v2-negative-draft.capture", copy)
    manifest = copy / "manifest.json"
    entries = json.loads(manifest.read_text())
    del entries["versions"]["vllm"]
    manifest.write_text(json.dumps(entries))
    return copy


def test_a_capture_naming_no_vllm_says_the_vllm_variant_runs_the_installed_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A capture whose manifest names no vLLM version, replayed with ``--variant vllm`` alone:
    replay, summary (markdown and text) and the report's header said nothing of which vLLM
    ran (the models' sentence said the version unknown, and no model replayed). Each now says
    the capture's version is unknown and the variant ran the installed vLLM, naming it."""
    from test_round2 import run_cli

    import forensics
    from forensics.present import capture_facts
    from forensics.present.conclusion import conclude
    from forensics.present.report import header_data
    from forensics.versions import module_version

    installed = module_version("vllm")
    if installed is None:  # nothing installed: the vllm variant cannot run
        assert capture_facts.version_sentence({}, ["vllm"]) == ""
        return
    said = (f"The vLLM version of the capture is unknown (its manifest's versions.vllm), while "
            f"vllm replays the code of the installed vLLM {installed}: a finding or verdict of "
            f"it may not be what the engine's version did")
    copy = _unversioned(tmp_path)
    outs = {}
    for name, argv in {"replay": ["replay", copy, "--variant", "vllm"],
                       "markdown": ["summary", copy, "--variant", "vllm"],
                       "text": ["summary", copy, "--variant", "vllm", "--format", "text"]
                       }.items():
        code, out, err = run_cli(capsys, *argv)
        assert code in (0, 1), (name, code, err)
        outs[name] = " ".join(out.replace("> ", " ").split())
    result = forensics.replay(copy, ["vllm"])
    outs["report"] = " ".join(" ".join(header_data(result, conclude(result))["lines"]).split())
    for name, out in outs.items():
        assert said in out, (name, out)
    both = capture_facts.version_sentence({}, ["upstream", "vllm", "vllm+fix.diff"])
    assert "while upstream replays the code of vLLM 0.33.0" in both
    assert f"while vllm, vllm+fix.diff replay the code of the installed vLLM {installed}: " \
        "a finding or verdict of them" in both


# ------------------------------ T113c: a SIGTERM while another thread closes the session

CLOSING_CHILD = textwrap.dedent("""
    import sys
    import threading
    import time
    from pathlib import Path
    from forensics.probe import plugin
    from forensics.probe.session import ProbeSession
    from forensics.probe.settings import Settings

    sys.path.insert(0, sys.argv[3])
    from probe_fakes import record_batch_changes

    capture = Path(sys.argv[1])
    session = plugin.start(Settings(directory=capture.parent, capture=capture, ring=64,
                                    flush_every=1000, handoff="batch", writer=sys.argv[2]))
    backend = type(session.backend)
    real_stop, real_close = backend.stop, ProbeSession.close
    handler_in = threading.Event()

    def stop(self):  # in the close, after its final flush, before probe_stop; no lock held
        print("closing", flush=True)
        handler_in.wait()  # goes on once the SIGTERM's handler is in close()
        return real_stop(self)

    def close(self):
        if threading.current_thread() is threading.main_thread():
            handler_in.set()  # the SIGTERM handler, in the main thread
        real_close(self)

    record_batch_changes(session, [[0, 1], [1, 0], [0, 0]])
    backend.stop, ProbeSession.close = stop, close
    threading.Thread(target=session.close).start()  # another thread closes the session
    while True:
        time.sleep(0.05)  # the main thread, where the SIGTERM's handler runs
""")


@pytest.mark.parametrize("writer", ["thread", "process"])
def test_a_sigterm_while_another_thread_closes_waits_for_that_close(
        tmp_path: Path, writer: str) -> None:
    """An engine process (SIGTERM at its default action) one thread of which other than the
    main one is inside the probe's close when SIGTERM comes: the handler (in the main thread)
    found the session stopping and returned at once, re-raising SIGTERM, and the process died
    before that close wrote ``probe_stop`` (the capture read as "died"). The handler now waits
    for the other thread's close, then the process dies of SIGTERM, the capture whole."""
    capture = tmp_path / "child.capture"
    child = subprocess.Popen([sys.executable, "-c", CLOSING_CHILD, str(capture), writer,
                              str(PROBE_TESTS)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    try:
        assert child.stdout.readline().strip() == "closing"
        child.send_signal(signal.SIGTERM)  # a real signal, from another process
        code = child.wait(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert code == -signal.SIGTERM
    loaded = forensics.load(capture)
    assert [e["kind"] for e in loaded.events].count("probe_stop") == 1, loaded.events
    assert [r.step for r in loaded] == [0, 1, 2]


def test_a_close_waiting_for_another_threads_close_lets_go_of_the_lock_it_holds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SIGTERM may interrupt the main thread inside one of the session's critical
    sections, its lock held: the close it calls while another thread closes waits on the
    session's condition, which lets go of the lock (every level of the RLock) meanwhile, so
    that close ends (``probe_stop``) and the waiting one returns, the lock held again. On the
    code before, it returned at once, ``probe_stop`` not yet written."""
    import threading

    from forensics.probe.session import ProbeSession
    from forensics.probe.settings import Settings

    sys.path.insert(0, str(PROBE_TESTS))
    from probe_fakes import record_batch_changes

    capture = tmp_path / "t.capture"
    session = ProbeSession(Settings(directory=tmp_path, capture=capture, ring=64,
                                    flush_every=1000, handoff="batch", writer="thread"))
    record_batch_changes(session, [[0, 1], [1, 0]])
    real_flush, go = ProbeSession.flush, threading.Event()

    def flush(self: ProbeSession, *, wait: bool = False) -> int:
        go.wait()  # the other thread's close, stopping already, needing the lock next
        return real_flush(self, wait=wait)

    monkeypatch.setattr(ProbeSession, "flush", flush)
    other = threading.Thread(target=session.close)
    other.start()
    while not session._stopping:
        threading.Event().wait(0.01)  # not a timing assertion: until the other has begun
    with session._lock, session._lock:  # the interrupted thread's critical section, nested
        go.set()
        session.close()
        assert session._lock._is_owned()  # type: ignore[attr-defined]
        events = [e["kind"] for e in forensics.load(capture).events]
    other.join()
    assert events.count("probe_stop") == 1, events
    assert [r.step for r in forensics.load(capture)] == [0, 1]
