"""Hostile input, round 3 (issue 38), round 16: what last round's attackers found and left.

T83a: ``replay --variant vllm`` had no overall deadline: each record of a Model Runner V2 site
waited up to ``FORENSICS_CHILD_TIMEOUT`` for the kernel worker, so N records whose kernel
loops (a ``post_update`` with ``num_sampled`` 2**31 - 1) took N times it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import psutil
import pytest
from test_round3_caps import STUCK_WORKER, i32, post

from forensics.records import Record
from forensics.store.writer import write_capture

#: a ``post_update`` whose first row claims 2**31 - 1 sampled ids: vLLM's kernel loops on it
LOOPS = {"num_sampled": i32(2**31 - 1, 1)}


def _workers(before: frozenset[int] = frozenset()) -> list[psutil.Process]:
    """The kernel worker processes this test process started and that still run, but those
    running ``before`` the test (another test's shared worker of a diff, left warm)."""
    return [p for p in psutil.Process().children(recursive=True)
            if ("forensics.variants.triton_worker" in " ".join(p.cmdline())
                or "stuck_worker" in " ".join(p.cmdline())) and p.pid not in before]


def _hostile(path: Path) -> Path:
    """Two ordinary ``post_update`` records (steps 0, 1), then three that loop (steps 2-4)."""
    records: list[Record] = [post(0), post(1)] + [post(s, **LOOPS) for s in (2, 3, 4)]
    return write_capture(path, records)


def test_looping_v2_records_stop_at_the_replays_overall_deadline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three looping records once took three child timeouts (68 s at 20 s each); now the
    replay's overall deadline of 15 s ends them: step 2 times out after its child deadline of
    10 s, the deadline passes while step 3 runs, so steps 3 and 4 are errors ``not judged:
    the overall deadline of 15 s passed`` (never ok), the conclusion says so, the steps before
    stand, and no worker is left running."""
    from forensics.present.conclusion import conclude
    from forensics.replaying import replay
    from forensics.variants import triton_kernels

    capture = _hostile(tmp_path / "loops.capture")
    monkeypatch.setenv("FORENSICS_CHILD_TIMEOUT", "10")
    triton_kernels.close_worker()
    before = frozenset(p.pid for p in _workers())
    try:  # the worker starts (imports vLLM) before the clock runs
        replay(write_capture(tmp_path / "warm.capture", [post(0)]), variants=["vllm"])
        result = replay(capture, variants=["vllm"], deadline=15)
        left = _workers(before)
    finally:
        triton_kernels.close_worker()
    rows = result.outcomes.sort_values("step")
    cut = "not judged: the overall deadline of 15 s passed"
    assert rows["status"].tolist() == ["ok", "ok", "error", "error", "error"], rows
    assert rows["message"].tolist() == ["", "", "timed out after 10 s", cut, cut], rows
    assert result.verdicts["vllm"]["post_update"] == "error"
    assert result.cut == "the overall deadline of 15 s passed"
    sentence = conclude(result).cut
    assert "2 post_update record(s) of vllm (steps 3 and 4)" in sentence, sentence
    assert "not as clean" in sentence, sentence
    assert left == [], left


def test_replay_takes_a_deadline_and_ends_the_worker_it_cuts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
        ) -> None:
    """``forensics replay --deadline 5``: a worker that never answers step 1 (with a child
    deadline of 600 s) is ended when the 5 s pass; steps 1 and 2 are not judged, step 0
    stands, the command exits 0 with the conclusion saying so; a deadline of 0 is one line,
    exit 2."""
    from forensics.cli import main
    from forensics.replaying import replay
    from forensics.variants import triton_kernels

    capture = write_capture(tmp_path / "stuck.capture", [post(0), post(1), post(2)])
    monkeypatch.setenv("FORENSICS_CHILD_TIMEOUT", "600")
    monkeypatch.setattr(triton_kernels.KernelWorker, "_command",
                        lambda self: [sys.executable, str(STUCK_WORKER)])
    triton_kernels.close_worker()
    before = frozenset(p.pid for p in _workers())
    try:
        replay(write_capture(tmp_path / "warm.capture", [post(0)]), variants=["vllm"])
        code = main(["replay", str(capture), "--variant", "vllm", "--deadline", "5", "--json"])
        left = _workers(before)
    finally:
        triton_kernels.close_worker()
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    assert out["outcomes"]["vllm"] == {"ok": 1, "index_error": 0, "error": 2}, out
    assert "2 post_update record(s) of vllm (steps 1 and 2): the overall deadline of 5 s passed" \
        in out["conclusion"]["cut"], out["conclusion"]
    assert left == [], left
    assert main(["replay", str(capture), "--deadline", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--deadline '0' is not a number of seconds" in err, err


# T83b: ``inspect`` stated the steps and counts of the ``.idx`` files without checking them


def _indexed(tmp_path: Path) -> tuple[Path, Path]:
    """A capture of ``post_update`` records at steps 0-14 (one batch), and its segment's index."""
    from forensics.store.writer import write_capture

    capture = write_capture(tmp_path / "idx.capture", [post(s) for s in range(15)])
    segment = next(capture.glob("*.arrows"))
    return capture, segment.with_name(segment.name + ".idx")


@pytest.mark.parametrize(("field", "change", "claims", "held"), [
    ("step_min", 1000, "15 record(s) of steps 1000..1014", "15 record(s) of steps 0..14"),
    ("rows", -5, "10 record(s) of steps 0..14", "a batch of 15 record(s)")])
def test_inspect_refuses_an_index_whose_claims_its_batch_does_not_hold(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, change: int,
        claims: str, held: str) -> None:
    """1000 added to an index entry's steps once made ``inspect`` print ``steps 1000..1014``
    (or a count cut by 5, ``10 records``: the batch holds 15) while ``replay`` refused the
    batch; the entry is now checked against its batch's header and step column before
    ``inspect`` states it: one line names the segment, the entry, what it claims, what the
    segment holds, and the fix."""
    import numpy as np

    from forensics.cli import main
    from forensics.store.index import ENTRY, MAGIC

    capture, index = _indexed(tmp_path)
    entries = np.fromfile(index, dtype=ENTRY, offset=len(MAGIC))
    entries[0][field] += change
    if field == "step_min":
        entries[0]["step_max"] += change
    index.write_bytes(MAGIC + entries.tobytes())
    assert main(["inspect", str(capture)]) == 2
    out, err = capsys.readouterr()
    line = err.strip()
    assert "\n" not in line and "1000..1014" not in out and "10 records" not in out, out
    assert f"index entry 0 claims {claims}, but the segment holds {held} there; delete " \
           f"'{index.name}' to rescan" in line, line
    assert f"segment '{index.name.removesuffix('.idx')}'" in line, line
    assert main(["replay", str(capture)]) == 2  # as it did: the batch against its entry
    assert "batch 0 does not match its index entry" in capsys.readouterr().err


# T83c: ``triage`` from a working directory past PATH_MAX blamed its processes' deaths

DEEP_TRIAGE = """
import os, sys
from forensics.cli import main
for _ in range(18):  # 18 folders of 250 characters: a path of 4,500 bytes and more
    os.mkdir("d" * 250)
    os.chdir("d" * 250)
sys.exit(main(["triage", *sys.argv[1:]]))
"""


def test_triage_from_a_working_directory_past_path_max_says_why_it_cannot_start(
        tmp_path: Path) -> None:
    """Run from a folder whose path passes PATH_MAX (4096 bytes), every process of the
    triage's pool failed to change into it and each row said ``its process died (a signal, or
    the system ended it)``; now the triage refuses before it starts any, in one line naming
    the working directory's length, PATH_MAX and the fix (exit 2)."""
    import os
    import subprocess

    capture = write_capture(tmp_path / "a.capture", [post(0)])
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", DEEP_TRIAGE, str(capture)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(root)})
    line = done.stderr.strip()
    assert done.returncode == 2, (done.stdout, line[-2000:])
    assert "\n" not in line and "died" not in done.stdout + line, (done.stdout, line[-2000:])
    assert "the working directory's path takes " in line, line
    assert "bytes, past PATH_MAX (4096)" in line and "from a folder whose path is shorter" \
        in line, line
