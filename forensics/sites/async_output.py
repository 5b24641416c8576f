"""Site ``async_output``: ``InputBatch.update_async_output_token_ids``."""

from __future__ import annotations

from forensics.records import FieldSpec

NAME = "async_output"
FIELDS = (
    FieldSpec("req_ids", "str_list", doc="[n] current rows"),
    FieldSpec("prev_req_id_to_index", "index_map", required=False),
    FieldSpec("prev_req_ids", "opt_str_list", required=False),
    FieldSpec("sampled_token_ids_cpu", "tensor", ndim=2, doc="[p, k] int32"),
    FieldSpec("output_token_ids", "ragged", required=False, doc="full output lists"),
    FieldSpec("output_tail", "ragged", required=False, doc="last ids of each output list"),
    FieldSpec("output_len", "tensor", required=False, doc="[n] full lengths"),
    FieldSpec("vocab_size", "int"),
)
OUTPUT_FIELDS = ("output_token_ids", "output_tail", "output_len")
SUMMARY_BOUND = "vocab_size"
