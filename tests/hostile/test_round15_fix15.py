"""Round 15's fixes (fix15) of what round 14's attackers left open, in triage, the importers
and the presenting layer: the claims T76a-T76f of docs/threat-model.md."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from forensics.records import Record
from forensics.store.writer import write_capture

CHANGED = "changed while the triage ran"


# ------------------------- T76a: a segment rewritten in place, same size and modification time


def _rewrite_in_place(segment: Path, old: bytes, new: bytes) -> None:
    """Write ``new`` over the one ``old`` in ``segment``, in place (same inode, same size), and
    put its access and modification times back: all a stat of size and mtime can see is the
    same."""
    before = os.stat(segment)
    data = segment.read_bytes()
    assert data.count(old) == 1 and len(old) == len(new)
    with open(segment, "r+b") as f:
        f.seek(data.index(old))
        f.write(new)
    os.utime(segment, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(segment)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino, before.st_size, before.st_mtime_ns)


def _engine(root: Path, diverging: bool) -> list[Path]:
    """The two captures of one two-rank engine under ``root`` (rank 1 diverging at step 6
    when asked; otherwise alike)."""
    from forensics.fleet.generate import Fleet, _engine

    fleet = Fleet(root)
    root.mkdir(parents=True)
    _engine(fleet, "engine-x", 12, 4, 3, diverging)
    return sorted(Path(p) for p in fleet.kinds)


def test_a_segment_rewritten_in_place_before_the_stitch_is_its_error_row(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 1's embedding segment rewritten in place after its task, to the bytes of a rank
    diverging at step 6, its size and modification time put back: the stitch took it for the
    file its row's replay read (device, inode, size, mtime alike) and both rows said "rank
    divergence", though rank 1's replay read the ranks agreeing. Its change time moved: it is
    its error row, one line, and rank 0 is compared with nothing."""
    from forensics.fleet import runners
    from forensics.fleet.triage import triage

    rank0, rank1 = _engine(tmp_path / "fleet", diverging=False)
    _, diverging1 = _engine(tmp_path / "other", diverging=True)
    name = "embedding.r1.w0.0000.arrows"
    old, new = (rank1 / name).read_bytes(), (diverging1 / name).read_bytes()
    assert len(old) == len(new) and old != new
    real = runners.run_local

    def run_local(*args: Any, **kwargs: Any) -> list[bytes]:
        results = real(*args, **kwargs)
        _rewrite_in_place(rank1 / name, old, new)
        return results

    monkeypatch.setattr(runners, "run_local", run_local)
    rows = {r["name"]: r for r in triage([rank0, rank1], workers=1).rows}
    assert rows[rank0.name]["divergence"] is None and rows[rank0.name]["conclusion"] == "clean"
    error = rows[rank1.name]["error"]
    assert CHANGED in error and rank1.name in error and "\n" not in error, rows
    assert "not those it held when its replay read it" in error
    assert rows[rank1.name]["conclusion"] == "unreadable"


def test_a_segment_rewritten_in_place_while_the_stitch_reads_it_is_its_error_row(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rewrite lands while the stitch compares (after it opened and checked each capture):
    the stitch reads the segments through their maps, so it compared the new bytes. Each
    capture is checked again once compared: rank 1 is its error row."""
    from forensics.fleet import stitch
    from forensics.fleet.triage import triage

    rank0, rank1 = _engine(tmp_path / "fleet", diverging=False)
    _, diverging1 = _engine(tmp_path / "other", diverging=True)
    name = "embedding.r1.w0.0000.arrows"
    old, new = (rank1 / name).read_bytes(), (diverging1 / name).read_bytes()
    real, done = stitch._first_in, []

    def first_in(*args: Any) -> Any:
        if not done:
            done.append(_rewrite_in_place(rank1 / name, old, new))
        return real(*args)

    monkeypatch.setattr(stitch, "_first_in", first_in)
    rows = {r["name"]: r for r in triage([rank0, rank1], workers=1).rows}
    assert done and rows[rank0.name]["divergence"] is None, rows
    error = rows[rank1.name]["error"]
    assert CHANGED in error and f"'{name}' was written to" in error and "\n" not in error


MARK, FORGED = np.int64(777_777).tobytes(), np.int64(1 << 40).tobytes()


def _long(path: Path) -> Path:
    """A capture of 1,200 steps of one embedding record each, an id ``777777`` at step 900 (in
    range: no finding)."""
    return write_capture(path, [
        Record("embedding", step, 0, {
            "input_ids": np.array([step % 500, 777_777 if step == 900 else 3], dtype=np.int64),
            "num_embeddings": 1 << 20}) for step in range(1200)])


def test_a_segment_rewritten_in_place_between_two_pieces_is_its_error_row(
        tmp_path: Path) -> None:
    """A capture cut into two step ranges, its segment rewritten in place between them (an id
    of step 900 made 2**40, out of range), size and modification time put back: each piece
    checked only the records and steps planned, and the stitch of the pieces compared device,
    inode, size and mtime, all alike; the row said one finding of a capture that held none
    when it was planned and when its first range was read. It is its error row."""
    from forensics.fleet.piece import replay_piece
    from forensics.fleet.tasks import plan
    from forensics.fleet.triage import finish

    capture = _long(tmp_path / "x.capture")
    tasks = plan([capture], 1_000)
    assert len(tasks) == 2
    first = replay_piece(tasks[0].path, tasks[0].start, tasks[0].stop, tasks[0].window,
                         planned=tasks[0].planned)
    _rewrite_in_place(capture / "embedding.r0.w0.0000.arrows", MARK, FORGED)
    second = replay_piece(tasks[1].path, tasks[1].start, tasks[1].stop, tasks[1].window,
                          planned=tasks[1].planned)
    rows = finish(tasks, [first, second])
    error = rows[0]["error"]
    assert CHANGED in error and "\n" not in error, rows
    assert "not those it held when its step ranges were cut" in error
    assert "records and steps are" in error


def test_a_segment_rewritten_in_place_while_its_piece_reads_it_is_its_error_row(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The segment rewritten in place while the piece replays it (after it was opened): what
    the piece read is of two files, and its row named the files as opened. The piece checks
    each segment again once replayed: its row is the error naming the segment."""
    from forensics.fleet import piece
    from forensics.fleet.tasks import Task
    from forensics.fleet.triage import finish

    capture = _long(tmp_path / "x.capture")
    real = piece.replayed_range

    def replayed_range(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        _rewrite_in_place(capture / "embedding.r0.w0.0000.arrows", MARK, FORGED)
        return out

    monkeypatch.setattr(piece, "replayed_range", replayed_range)
    task = Task(str(capture))
    rows = finish([task], [piece.replay_piece(task.path)])
    error = rows[0]["error"]
    assert CHANGED in error and "'embedding.r0.w0.0000.arrows' was written to" in error, rows
    assert "\n" not in error


def test_a_capture_left_alone_is_triaged_whole_and_split_alike(tmp_path: Path) -> None:
    """The check is the changed capture's only: one left alone, cut or not, is no error row,
    and its pieces name the same files."""
    from forensics.fleet.runners import run_local
    from forensics.fleet.tasks import plan
    from forensics.fleet.triage import finish

    capture = _long(tmp_path / "x.capture")
    for split in (1_000, 5_000):
        tasks = plan([capture], split)
        rows = finish(tasks, run_local(tasks, workers=1))
        assert not rows[0]["error"] and rows[0]["records"] == 1200, rows
    copy = Path(shutil.copytree(capture, tmp_path / "y.capture"))
    assert not finish(plan([copy]), run_local(plan([copy]), workers=1))[0]["error"]


# ------------------------- T76b: a Ray worker imports nothing from the folder a triage ran in

PLANTED = """import pathlib
(pathlib.Path(__file__).parent / "ran-{name}").write_text("ran")
raise SystemExit(9)
"""


@pytest.mark.timeout(300)
def test_a_ray_worker_runs_no_module_planted_where_the_triage_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``triage --ray`` run in a folder others write (a folder of captures): Ray put the
    driver's working directory first on each worker's path, so a planted ``forensics``
    package ran in every worker (its task retried, then lost). The workers run in an empty
    folder of their own, importing the ``forensics`` this process imported; the capture,
    named relative to the folder, is replayed as here."""
    pytest.importorskip("ray", reason="the fleet extra: pip install 'vllm-forensics[fleet]'")
    from forensics.fleet.piece import from_ipc
    from forensics.fleet.runners import run_ray
    from forensics.fleet.tasks import plan

    shared = tmp_path / "shared"
    (shared / "forensics").mkdir(parents=True)
    for name in ("forensics/__init__.py", "pyarrow.py", "numpy.py", "argparse.py"):
        (shared / name).write_text(PLANTED.format(name=name.replace("/", "-")))
    _long(shared / "x.capture")
    monkeypatch.chdir(shared)
    tasks = plan([Path("x.capture")])
    rows = [from_ipc(out).to_pylist()[0] for out in run_ray(tasks)]
    assert [p.name for p in shared.rglob("ran-*")] == []
    assert len(rows) == 1 and not rows[0]["error"] and rows[0]["records"] == 1200, rows


# ------------------------- T76d: a traceback line cut at the line bound is said cut

def _cut_chain(where: str) -> str:
    """A crash chain one of whose lines (``where``: its frame, or its exception line) is past
    the log's line bound, the words naming the CUDA error past the cut."""
    from forensics.importers.logs import MAX_LINE

    pad = "x" * (MAX_LINE + 100)
    frame = f'  File "/x/vllm/v1/worker/gpu_model_runner.py", line 10, in execute_model{pad}'
    error = f"RuntimeError: {pad} CUDA error: an illegal memory access was encountered"
    return ("ERROR 12-06 10:00:00 [core.py:1] EngineCore encountered a fatal error.\n"
            "Traceback (most recent call last):\n"
            + (frame if where == "frame" else '  File "/x/a.py", line 1, in f') + "\n"
            "    step()\n"
            + (error if where == "exception" else "RuntimeError: boom") + "\n")


@pytest.mark.parametrize("where", ["frame", "exception"])
def test_a_traceback_line_past_the_line_bound_is_said_cut(tmp_path: Path, where: str) -> None:
    """A traceback line longer than 64 KiB was cut there (what named the CUDA error past it
    unread) and its crash event read as whole: the chain took no ``cut``. The event says
    which line was cut, in its message too, and the import's note names it."""
    from forensics.importers import logs

    log = tmp_path / "engine.log"
    log.write_text(_cut_chain(where))
    (event,) = [e for e in logs.read(log).events if e.get("links")]
    line = 3 if where == "frame" else 5
    assert event["cut"] == (f"its line {line} was longer than {logs.MAX_LINE} bytes; only its "
                            f"first {logs.MAX_LINE} were read"), event
    assert event["cut"] in event["message"] and "\n" not in event["message"]
    assert logs.cut_note([event]) is not None


def test_a_traceback_within_the_line_bound_is_not_said_cut(tmp_path: Path) -> None:
    """The flag is the cut line's chain's only: a chain of short lines says nothing of it."""
    from forensics.importers import logs

    log = tmp_path / "engine.log"
    log.write_text(_cut_chain("none"))
    (event,) = [e for e in logs.read(log).events if e.get("links")]
    assert "cut" not in event and "longer than" not in event["message"]
