"""The batch_change models: vLLM 0.33.0's gathers, the stale-row guard, and the vectorised path."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from site_records import i32, record

from forensics.errors import CaptureFormatError
from forensics.judge.findings import judge_record
from forensics.sites import batch_change as bc


def make(pp, valid=(2, 1), computed=(10, 20, 30, 40, 0, 0), drafts=(2, 2, 2, 2), **extra):
    n = len(pp)
    fields = dict(prev_positions=i32(*pp), valid_sampled_token_count=i32(*valid),
                  num_computed_tokens=i32(*computed), num_accepted_tokens=i32(*[1] * n),
                  prev_num_draft_tokens=i32(*drafts),
                  cpu_num_computed_tokens=i32(*[100 + i for i in range(n)]))
    fields.update(extra)
    return record("batch_change", **fields)


def test_upstream_corrects_rows_with_drafts_and_keeps_cpu_values_for_new_rows() -> None:
    out = bc.SITE.upstream(make([1, -1]))
    assert out.status == "ok"
    np.testing.assert_array_equal(out.outputs["num_computed_tokens"], [21, 101, 30, 40, 0, 0])
    np.testing.assert_array_equal(out.outputs["num_accepted_tokens"], [1, 1])
    assert out.outputs["num_computed_tokens"].dtype == np.int32
    assert out.outputs["num_accepted_tokens"].dtype == np.int32


def test_rows_without_previous_drafts_take_the_cpu_value() -> None:
    out = bc.SITE.upstream(make([0], drafts=(0,)))
    np.testing.assert_array_equal(out.outputs["num_computed_tokens"][:1], [100])


def test_stale_positive_row_is_an_index_error_upstream_and_a_cpu_fallback_patched() -> None:
    rec = make([0, 3])
    up, pa = bc.SITE.upstream(rec), bc.SITE.patched(rec)
    assert up.status == "index_error" and "out of bounds" in up.message
    found = judge_record(rec, up)
    assert {(f["tensor"], f["row"], f["value"], f["upper"]) for f in found} == {
        ("valid_sampled_token_count", 1, 3, 2)}
    assert pa.status == "ok" and judge_record(rec, pa) == []
    np.testing.assert_array_equal(pa.outputs["num_computed_tokens"][:2], [12, 101])


def test_empty_valid_count_is_out_of_bounds_even_when_every_row_is_new() -> None:
    rec = make([-1, -1], valid=())
    up = bc.SITE.upstream(rec)
    assert up.status == "index_error"
    assert [(f["row"], f["value"], f["upper"]) for f in judge_record(rec, up)] == [
        (0, 0, 0), (1, 0, 0)]
    assert bc.SITE.patched(rec).status == "ok"


def test_misattributed_row_needs_request_ids() -> None:
    rec = make([1], req_ids=["a"], prev_req_ids=["a", "b"])
    found = judge_record(rec, bc.SITE.upstream(rec))
    assert [(f["kind"], f["row"], f["value"], f["req_id"]) for f in found] == [
        ("misattributed", 0, 1, "a")]
    assert judge_record(make([1]), bc.SITE.upstream(make([1]))) == []
    same = make([1], req_ids=["b"], prev_req_id_to_index={"b": 1})
    assert judge_record(same, bc.SITE.upstream(same)) == []


def test_check_record_rejects_per_row_tensors_of_another_length() -> None:
    with pytest.raises(CaptureFormatError, match="num_accepted_tokens"):
        record("batch_change", prev_positions=i32(0, 1), valid_sampled_token_count=i32(1),
               num_computed_tokens=i32(1, 2), num_accepted_tokens=i32(1),
               prev_num_draft_tokens=i32(1), cpu_num_computed_tokens=i32(1, 2))


def test_int64_buffers_keep_their_width_and_int32_wraps_like_torch() -> None:
    rec = record("batch_change", prev_positions=np.array([0], np.int64),
                 valid_sampled_token_count=np.array([2**31 + 5], np.int64),
                 num_computed_tokens=i32(2**31 - 1), num_accepted_tokens=np.array([0], np.int64),
                 prev_num_draft_tokens=i32(1), cpu_num_computed_tokens=i32(0))
    for out in (bc.SITE.upstream(rec),):
        assert out.outputs["num_computed_tokens"].dtype == np.int32
        assert out.outputs["num_accepted_tokens"].dtype == np.int64
        assert int(out.outputs["num_computed_tokens"][0]) == 4  # (2**31 - 1) + int32(2**31 + 5)
        assert int(out.outputs["num_accepted_tokens"][0]) == 2**31 + 5


dtypes = st.sampled_from([np.int32, np.int64])


@st.composite
def bc_records(draw):
    n = draw(st.integers(0, 5))
    ints = lambda size, lo, hi: np.array(draw(st.lists(st.integers(lo, hi), min_size=size,  # noqa: E731
                                                       max_size=size)), dtype=draw(dtypes))
    p, m, q = draw(st.integers(0, 6)), n + draw(st.integers(0, 3)), draw(st.integers(0, 7))
    return record("batch_change", prev_positions=ints(n, -1, 7),
                  valid_sampled_token_count=ints(p, 0, 5), num_computed_tokens=ints(m, 0, 99),
                  num_accepted_tokens=ints(n, 0, 5), prev_num_draft_tokens=ints(q, 0, 2),
                  cpu_num_computed_tokens=ints(n, 0, 99))


def _same(a, b, accesses: bool = True) -> None:
    assert (a.status, sorted(a.outputs)) == (b.status, sorted(b.outputs))
    for key in a.outputs:
        assert a.outputs[key].dtype == b.outputs[key].dtype
        np.testing.assert_array_equal(a.outputs[key], b.outputs[key])
    for x, y in zip(a.accesses, b.accesses, strict=True) if accesses else ():
        assert (x.tensor, x.upper) == (y.tensor, y.upper)
        np.testing.assert_array_equal(x.values, y.values)
        np.testing.assert_array_equal(x.rows, y.rows)


@settings(max_examples=200, deadline=None)
@given(bc_records())
def test_patched_never_reads_out_of_bounds(rec) -> None:
    out = bc.SITE.patched(rec)
    assert out.status == "ok"
    assert judge_record(rec, out) == []
    up = bc.SITE.upstream(rec)
    if up.status == "ok":
        _same(up, out, accesses=False)
