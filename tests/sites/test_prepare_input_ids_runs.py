"""The columnar run of prepare_input_ids held to the per-record form: its reads kept as each
record's extremes (``in_range_extremes``) give the checked ranges and findings of every read,
and a batch's run gives, record by record, the ranges and findings of the model's outcome on
that record alone."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_prepare_input_ids import drafting_records, pii_records

from forensics.sites import prepare_input_ids as pii
from forensics.sites._common import RecordColumns
from forensics.sites.core import CheckList, Checks, in_range_extremes
from forensics.sites.prepare_input_ids import plans as pii_plans
from forensics.sites.prepare_input_ids import replay as pii_replay


def _table(checks: Checks | CheckList) -> list[tuple[int, str, list[int]]]:
    rec, tensors, which, numbers = checks.range_table()
    return [(int(r), tensors[w], n.tolist())
            for r, w, n in zip(rec.tolist(), which.tolist(), numbers, strict=True)]


GROUPS = st.lists(st.tuples(st.integers(1, 9), st.lists(st.integers(0, 8), min_size=1,
                                                          max_size=5)), max_size=6)


@given(GROUPS)
@settings(max_examples=200, deadline=None)
def test_extremes_are_every_value_in_range(groups) -> None:
    """Per record its smallest and largest value stand for all its values: the same ranges,
    and no finding."""
    groups = [(upper, [v % upper for v in values]) for upper, values in groups]
    record = np.arange(len(groups), dtype=np.int64) * 2  # some records without values
    counts = np.array([len(v) for _, v in groups], dtype=np.int64)
    values = np.array([x for _, v in groups for x in v], dtype=np.int64)
    uppers = np.array([u for u, _ in groups], dtype=np.int64)
    every_value = Checks.of("t", np.repeat(record, counts), 0, 0, values, 0,
                            np.repeat(uppers, counts))
    low = np.array([min(v) for _, v in groups], dtype=np.int64)
    high = np.array([max(v) for _, v in groups], dtype=np.int64)
    extremes = in_range_extremes("t", record, low, high, uppers)
    assert _table(extremes) == _table(every_value)
    assert extremes.findings() == every_value.findings() == {}


@pytest.mark.parametrize(("low", "high", "upper"), [(-1, 2, 5), (0, 5, 5), (3, 2, 5)])
def test_extremes_refuse_values_outside_their_range(low: int, high: int, upper: int) -> None:
    """A group leaving ``[0, upper)`` would lose its findings: refused."""
    with pytest.raises(ValueError, match="outside"):
        in_range_extremes("t", np.array([0]), np.array([low]), np.array([high]),
                          np.array([upper]))


def _per_record_table(checks: Checks | CheckList) -> dict[int, list[tuple[str, list[int]]]]:
    table: dict[int, list[tuple[str, list[int]]]] = {}
    for rec, tensor, numbers in _table(checks):
        table.setdefault(rec, []).append((tensor, numbers))
    return table


@settings(max_examples=300, deadline=None)
@given(st.lists(pii_records() | drafting_records(), min_size=1, max_size=4), st.booleans())
def test_a_batch_checks_the_ranges_each_record_checks_alone(records, patched) -> None:
    """The columnar run of several records gives, per record, the checked ranges (tensor,
    min, max, lower, upper, in order) and the findings that the per-record checks of the
    model's outcome give."""
    run = pii_replay.run_batch(pii_replay.prepare_columns(RecordColumns(records)), patched)
    got = _per_record_table(run.whole().checks)
    model = pii.SITE.patched if patched else pii.SITE.upstream
    for i, rec in enumerate(records):
        alone = pii_replay.outcome_checks(rec, model(rec))
        assert got.get(i, []) == _per_record_table(alone).get(0, []), i


def _judged(run) -> tuple[list[str], dict, dict, dict]:
    run = run.whole()  # patched's run inherits the inert records from upstream's
    found = {r: _keyed(f) for r, f in run.checks.findings().items()}
    return run.status.tolist(), run.messages, _per_record_table(run.checks), found


def _keyed(found: list[dict]) -> list[tuple]:
    return sorted((f["kind"], f["tensor"], f["row"], f["element"], f["value"], f["lower"],
                   f["upper"]) for f in found)


@settings(max_examples=300, deadline=None)
@given(st.lists(pii_records() | drafting_records(), min_size=2, max_size=8))
def test_records_the_guard_changes_run_apart_as_in_the_whole_batch(records) -> None:
    """Where the guard skips rows of some records only, those run apart (per model) and the
    others once for both: statuses, messages, ranges and findings are those of each model
    run over the whole batch."""
    batch = pii_replay.prepare_columns(RecordColumns(records))
    changed = ~pii_plans.inert(batch)
    for patched in (False, True):
        whole = pii_replay._run_batch(pii_replay.prepare_columns(RecordColumns(records)), patched)
        assert _judged(pii_replay.run_batch(batch, patched)) == _judged(whole)
    apart = 0 < changed.sum() <= min(pii_replay.APART_AT_MOST, len(records) - 1)
    assert (("apart", True) in batch.runs) == apart
    assert (("inert", False) in batch.runs) == apart
    if not changed.any():
        assert list(batch.runs) == [("whole", False)]  # one run for both models


def test_many_changed_records_run_whole_per_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past :data:`APART_AT_MOST` changed records, each model runs the whole batch."""
    from test_prepare_input_ids import make

    stale = make([5], [7], [1])  # its previous row is past the one sampled row
    fine = make([0], [7], [1])
    monkeypatch.setattr(pii_replay, "APART_AT_MOST", 0)
    batch = pii_replay.prepare_columns(RecordColumns([stale, fine]))
    up, patched = pii_replay.run_batch(batch, False), pii_replay.run_batch(batch, True)
    assert sorted(batch.runs) == [("whole", False), ("whole", True)]
    assert up.status.tolist() == [1, 0] and patched.status.tolist() == [0, 0]


def test_a_changed_record_numpy_runs_is_left_to_its_own_run() -> None:
    """A record the guard changes that numpy runs (the fast path's silent broadcast) is
    checked once per model, by its own run: its findings are the whole batch's, not twice."""
    from test_prepare_input_ids import make

    broadcast = make([0, 1, 2], [7], [1, 2, 3])  # rows 1, 2 past the one sampled row
    fine = make([0], [7], [1])
    records = [fine, broadcast, fine]
    batch = pii_replay.prepare_columns(RecordColumns(records))
    assert (~pii_plans.inert(batch)).tolist() == [False, True, False]
    for patched in (False, True):
        whole = pii_replay._run_batch(pii_replay.prepare_columns(RecordColumns(records)), patched)
        assert _judged(pii_replay.run_batch(batch, patched)) == _judged(whole)
    assert len(pii_replay.run_batch(batch, False).checks.findings()[1]) == 2
