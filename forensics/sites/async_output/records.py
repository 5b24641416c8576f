"""What a record of ``async_output`` holds (its fields, which of them are outputs, its place in the
origin chain) and the cross-field checks a record, or a whole batch, must pass."""

from __future__ import annotations

import numpy as np

from forensics.records import POSITIVE, FieldSpec, Record
from forensics.sites._common import (
    BatchColumns,
    require,
    require_len,
    require_unique,
    rows_with_any,
    screen_unique,
)
from forensics.sites._fields import PREV_REQUESTS

NAME = "async_output"
FIELDS = (
    FieldSpec("req_ids", "str_list", doc="[n] current rows"),
    *PREV_REQUESTS,
    FieldSpec("sampled_token_ids_cpu", "tensor", ndim=2, rank_shared=True, doc="[p, k] int32",
              token_ids=True),
    FieldSpec("output_token_ids", "ragged", required=False, doc="full output lists",
              token_ids=True),
    FieldSpec("output_tail", "ragged", required=False, doc="last ids of each output list",
              token_ids=True),
    FieldSpec("output_len", "tensor", required=False, doc="[n] full lengths"),
    FieldSpec("vocab_size", "int", token_bound=True, limits=POSITIVE),
)
OUTPUT_FIELDS = ("output_token_ids", "output_tail", "output_len")
SUMMARY_BOUND = "vocab_size"
SUMMARY_TENSOR = "out.output_token_ids"
#: the place in the origin chain (pipeline positions): the record of step ``s`` writes the ids
#: of step ``s - 1`` into the output lists, which the input staging reads only at the next step,
#: so at equal steps this site is farther from the sink than the input staging (position 1) and
#: nearer than the batch change (position 0)
ORIGIN_POSITION = 0.5
#: the tensor of the sampled ids the call reads (at each request's previous row, which no
#: captured tensor holds as such: ``index_tensor`` null)
SAMPLED = "sampled_token_ids_cpu"


def check_record(record: Record, where: str) -> None:
    """Cross-field checks: the previous batch is given, outputs are full lists or tails with
    lengths, one per current row.

    Raises:
        CaptureFormatError: naming the field and what was expected.
    """
    n = len(record["req_ids"])
    require_unique(record, "req_ids", where)
    require("prev_req_id_to_index" in record or "prev_req_ids" in record, where,
            "prev_req_id_to_index", "or 'prev_req_ids' must give the previous batch")
    has_full, has_tail = "output_token_ids" in record, "output_tail" in record
    require(has_full != has_tail, where, "output_token_ids",
            "or 'output_tail' (with 'output_len') must be given, not both")
    for name in ("output_token_ids", "output_tail", "output_len"):
        require_len(record, name, n, where, "one per current row")
    if has_tail:
        require("output_len" in record, where, "output_len", "must come with 'output_tail'")
        _check_tails(record, where)


def check_batch(cols: BatchColumns) -> np.ndarray:
    """:func:`check_record` on a whole batch at once: the records it may reject."""
    n = cols.length("req_ids")
    full, tail = cols.present("output_token_ids"), cols.present("output_tail")
    bad = screen_unique(cols, "req_ids") | (full == tail)
    bad |= ~(cols.present("prev_req_id_to_index") | cols.present("prev_req_ids"))
    for name in ("output_token_ids", "output_tail", "output_len"):
        bad |= cols.present(name) & (cols.length(name) != n)
    has_len = cols.present("output_len")
    bad |= tail & ~has_len
    if not (tail & has_len).any():
        return bad
    lengths, counts = cols.flat("output_len")
    tails, tail_counts = cols.inner_lengths("output_tail")
    if not np.array_equal(counts, tail_counts):
        return bad | tail  # the rows whose counts differ are flagged; check the rest per row
    wrong = (tails > lengths) | ((tails == 0) & (lengths != 0))
    return bad | (tail & rows_with_any(wrong, counts)) if wrong.any() else bad


def _check_tails(record: Record, where: str) -> None:
    """Each tail holds the last ids of its list: at most ``output_len`` ids, and some ids
    unless the list is empty (one numpy pass; the first bad row is named)."""
    lengths = np.asarray(record["output_len"], dtype=np.int64)
    tails = np.fromiter(map(len, record["output_tail"]), dtype=np.int64,
                        count=len(record["output_tail"]))
    bad = np.flatnonzero((tails > lengths) | ((tails == 0) & (lengths != 0)))
    if len(bad):
        row = int(bad[0])
        require(False, where, "output_tail", f"row {row}: must hold the last ids of a list of "
                f"{int(lengths[row])} ids (got {int(tails[row])})")
