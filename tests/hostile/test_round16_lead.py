"""Round 16, the lead's: a report of one record of many out-of-range ids listed each id as a
row of the sink's table (T86a), ``known`` read every finding row by row (T86b), and every table
cell cost a Styler its id and classes (T86c)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_round2 import run_cli

from forensics.budget import FINDING_BYTES, MAX_ALLOC_ENV
from forensics.known.evidence import Evidence, value_class
from forensics.known.matching import _finding, _one_of
from forensics.present.report import write_report
from forensics.present.tables import styled
from forensics.records import Record
from forensics.store.writer import write_capture


def _many_ids(root: Path, ids: int) -> Path:
    """A capture of one embedding record whose ``ids`` input ids are all out of range."""
    return write_capture(root / "many.capture", [
        Record("embedding", 1, 0, {"input_ids": np.full(ids, 50, np.int64),
                                   "num_embeddings": 10})])


def test_the_sinks_table_is_one_row_per_group_not_per_id(tmp_path: Path) -> None:
    """The report's "Where the sink's bad values came from" was a row per offending element: one
    record of 80,000 out-of-range ids (a 640 KB capture) made a report of 110 MB, 53 s and
    1.95 GB. It is a row per (variant, step, row) now, as the findings are, counting them."""
    ids = 300
    html = write_report(_many_ids(tmp_path, ids), tmp_path / "many.html").read_text()
    sink = html.split('id="Where-the-sink')[1].split("<h2")[0]
    rows = re.findall(r"<tr>(.*?)</tr>", sink, re.DOTALL)
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row, re.DOTALL) for row in rows[1:]]
    header = re.findall(r"<th[^>]*>(.*?)</th>", rows[0], re.DOTALL)
    assert [c[header.index("variant")] for c in cells] == ["upstream", "patched"], cells
    assert {c[header.index("findings")] for c in cells} == {str(ids)}
    assert {c[header.index("values")] for c in cells} == {"50"}
    assert {c[header.index("tensors")] for c in cells} == {"input_ids"}


def _row_by_row(spec: dict[str, Any], frame: pd.DataFrame, bounds: set[int]) -> int | None:
    """The position of the first row of ``frame`` matching ``spec``, read row by row (the
    matcher's reading before T86b)."""
    for at, (_, row) in enumerate(frame.iterrows()):
        origin = "none" if row.get("origin") is None else row.get("origin")
        got = {"origin": origin, "value_class": value_class(row, bounds)}
        if all((got[k] if k in got else row.get(k)) in _one_of(v)
               for k, v in spec.items() if k != "variant"):
            return at
    return None


_SITES = st.sampled_from(["embedding", "prepare_input_ids", "async_output"])
_ROWS = st.lists(st.fixed_dictionaries({
    "site": _SITES, "tensor": st.sampled_from(["input_ids", "draft_token_ids"]),
    "kind": st.sampled_from(["out_of_bounds", "misattributed"]),
    "value": st.sampled_from([-1, 10, 11, 3]), "upper": st.sampled_from([10, 4]),
    "origin": st.sampled_from([None, "prepare_input_ids"]),
    "step": st.integers(0, 3)}), max_size=40)
_SPECS = st.fixed_dictionaries({}, optional={
    "site": _SITES, "tensor": st.sampled_from(["input_ids", ["input_ids", "draft_token_ids"]]),
    "kind": st.sampled_from(["out_of_bounds", "misattributed"]),
    "value_class": st.sampled_from(["placeholder", "vocab_size", "past_end", "stale_row"]),
    "origin": st.sampled_from(["none", "prepare_input_ids"])})


@settings(max_examples=150, deadline=None)
@given(rows=_ROWS, spec=_SPECS)
def test_a_signatures_finding_is_the_first_row_that_matches(rows: list[dict[str, Any]],
                                                            spec: dict[str, Any]) -> None:
    """``known`` read each finding through pandas' ``iterrows``: 13 s of a report's 17 for the
    160,000 findings of one 640 KB capture. It compares text fields over the whole table and
    reads one row of findings alike in what a match reads (1.2 s); the finding it names is the
    one a row-by-row reading finds first."""
    frame = pd.DataFrame(rows, columns=["site", "tensor", "kind", "value", "upper", "origin",
                                        "step"])
    frame.insert(0, "variant", "upstream")
    frame["lower"], frame["step"] = 0, frame["step"].astype("int64")
    evidence = Evidence(findings=frame, baseline="upstream", facts={"vocab_size": 10})
    check = _finding(spec, evidence)
    first = _row_by_row(spec, frame, evidence.id_bounds())
    assert check.holds is (first is not None), (spec, check.why)
    if first is not None:
        row = frame.iloc[first]
        assert f"{row['site']} step {row['step']}: value {row['value']} used at " \
               f"{row['tensor']}" in check.why, (spec, first, check.why)


def test_a_styled_tables_markup_is_a_few_bytes_per_cell() -> None:
    """pandas' Styler gave every cell an id and three classes (about 60 bytes of markup per
    cell; a report of 20,000 one-token rows was 70 MB, 39 s and 0.76 GB) and its rendering held
    about 30 KB per row. A table is written directly now (25 MB, 16 s, 0.30 GB): under 30
    bytes of markup per cell, every row kept, every cell escaped."""
    rows, columns = 1000, 9
    frame = pd.DataFrame({f"c{i}": ["x"] * rows for i in range(columns)})
    frame.loc[rows - 1, "c0"] = "<b>"
    html = styled(frame).to_html()
    assert html.count("<tr>") == rows + 1 and "&lt;b&gt;" in html and "<b>" not in html
    assert len(html) < rows * columns * 30, len(html)


def _records_of_ids(root: Path, name: str, records: int, ids: int) -> Path:
    """A capture of ``records`` embedding records of ``ids`` out-of-range ids each."""
    return write_capture(root / f"{name}.capture", [
        Record("embedding", step, 0, {"input_ids": np.full(ids, 50, np.int64),
                                      "num_embeddings": 10}) for step in range(records)])


def test_findings_past_the_budget_are_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every out-of-range element is a finding a replay holds (2.3 KB each): a 6.2 MB capture of
    one record of 800,000 ids took `summary` 41 s and 3.8 GB. The findings are counted against
    the allocation budget before a batch's are made (0.4 s, 0.12 GB for that capture) and as
    the replay keeps them (many records each within it): one line naming the count, the bytes,
    the budget and the fix; within it, the same command runs."""
    monkeypatch.setenv(MAX_ALLOC_ENV, str(FINDING_BYTES * 1000))
    for name, records, ids in (("one", 1, 1001), ("many", 8, 200)):
        code, out, err = run_cli(capsys, "summary", _records_of_ids(tmp_path, name, records, ids))
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, (out, err)
        assert f"{name}.capture" in err and "'findings' is " in err and MAX_ALLOC_ENV in err
    code, out, _ = run_cli(capsys, "summary", _records_of_ids(tmp_path, "fits", 2, 200))
    assert code == 0 and "input_ids" in out, out


def _combine_record(idx_mapping: list[int]) -> Record:
    """A ``combine_tokens`` record of step 0 whose rows read the slots ``idx_mapping``."""
    from forensics.validate import validate_record

    drafts = np.zeros((4, 2), np.int32)
    drafts[3] = (7, 8)
    i32 = np.int32
    return validate_record(Record("combine_tokens", 0, 0, dict(
        input_ids=np.full(6, 99, i32), idx_mapping=np.array(idx_mapping, np.int64),
        last_sampled_tokens=np.array([21, 0, 0, 11], i32),
        query_start_loc=np.array([0, 3, 4], i32), seq_lens=np.array([10, 7], i32),
        prefill_len=np.array([4, 0, 0, 5], i32), draft_tokens=drafts,
        cu_num_logits=np.array([0, 3, 4], i32), num_new_sampled_tokens=1, vocab_size=50,
        req_ids=["a", "b"])), "test record")


def test_a_batch_interrupted_before_its_answers_never_answers_the_next(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel worker's answers are read in order, by no id: an interrupt (Ctrl-C in a
    notebook, an alarm) after a batch was sent and before its answers were read left the worker
    running, and the next batch read the interrupted batch's answers as its own: a record in
    range read as the other's index error. The worker is ended now: the next batch's answers
    are its own."""
    from forensics.variants import triton_kernels

    worker = triton_kernels.KernelWorker()
    bad, good = _combine_record([9, 0]), _combine_record([3, 0])
    try:
        assert worker._exchange([good])[0].status == "ok"  # the worker is up
        real_next = triton_kernels.Lines.next

        def interrupted(self: Any, seconds: float) -> str | None:
            monkeypatch.setattr(triton_kernels.Lines, "next", real_next)
            raise KeyboardInterrupt

        monkeypatch.setattr(triton_kernels.Lines, "next", interrupted)
        with pytest.raises(KeyboardInterrupt):
            worker._exchange([bad])
        assert worker._exchange([good])[0].status == "ok"  # its own answer, not bad's
        assert worker._exchange([bad])[0].status == "index_error"
    finally:
        worker.close()


def test_the_steps_a_deadline_cut_are_never_a_span_read_as_every_step_between() -> None:
    """Records cut at steps 3 and 40000 read "(steps 3-40000)", as if every step between was
    cut: up to three steps are named, more are counted with their ends."""
    from forensics.present.conclusion import steps_text as _steps_text

    assert _steps_text([40000, 3, 3]) == "steps 3 and 40000"
    assert _steps_text([7]) == "step 7"
    assert _steps_text([1, 2, 9]) == "steps 1, 2 and 9"
    assert _steps_text([5, 1, 2, 9]) == "4 steps from 1 to 9"


def _folder_of_odd_captures(root: Path) -> Path:
    """A folder holding one capture and four entries named ``*.capture`` that are none: a
    broken link, a FIFO, a file and a link to itself."""
    import os

    folder = root / "caps"
    write_capture(folder / "clean.capture", [
        Record("embedding", 0, 0, {"input_ids": np.array([1], np.int64), "num_embeddings": 10})])
    (folder / "dang.capture").symlink_to("/nonexistent")
    os.mkfifo(folder / "fifo.capture")
    (folder / "file.capture").write_text("hi")
    (folder / "loop.capture").symlink_to("loop.capture")
    return folder


def test_entries_named_capture_that_are_none_are_rows_not_dropped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Triage and the pytest plugin searched a folder for folders only: a capture whose link
    broke, or a FIFO, file or looping link named ``*.capture``, dropped out unsaid (``triage``
    said "1 capture"; the plugin collected one item and passed). Each is a row (an item) now,
    its reader's line saying what it is; a link to itself no longer ends the collection."""
    from forensics.pytest_plugin import captures_under, shown_path

    folder = _folder_of_odd_captures(tmp_path)
    names = ["clean", "dang", "fifo", "file", "loop"]
    assert [p.name for p in captures_under(folder)] == [f"{n}.capture" for n in names]
    assert shown_path(folder / "loop.capture").endswith("loop.capture")
    code, out, _ = run_cli(capsys, "triage", folder)
    assert code == 0, out
    for name, why in (("dang", "does not exist"), ("fifo", "is a FIFO"),
                      ("file", "is a file"), ("loop", "loop of symbolic links")):
        row = next(line for line in out.splitlines() if line.strip().startswith(name))
        assert "error:" in row and why in row, row


def test_a_request_id_that_is_vllms_word_leaves_that_word_in_the_error_text(
        tmp_path: Path) -> None:
    """``redact`` swapped every request id standing as a word of an event's error text for its
    pseudonym, also an id that is vLLM's own word: ``req_ids=["gdn", "r9"]`` turned "in gdn
    fused_recurrent kernel" into "in anon-0 fused_recurrent kernel", and ``known`` matched the
    GDN race on the capture but not on its redacted copy. Such a word stays (it is public); an
    id that is no such word is still swapped, and the records' ids are pseudonyms."""
    import forensics
    from forensics.share.redaction import redact

    message = ("RuntimeError: CUDA error: an illegal memory access was encountered in gdn "
               "fused_recurrent kernel for r9")
    src = write_capture(tmp_path / "src.capture", [
        Record("embedding", 0, 0, {"input_ids": np.array([1, 2], np.int64),
                                   "num_embeddings": 10, "req_ids": ["gdn", "r9"],
                                   "cu_num_tokens": np.array([1, 2], np.int32)})],
        events=[{"kind": "engine_exception", "step": 0, "rank": 0, "message": message}])
    out = forensics.load(redact(src, tmp_path / "out.capture").path)
    text = out.events[0]["message"]
    assert "in gdn fused_recurrent kernel" in text and "r9" not in text, text
    assert list(next(iter(out.records())).get("req_ids")) == ["anon-0", "anon-1"]
