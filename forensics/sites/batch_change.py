"""Site ``batch_change``: ``vllm.v1.spec_decode.utils.update_num_computed_tokens_for_batch_change``."""

from __future__ import annotations

from forensics.records import FieldSpec

NAME = "batch_change"
FIELDS = (
    FieldSpec("prev_positions", "tensor", doc="[n] current row -> previous row, -1 for new"),
    FieldSpec("valid_sampled_token_count", "tensor", doc="[p] per previous row"),
    FieldSpec("num_computed_tokens", "tensor", doc="[m] max_num_reqs buffer"),
    FieldSpec("num_accepted_tokens", "tensor", doc="[n]"),
    FieldSpec("prev_num_draft_tokens", "tensor", doc="[q] max_num_reqs buffer"),
    FieldSpec("cpu_num_computed_tokens", "tensor", doc="[n]"),
    FieldSpec("req_ids", "str_list", required=False, doc="current rows' request ids"),
    FieldSpec("prev_req_id_to_index", "index_map", required=False),
    FieldSpec("prev_req_ids", "opt_str_list", required=False),
)
OUTPUT_FIELDS = ("num_computed_tokens", "num_accepted_tokens")
SUMMARY_BOUND = "bound"
