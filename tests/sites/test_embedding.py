"""The embedding sink: one-GPU lookups raise, tensor-parallel ones mask; findings for everyone."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from site_records import i32, record

from forensics.judge.findings import judge_record
from forensics.outcome import STATUSES, Outcome
from forensics.sites import embedding as emb
from forensics.sites._common import RecordColumns


def test_out_of_range_ids_raise_with_one_gpu_and_are_masked_with_tp() -> None:
    rec = record("embedding", input_ids=np.array([1, 10, -1]), num_embeddings=10)
    assert emb.SITE.upstream(rec).status == "index_error"
    tp = record("embedding", input_ids=np.array([1, 10]), num_embeddings=10, tp_size=2)
    assert emb.SITE.upstream(tp).status == "ok"


def test_findings_map_tokens_to_rows_and_requests() -> None:
    rec = record("embedding", input_ids=i32(1, 2, 10, 3), num_embeddings=10,
                 cu_num_tokens=i32(2, 4), req_ids=["a", "b"])
    found = judge_record(rec, Outcome("ok"))
    assert [(f["row"], f["element"], f["value"], f["req_id"]) for f in found] == [
        (1, 2, 10, "b")]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(-2, 12), max_size=6), st.integers(0, 11),
                          st.sampled_from([1, 2])), min_size=1, max_size=6))
def test_vectorised_lookup_equals_one_record_at_a_time(specs) -> None:
    records = [record("embedding", input_ids=np.array(ids, np.int64), num_embeddings=bound,
                      tp_size=tp) for ids, bound, tp in specs]
    statuses = emb.prepare_columns(RecordColumns(records)).status.tolist()
    for many, rec in zip(statuses, records, strict=True):
        one = emb.SITE.upstream(rec)
        assert STATUSES[many] == one.status
        ids = np.asarray(rec["input_ids"])
        bad = ((ids < 0) | (ids >= rec["num_embeddings"])).any()
        assert (one.status == "index_error") == bool(bad and rec["tp_size"] == 1)
