"""Findings name the bad index and what it indexes (issue 29, point 1 and 8).

Each ``out_of_bounds`` finding carries ``index_tensor``/``index_at`` (what holds the bad value),
``held`` (whether ``index_tensor[index_at]`` holds the value itself), ``indexed`` and
``value_class``; and no output ever writes ``T[i] = v`` unless ``T[i]`` holds ``v``. The
records are the cases the issue found misnamed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import forensics
from forensics.cli import main
from forensics.judge.findings import COLUMNS, finding_records
from forensics.present.conclusion import conclude, describe_finding, next_steps
from forensics.present.demo import describe_finding as demo_line
from forensics.present.writeup import render
from forensics.records import Record
from forensics.sites import get_site
from forensics.validate import validate_record

#: ``T[i] = v``, ``T[i][j] = v`` or ``T.flatten()[i] = v`` anywhere in a text
ASSIGNMENT = re.compile(r"([A-Za-z_][\w.]*(?:\.flatten\(\))?)((?:\[\d+\])+) = (-?\d+)")
FLAT = ".flatten()"


def i32(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int32)


def _record(site: str, step: int, **fields: Any) -> Record:
    return validate_record(Record(site, step, 0, fields), f"test record of {site}")


def issue_records() -> list[Record]:
    """The issue's cases: a stale previous row into a 4-element ``valid_sampled_token_count``
    (holding 5 there), a draft overrun of a 2x2 ``draft_token_ids`` holding 20-23, a 1x1
    ``prev_sampled_token_ids`` read past its row (fast path slice and slow path), and an
    ``async_output`` write into a 6-element tail of a 20-id output."""
    return [
        _record("batch_change", 1, prev_positions=i32(0, 1, 2, 4),
                valid_sampled_token_count=i32(1, 1, 1, 5), num_computed_tokens=i32(*range(8)),
                num_accepted_tokens=i32(1, 1, 1, 1), prev_num_draft_tokens=i32(*[0] * 8),
                cpu_num_computed_tokens=i32(1, 2, 3, 4)),
        _record("prepare_input_ids", 2, prev_positions=i32(0, 2),
                prev_sampled_token_ids=np.array([[7], [8], [9]], np.int32),
                input_ids=i32(*[1] * 6), cu_num_tokens=i32(3, 6), num_draft_tokens=i32(2, 2),
                prev_num_spec_tokens=2, draft_token_ids=np.array([[20, 21], [22, 23]], np.int32),
                vocab_size=100),
        _record("prepare_input_ids", 3, prev_positions=i32(0, 1),
                prev_sampled_token_ids=np.array([[7]], np.int32), input_ids=i32(1, 1),
                cu_num_tokens=i32(1, 2), num_draft_tokens=i32(0, 0), prev_num_spec_tokens=0,
                vocab_size=100),
        _record("prepare_input_ids", 4, prev_positions=i32(1),
                prev_sampled_token_ids=np.array([[7]], np.int32), input_ids=i32(1),
                cu_num_tokens=i32(1), num_draft_tokens=i32(0), prev_num_spec_tokens=0,
                vocab_size=100),
        _record("async_output", 5, req_ids=["a"], prev_req_ids=["a"],
                sampled_token_ids_cpu=np.array([[248320, 3]], np.int32),
                output_tail=[[5, 6, 7, 8, -1, -1]], output_len=i32(20), vocab_size=248320),
    ]


@pytest.fixture(scope="module")
def result() -> Any:
    return forensics.replay(issue_records(), ["upstream", "patched"])


def holds(record: Record, tensor: str, at: list[int], value: int) -> bool:
    """Whether ``tensor`` (a field of ``record``, or ``out.<field>`` of upstream's outputs)
    holds ``value`` at the indices ``at`` (``tensor`` may carry indices: ``out.output_tail[0]``;
    ``T.flatten()`` is ``T`` read flat)."""
    at = [int(i) for i in re.findall(r"\[(\d+)\]", tensor)] + at
    name = tensor.split("[")[0]
    tensor, flat = name.removesuffix(FLAT), name.endswith(FLAT)
    if tensor.startswith("out."):
        source = get_site(record.site).upstream(record).outputs
        tensor = tensor[4:]
    else:
        source = dict(record.fields)
    if tensor not in source:
        return False
    held: Any = np.asarray(source[tensor]).reshape(-1) if flat else source[tensor]
    for i in at:
        held = list(held) if not isinstance(held, np.ndarray) else held
        if not 0 <= i < len(held):
            return False
        held = held[i]
    return int(held) == value


def assignments_not_held(text: str, records: list[Record]) -> list[str]:
    """The ``T[i] = v`` of ``text`` that no record holds."""
    wrong = []
    for name, brackets, value in ASSIGNMENT.findall(text):
        at = [int(i) for i in re.findall(r"\d+", brackets)]
        if not any(holds(r, name, at, int(value)) for r in records):
            wrong.append(f"{name}{brackets} = {value}")
    return wrong


def test_findings_name_the_index_tensor_and_what_it_indexes(result: Any) -> None:
    up = result.findings[result.findings["variant"] == "upstream"]
    assert set(COLUMNS) <= set(result.findings.columns)
    named: dict[tuple[str, int], Any] = {}
    for r in up.itertuples():
        named.setdefault((r.site, r.step), r)  # the first of each record
    stale = named[("batch_change", 1)]
    assert (stale.index_tensor, stale.index_at, stale.value, stale.held) == (
        "prev_positions", 3, 4, True)
    assert (stale.indexed, stale.upper, stale.value_class) == (
        "valid_sampled_token_count", 4, "stale_row")
    draft = named[("prepare_input_ids", 2)]
    assert (draft.index_tensor, draft.index_at, draft.held) == ("prev_positions", 1, False)
    assert (draft.indexed, draft.value, draft.upper, draft.value_class) == (
        "draft_token_ids.flatten()", 4, 4, "past_end")
    fast = named[("prepare_input_ids", 3)]
    assert (fast.index_tensor, fast.held, fast.indexed, fast.value_class) == (
        None, False, "prev_sampled_token_ids", "past_end")
    slow = named[("prepare_input_ids", 4)]
    assert (slow.index_tensor, slow.index_at, slow.held, slow.value_class) == (
        "prev_positions", 0, True, "stale_row")
    tail = named[("async_output", 5)]
    assert (tail.tensor, tail.element) == ("out.output_tail", 18)  # the full list's position
    assert (tail.index_tensor, tail.index_at, tail.held) == ("out.output_tail[0]", 4, True)
    assert (tail.indexed, tail.value_class) == ("vocabulary", "vocab_size")


def test_every_held_finding_holds_its_value(result: Any) -> None:
    records = issue_records()
    for f in finding_records(result.findings):
        if f["held"]:
            assert holds(records[f["record"]], f["index_tensor"], [f["index_at"]], f["value"])


def test_no_text_writes_an_assignment_that_does_not_hold(result: Any, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    records = issue_records()
    conclusion = conclude(result)
    texts = [conclusion.paragraph(), *next_steps(conclusion), render(result, "text"),
             render(result, "markdown"), render(result, "json")]
    texts += [describe_finding(f) for f in finding_records(result.findings)]
    texts += [demo_line(f) for f in finding_records(result.findings)]
    from forensics.store.writer import write_capture

    path = write_capture(tmp_path / "issue.capture", records, manifest={})
    for argv in (["replay", str(path)], ["summary", str(path), "--format", "markdown"]):
        assert main(argv) == 0
        texts.append(capsys.readouterr().out)
    everything = "\n".join(texts)
    assert "`prev_positions[3] = 4` indexes `valid_sampled_token_count` (4 elements): a stale " \
           "previous row" in everything
    assert "`out.output_tail[0][4] = 248320`" in everything
    assert ASSIGNMENT.search(everything)  # the check below reads some assignments
    assert assignments_not_held(everything, records) == []


def test_value_classes_are_named_in_words(result: Any) -> None:
    lines = [demo_line(f) for f in finding_records(result.findings)]
    joined = "\n".join(lines)
    assert "the vocab_size sentinel" in joined
    assert "a stale previous row" in joined
    assert "past the end by 1" in joined


def test_placeholder_and_negative_classes() -> None:
    records = [Record("embedding", 0, 0, {"input_ids": np.array([1, -1, -3, 9]),
                                          "num_embeddings": 9})]
    found = forensics.replay(records, ["upstream"]).findings
    classes = dict(zip(found["index_at"], found["value_class"], strict=True))
    assert classes == {1: "placeholder", 2: "negative", 3: "vocab_size"}
    assert set(found["indexed"]) == {"embedding rows"}


def test_replay_json_carries_the_index_keys(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    from forensics.store.writer import write_capture

    path = write_capture(tmp_path / "issue.capture", issue_records(), manifest={})
    assert main(["replay", str(path), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)["findings"]
    first = next(f for f in found if f["site"] == "batch_change")
    assert {k: first[k] for k in ("index_tensor", "index_at", "indexed", "value_class")} == {
        "index_tensor": "prev_positions", "index_at": 3,
        "indexed": "valid_sampled_token_count", "value_class": "stale_row"}


@pytest.mark.parametrize("name", ["stale-prev-row", "incident-b-vocab-sentinel",
                                  "placeholder-leak", "v2-negative-draft", "v2-vocab-sample"])
def test_bundled_demo_lines_name_the_index_tensor_and_value_class(name: str) -> None:
    from forensics.present.demo import verdict_rows

    data = Path(__file__).resolve().parent.parent / "data"
    result = forensics.replay(data / f"{name}.capture", ["upstream", "patched"])
    lines = [row.first_finding for row in verdict_rows(name, result)
             if row.first_finding != "-"]
    assert lines and all("`" in line for line in lines), lines  # an index tensor named
    classes = ("a stale previous row", "the vocab_size sentinel", "a -1 placeholder")
    assert all(any(c in line for c in classes) for line in lines), lines
    assert not any("its range" in line for line in lines), lines  # what it indexes is known
    up = result.findings[result.findings["variant"] == "upstream"]
    for f in finding_records(up.head(200)):
        if f["held"]:
            record = result.records[f["record"]]
            assert holds(record, f["index_tensor"], [f["index_at"]], f["value"]), f


def test_an_async_previous_row_past_the_end_names_no_holder() -> None:
    record = _record("async_output", 5, req_ids=["a", "b"], prev_req_ids=["a", "b"],
                     sampled_token_ids_cpu=np.array([[3, 3]], np.int32),
                     output_token_ids=[[5, -1], [6, -1]], vocab_size=100)
    result = forensics.replay([record], ["upstream"])
    (f,) = finding_records(result.findings)
    assert (f["tensor"], f["index_tensor"], f["held"], f["value_class"]) == (
        "sampled_token_ids_cpu", None, False, "stale_row")
    assert "index 1 indexes `sampled_token_ids_cpu` (1 row): a stale previous row" in \
        conclude(result).paragraph()
