"""Model Runner V2 record builders for the site tests: a small batch as vLLM's V2 holds it."""

from __future__ import annotations

from typing import Any

import numpy as np
from site_records import i32, record

from forensics.records import Record

VOCAB = 50


def combine(draft: tuple[int, int] = (7, 8), last: int = 11, **change: Any) -> Record:
    """A ``combine_tokens`` record: row 0 (slot 3) verifies two drafts, row 1 (slot 0) decodes
    one token; the input buffer holds 6 slots."""
    drafts = np.zeros((4, 2), np.int32)
    drafts[3] = draft
    fields: dict[str, Any] = dict(
        input_ids=np.full(6, 99, np.int32), idx_mapping=np.array([3, 0], np.int64),
        last_sampled_tokens=i32(21, 0, 0, last), query_start_loc=i32(0, 3, 4),
        seq_lens=i32(10, 7), prefill_len=i32(4, 0, 0, 5), draft_tokens=drafts,
        cu_num_logits=i32(0, 3, 4), num_new_sampled_tokens=1, vocab_size=VOCAB,
        req_ids=["a", "b"])
    fields.update(change)
    return record("combine_tokens", **fields)


def post(sampled: tuple[int, int, int] = (5, 6, -1), num_sampled: int = 2,
         **change: Any) -> Record:
    """A ``post_update`` record: row 0 (slot 3) accepted one draft and sampled ``num_sampled``
    ids; row 1 (slot 0) sampled one id."""
    fields: dict[str, Any] = dict(
        idx_mapping=np.array([3, 0], np.int64), num_computed_tokens=i32(6, 0, 0, 7),
        last_sampled_tokens=i32(21, 0, 0, 11),
        sampled_tokens=np.array([sampled, (22, -1, -1)], np.int32),
        num_sampled=i32(num_sampled, 1), num_rejected=i32(3 - num_sampled, 0),
        total_len=i32(7, 0, 0, 9), all_token_ids_width=64, bin_counts_rows=4,
        bin_counts_width=VOCAB, vocab_size=VOCAB, query_start_loc=i32(0, 3, 4),
        req_ids=["a", "b"])
    fields.update(change)
    return record("post_update", **fields)


def drafts(draft: int = 9, **change: Any) -> Record:
    """A ``rejection_drafts`` record: request "a" (slot 1, past its prompt of 4) verifies two
    drafts (``draft`` and 3) at logits rows 1 and 2, request "b" (slot 0) decodes (row 3);
    the step's 5 tokens, the first of "a" at position 7."""
    fields: dict[str, Any] = dict(
        input_ids=i32(5, draft, 3, 8, 99), positions=np.array([7, 8, 9, 6, 0], np.int64),
        logits_indices=np.array([0, 1, 2, 3], np.int64),
        expanded_idx_mapping=np.array([1, 1, 1, 0], np.int64),
        expanded_local_pos=i32(0, 1, 2, 0), prefill_len=i32(5, 4), vocab_size=VOCAB,
        req_ids=["a", "b"])
    fields.update(change)
    return record("rejection_drafts", **fields)
