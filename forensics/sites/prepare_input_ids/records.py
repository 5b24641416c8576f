"""What a record of ``prepare_input_ids`` holds (its fields, its output, the tensors it indexes)
and the cross-field checks a record, or a whole batch, must pass."""

from __future__ import annotations

import numpy as np

from forensics.records import COUNT, POSITIVE, FieldSpec, Record
from forensics.sites._common import (
    BatchColumns,
    aligned,
    require,
    require_rows,
    row_last,
    row_steps,
    rows_with_any,
    screen_rows,
)

NAME = "prepare_input_ids"
FIELDS = (
    FieldSpec("prev_positions", "tensor", rank_shared=True, doc="[n]"),
    FieldSpec("prev_sampled_token_ids", "tensor", ndim=2, rank_shared=True, doc="[p, 1] int32",
              token_ids=True),
    FieldSpec("input_ids", "tensor", rank_shared=True, doc="[t] CPU-staged ids", token_ids=True),
    FieldSpec("input_ids_device", "tensor", required=False, doc="[t] device buffer before",
              token_ids=True),
    FieldSpec("cu_num_tokens", "tensor", doc="[n] inclusive cumulative scheduled tokens"),
    FieldSpec("num_draft_tokens", "tensor", doc="[n]"),
    FieldSpec("prev_num_spec_tokens", "int", limits=COUNT),
    FieldSpec("draft_token_ids", "tensor", ndim=2, required=False, doc="[p', s]",
              token_ids=True),
    FieldSpec("vocab_size", "int", token_bound=True, limits=POSITIVE),
    FieldSpec("req_ids", "str_list", required=False),
)
OUTPUT_FIELDS = ("input_ids_device",)
SUMMARY_BOUND = "vocab_size"
SUMMARY_TENSOR = "out.input_ids_device"
OUTPUT_TENSOR = "out.input_ids_device"
SAMPLED, DRAFTS = "prev_sampled_token_ids", "draft_token_ids"
#: what a draft index indexes: ``draft_token_ids.flatten()[prev_positions[r] * spec + j]``
DRAFTS_FLAT = "draft_token_ids.flatten()"
#: fields with one entry per current row
_ROWS = ("cu_num_tokens", "num_draft_tokens", "req_ids")


def total_tokens(record: Record) -> int:
    """Total scheduled tokens of the step: ``cu_num_tokens[-1]``, or 0 without rows."""
    cu = record["cu_num_tokens"]
    return int(cu[-1]) if len(cu) else 0


def check_record(record: Record, where: str) -> None:
    """Cross-field checks: one entry per row, each row scheduling its token and its drafts,
    buffers holding every scheduled token.

    Raises:
        CaptureFormatError: naming the field and what was expected.
    """
    require_rows(record, _ROWS, where)
    drafts = np.asarray(record["num_draft_tokens"], dtype=np.int64)
    cu = np.asarray(record["cu_num_tokens"], dtype=np.int64)
    counts = np.diff(cu, prepend=0)
    require(bool((drafts >= 0).all()), where, "num_draft_tokens", "must be >= 0")
    # in exact arithmetic: every cu >= 1 (so no step overflows int64), each step > drafts
    require(bool((cu >= 1).all() and (counts > drafts).all()), where, "cu_num_tokens",
            "must give each row at least 1 + num_draft_tokens[row] tokens")
    total = total_tokens(record)
    for name in ("input_ids", "input_ids_device"):
        if name in record:
            require(len(record[name]) >= total, where, name,
                    f"must hold the {total} scheduled tokens (cu_num_tokens[-1])")


def check_batch(cols: BatchColumns) -> np.ndarray:
    """:func:`check_record` on a whole batch at once: the records it may reject."""
    bad = screen_rows(cols, _ROWS)
    cu, drafts, counts = aligned(cols, ("cu_num_tokens", "num_draft_tokens"))
    bad |= rows_with_any((drafts < 0) | (cu < 1) | (row_steps(cu, counts) <= drafts), counts)
    total = row_last(cu, counts)
    for name in ("input_ids", "input_ids_device"):
        bad |= cols.present(name) & (cols.length(name) < total)
    return bad
