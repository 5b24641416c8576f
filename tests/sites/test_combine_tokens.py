"""Site ``combine_tokens`` (Model Runner V2): the kernel's writes into ``input_ids``, the ids it
passes on unclamped, the slot reads, and the patch that rejects negative drafts."""

from __future__ import annotations

import numpy as np
from site_records import i32
from v2_records import VOCAB, combine

from forensics.judge.findings import judge_record
from forensics.sites import combine_tokens as site


def test_writes_the_last_sampled_token_and_the_drafts_of_each_slot() -> None:
    out = site.SITE.upstream(combine())
    assert out.status == "ok"
    assert out.outputs["input_ids"].tolist() == [11, 7, 8, 21, 99, 99]
    assert judge_record(combine(), out) == []


def test_a_negative_draft_is_written_as_it_is_and_found_at_its_row_and_slot() -> None:
    rec = combine(draft=(7, -1))
    out = site.SITE.upstream(rec)
    assert out.status == "ok" and out.outputs["input_ids"][2] == -1
    found = judge_record(rec, out)
    assert [(f["tensor"], f["row"], f["element"], f["value"], f["upper"], f["req_id"])
            for f in found] == [("out.input_ids", 0, 2, -1, VOCAB, "a")]


def test_the_patch_rejects_a_negative_draft_but_not_a_vocab_size_last_token() -> None:
    assert site.SITE.patched(combine(draft=(7, -1))).outputs["input_ids"].tolist()[:3] == [11, 7, 0]
    rec = combine(last=VOCAB)
    found = judge_record(rec, site.SITE.patched(rec))
    assert [(f["element"], f["value"]) for f in found] == [(0, VOCAB)]


def test_a_prefill_row_is_left_alone() -> None:
    rec = combine(seq_lens=i32(5, 7))  # slot 3 has prefill_len 5: still in its prompt
    assert site.SITE.upstream(rec).outputs["input_ids"].tolist() == [99, 99, 99, 21, 99, 99]


def test_a_slot_outside_the_buffers_is_an_illegal_read() -> None:
    rec = combine(idx_mapping=np.array([4, 0], np.int64))
    out = site.SITE.upstream(rec)
    assert out.status == "index_error" and "slot 4" in out.message
    found = judge_record(rec, out)
    assert {(f["tensor"], f["row"], f["value"], f["upper"]) for f in found} >= {
        ("prefill_len", 0, 4, 4), ("last_sampled_tokens", 0, 4, 4)}


def test_drafts_past_the_row_width_read_the_next_slot() -> None:
    rec = combine(cu_num_logits=i32(0, 4, 5), query_start_loc=i32(0, 4, 5),
                  idx_mapping=np.array([2, 0], np.int64), prefill_len=i32(4, 0, 5, 5),
                  input_ids=np.full(6, 99, np.int32))
    out = site.SITE.upstream(rec)
    assert out.outputs["input_ids"].tolist()[:4] == [0, 0, 0, 7]  # slot 3's first draft
    found = judge_record(rec, out)
    assert [(f["tensor"], f["row"], f["element"], f["upper"]) for f in found] == [
        ("draft_tokens.column", 0, 2, 2)]
