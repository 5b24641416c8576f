"""Hostile input, round 6, on fleets (T36f): a task that kills its worker process is its own
row and the tasks beside it keep theirs, with one worker too; a task on one worker has the
deadline too; a triage of thousands of captures in one group is written out in time linear in
them; a capture's column whose name folds (case, Unicode) onto one of ours is namespaced, so a
case-insensitive query (DuckDB) of the documented columns reads ours."""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from forensics.fleet.runners import run_local
from forensics.fleet.tasks import Task
from forensics.records import Record
from forensics.store.writer import write_capture
from tests.instructions import assert_linear, scaling


def _rows(out: list[bytes]) -> list[dict[str, Any]]:
    return [pa.ipc.open_stream(data).read_all().to_pylist()[0] for data in out]


# ------------------------------------------------ 1. a task that kills its process is its own row


def test_a_task_that_kills_its_worker_leaves_the_other_rows(tmp_path: Path) -> None:
    """Of five tasks on two local processes, the one whose process dies abruptly (``os._exit``:
    what a SIGBUS or the OOM killer does) is its row ``task failed: BrokenProcessPool``; the
    four others come back as their own rows (a broken pool once failed every task in it)."""
    from round6_fleet_piece import piece

    names = ["a", "dies", "b", "c", "d"]
    rows = _rows(run_local([Task(str(tmp_path / n)) for n in names], workers=2, piece=piece))
    assert [r["name"] for r in rows] == names
    errors = {r["name"]: r["error"] for r in rows}
    assert errors.pop("dies").startswith("task failed: BrokenProcessPool"), rows
    assert errors == dict.fromkeys(["a", "b", "c", "d"]), rows


def test_a_task_that_kills_its_only_worker_leaves_the_other_rows(tmp_path: Path) -> None:
    """With one worker (``--workers 1``), a task whose process sends itself SIGKILL is its row
    ``task failed: BrokenProcessPool: its process died (signal SIGKILL)``, and the bundled
    captures before and after it get exactly the rows they get without it (the task once ran
    in the triage's own process: the signal ended the whole triage, no row for anyone)."""
    from round6_fleet_piece import killer

    data = Path(__file__).resolve().parents[2] / "data"
    others = [Task(str(data / n)) for n in ("clean.capture", "incident-b-vocab-sentinel.capture",
                                           "misattribution.capture")]
    tasks = [others[0], Task(str(tmp_path / "killed")), *others[1:]]
    rows = _rows(run_local(tasks, workers=1, piece=killer))
    assert [r["name"] for r in rows] == [os.path.basename(t.path) for t in tasks], rows
    assert rows.pop(1)["error"] == \
        "task failed: BrokenProcessPool: its process died (signal SIGKILL)"
    alone = _rows(run_local(others, workers=1, piece=killer))
    assert rows == alone and all(r["error"] == "" and r["records"] for r in alone), alone


# ------------------------------------------------------ 2. a task on one worker has its deadline


def test_a_task_on_one_worker_has_the_deadline(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """``--workers 1`` (and a triage of one capture) runs its task in one process apart from
    this one: it is ended at the deadline as any pool's tasks are (when it ran in this
    process, it once ran without one, for ever)."""
    from round6_fleet_piece import piece

    monkeypatch.setenv("FORENSICS_CHILD_TIMEOUT", "1")
    (row,) = _rows(run_local([Task(str(tmp_path / "slow"))], workers=1, piece=piece))
    assert (row["name"], row["error"]) == ("slow", "timed out after 1 s")
    (row,) = _rows(run_local([Task(str(tmp_path / "quick"))], workers=1, piece=piece))
    assert (row["name"], row["error"]) == ("quick", None)


def test_a_task_queued_behind_stuck_ones_is_not_timed_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two tasks stuck where no signal reaches them hold both processes past the backstop:
    they are their rows ``timed out``, and the one queued behind them, which never started,
    runs in a new pool (its time once counted from when the pool queued it: it was reported
    timed out too)."""
    from round6_fleet_piece import deaf

    import forensics.fleet.runners as runners

    monkeypatch.setenv("FORENSICS_CHILD_TIMEOUT", "2")
    monkeypatch.setattr(runners, "BACKSTOP_GRACE", 0.0)
    names = ["deaf1", "deaf2", "c"]
    rows = _rows(run_local([Task(str(tmp_path / n)) for n in names], workers=2, piece=deaf))
    # each stuck row names its deadline and that the backstop ended it (T131e)
    backstop = ("timed out after 2 s (no row came back by the backstop, over 4 s after it "
                "started: ended from outside)")
    assert [(r["name"], r["error"]) for r in rows] == [
        ("deaf1", backstop), ("deaf2", backstop), ("c", None)], rows


def test_a_task_raising_an_odd_exception_is_its_one_line_row(tmp_path: Path) -> None:
    """On one worker, a task that raises an exception which cannot be pickled, its text on
    two lines with a terminal escape, is its row ``task failed: Odd: ...`` on one line,
    escaped as every exception's text is (``errors.reason``: its line break too) (run in this
    process, it once ended the whole run; in a pool its row once named the pickling's error
    instead); the task after it keeps its row."""
    from round6_fleet_piece import odd

    rows = _rows(run_local([Task(str(tmp_path / n)) for n in ("odd", "b")], workers=1,
                           piece=odd))
    assert [r["name"] for r in rows] == ["odd", "b"] and rows[1]["error"] is None, rows
    assert rows[0]["error"] == "task failed: Odd: first line\\x0asecond \\x1b[31mline", rows


# ------------------------------------ 3. thousands of captures in one group: linear to write out


def _triage_of(count: int) -> Any:
    """A triage of ``count`` clean captures, one group, each on its own host and version."""
    from forensics.fleet.signature import conclusion, group_rows
    from forensics.fleet.triage import Triage

    rows = []
    for i in range(count):
        row = {"capture": f"/fleet/c{i:06d}.capture", "name": f"c{i:06d}.capture", "error": "",
               "host": f"host-{i}", "pid": i, "ranks": "0", "engine_id": "unknown",
               "vllm": "0.33.0", "runner": "v1", "spec_method": "unknown",
               "async_scheduling": None, "steps": 3, "records": 3, "crash_events": "",
               "guard_events": "", "crashed": False, "verdicts": {}, "first": None,
               "known": [], "divergence": None, "findings": 0}
        row["conclusion"] = conclusion(row)
        rows.append(row)
    return Triage(rows, group_rows(rows))


FORMATS = ["table", "text"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_writing_a_large_group_out_is_linear(fmt: str, tmp_path: Path) -> None:
    """4x the captures of one group cost under 6x the instructions to flatten (every table
    output's rows) and to render: each group's title is made once, not once per capture (it
    counts the group's hosts and versions)."""
    assert_linear(scaling(__file__, dict.fromkeys(FORMATS, 1000), tmp_path)[fmt])


def make_work(fmt: str, count: int, scratch: Path) -> Callable[[], object]:
    """Writing out one group of ``count`` captures as ``fmt`` (:mod:`tests.instructions`)."""
    from forensics.fleet.output import flat_rows, render

    made = _triage_of(count)
    return (lambda: flat_rows(made)) if fmt == "table" else (lambda: render(made, "text"))


# ------------------------------- 4. a column that folds onto one of ours is the capture's own


def _fold(name: str) -> str:
    return unicodedata.normalize("NFKC", name).casefold()


@pytest.fixture(scope="module")
def folding(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A clean capture, and one of only a summary record (its columns come first in the
    union) whose extras are our columns and the site's in other cases."""
    root = tmp_path_factory.mktemp("folding")
    good = write_capture(root / "good.capture", [
        Record("embedding", s, 0, {"input_ids": np.arange(4, dtype=np.int32),
                                   "num_embeddings": 10}) for s in range(3)])
    extras = {"Capture": "/etc/passwd", "HOST": "forged", "Pid": 1, "Input_Ids": 99,
              "Step": 5, "RANK": 7, "Summary": 0, "NUM_EMBEDDINGS": "x"}
    hostile = write_capture(root / "a-hostile.capture", [
        Record("embedding", 3, 0, {"min": 0, "max": 3, "num_embeddings": 10, **extras},
               summary=True)])
    return {"good": str(good), "hostile": str(hostile)}


def test_a_column_folding_onto_ours_is_namespaced(folding: dict[str, str]) -> None:
    """No two columns of a site's dataset fold to one name; the capture's own are
    ``extra.NAME``, its values kept there."""
    from forensics.fleet.dataset import open_many

    table = open_many([folding["hostile"], folding["good"]])["embedding"].to_table()
    names = table.column_names
    assert len({_fold(n) for n in names}) == len(names), names
    for name in ("Capture", "HOST", "Pid", "Input_Ids", "Step", "RANK", "Summary",
                 "NUM_EMBEDDINGS"):
        assert f"extra.{name}" in names and name not in names, names
    rows = table.to_pylist()
    assert [r["extra.Capture"] for r in rows if r["summary"]] == ["/etc/passwd"]
    assert {r["capture"] for r in rows} == {folding["good"], folding["hostile"]}


def test_duckdb_reads_our_columns_beside_a_folding_capture(folding: dict[str, str]) -> None:
    """The documented DuckDB query (identifiers are case-insensitive there) reads our
    ``capture``, ``host`` and ``input_ids`` columns: a capture's ``Capture`` extra once
    became every row's capture, and its ``Input_Ids`` made the query fail for all."""
    import duckdb

    from forensics.fleet.dataset import open_many

    con = duckdb.connect()
    con.register("emb", open_many([folding["hostile"], folding["good"]])["embedding"])
    got = con.sql("SELECT capture, host, min(list_min(input_ids)) AS low FROM emb "
                     "GROUP BY ALL ORDER BY capture").fetchall()
    assert got == [(folding["hostile"], None, None), (folding["good"], None, 0)], got
    assert os.path.basename(folding["hostile"]) == "a-hostile.capture"


def test_one_long_value_does_not_pad_every_row_of_its_group() -> None:
    """The text table aligns its columns: one capture's 20,000-character host (the most a
    cell shows) once padded each of the group's rows to that width (the output grew by the
    captures times the longest claim). Columns are padded to a bounded width."""
    from forensics.fleet.output import render

    made = _triage_of(200)
    made.rows[0]["host"] = "h" * 50_000
    lines = render(made, "text").splitlines()
    assert max(len(line) for line in lines[1:]) > 20_000  # the long host is shown, cut
    assert sorted(len(line) for line in lines)[-2] < 500, sorted(map(len, lines))[-3:]
    assert sum(map(len, lines)) < 200 * 500 + 30_000


def test_the_json_output_of_an_undecodable_name_is_strict() -> None:
    """A capture folder's name that is not UTF-8 reaches the rows as lone surrogates; the JSON
    output once wrote them as ``\\udcff`` escapes, which strict parsers refuse. Every string
    of it encodes as UTF-8, the name shown as the text ``\\udcff``."""
    import json

    from forensics.fleet.output import render
    from forensics.fleet.signature import group_rows

    made = _triage_of(3)
    made.rows[1].update(capture="/fleet/bad\udcff.capture", name="bad\udcff.capture",
                        host="h\ud800", verdicts={"upstream": {"emb\udcfe": "ok"}})
    made.groups = group_rows(made.rows)
    parsed = json.loads(render(made, "json"))
    json.dumps(parsed, ensure_ascii=False).encode("utf-8")  # no lone surrogate anywhere
    rows = parsed["rows"]
    assert rows[1]["capture"] == "/fleet/bad\\udcff.capture"
    assert rows[1]["verdicts"] == {"upstream": {"emb\\udcfe": "ok"}}


# ------------------------------------- 5. a group's title does not grow with its captures' facts


def test_a_groups_title_is_bounded_whatever_its_captures_claim(tmp_path: Path) -> None:
    """A known issue's group gathers captures of any vLLM version, runner and speculative
    method: 100 captures claiming 2,000-character distinct versions once made a title of
    200,000 characters, written on each of their 100 rows of the Parquet table (quadratic in
    the captures). The title names a few values, each cut, and how many more."""
    import pyarrow.parquet as pq

    from forensics.fleet.output import write_table
    from forensics.fleet.signature import FACT_VALUES, group_rows

    made = _triage_of(100)
    for i, row in enumerate(made.rows):
        row.update(vllm=f"{i:03d}" + "v" * 2000, runner="r" * 5000 + str(i), known=["x"],
                   conclusion="known")
    made.groups = group_rows(made.rows)
    (group,) = made.groups
    title = group.title()
    assert len(title) < 3000 and f"or {100 - FACT_VALUES} more" in title, title[:300]
    assert title.startswith("100 captures on 100 hosts, vLLM 000vvv")
    table = pq.read_table(write_table(made, tmp_path / "t.parquet"))
    assert set(table["group"].to_pylist()) == {title}


def test_extras_of_two_captures_folding_onto_each_other_are_kept_apart(
        tmp_path: Path) -> None:
    """A capture's ``Foo`` extra beside another's ``foo``: DuckDB read the first for both
    (the other capture's rows then null). Each is renamed by its spelling; no two columns
    fold to one name, and each capture's value is under its own."""
    import duckdb

    from forensics.fleet.dataset import open_many

    paths = [str(write_capture(tmp_path / f"{name}.capture", [
        Record("embedding", 0, 0, {"min": 0, "max": 3, "num_embeddings": 10, extra: value},
               summary=True)])) for name, extra, value in (("a", "Foo", 1), ("b", "foo", 2))]
    emb = open_many(paths)["embedding"]
    names = emb.schema.names
    assert len({_fold(n) for n in names}) == len(names), names
    assert {"Foo.case_100", "foo.case_000"} <= set(names) and "foo" not in names, names
    con = duckdb.connect()
    con.register("emb", emb)
    got = con.sql('SELECT "Foo.case_100", "foo.case_000" FROM emb ORDER BY capture').fetchall()
    assert got == [(1, None), (None, 2)], got


# ------------------------------ 6. a capture's ids that fit no shared type stop no one else's read


def _ids_capture(root: Path, name: str, rank: int, ids: list[int], dtype: Any) -> str:
    return str(write_capture(root / name, [
        Record("embedding", s, rank, {"input_ids": np.array(ids, dtype=dtype),
                                      "num_embeddings": 10}) for s in range(2)]))


@pytest.fixture(scope="module")
def unfit(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Rank 0 of int64 ids, rank 1 of uint64 ids one past int64 at element 2, and a third
    capture of int32 ids."""
    root = tmp_path_factory.mktemp("unfit")
    return {"signed": _ids_capture(root, "a.capture", 0, [0, 1, 2, 3], np.int64),
            "huge": _ids_capture(root, "b.capture", 1, [0, 1, 2**63 + 5, 3], np.uint64),
            "narrow": _ids_capture(root, "c.capture", 0, [0, 1, 2, 3], np.int32)}


def test_ids_past_int64_beside_signed_ones_leave_only_their_capture_out(
        unfit: dict[str, str]) -> None:
    """A uint64 id past int64 fits no type it shares with int64 ids: ``on_error="skip"``
    leaves out that capture only (it once failed the whole read, skip or not, and with it
    the triage stitching an engine it claimed); ``"raise"`` is one line naming it."""
    from forensics.errors import CaptureFormatError
    from forensics.fleet.dataset import open_many
    from forensics.fleet.stitch import first_divergence

    paths = [unfit["signed"], unfit["huge"], unfit["narrow"]]
    table = open_many(paths, on_error="skip")["embedding"].to_table()
    assert sorted(set(table["capture"].to_pylist())) == [unfit["signed"], unfit["narrow"]]
    assert table["input_ids"].to_pylist() == [[0, 1, 2, 3]] * 4
    with pytest.raises(CaptureFormatError) as raised:
        open_many(paths)
    assert "b.capture" in str(raised.value) and "'input_ids'" in str(raised.value)
    assert "\n" not in str(raised.value)
    assert first_divergence([unfit["signed"], unfit["huge"]]) is None


def test_a_divergence_of_uint64_ids_names_their_values(unfit: dict[str, str],
                                                       tmp_path: Path) -> None:
    """Ranks of uint64 ids that differ past int64 are compared and named as stored (they were
    cast to int64, a value past it then named as a negative number)."""
    from forensics.fleet.stitch import first_divergence

    other = _ids_capture(tmp_path, "d.capture", 0, [0, 1, 7, 3], np.uint64)
    hit = first_divergence([other, unfit["huge"]])
    assert hit is not None
    assert (hit["step"], hit["tensor"], hit["element"], hit["ranks"], hit["values"]) == \
        (0, "input_ids", 2, [0, 1], [7, 2**63 + 5]), hit
