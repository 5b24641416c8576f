"""Hostile input, round 9 (fleet9), on triage, ``open_many``, rank stitching and the probe's
capture folder: the claims T48a-T48h of docs/threat-model.md."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from forensics.records import Record
from forensics.store.writer import write_capture


def _ids_capture(path: Path, ranks: dict[int, list[int]],
                 manifest: dict[str, Any] | None = None) -> str:
    """A capture of two steps of embedding records, one per rank of ``ranks`` (its ids)."""
    return str(write_capture(path, [
        Record("embedding", step, rank, {"input_ids": np.array(ids, dtype=np.int64),
                                         "num_embeddings": 1000})
        for step in range(2) for rank, ids in ranks.items()], manifest))


def _row(capture: str, ranks: str, **facts: Any) -> dict[str, Any]:
    """A readable triage row of ``capture`` as the stitching reads it, with what its replay
    read when the capture exists (``held``: the stitch compares the capture as that, T73c)."""
    from forensics.fleet.piece import Held
    from forensics.store.reader import load

    held = Held.of(load(capture)).text() if os.path.isdir(capture) else None
    return {"capture": capture, "ranks": ranks, "error": None, "engine_id": "unknown",
            "host": "unknown", "started": "unknown", "history": "", "divergence": None,
            "held": held, **facts}


# ---------------------------- T48a: an engine id never takes the stitching key of a capture


def test_an_engine_id_naming_a_capture_does_not_hide_its_divergence(tmp_path: Path) -> None:
    """A capture ``v#0`` whose two ranks diverge, beside two captures claiming the engine id
    ``capture:.../v`` (corroborated by one host and run start): the stitching keyed an engine
    by ``ID#N`` and a lone capture by ``capture:PATH``, so that engine's key was the victim's,
    its captures compared in the victim's stead, and the victim's row said nothing of its
    divergence. Each is stitched under a key of its own."""
    from forensics.fleet.stitch import engines
    from forensics.fleet.triage import _stitch

    victim = _ids_capture(tmp_path / "v#0", {0: [1, 2, 3], 1: [1, 2, 99]})
    claim = {"engine_id": "capture:" + victim[:-2]}
    forged = [_ids_capture(tmp_path / f"h{rank}.capture", {rank: [5, 5]}, claim)
              for rank in (0, 1)]
    rows = [_row(victim, "0,1"),
            *(_row(path, str(rank), engine_id=claim["engine_id"], host="h",
                   started="2026-01-01") for rank, path in enumerate(forged))]
    stitched = sorted(sorted(captures) for captures in engines(rows).values())
    assert stitched == sorted([[victim], sorted(forged)]), stitched
    _stitch(rows)
    hit = rows[0]["divergence"]
    assert hit is not None and (hit["step"], hit["element"], hit["values"]) == (0, 2, [3, 99])
    assert rows[1]["divergence"] is None and rows[2]["divergence"] is None


# ------------------- T48b: a forked copy of the engine writes under a process name of its own


def test_a_forked_copys_records_are_not_found_for_a_killed_writer(tmp_path: Path) -> None:
    """The engine forks after its writer process started; the copy records 8 records and
    closes. The engine's writer is then stopped, given 8 records it never writes, and killed:
    it wrote none of them, yet the copy's segments (under the engine's process name) were
    counted as what it wrote ("found" 8, "dropped" 0). The copy names its own process, so
    none of its records is taken for the engine's, and each keeps its own events file."""
    import signal
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "probe"))
    from probe_fakes import make_settings, record_batch_changes

    import forensics
    from forensics.probe.session import ProbeSession, ProcessBackend

    session = ProbeSession(make_settings(tmp_path, capture=tmp_path / "k.capture", ring=64,
                                         flush_every=4))
    assert isinstance(session.backend, ProcessBackend)
    record_batch_changes(session, [[0, 1]] * 4)
    assert session.drain(timeout=30)
    pid = os.fork()
    if pid == 0:  # the forked copy
        code = 1
        signal.alarm(60)  # a copy stuck on a lock another thread held at the fork: it fails
        try:
            record_batch_changes(session, [[0, 1]] * 8)
            session.close()
            code = 0
        finally:
            os._exit(code)
    assert os.waitpid(pid, 0)[1] == 0
    assert len(forensics.load(session.settings.capture)) == 12
    proc = session.backend.channel.proc
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        record_batch_changes(session, [[0, 1]] * 8)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
    session.close()
    capture = forensics.load(session.settings.capture)
    (lost,) = [e for e in capture.events if e["kind"] == "probe_writer_lost"]
    assert lost["found"] == 0, lost
    assert session.counts["records"] == 12 and \
        session.counts["written"] == 4 + lost["recovered"], session.counts
    assert len({e["process"] for e in capture.events}) == 2


# ------------------------- T48c: a group's title names its facts as values, escaped apart


def _clean_rows(count: int) -> list[dict[str, Any]]:
    """Triage rows of ``count`` clean captures."""
    from tests.hostile.test_round6_fleet import _triage_of

    return list(_triage_of(count).rows)


def test_two_groups_whose_versions_escape_alike_have_two_titles(tmp_path: Path) -> None:
    """Two captures claiming the vLLM versions ``0.33<ESC>[2J`` and ``0.33\\x1b[2J`` (the text)
    are two groups; their titles named the versions unescaped, then made the title inert, so
    both read ``vLLM 0.33\\x1b[2J`` in the text, Markdown, CSV and HTML outputs. Each version is
    escaped as a value first (T42a), so the titles differ, and none holds ESC."""
    import csv

    from forensics.fleet.output import render, write_html, write_table
    from forensics.fleet.signature import group_rows
    from forensics.fleet.triage import Triage

    rows = _clean_rows(2)
    rows[0]["vllm"], rows[1]["vllm"] = "0.33\x1b[2J", "0.33\\x1b[2J"
    made = Triage(rows, group_rows(rows))
    for fmt in ("text", "markdown"):
        titles = [line for line in render(made, fmt).splitlines() if "capture on" in line]
        assert len(set(titles)) == 2 and "\x1b" not in "".join(titles), titles
    with write_table(made, tmp_path / "t.csv").open(encoding="utf-8") as cells:
        groups = [row["group"] for row in csv.DictReader(cells)]
    assert len(set(groups)) == 2, groups
    page = write_html(made, tmp_path / "html", report=lambda capture, out: out).read_text()
    heads = [line for line in page.splitlines() if line.startswith("<h2>")]
    assert len({head.split("</h2>")[0] for head in heads}) == 2, heads


# ------------------------------ T48d: a triage never writes into a capture it reads


def test_a_triage_output_inside_a_capture_it_reads_is_refused(
        tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    """``triage DIR -o DIR/a.capture/t.csv`` (or ``--html DIR/a.capture``, or through a link
    to it) wrote its table or index into a capture it had just read, changing it. It is one
    line naming the option and the capture, exit 2, before anything is replayed, and nothing
    is written; the API's writers refuse it too."""
    from forensics.cli import main
    from forensics.errors import ConfigurationError
    from forensics.fleet import runners
    from forensics.fleet.output import write_html, write_table
    from forensics.fleet.triage import Triage

    capture = _ids_capture(tmp_path / "a.capture", {0: [1, 2]})
    (tmp_path / "link").symlink_to(capture)
    before = sorted(os.listdir(capture))
    monkeypatch.setattr(runners, "run_local", None)  # nothing may be replayed
    for option, out in (("-o", f"{capture}/t.csv"), ("-o", str(tmp_path / "link" / "t.parquet")),
                        ("--html", capture), ("--html", f"{capture}/html")):
        assert main(["triage", str(tmp_path), "--workers", "1", option, out]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and option in err and "the capture" in err, err
        assert sorted(os.listdir(capture)) == before
    made = Triage([_row(capture, "0")])
    for write, out in ((write_table, f"{capture}/t.csv"), (write_html, f"{capture}/h")):
        try:
            write(made, out)
        except ConfigurationError as exc:
            assert "inside the capture" in str(exc)
        else:
            raise AssertionError(f"{write.__name__} wrote into {out}")
    assert sorted(os.listdir(capture)) == before


# ---------------- T48e: a record's column named like a <field>_len of to_frame stays its own


def test_a_summary_extra_named_like_a_length_column_takes_no_records_length(
        tmp_path: Path) -> None:
    """A summary record's extras ``input_ids_len`` (999) and ``foo_len`` (7) beside its
    tensor ``foo`` (3 ids): ``to_frame`` and ``to_arrow`` wrote them into the length columns
    of ours, so the record of 4 input ids read ``input_ids_len`` None and ``foo`` read 7 long
    (or, as the text ``req_ids_len``, ``to_arrow`` failed for the whole site). They are
    ``extra.NAME``,
    every length is the stored one, and every value captured is kept."""
    import forensics

    capture = forensics.load(write_capture(tmp_path / "x.capture", [
        Record("embedding", 0, 0, {"input_ids": np.arange(4), "num_embeddings": 10}),
        Record("embedding", 1, 0, {"min": 0, "max": 3, "num_embeddings": 10,
                                   "input_ids_len": 999, "foo": np.arange(3), "foo_len": 7},
               summary=True),
        Record("embedding", 2, 0, {"min": 0, "max": 3, "num_embeddings": 10,
                                   "req_ids_len": "text"}, summary=True)]))
    for table in (capture.to_frame("embedding").to_dict("records"),
                  capture.to_arrow("embedding").to_pylist()):
        got = [tuple(None if r[k] is None or r[k] != r[k] else r[k] for k in (
            "input_ids_len", "foo_len", "req_ids_len", "extra.input_ids_len", "extra.foo_len",
            "extra.req_ids_len")) for r in table]
        assert got == [(4, None, None, None, None, None), (None, 3, None, 999, 7, None),
                       (None, None, None, None, None, "text")], got


# ----------- T48f: to_arrow reads a capture whose summaries' extras differ in kind or presence


def test_summary_extras_of_other_kinds_or_absent_leave_to_arrow_whole(tmp_path: Path) -> None:
    """One summary record's extra ``note`` (text) absent from the other records, and an extra
    ``bar`` an int in one summary and text in another: ``to_arrow`` (for Polars, DuckDB,
    Parquet) failed for the whole site (pandas holds a missing text as NaN, then Arrow was
    asked for one type of both kinds). ``note`` is a text column, null where absent, and
    ``bar`` is ``bar.int`` and ``bar.str``, as ``open_many`` splits it across captures."""
    import forensics

    capture = forensics.load(write_capture(tmp_path / "x.capture", [
        Record("embedding", 0, 0, {"input_ids": np.arange(4), "num_embeddings": 10}),
        Record("embedding", 1, 0, {"min": 0, "max": 3, "num_embeddings": 10, "bar": 1,
                                   "note": "=cmd|' /C calc'!A0"}, summary=True),
        Record("embedding", 2, 0, {"min": 0, "max": 3, "num_embeddings": 10, "bar": "x"},
               summary=True)]))
    table = capture.to_arrow("embedding")
    assert [(r["note"], r["bar.int"], r["bar.str"]) for r in table.to_pylist()] == [
        (None, None, None), ("=cmd|' /C calc'!A0", 1, None), (None, None, "x")]
    assert "bar" not in table.column_names and str(table.schema.field("note").type) == "string"


# ------------- T48g: a rank divergence names its captures escaped as values, never alike


def test_divergences_naming_captures_that_escape_alike_read_apart(tmp_path: Path) -> None:
    """Two rank divergences, one naming a capture ``a<ESC>.capture``, one naming
    ``a\\x1b.capture`` (the text): the divergence message named each by its basename, then
    was made inert, so the two rows' ``what it shows`` (text, Markdown) and ``divergence``
    (CSV, Parquet) cells read alike. Each name is escaped as a value first (T42a)."""
    import csv

    import pyarrow.parquet as pq

    from forensics.escaping import unicode_path
    from forensics.fleet.output import render, write_table
    from forensics.fleet.signature import conclusion, group_rows
    from forensics.fleet.triage import Triage

    rows = _clean_rows(2)
    for row, name in zip(rows, ("/fleet/a\x1b.capture", "/fleet/a\\x1b.capture"), strict=True):
        row["divergence"] = {"step": 0, "site": "embedding", "tensor": "input_ids",
                             "element": 1, "ranks": [0, 1], "values": [1, 2],
                             "captures": [unicode_path(name), "/fleet/b.capture"]}
        row["conclusion"] = conclusion(row)
    made = Triage(rows, group_rows(rows))
    for fmt in ("text", "markdown"):
        shown = [line for line in render(made, fmt).splitlines() if "on rank 0" in line]
        assert len(shown) == 2 and "\x1b" not in "".join(shown), shown
        said = {line[line.index("rank divergence at"):] for line in shown}
        assert len(said) == 2, said
    with write_table(made, tmp_path / "t.csv").open(encoding="utf-8") as cells:
        texts = [row["divergence"] for row in csv.DictReader(cells)]
    parquet = pq.read_table(write_table(made, tmp_path / "t.parquet"))["divergence"]
    for found in (texts, parquet.to_pylist()):
        assert len(set(found)) == 2 and all("on rank 0" in t for t in found), found


# --------------- T48h: a step history corroborates an engine claim only when it is the same


def test_step_histories_of_other_record_counts_do_not_corroborate() -> None:
    """Two captures claiming one engine id, ranks 0 and 1 of one step span, one of 1,000,000
    records and one of 1,000,001: the history wrote records per rank as ``1e+06`` for both,
    so they corroborated each other and were stitched as one engine (a divergence between
    two runs reported as one engine's). The count is exact; one capture holding both ranks
    of 2,000,000 records still shares the history of 1,000,000 per rank."""
    from forensics.fleet.facts import step_history
    from forensics.fleet.stitch import corroborated, engines

    def history(records: int, ranks: list[int]) -> str:
        return step_history({"ranks": ranks, "site_steps": {"embedding": (0, 9)},
                             "sites": {"embedding": records}})

    rows = [_row(f"/fleet/{name}.capture", rank, engine_id="e", history=history(n, ranks))
            for name, rank, n, ranks in (("a", "0", 1_000_000, [0]), ("b", "1", 1_000_001, [1]))]
    assert not corroborated(rows[0], rows[1])
    assert sorted(map(len, engines(rows).values())) == [1, 1]
    assert history(2_000_000, [0, 1]) == history(1_000_000, [0])
    assert history(3, [0, 1]) != history(1, [0])
