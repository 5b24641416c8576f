"""Round 19's fix19a (issue 38): ranks of one engine holding unlike numbers of records of a site
at a step (T107a), an events file whose last line lacks only its line end (T107b), and a
`.pt` field's container of very many elements, counted before it is built (T107c)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rank_engines import engine_ranks
from test_round2 import run_cli

from forensics.records import Record
from forensics.store.writer import write_capture

# -------------------------- T107a: ranks holding unlike numbers of records of a step, not compared


def _engine(root: Path, calls: dict[int, int], changed_at: int | None = None) -> list[str]:
    """The two rank captures of one engine (:func:`rank_engines.engine_ranks`) whose embedding
    is called ``calls[rank]`` times at step 5, alike on both ranks; ``changed_at``: a later step
    at which rank 1's embedding ids differ."""
    return engine_ranks(root, 2, calls, [(1, changed_at)] if changed_at is not None else [])


#: what the divergence column says of rank 0's 2 calls and rank 1's 3 at step 5
UNLIKE = ("rank divergence not judged at step 5: embedding input_ids not compared: rank 0 "
          "(engine-x-rank0.capture) holds 2 records of it, rank 1 (engine-x-rank1.capture) "
          "holds 3 (more calls, or records dropped: no call can be paired with its own)")


def test_ranks_holding_unlike_numbers_of_calls_of_a_step_are_not_compared(
        tmp_path: Path) -> None:
    """Rank 0 holds 2 embedding records at step 5, rank 1 holds 3 (the first two alike): the
    triage paired the first two and skipped rank 1's third in silence, no divergence, the
    engine `clean`. The counts are said, "not compared", never "diverged": a record the probe
    dropped (T102d) makes counts differ too."""
    from forensics.fleet.stitch import divergence_text, first_divergence

    hit = first_divergence(_engine(tmp_path / "fleet", {0: 2, 1: 3}))
    assert hit is not None and hit.get("unpaired") and (hit["step"], hit["values"]) == \
        (5, [2, 3]), hit
    text = divergence_text(hit)
    assert text.startswith(UNLIKE), text
    assert "diverged" not in text and "rank divergence at" not in text


def test_a_rank_holding_no_record_of_a_step_the_others_hold_is_not_compared(
        tmp_path: Path) -> None:
    """Rank 1 holds no embedding record at step 5 (dropped: T102d), rank 0 holds its one, both
    holding the steps around it: rank 0's record was compared with nothing, in silence, and
    the engine read `clean`. The step is said not compared."""
    from forensics.fleet.stitch import divergence_text, first_divergence

    hit = first_divergence(_engine(tmp_path / "fleet", {0: 1, 1: 0}))
    assert hit is not None and hit.get("unpaired") and (hit["step"], hit["values"]) == \
        (5, [1, 0]), hit
    assert divergence_text(hit).startswith(
        "rank divergence not judged at step 5: embedding input_ids not compared: rank 0 "
        "(engine-x-rank0.capture) holds 1 record of it, rank 1 (engine-x-rank1.capture) "
        "holds 0"), divergence_text(hit)


def test_ranks_holding_as_many_calls_still_agree(tmp_path: Path) -> None:
    """Both ranks hold 3 alike records at step 5: no divergence, nothing unpaired."""
    from forensics.fleet.stitch import first_divergence

    assert first_divergence(_engine(tmp_path / "fleet", {0: 3, 1: 3})) is None


def test_a_divergence_after_a_step_not_compared_is_found_and_the_step_said(
        tmp_path: Path) -> None:
    """Counts unlike at step 5, rank 1's ids differing at step 7: the divergence of step 7 is
    found (a step not compared hides none after it), and the sentence says step 5 was not
    compared, so "first" is never claimed of it."""
    from forensics.fleet.stitch import divergence_text, first_divergence

    hit = first_divergence(_engine(tmp_path / "fleet", {0: 2, 1: 3}, changed_at=7))
    assert hit is not None and (hit["step"], hit["element"]) == (7, 0), hit
    text = divergence_text(hit)
    assert text.startswith("rank divergence at step 7: embedding input_ids[0] = "), text
    assert text.endswith("; before it, " + UNLIKE), text


def _report(capture: str, out: Path) -> None:
    """A stand-in for a capture's report (the banner goes into it)."""
    out.write_text("<html><body><h1>report</h1></body></html>")


def test_every_triage_output_says_the_step_not_compared(tmp_path: Path) -> None:
    """The triage of that engine: both rows `divergence not judged`, grouped as ranks of
    unlike counts, and the sentence in the text, Markdown and JSON renderings, the CSV and
    Parquet tables and the HTML index and its report banner; no output says `clean`."""
    import pyarrow.parquet as pq

    from forensics.fleet.output import render, write_html, write_table
    from forensics.fleet.triage import triage

    _engine(tmp_path / "fleet", {0: 2, 1: 3})
    result = triage([tmp_path / "fleet"], workers=1)
    assert [r["conclusion"] for r in result.rows] == ["divergence not judged"] * 2, \
        [(r["conclusion"], r["divergence"]) for r in result.rows]
    assert [g.what for g in result.groups] == [
        "rank divergence not judged (ranks hold unlike numbers of records of a step)"]
    for fmt in ("text", "markdown"):
        out = render(result, fmt)
        assert UNLIKE in out and "clean" not in out, out
    rows = json.loads(render(result, "json"))["rows"]
    assert all(r["divergence"]["judged"] is False and "values" not in r["divergence"]
               for r in rows), rows
    table = write_table(result, tmp_path / "t.csv")
    with table.open(encoding="utf-8") as held:
        cells = list(csv.DictReader(held))
    parquet = pq.read_table(write_table(result, tmp_path / "t.parquet")).to_pylist()
    for flat in (cells, parquet):
        assert [r["divergence"] for r in flat] == [UNLIKE] * 2, flat
        assert {r["conclusion"] for r in flat} == {"divergence not judged"}
    index = write_html(result, tmp_path / "html", report=_report).read_text()
    assert UNLIKE in index and "clean" not in index
    banner = (tmp_path / "html" / "group-000.html").read_text()
    assert f"Fleet triage: {UNLIKE}" in banner, banner



# --------------------------------- T107b: an events file's last line whole but for its line end

#: an engine_exception event, whole, as a writer writes it (its line end apart)
EXCEPTION = b'{"kind": "engine_exception", "message": "IndexError", "rank": 0, "step": 5}'


def _events_capture(tmp_path: Path, tail: bytes) -> Path:
    """A capture of three embedding records whose events file holds a probe_start line and
    then ``tail`` with no line end."""
    capture = write_capture(tmp_path / "e.capture", [
        Record("embedding", s, 0, {"input_ids": np.arange(4, dtype=np.int32),
                                   "num_embeddings": 10}) for s in range(3)])
    (capture / "events-w0.jsonl").write_bytes(b'{"kind": "probe_start", "rank": 0, "step": 0}\n'
                                              + tail)
    return capture


def test_a_last_event_lacking_only_its_line_end_is_read(tmp_path: Path) -> None:
    """An events file whose last line is a whole ``engine_exception`` object, its writer killed
    before the newline: every reader said the line "not read" (the capture's crash unseen). A
    last line that is one whole JSON object of the events schema is read, the file not said
    cut."""
    import forensics

    capture = forensics.load(_events_capture(tmp_path, EXCEPTION))
    assert [e["kind"] for e in capture.events] == ["probe_start", "engine_exception"]
    assert capture.truncated == []


def test_replay_says_the_crash_of_a_last_event_lacking_its_line_end(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``replay`` of that capture said "Not read: the end of events file 'events-w0.jsonl'"
    and nothing of the crash; it counts the crash event and says nothing was not read."""
    code, said, err = run_cli(capsys, "replay", _events_capture(tmp_path, EXCEPTION))
    said = " ".join(said.split())
    assert code in (0, 1), err
    assert "Not read" not in said and "1 crash event(s)" in said, said


@pytest.mark.parametrize("tail", [EXCEPTION[:-1], EXCEPTION[:40], b'{"kind": 5}', b"[1, 2]",
                                  b'{"kind": "a", "kind": "b"}', b"   "],
                         ids=["cut before its brace", "cut inside", "kind not a string",
                              "not an object", "a key twice", "blanks"])
def test_a_last_line_that_is_no_whole_event_is_still_not_read(tmp_path: Path,
                                                              tail: bytes) -> None:
    """A last line without its line end that is not one whole event of the schema (cut
    inside the object, or no event a reader takes) is not read and said cut, as before."""
    import forensics

    capture = forensics.load(_events_capture(tmp_path, tail))
    assert [e["kind"] for e in capture.events] == ["probe_start"]
    assert capture.truncated == ["events-w0.jsonl"]


def test_a_writer_taking_over_keeps_a_whole_last_event(tmp_path: Path) -> None:
    """A writer reopening an events file whose last event lacks only its line end cut that
    event off (as a line cut short); it ends the line and appends after it: nothing captured is
    lost."""
    import forensics
    from forensics.store.events import EventLog

    root = _events_capture(tmp_path, EXCEPTION)
    again = EventLog(root, "w0")
    again.append({"kind": "taken over", "step": 6})
    again.close()
    assert [e["kind"] for e in forensics.load(root).events] == [
        "probe_start", "engine_exception", "taken over"]
    assert (root / "events-w0.jsonl").read_bytes().endswith(b"}\n")


# ------------------------- T107c: a .pt field's list of very many containers, counted first

#: the tensors of a ``batch_change`` record
CHANGE_TENSORS = ("prev_positions", "valid_sampled_token_count", "num_computed_tokens",
                  "num_accepted_tokens", "prev_num_draft_tokens", "cpu_num_computed_tokens")


def _pt_record(value: Any) -> dict[str, Any]:
    """A ``batch_change`` record whose ``prev_req_id_to_index`` is ``value``."""
    import torch

    return {"site": "batch_change", "step": 3, "prev_req_id_to_index": value,
            **{name: torch.zeros(2, dtype=torch.int32) for name in CHANGE_TENSORS}}


def _refused_unloaded(source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                      monkeypatch: pytest.MonkeyPatch, *words: str) -> None:
    """``import`` of ``source``: refused in one line holding ``words``, torch never loading it."""
    import torch
    from test_round4_importers import refused

    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("torch loaded it"))
    refused(source, tmp_path, capsys, *words)


@pytest.mark.parametrize("kind", ["dicts", "lists", "nested"])
def test_a_pt_field_of_a_million_empty_containers_is_refused_from_its_pickle(
        kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``.pt`` record whose ``prev_req_id_to_index`` is a list of a million ``{}`` (or
    ``[]``, or those inside one more list): torch unpickled it whole (6.7 s of CPU and 866 MB
    here) before the field's type refused it; only the 5 million values cap bounded it. The
    pickle's containers are counted per container before anything is loaded, and the file
    refused in one line naming it, the record, the field and the cap."""
    import torch

    n = 1_000_000
    value: Any = [{} for _ in range(n)] if kind == "dicts" else [[] for _ in range(n)]
    torch.save(_pt_record([value] if kind == "nested" else value), tmp_path / "many.pt")
    _refused_unloaded(tmp_path / "many.pt", tmp_path, capsys, monkeypatch,
                      "record 0 in 'many.pt':",
                      "field 'prev_req_id_to_index'", "past the 262144", "before anything is "
                      "loaded")


def test_a_pt_list_of_records_names_the_record_whose_field_holds_too_many(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Three records saved as a list, the third's field a list of 300,000 ``[]``: its record
    and field are named (the keys torch.save memoizes are named from the memo)."""
    import torch

    records = [_pt_record({"r0": 0}), _pt_record({"r1": 0}),
               _pt_record([[] for _ in range(300_000)])]
    torch.save(records, tmp_path / "three.pt")
    _refused_unloaded(tmp_path / "three.pt", tmp_path, capsys, monkeypatch,
                      "record 2 in 'three.pt':",
                      "field 'prev_req_id_to_index'", "lists, dicts and tuples")


def test_pt_records_of_many_containers_in_all_are_imported(tmp_path: Path) -> None:
    """Records each within the cap, past it together (a list of 40 records whose ragged
    ``output_token_ids`` holds 8,192 rows: 327,680 lists), import: the cap is one record's."""
    import torch

    from forensics.importers import read_source

    n = 8192
    saved = [{"site": "async_output", "step": s, "req_ids": [f"r{i}" for i in range(n)],
              "prev_req_id_to_index": {}, "vocab_size": 100,
              "sampled_token_ids_cpu": torch.zeros((1, 1), dtype=torch.int32),
              "output_token_ids": [[1, 2] for _ in range(n)]} for s in range(40)]
    torch.save(saved, tmp_path / "ok.pt")
    assert len(read_source(tmp_path / "ok.pt").records) == 40


# ------------------- T107d: a capture's list column of very many lists or entries, counted first


def _async_capture(root: Path, **fields: Any) -> Path:
    """A capture of one ``async_output`` record of one request, ``fields`` replacing its own,
    written unvalidated (as a hostile writer would)."""
    record = Record("async_output", 1, 0, {
        "req_ids": ["a"], "prev_req_id_to_index": {"a": 0}, "vocab_size": 100,
        "sampled_token_ids_cpu": np.zeros((1, 1), np.int32), "output_token_ids": [[1]],
        **fields})
    return write_capture(root, [record], validated=True)


@pytest.mark.parametrize(("field", "value", "said"), [
    ("output_token_ids", [[] for _ in range(2_000_000)],
     "field 'output_token_ids' holds 2000000 lists, past the 262144"),
    ("prev_req_id_to_index", {f"r{i}": i for i in range(300_000)},
     "field 'prev_req_id_to_index' holds 300000 entries, past the 65559"),
], ids=["ragged of two million empty lists", "index map of 300,000 keys"])
def test_a_list_column_of_very_many_items_is_refused_before_they_are_built(
        tmp_path: Path, field: str, value: Any, said: str) -> None:
    """A capture whose record's ``output_token_ids`` holds two million empty lists (8 MB of
    offsets): every reader built two million Python lists (130 MB; 1.7 GB and 2.6 s of CPU for
    20 million, a 80 MB capture) before the record's check refused it; a
    ``prev_req_id_to_index`` of 300,000 keys was read whole and taken. Each row's lists (or
    entries) are counted from the column's offsets first: one line naming the segment, the
    row, the field and the cap, the memory not grown."""
    from test_round4_store import peak_growth

    import forensics
    from forensics.errors import CaptureFormatError

    capture = _async_capture(tmp_path / "c.capture", **{field: value})
    del value

    def read() -> None:
        with pytest.raises(CaptureFormatError, match="counted before") as caught:
            list(forensics.load(capture).records())
        message = str(caught.value)
        assert said in message and "row 0" in message and "async_output" in message, message

    assert peak_growth(read) < 48 << 20


def test_replay_refuses_a_list_column_of_very_many_lists_alike(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``replay`` of a capture whose one request's ``output_token_ids`` holds 300,000 lists,
    its ``req_ids`` as many (so no cross-field check flags the row, and the columnar replay
    never builds a record): refused in one line as a reader of its records refuses it; it was
    replayed. Its ``req_ids`` of 300,000 strings are past their own cap (T114e), counted
    first: the line names them."""
    rows = 300_000
    capture = _async_capture(tmp_path / "c.capture", output_token_ids=[[1]] * rows,
                             req_ids=[f"r{i}" for i in range(rows)],
                             sampled_token_ids_cpu=np.zeros((rows, 1), np.int32))
    code, said, err = run_cli(capsys, "replay", capture)
    assert code == 2 and len(err.strip().splitlines()) == 1, (code, said, err)
    assert "field 'req_ids' holds 300000 strings, past the 262144" in err, err


# ------------------ T107e: an .npz member of very many strings, counted before the list is built


def test_an_npz_string_member_of_very_many_strings_is_refused_before_its_list_is_built(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An ``.npz`` whose ``req_ids`` is a 1-d string array of 4.9 million ids (200 KB
    compressed): each became a Python string (510 MB peak and 2.0 s of CPU here) before the
    record's check refused it; only the 5 million strings cap bounded it. A list
    field holds one string per request of a batch: the member's strings are counted from its
    header first, and the file refused in one line naming it, the member, the count and the
    cap, no string built."""
    from test_round4_importers import refused

    from forensics.importers import npz

    monkeypatch.setattr(npz, "_value", lambda *a: pytest.fail("a member's value was built"))
    n = 300_000
    np.savez_compressed(tmp_path / "ids.npz", site=np.array("async_output"), step=np.array(1),
                        req_ids=np.array([f"r{i}" for i in range(n)]),
                        vocab_size=np.array(100))
    refused(tmp_path / "ids.npz", tmp_path, capsys, "member 'req_ids.npy'",
            "holds 300000 strings", "past the 262144")


@pytest.mark.parametrize(("fields", "said"), [
    ({"output_token_ids": [[1]] * 300_000},  # req_ids as many: past their own cap (T114e)
     "field 'output_token_ids' holds 300000 lists, past the 262144"),
    ({"prev_req_id_to_index": {f"r{i}": i for i in range(70_000)}},
     "field 'prev_req_id_to_index' holds 70000 entries, past the 65559"),
], ids=["ragged", "index map"])
def test_no_writer_of_ours_writes_a_row_a_reader_refuses(
        tmp_path: Path, fields: dict[str, Any], said: str) -> None:
    """``write_capture`` (validating) of a record whose ragged field holds 300,000 lists, or
    whose index map 70,000 entries: it wrote a capture every reader refuses (T107d); it
    refuses the record, naming the field, the count and the cap, and writes nothing."""
    from forensics.errors import CaptureFormatError

    record = Record("async_output", 1, 0, {
        "req_ids": ["a"], "prev_req_id_to_index": {"a": 0}, "vocab_size": 100,
        "sampled_token_ids_cpu": np.zeros((1, 1), np.int32), "output_token_ids": [[1]],
        **fields})
    with pytest.raises(CaptureFormatError) as caught:
        write_capture(tmp_path / "w.capture", [record])
    assert said in str(caught.value), caught.value
    assert not (tmp_path / "w.capture").exists()
