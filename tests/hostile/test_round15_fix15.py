"""Round 15's fixes (fix15) of what round 14's attackers left open, in triage, the importers
and the presenting layer: the claims T76a-T76f of docs/threat-model.md."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_round14_fix14b import _engine  # two captures of one two-rank engine

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
    from forensics.fleet.triage import decoded, merged

    capture = _long(tmp_path / "x.capture")
    tasks = plan([capture], 1_000)
    assert len(tasks) == 2
    first = replay_piece(tasks[0].path, tasks[0].start, tasks[0].stop, tasks[0].window,
                         planned=tasks[0].planned)
    _rewrite_in_place(capture / "embedding.r0.w0.0000.arrows", MARK, FORGED)
    second = replay_piece(tasks[1].path, tasks[1].start, tasks[1].stop, tasks[1].window,
                          planned=tasks[1].planned)
    rows = merged(tasks, decoded(tasks, [first, second]))
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
    from forensics.fleet.triage import decoded, merged

    capture = _long(tmp_path / "x.capture")
    real = piece.replayed_range

    def replayed_range(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        _rewrite_in_place(capture / "embedding.r0.w0.0000.arrows", MARK, FORGED)
        return out

    monkeypatch.setattr(piece, "replayed_range", replayed_range)
    task = Task(str(capture))
    rows = merged([task], decoded([task], [piece.replay_piece(task.path)]))
    error = rows[0]["error"]
    assert CHANGED in error and "'embedding.r0.w0.0000.arrows' was written to" in error, rows
    assert "\n" not in error


def test_a_capture_left_alone_is_triaged_whole_and_split_alike(tmp_path: Path) -> None:
    """The check is the changed capture's only: one left alone, cut or not, is no error row,
    and its pieces name the same files."""
    from forensics.fleet.runners import run_local
    from forensics.fleet.tasks import plan
    from forensics.fleet.triage import decoded, merged

    capture = _long(tmp_path / "x.capture")
    for split in (1_000, 5_000):
        tasks = plan([capture], split)
        rows = merged(tasks, decoded(tasks, run_local(tasks, workers=1)))
        assert not rows[0]["error"] and rows[0]["records"] == 1200, rows
    copy = Path(shutil.copytree(capture, tmp_path / "y.capture"))
    again = plan([copy])
    assert not merged(again, decoded(again, run_local(again, workers=1)))[0]["error"]


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


# ------------------------- T76c: a split capture's race window, worked out on arrays

def _window_by_rows(columns: dict[str, tuple[Any, Any]], crash: set[int]) -> frozenset[Any]:
    """The window as :func:`forensics.judge.race.window_of` worked it out before: a tuple per
    record through ``_paired`` and ``_chosen`` (what the replay's race plan still does)."""
    from forensics.judge import race

    rows: list[tuple[int, str, int, int]] = []
    for site, (steps, ranks) in columns.items():
        rows += [(len(rows) + i, site, int(s), int(r))
                 for i, (s, r) in enumerate(zip(steps, ranks, strict=True))]
    _, pairs = race._paired(rows)
    return frozenset((p[0], p[1]) for p in race._chosen(pairs, crash))


def _window_by_batches(capture: Any) -> frozenset[Any]:
    """:func:`_window_by_rows` of ``capture``'s race-site batches, read as ``window_of`` read
    them before (a Python tuple a record)."""
    from forensics.judge import race

    columns = {}
    for site in (s for s in race._race_sites()[2] if s in capture.sites):
        kept = [(int(step), int(view.rank)) for view in capture.batches(site)
                for step in view.steps[~np.asarray(view.summary, dtype=bool)].tolist()]
        columns[site] = ([k[0] for k in kept], [k[1] for k in kept])
    return _window_by_rows(columns, race._crash_steps(capture))


def make_work(case: str, steps: int, scratch: Path) -> Any:
    """For :func:`tests.instructions.instructions`: the race window of the simulated capture
    of ``steps`` steps in ``scratch``, on arrays (``arrays``) or a tuple a record (``rows``)."""
    from forensics.judge import race
    from forensics.store.reader import load

    capture = load(scratch / f"race{steps}.capture")
    return (lambda: race.window_of(capture)) if case == "arrays" else \
        (lambda: _window_by_batches(capture))


def test_the_race_window_costs_a_fraction_of_a_tuple_a_record(tmp_path: Path) -> None:
    """The race window of 5,000 steps (10,000 records at the race sites) takes under a third
    of the instructions it took with a Python tuple a record (counted by callgrind,
    :mod:`tests.instructions`), and is the same window."""
    from forensics.cli import main
    from forensics.judge import race
    from forensics.store.reader import load
    from tests.instructions import instructions

    path = tmp_path / "race5000.capture"
    assert main(["simulate", "vocab-sentinel", "-o", str(path), "--steps", "5000"]) == 0
    assert race.window_of(load(path)) == _window_by_batches(load(path))
    arrays, rows = instructions(__file__, [("arrays", 5000), ("rows", 5000)], tmp_path)
    print(f"race window of 20,000 records: {arrays:,} instructions on arrays, {rows:,} by rows")
    assert 3 * arrays < rows, (arrays, rows)


def _columns(data: Any) -> tuple[dict[str, tuple[Any, Any]], set[int]]:
    """Random race-site records (steps and ranks per site, some repeated) and crash steps,
    some past int64."""
    from hypothesis import strategies as st

    from forensics.judge.race import _race_sites

    near = st.integers(-3, 40) | st.sampled_from([2**63 - 1, -(2**63), 2**62])
    columns: dict[str, tuple[Any, Any]] = {}
    for site in _race_sites()[2]:
        pairs = data.draw(st.lists(st.tuples(near, st.integers(0, 2)), max_size=60))
        columns[site] = (np.array([p[0] for p in pairs], dtype=np.int64),
                         np.array([p[1] for p in pairs], dtype=np.int64))
    crash = data.draw(st.sets(near | st.sampled_from([2**64, -(2**70)]), max_size=3))
    return columns, crash


def test_the_race_window_on_arrays_is_the_window_of_the_records(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``window_of`` (0.39 s of CPU for 400,000 records, a Python tuple a record) is worked out
    on arrays (0.03 s): for any records, repeated or not, near crash steps or far, with few
    or many steps to choose from, it keeps the pairs the replay's race plan keeps."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from forensics.judge import race

    @settings(max_examples=300, deadline=None)
    @given(st.data(), st.sampled_from([1, 3, 256]))
    def check(data: Any, most: int) -> None:
        columns, crash = _columns(data)
        with monkeypatch.context() as patch:
            patch.setattr(race, "MAX_STEPS", most)
            assert race.window_from(columns, crash) == _window_by_rows(columns, crash)

    check()


def test_the_window_of_a_capture_is_its_records_window(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``window_of`` reads a capture's race sites into the arrays (summary records left out):
    a simulated capture's window is the one its records give, few steps chosen or all."""
    from forensics.cli import main
    from forensics.judge import race
    from forensics.store.reader import load

    path = tmp_path / "x.capture"
    assert main(["simulate", "vocab-sentinel", "-o", str(path), "--steps", "300"]) == 0
    capture = load(path)
    columns = {}
    for site in (s for s in race._race_sites()[2] if s in capture.sites):
        kept = [(int(r.step), int(r.rank)) for r in capture.records(site) if not r.summary]
        columns[site] = (np.array([k[0] for k in kept], dtype=np.int64),
                         np.array([k[1] for k in kept], dtype=np.int64))
    assert len(columns) == 2
    for most in (10, 256, 1000):
        monkeypatch.setattr(race, "MAX_STEPS", most)
        window = race.window_of(capture)
        assert window == _window_by_rows(columns, race._crash_steps(capture))
        assert len(window) == min(most, 300)


# ------------------------- T76e: a timeline's lines break where no record is

FAR = 2**63 - 1


def _far_apart(tmp_path: Path) -> Any:
    """The replay of embedding records at steps 0, 1, 2 and 2**63-1 (id 50 of 10 rows at
    step 1)."""
    from forensics.replaying import replay

    steps = [0, 1, 2, FAR]
    return replay(write_capture(tmp_path / "far.capture", [
        Record("embedding", step, 0, {"input_ids": np.array([50 if step == 1 else 3],
                                                            dtype=np.int64),
                                      "num_embeddings": 10}) for step in steps]))


def test_the_svg_timeline_breaks_its_lines_where_no_record_is(tmp_path: Path) -> None:
    """Steps 0-2 and 2**63-1: the SVG drew one polyline (and one band, one bound) from step 2
    to 2**63-1, as if values were recorded all along. Each line is drawn per run of adjacent
    steps: 0-2 joined, 2**63-1 a line (and dot) of its own."""
    import xml.etree.ElementTree as ET

    from forensics.present.svg import views

    root = ET.fromstring(views.figure("timeline", _far_apart(tmp_path), site="embedding",
                                      variant="upstream").to_svg())
    for role in ("series max", "series min"):
        drawn = [[int(x) for x in e.get("data-x", "").split(",")] for e in root.iter()
                 if e.get("class") == role]
        # the far step's x is float(2**63 - 1) (no origin makes both ends exact past 2**53)
        assert drawn[0] == [0, 1, 2] and len(drawn) == 2 and len(drawn[1]) == 1, drawn
        assert abs(drawn[1][0] - FAR) <= 2**11, (role, drawn)
    bounds = [e for e in root.iter() if e.get("class") == "bound upper"]
    assert len(bounds) == 2 and len([e for e in root.iter() if e.get("class") == "band"]) == 2
    marks = [m for g in root.iter() if g.get("class") == "mark open" for m in g]
    assert [m.get("data-x") for m in marks] == ["1"]


def test_the_matplotlib_timeline_breaks_its_lines_where_no_record_is(tmp_path: Path) -> None:
    """The notebook's view breaks at the same place (the scene's one rule), its legend naming
    the series once."""
    from forensics import plots

    ax = plots.plot_bounds_timeline(_far_apart(tmp_path), site="embedding", variant="upstream")
    maxima = [line for line in ax.get_lines()
              if str(line.get_label()).lstrip("_").startswith("input_ids")]
    minima = [line for line in ax.get_lines() if line.get_linestyle() == ":"]
    legend = [t.get_text() for t in ax.get_legend().get_texts()] if ax.get_legend() else []
    plots.close(ax)
    for drawn in (maxima, minima):  # each in two runs: 0-2, and 2**63-1 alone
        assert sorted(len(line.get_xdata()) for line in drawn) == [1, 3]
    assert sum(text.startswith("input_ids") for text in legend) == 1, legend


def test_adjacent_steps_are_one_line(tmp_path: Path) -> None:
    """The rule breaks only where a step (or bin) holds no record: steps 0-2 are one run, and
    a dense timeline's adjacent bins one run too."""
    from forensics.present.scene.timeline import runs

    assert runs(np.array([0.0, 1.0, 2.0]), 1) == [slice(0, 3)]
    assert runs(np.array([0.0, 1.0, 3.0]), 1) == [slice(0, 2), slice(2, 3)]
    assert runs(np.array([4.5, 14.5, 24.5, 54.5]), 10) == [slice(0, 3), slice(3, 4)]
    assert runs(np.array([]), 1) == []
