"""``prev_rows`` and ``other_holder`` (``forensics/sites/_common.py``) over request-id codes,
held to their per-record forms ``prev_index_map`` and ``prev_holders`` on every lookup path:
each record's previous ids as a line of one matrix (most batches), and (record, code) keys
in a table or sorted when one record's previous list is long."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from site_records import record

from forensics.records import Record
from forensics.sites import _common
from forensics.sites._common import (
    RecordColumns,
    other_holder,
    prev_holders,
    prev_index_map,
    prev_rows,
)

IDS = "abcdef"
batches = st.lists(st.tuples(st.lists(st.sampled_from(IDS), unique=True, max_size=5),
                             st.lists(st.sampled_from(IDS) | st.none(), max_size=6)),
                   min_size=1, max_size=5)


def async_records(batch: list[tuple[list[str], list[str | None]]], long: bool) -> list[Record]:
    """``async_output`` records of (req_ids, prev_req_ids); ``long``: one more record whose
    previous batch holds 3,000 ids (its line would make the matrix large)."""
    if long:
        batch = [*batch, (["a", "x7"], [f"x{i}" for i in range(3000)])]
    return [record("async_output", req_ids=req, prev_req_ids=prev,
                   sampled_token_ids_cpu=np.zeros((1, 1), np.int32),
                   output_token_ids=[[1]] * len(req), vocab_size=10) for req, prev in batch]


@pytest.mark.parametrize("table", [True, False])
@settings(max_examples=150, deadline=None)
@given(batches, st.booleans())
def test_prev_rows_is_prev_index_map(table: bool, batch: list, long: bool) -> None:
    assert_prev_rows_is_prev_index_map(async_records(batch, long), table)


def assert_prev_rows_is_prev_index_map(records: list[Record], table: bool) -> None:
    """``prev_rows`` of ``records`` (``table``: keys looked up in a table where it fits; else
    never in a table) gives each current row the previous row ``prev_index_map`` gives (the
    last of a repeated id wins), known where it finds one."""
    saved = _common._LOOKUP_TABLE
    _common._LOOKUP_TABLE = saved if table else 0
    try:
        got, known = prev_rows(RecordColumns(records))
    finally:
        _common._LOOKUP_TABLE = saved
    want = [prev_index_map(r).get(q, -1) for r in records for q in r["req_ids"]]
    assert got.tolist() == want
    assert known.tolist() == [w >= 0 for w in want]


def test_the_last_of_a_repeated_previous_id_wins_where_the_row_matches_too() -> None:
    records = async_records([(["a", "b"], ["a", "b", "a"]), (["c"], ["c", None, None])],
                            long=False)
    got, known = prev_rows(RecordColumns(records))
    assert got.tolist() == [2, 1, 0] and known.tolist() == [True, True, True]


@settings(max_examples=150, deadline=None)
@given(batches, st.lists(st.integers(-2, 7), max_size=40))
def test_other_holder_is_prev_holders(batch: list, positions: list[int]) -> None:
    records = async_records(batch, long=False)
    counts = np.array([len(r["req_ids"]) for r in records], dtype=np.int64)
    pp = np.resize(np.array(positions or [0], dtype=np.int64), int(counts.sum()))
    got = other_holder(RecordColumns(records), pp, counts)
    want, at = [], 0
    for r in records:
        holders = prev_holders(r)
        for q in r["req_ids"]:
            p = int(pp[at])
            want.append(p in holders and 0 <= p < len(r["prev_req_ids"]) and holders[p] != q)
            at += 1
    assert got.tolist() == want
