"""Small in-memory records of one async spec-decode step per site (clean unless edited)."""

from __future__ import annotations

import numpy as np

from forensics.records import Record

VOCAB = 248320
SPEC = 4


def clean_step(step: int, reqs: list[str], rank: int = 0, base: int = 100) -> list[Record]:
    """The four sites of one decode step of ``reqs``: each had 1 + SPEC tokens last step."""
    n = len(reqs)
    per = 1 + SPEC
    cu = np.arange(1, n + 1, dtype=np.int32) * per
    pp = np.arange(n, dtype=np.int64)
    sampled = (base + np.arange(n, dtype=np.int32) * 10).reshape(n, 1)
    drafts = (base + 1 + np.arange(n * SPEC, dtype=np.int64)).reshape(n, SPEC)
    staged = np.zeros(n * per, dtype=np.int32)
    ids = np.concatenate([np.r_[sampled[i], drafts[i]] for i in range(n)]).astype(np.int64) \
        if n else np.zeros(0, np.int64)
    prev = {r: i for i, r in enumerate(reqs)}
    return [
        Record("batch_change", step, rank, {
            "prev_positions": pp.astype(np.int32),
            "valid_sampled_token_count": np.full(n, 2, np.int32),
            "num_computed_tokens": np.arange(8, dtype=np.int32) * 10,
            "num_accepted_tokens": np.ones(n, np.int32),
            "prev_num_draft_tokens": np.full(8, SPEC, np.int32),
            "cpu_num_computed_tokens": np.arange(n, dtype=np.int32) * 10 + 3,
            "req_ids": list(reqs), "prev_req_id_to_index": dict(prev)}),
        Record("prepare_input_ids", step, rank, {
            "prev_positions": pp, "prev_sampled_token_ids": sampled, "input_ids": staged,
            "cu_num_tokens": cu, "num_draft_tokens": np.full(n, SPEC, np.int32),
            "prev_num_spec_tokens": SPEC, "draft_token_ids": drafts, "vocab_size": VOCAB,
            "req_ids": list(reqs)}),
        Record("async_output", step, rank, {
            "req_ids": list(reqs), "prev_req_id_to_index": dict(prev),
            "sampled_token_ids_cpu": np.c_[sampled, np.full((n, SPEC), -1, np.int32)],
            "output_token_ids": [[7, 8] + [-1] * per for _ in reqs], "vocab_size": VOCAB}),
        Record("embedding", step, rank, {
            "input_ids": ids, "num_embeddings": VOCAB, "req_ids": list(reqs),
            "cu_num_tokens": cu}),
    ]


def by_site(records: list[Record], site: str, step: int) -> Record:
    """The record of ``site`` at ``step``."""
    return next(r for r in records if r.site == site and r.step == step)
