"""The columnar core's building blocks: runs laid end to end, checks laid out per row and
checks sharing their groups give what the per-entry forms give."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.sites.core import (
    BatchRun,
    CheckList,
    Checks,
    _first_of_each,
    group_starts,
    runs_from,
    within,
)

INT64 = st.integers(-2**63, 2**63 - 1)


@given(st.lists(st.tuples(INT64, st.integers(0, 4)), max_size=6), st.booleans())
@settings(max_examples=200, deadline=None)
def test_runs_from_is_each_first_plus_its_positions(runs, one_length) -> None:
    """``runs_from`` is ``np.repeat(first, lengths) + within(lengths)``, wrapping alike, with
    runs of one length (its broadcast form) or not."""
    first = np.array([f for f, _ in runs], dtype=np.int64)
    lengths = np.array([n for _, n in runs], dtype=np.int64)
    if one_length and len(lengths):
        lengths[:] = lengths[0]
    with np.errstate(over="ignore"):
        want = np.repeat(first, lengths) + within(lengths)
    got = runs_from(first, lengths)
    assert got.dtype == np.int64
    assert got.tolist() == want.tolist()


def _table(checks: Checks) -> list[tuple[int, str, list[int]]]:
    rec, tensors, which, numbers = checks.range_table()
    return [(int(r), tensors[w], n.tolist())
            for r, w, n in zip(rec.tolist(), which.tolist(), numbers, strict=True)]


ROWS = st.lists(st.tuples(st.integers(0, 3), st.lists(st.integers(-3, 12), max_size=4)),
                max_size=6)


@given(ROWS, st.integers(1, 10))
@settings(max_examples=200, deadline=None)
def test_checks_per_row_are_the_checks_per_entry(rows, upper) -> None:
    """``Checks.of_row_runs`` (values per entry, the rest per row) gives the ranges and
    findings of ``Checks.of`` over the same entries spelled out."""
    rows = sorted(rows, key=lambda r: r[0])  # records non-decreasing
    run_record = np.array([r for r, _ in rows], dtype=np.int64)
    counts = np.array([len(v) for _, v in rows], dtype=np.int64)
    values = np.array([x for _, v in rows for x in v], dtype=np.int64)
    run_row = np.arange(len(rows), dtype=np.int64) + 7
    run_element = np.arange(len(rows), dtype=np.int64) * 10
    run_upper = upper + run_record
    per_row = Checks.of_row_runs("t", run_record, counts, values, run_row, run_element,
                                 run_upper)
    per_entry = Checks.of("t", np.repeat(run_record, counts), np.repeat(run_row, counts),
                          np.repeat(run_element, counts) + within(counts), values, 0,
                          np.repeat(run_upper, counts))
    assert _table(per_row) == _table(per_entry)
    assert per_row.findings() == per_entry.findings()


@given(ROWS, st.integers(1, 10), st.integers(1, 10))
@settings(max_examples=100, deadline=None)
def test_checks_sharing_groups_are_fresh_checks(rows, upper, other_upper) -> None:
    """``Checks.sharing`` (another tensor and bound over the same entries) gives what a
    fresh ``Checks.of`` of that tensor gives."""
    rows = sorted(rows, key=lambda r: r[0])
    record = np.array([r for r, v in rows for _ in v], dtype=np.int64)
    values = np.array([x for _, v in rows for x in v], dtype=np.int64)
    first = Checks.of("a", record, -1, -1, values, 0, upper)
    shared = first.sharing("b", np.full(len(values), other_upper, dtype=np.int64))
    fresh = Checks.of("b", record, -1, -1, values, 0, other_upper)
    assert _table(shared) == _table(fresh)
    assert shared.findings() == fresh.findings()
    assert _table(first) == _table(Checks.of("a", record, -1, -1, values, 0, upper))


def _neighbour_starts(record: np.ndarray) -> list[int]:
    """The first entry of each run of equal records, by comparing neighbours (the plain form)."""
    return [i for i in range(len(record)) if i == 0 or record[i] != record[i - 1]]


GROUPS = st.lists(st.tuples(st.integers(0, 6), st.integers(1, 30)), max_size=8)


@given(GROUPS, st.integers(0, 2**40))
@settings(max_examples=200, deadline=None)
def test_group_starts_by_search_are_the_neighbour_comparison(groups, offset) -> None:
    """``group_starts`` (searching each record value's first entry when the values are few
    for their entries, comparing neighbours otherwise) and its search form on its own give
    the first entry of each run of equal records."""
    values = np.cumsum([gap for gap, _ in groups], dtype=np.int64) + offset
    record = np.repeat(values, [n for _, n in groups])
    want = _neighbour_starts(record)
    assert group_starts(record, len(record)).tolist() == want
    if len(record):
        got = _first_of_each(record, int(record[0]), int(record[-1]))
        assert got.tolist() == want


@given(st.lists(st.integers(0, 5), max_size=8), st.booleans())
@settings(max_examples=200, deadline=None)
def test_within_is_each_position_in_its_run(lengths, one_length) -> None:
    """``within`` (its repeated form for runs of one length, or not) is each value's position
    in its run."""
    lengths = np.array(lengths, dtype=np.int64)
    if one_length and len(lengths):
        lengths[:] = lengths[0]
    want = [j for n in lengths.tolist() for j in range(n)]
    got = within(lengths)
    assert got.dtype == np.int64
    assert got.tolist() == want


def _findings(checks: Checks | CheckList) -> dict[int, list[dict]]:
    return checks.findings()


def _shared_parts(rows: list[tuple[int, list[int]]], upper: int) -> CheckList:
    """Checks of two tensors over the same entries (the second :meth:`Checks.sharing` the
    first's record column) and a third part of its own."""
    rows = sorted(rows, key=lambda r: r[0])
    record = np.array([r for r, v in rows for _ in v], dtype=np.int64)
    values = np.array([x for _, v in rows for x in v], dtype=np.int64)
    first = Checks.of("a", record, -1, -1, values, 0, upper)
    other = Checks.of_runs("c", np.bincount(record, minlength=4) if len(record) else
                           np.zeros(4, np.int64), np.sort(values), 0, upper + 1)
    return Checks.concat([first, first.sharing("b", np.full(len(values), upper + 2)), other])


@given(ROWS, st.integers(1, 10), st.permutations(range(4)), st.integers(0, 50))
@settings(max_examples=200, deadline=None)
def test_renumbered_checks_name_each_record_by_its_position(rows, upper, order, shift) -> None:
    """``renumbered`` (each part's record column gathered once, positions ``0...`` renaming
    nothing) gives each range and finding of record ``i`` to ``positions[i]``."""
    checks = _shared_parts(rows, upper)
    positions = np.array(order, dtype=np.int64) + shift
    for where in (positions, np.arange(4)):
        moved = checks.renumbered(where)
        want = [(int(where[r]), t, n) for r, t, n in _table_of(checks)]
        assert _table_of(moved) == sorted(want, key=lambda x: x[0])
        assert _findings(moved) == {int(where[r]): f for r, f in _findings(checks).items()}


def _table_of(checks: Checks | CheckList) -> list[tuple[int, str, list[int]]]:
    rec, tensors, which, numbers = checks.range_table()
    return [(int(r), tensors[w], n.tolist())
            for r, w, n in zip(rec.tolist(), which.tolist(), numbers, strict=True)]


@given(ROWS, st.integers(1, 10), st.lists(st.booleans(), min_size=4, max_size=4))
@settings(max_examples=200, deadline=None)
def test_restricted_checks_are_the_kept_records_ones(rows, upper, keep) -> None:
    """``restricted`` keeps exactly the ranges and findings of the records kept."""
    checks = _shared_parts(rows, upper)
    kept = np.array(keep)
    mine = checks.restricted(kept)
    assert _table_of(mine) == [t for t in _table_of(checks) if keep[t[0]]]
    assert _findings(mine) == {r: f for r, f in _findings(checks).items() if keep[r]}


@given(ROWS, ROWS, st.integers(1, 10), st.lists(st.booleans(), min_size=4, max_size=4))
@settings(max_examples=200, deadline=None)
def test_a_run_inheriting_records_is_whole_with_its_base(rows, base_rows, upper, keep) -> None:
    """``BatchRun.whole`` takes the inherited records' status, messages and checks from the
    base run and the others' from the run itself."""
    inherited = np.array(keep)
    base = BatchRun(np.array([0, 1, 2, 1], np.int8), {1: "base one", 3: "base three"},
                    _shared_parts(base_rows, upper), [None] * 4)
    own = BatchRun(np.array([1, 0, 1, 2], np.int8), {0: "own zero", 3: "own three"},
                   _shared_parts(rows, upper), [None] * 4, base, inherited)
    whole = own.whole()
    pick = [base if keep[r] else own for r in range(4)]
    assert whole.base is None
    assert whole.status.tolist() == [int(pick[r].status[r]) for r in range(4)]
    assert whole.messages == {r: pick[r].messages[r] for r in range(4) if r in pick[r].messages}
    assert _table_of(whole.checks) == [
        t for r in range(4) for t in _table_of(pick[r].checks) if t[0] == r]
    assert _findings(whole.checks) == {
        r: f for r in range(4) for q, f in _findings(pick[r].checks).items() if q == r}
