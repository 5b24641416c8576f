"""Site ``post_update`` (Model Runner V2): the per-slot state it stores after sampling, the
sampled ids used as an index into ``output_bin_counts``, and the vocabulary check of the patch."""

from __future__ import annotations

import numpy as np
from site_records import i32
from v2_records import VOCAB, post

from forensics.judge.findings import judge_record
from forensics.sites import post_update as site


def test_stores_the_last_sampled_id_and_moves_the_lengths() -> None:
    out = site.SITE.upstream(post())
    assert out.status == "ok"
    assert out.outputs["last_sampled_tokens"].tolist() == [22, 0, 0, 6]
    assert out.outputs["total_len"].tolist() == [8, 0, 0, 11]
    assert out.outputs["num_computed_tokens"].tolist() == [7, 0, 0, 9]  # 3 - 1 rejected
    assert judge_record(post(), out) == []


def test_a_vocab_size_id_is_an_index_into_another_slots_counts_and_stored() -> None:
    rec = post(sampled=(5, VOCAB, -1), bin_counts_rows=5)
    out = site.SITE.upstream(rec)
    assert out.status == "ok"  # slot 3's id V lands on slot 4's first count: silent
    found = {(f["tensor"], f["row"], f["element"], f["value"]) for f in judge_record(rec, out)}
    assert found == {("output_bin_counts", 0, 1, VOCAB),
                     ("out.last_sampled_tokens", 0, 3, VOCAB)}


def test_an_id_past_the_last_slots_counts_is_an_illegal_access() -> None:
    rec = post(sampled=(5, VOCAB, -1), bin_counts_rows=4,
               idx_mapping=np.array([3, 0], np.int64), bin_counts_width=VOCAB - 1)
    out = site.SITE.upstream(rec)
    assert out.status == "index_error" and "output_bin_counts[3, 50]" in out.message


def test_the_patch_stops_the_count_at_the_first_id_outside_the_vocabulary() -> None:
    rec = post(sampled=(5, VOCAB, -1))
    out = site.SITE.patched(rec)
    assert out.outputs["last_sampled_tokens"].tolist() == [22, 0, 0, 5]
    assert out.outputs["total_len"].tolist() == [8, 0, 0, 10]
    assert judge_record(rec, out) == []


def test_negative_slots_are_skipped_and_a_stale_column_is_found() -> None:
    rec = post(idx_mapping=np.array([-1, 0], np.int64), total_len=i32(64, 0, 0, 9))
    out = site.SITE.upstream(rec)
    assert out.outputs["last_sampled_tokens"].tolist() == [22, 0, 0, 11]
    late = post(total_len=i32(7, 0, 0, 63))
    found = judge_record(late, site.SITE.upstream(late))
    assert [(f["tensor"], f["row"], f["element"], f["value"], f["upper"]) for f in found] == [
        ("all_token_ids", 0, 1, 64, 64)]


def test_a_slot_outside_the_draft_destination_is_an_illegal_access() -> None:
    """Slot 3 of a ``draft_tokens_out`` of 2 rows: the kernel writes outside it (on a GPU an
    illegal access), reported as ``index_error`` with the slot found, not a Python error."""
    rec = post(draft_tokens=np.zeros((2, 2), np.int32), draft_tokens_out=np.zeros((2, 2), np.int32))
    out = site.SITE.upstream(rec)
    assert out.status == "index_error" and "draft_tokens_out slot 3 of 2" in out.message
    found = [(f["tensor"], f["row"], f["value"], f["upper"]) for f in judge_record(rec, out)]
    assert found == [("draft_tokens_out", 0, 3, 2)]
