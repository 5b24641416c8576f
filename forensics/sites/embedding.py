"""Site ``embedding``: the token-embedding lookup of the model's ``input_ids`` (the sink)."""

from __future__ import annotations

from forensics.records import FieldSpec

NAME = "embedding"
FIELDS = (
    FieldSpec("input_ids", "tensor", doc="[t]"),
    FieldSpec("num_embeddings", "int", doc="rows of the weight being indexed"),
    FieldSpec("tp_size", "int", required=False),
    FieldSpec("req_ids", "str_list", required=False, doc="requests of the batch rows"),
    FieldSpec("cu_num_tokens", "tensor", required=False, doc="[n] token -> row mapping"),
)
OUTPUT_FIELDS: tuple[str, ...] = ()
SUMMARY_BOUND = "num_embeddings"
