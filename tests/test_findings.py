"""The judge: fixed columns, origins per rank, resolution, summary records, verdicts, order."""

from __future__ import annotations

import numpy as np
from incident_records import VOCAB

from forensics.findings import (
    COLUMNS,
    build_findings,
    first_finding,
    judge_record,
    verdicts,
)
from forensics.outcome import Outcome
from forensics.records import Record


def emb(step: int, ids, rank: int = 0, **extra) -> Record:
    return Record("embedding", step, rank, {"input_ids": np.array(ids, np.int64),
                                            "num_embeddings": VOCAB, **extra})


def summary(site: str, step: int, lo: int, hi: int, rank: int = 0) -> Record:
    bound = {"embedding": "num_embeddings", "async_output": "vocab_size",
             "prepare_input_ids": "vocab_size", "batch_change": "bound"}[site]
    return Record(site, step, rank, {"min": lo, "max": hi, bound: VOCAB}, summary=True)


def judge(records, outcomes=None):
    outcomes = outcomes or {"upstream": [None if r.summary else Outcome("ok", "", {}, [])
                                        for r in records]}
    frame = build_findings(records, outcomes)
    return frame, verdicts(records, outcomes, frame)


def test_columns_are_fixed_even_when_empty() -> None:
    frame, found = judge([emb(0, [1, 2])])
    assert list(frame.columns) == list(COLUMNS) and frame.empty
    assert found == {"upstream": {"embedding": "ok"}}


def test_summary_records_give_one_finding_per_broken_side() -> None:
    found = judge_record(summary("embedding", 0, -1, VOCAB), None)
    assert [(f["value"], f["lower"], f["upper"], f["row"]) for f in found] == [
        (-1, 0, VOCAB, None), (VOCAB, 0, VOCAB, None)]
    assert judge_record(summary("embedding", 0, 0, VOCAB - 1), None) == []


def test_origin_is_the_latest_producer_on_the_same_rank_with_ties_towards_the_sink() -> None:
    records = [summary("async_output", 1, 0, VOCAB), summary("async_output", 2, 0, VOCAB),
               summary("prepare_input_ids", 2, 0, VOCAB), summary("batch_change", 2, 0, VOCAB),
               summary("prepare_input_ids", 3, 0, VOCAB, rank=1), emb(3, [VOCAB])]
    frame, _ = judge(records)
    sink = frame[frame["site"] == "embedding"].iloc[0]
    assert sink["origin"] == "prepare_input_ids" and sink["resolved"] is False
    assert frame.loc[frame["site"] != "embedding", "origin"].isna().all()


def test_no_origin_on_another_rank_or_a_later_step() -> None:
    records = [summary("async_output", 1, 0, VOCAB, rank=1), emb(1, [VOCAB]),
               summary("async_output", 5, 0, VOCAB)]
    frame, found = judge(records)
    sink = frame[frame["site"] == "embedding"].iloc[0]
    assert sink["origin"] is None and sink["resolved"] is False
    assert found["upstream"]["embedding"] == "violation"


def test_real_code_index_error_gets_one_parsed_finding() -> None:
    rec = Record("batch_change", 0, 0, {})
    outcome = Outcome("index_error", "IndexError: index 7 is out of bounds for dimension 0 "
                                     "with size 2")
    assert [(f["value"], f["upper"], f["row"]) for f in judge_record(rec, outcome)] == [
        (7, 2, None)]
    outcome = Outcome("index_error", "IndexError: list index out of range")
    assert [f["value"] for f in judge_record(rec, outcome)] == [None]


def test_error_outcome_gives_the_error_verdict() -> None:
    rec = emb(0, [1])
    frame, found = judge([rec], {"mine": [Outcome("error", "RuntimeError: boom")]})
    assert frame.empty and found == {"mine": {"embedding": "error"}}


def test_first_finding_orders_by_step_rank_site_row_element() -> None:
    records = [emb(2, [VOCAB, -1], rank=0), emb(1, [1, 2, VOCAB], rank=1), emb(1, [5, -3])]
    frame, _ = judge(records)
    assert first_finding(frame, "upstream") == {
        "site": "embedding", "step": 1, "rank": 0, "row": None, "element": 1,
        "tensor": "input_ids", "kind": "out_of_bounds", "value": -3}
    assert first_finding(frame, "nobody") is None
