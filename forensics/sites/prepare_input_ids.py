"""Site ``prepare_input_ids``: the async branch of ``GPUModelRunner._prepare_input_ids``."""

from __future__ import annotations

from forensics.records import FieldSpec

NAME = "prepare_input_ids"
FIELDS = (
    FieldSpec("prev_positions", "tensor", doc="[n]"),
    FieldSpec("prev_sampled_token_ids", "tensor", ndim=2, doc="[p, 1] int32"),
    FieldSpec("input_ids", "tensor", doc="[t] CPU-staged ids"),
    FieldSpec("input_ids_device", "tensor", required=False, doc="[t] device buffer before"),
    FieldSpec("cu_num_tokens", "tensor", doc="[n] inclusive cumulative scheduled tokens"),
    FieldSpec("num_draft_tokens", "tensor", doc="[n]"),
    FieldSpec("prev_num_spec_tokens", "int"),
    FieldSpec("draft_token_ids", "tensor", ndim=2, required=False, doc="[p', s]"),
    FieldSpec("vocab_size", "int"),
    FieldSpec("req_ids", "str_list", required=False),
)
OUTPUT_FIELDS = ("input_ids_device",)
SUMMARY_BOUND = "vocab_size"
