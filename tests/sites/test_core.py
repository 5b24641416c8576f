"""The columnar core's building blocks: runs laid end to end, checks laid out per row and
checks sharing their groups give what the per-entry forms give."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.sites.core import Checks, runs_from, within

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
