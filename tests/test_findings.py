"""The judge: fixed columns, origins per rank, resolution, summary records, verdicts, order."""

from __future__ import annotations

import numpy as np
import pytest
from incident_records import VOCAB

from forensics.judge.findings import (
    COLUMNS,
    Judge,
    JudgedRun,
    build_findings,
    first_finding,
    judge_record,
    verdicts,
)
from forensics.outcome import Outcome
from forensics.records import Record
from forensics.sites.core import BatchRun, Checks


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


def _faulty_runs(scenario: str, site: str) -> tuple[BatchRun, BatchRun]:
    """The upstream and patched columnar runs of a simulated scenario's records of ``site``."""
    from forensics.simulator.runs import Simulator
    from forensics.sites import get_site

    records = [r for r in Simulator(scenario, seed=3).records(60) if r.site == site]
    return (get_site(site).run_records(records, False),
            get_site(site).run_records(records, True))


def _judged_as_lists(run: JudgedRun) -> tuple:
    return (run.status.tolist(), run.messages, run.found, run.rec.tolist(),
            [run.tensors[w] for w in run.which.tolist()], run.numbers.tolist())


@pytest.mark.parametrize("scenario,site", [("stale-prev-row", "batch_change"),
                                           ("vocab-sentinel", "async_output"),
                                           ("stale-prev-row", "prepare_input_ids"),
                                           ("misattribution", "batch_change")])
def test_a_run_inheriting_records_is_judged_as_the_whole_run(scenario, site) -> None:
    """A patched run that takes some records from upstream's (``base``, ``inherited``) is
    judged as its :meth:`~forensics.sites.core.BatchRun.whole` run, judging upstream once;
    inheriting exactly the records where the two runs are judged alike gives the patched
    run's own judgment."""
    upstream, patched = _faulty_runs(scenario, site)
    n = len(upstream.status)
    for inherited in (np.arange(n) % 3 == 0, np.ones(n, bool), np.zeros(n, bool)):
        partial = BatchRun(patched.status, patched.messages, patched.checks, patched.req_ids,
                           upstream, inherited)
        known: dict = {}
        merged = JudgedRun.of(partial, known)
        assert known[id(upstream)] is JudgedRun.of(upstream, known)  # judged once
        assert _judged_as_lists(merged) == _judged_as_lists(JudgedRun.of(partial.whole()))
    alike = _alike(JudgedRun.of(upstream), JudgedRun.of(patched), n)
    assert not alike.all() and alike.any()  # the scenario's patch changes some records
    partial = BatchRun(patched.status, patched.messages, patched.checks, patched.req_ids,
                       upstream, alike)
    assert _judged_as_lists(JudgedRun.of(partial)) == _judged_as_lists(JudgedRun.of(patched))


def _alike(a: JudgedRun, b: JudgedRun, n: int) -> np.ndarray:
    """The records judged alike in ``a`` and ``b``: status, message, findings and ranges."""
    def ranges(run: JudgedRun, r: int) -> list:
        at = run.rec == r
        return list(zip([run.tensors[w] for w in run.which[at]], run.numbers[at].tolist(),
                        strict=True))
    return np.array([a.status[r] == b.status[r] and a.messages.get(r) == b.messages.get(r)
                     and a.found.get(r) == b.found.get(r) and ranges(a, r) == ranges(b, r)
                     for r in range(n)])


def test_one_run_object_is_judged_once_and_kept_apart_per_variant() -> None:
    """Two variants returning one run object share one judgment, and the judge keeps each
    variant's findings apart (annotating one variant's never changes the other's)."""
    from forensics.replaying import _judged

    upstream, _ = _faulty_runs("vocab-sentinel", "embedding")
    runs = _judged({"upstream": upstream, "patched": upstream}, None).variants
    assert runs["upstream"] is runs["patched"] and runs["upstream"].found
    keep = Judge(["upstream", "patched"])
    positions = np.arange(len(upstream.status))
    for name, run in runs.items():
        keep.add_run(name, "embedding", positions, run)
    first = next(iter(runs["upstream"].found))
    keep._found["upstream"][first][0]["resolved"] = True
    assert keep._found["patched"][first][0].get("resolved") is None


def test_inherited_ranges_keep_their_tensor_names_when_the_runs_check_others() -> None:
    """Inheriting records from a run that checks other tensors keeps every range's tensor
    name (the two runs' tensor lists merged)."""
    def run(tensors: list[str], upper: int, base: BatchRun | None = None,
            inherited: np.ndarray | None = None) -> BatchRun:
        parts = [Checks.of(t, [0, 0, 1, 2], -1, -1, [1, 5, 2, 3 + k], 0, upper)
                 for k, t in enumerate(tensors)]
        return BatchRun(np.zeros(3, np.int8), {}, Checks.concat(parts), [None] * 3, base,
                        inherited)

    base = run(["a", "b"], 4)
    partial = run(["z", "a"], 6, base, np.array([True, False, True]))
    assert _judged_as_lists(JudgedRun.of(partial)) == _judged_as_lists(
        JudgedRun.of(partial.whole()))
    assert [JudgedRun.of(partial).tensors[w] for w in JudgedRun.of(partial).which] == [
        "a", "b", "z", "a", "a", "b"]
