"""Model Runner V2's origin chain: a bad id at the embedding names the V2 site that wrote it,
across steps (``post_update`` -> ``combine_tokens`` -> ``embedding``)."""

from __future__ import annotations

import numpy as np
from site_records import i32, record
from v2_records import VOCAB, combine, post

import forensics


def _embedding(step: int, ids: list[int]) -> object:
    return record("embedding", step=step, input_ids=np.array(ids, np.int32),
                  num_embeddings=VOCAB, cu_num_tokens=i32(3, 4), req_ids=["a", "b"])


def _sink_findings(records: list[object]) -> list[tuple[object, ...]]:
    result = forensics.replay(records, variants=["upstream", "patched"])
    table = result.findings
    sink = table[table["site"] == "embedding"]
    return [tuple(r) for r in sink[["variant", "step", "row", "value", "origin", "resolved",
                                    "req_id"]].itertuples(index=False)]


def test_a_negative_draft_at_the_embedding_comes_from_combine_tokens() -> None:
    found = _sink_findings([combine(step=5, draft=(7, -1)), _embedding(5, [11, 7, -1, 21])])
    assert found == [("upstream", 5, 0, -1, "combine_tokens", False, "a"),
                     ("patched", 5, 0, -1, "combine_tokens", True, "a")]


def test_a_vocab_size_sample_is_traced_to_combine_tokens_of_the_next_step() -> None:
    records = [post(step=4, sampled=(5, VOCAB, -1), bin_counts_rows=5),
               combine(step=5, last=VOCAB), _embedding(5, [VOCAB, 7, 8, 21])]
    found = _sink_findings(records)
    assert found[0] == ("upstream", 5, 0, VOCAB, "combine_tokens", False, "a")
    result = forensics.replay(records, variants=["upstream", "patched"])
    verdicts = result.verdicts
    assert verdicts["upstream"]["post_update"] == "violation"
    assert verdicts["patched"]["post_update"] == "ok"


def test_without_combine_tokens_the_stored_sample_is_the_origin() -> None:
    records = [post(step=4, sampled=(5, VOCAB, -1), bin_counts_rows=5),
               _embedding(5, [VOCAB, 7, 8, 21])]
    assert _sink_findings(records)[0][4] == "post_update"
