"""Site ``embedding``: the token-embedding lookup of the model's ``input_ids`` (the sink).

With one GPU (``tp_size`` absent or 1) an id outside ``[0, num_embeddings)`` raises (on the GPU:
the ``indexSelectSmallIndex`` / ``vectorized_gather_kernel`` asserts; on CPU an IndexError).
With tensor parallelism each rank masks ids outside its shard, so such an id is silently zeroed.
There is no patch: ``patched`` is ``upstream``. ``cu_num_tokens`` and ``req_ids``, when given,
map each token to its batch row and request.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from forensics.outcome import Outcome
from forensics.records import FieldSpec, Record
from forensics.sites._common import (
    BatchColumns,
    ids_outside,
    require,
    require_len,
    row_last,
    row_steps,
    rows_of_slots,
    rows_with_any,
)

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
SUMMARY_TENSOR = "input_ids"
_MESSAGE = "IndexError: index out of range in self"


def check_record(record: Record, where: str) -> None:
    """Cross-field checks: sane bound and tensor-parallel size, a row mapping that covers at
    most the ids and names one request per row.

    Raises:
        CaptureFormatError: naming the field and what was expected.
    """
    require(record["num_embeddings"] >= 0, where, "num_embeddings", "must be >= 0")
    require(record.get("tp_size", 1) >= 1, where, "tp_size", "must be >= 1")
    cu = record.get("cu_num_tokens")
    if cu is not None:
        require_len(record, "req_ids", len(cu), where, "one per entry of 'cu_num_tokens'")
        cu = np.asarray(cu, dtype=np.int64)
        require(bool((np.diff(cu, prepend=0) >= 0).all()), where, "cu_num_tokens",
                "must be non-decreasing and >= 0")
        require(len(cu) == 0 or cu[-1] <= len(record["input_ids"]), where, "cu_num_tokens",
                "must not count more tokens than 'input_ids' holds")


def check_batch(cols: BatchColumns) -> np.ndarray:
    """:func:`check_record` on a whole batch at once: the records it may reject."""
    bad = (cols.ints("num_embeddings") < 0) | (cols.present("tp_size")
                                                & (cols.ints("tp_size") < 1))
    has_cu = cols.present("cu_num_tokens")
    if not has_cu.any():
        return bad
    cu, counts = cols.flat("cu_num_tokens")
    bad |= has_cu & cols.present("req_ids") & (cols.length("req_ids") != counts)
    bad |= has_cu & rows_with_any(row_steps(cu, counts) < 0, counts)
    return bad | (has_cu & (counts > 0) & (row_last(cu, counts) > cols.length("input_ids")))


def upstream(record: Record) -> Outcome:
    """The lookup on one record: ``index_error`` for an id outside the weight with one GPU,
    ``ok`` otherwise (masked with tensor parallelism). No outputs; no accesses beyond the ids,
    which the judge checks for every variant."""
    return upstream_many([record])[0]


patched = upstream


def upstream_many(records: list[Record]) -> list[Outcome]:
    """:func:`upstream` on many records at once (one numpy pass over all their ids)."""
    if not records:
        return []
    arrays = [np.asarray(r["input_ids"]).astype(np.int64, copy=False) for r in records]
    lengths = np.array([len(a) for a in arrays], dtype=np.int64)
    rec = np.repeat(np.arange(len(records)), lengths)
    bound = np.array([r["num_embeddings"] for r in records], dtype=np.int64)
    ids = np.concatenate(arrays) if arrays else np.zeros(0, np.int64)
    bad = (ids < 0) | (ids >= bound[rec])
    has_bad = np.bincount(rec[bad], minlength=len(records)) > 0
    single = np.array([r.get("tp_size", 1) == 1 for r in records])
    raises = has_bad & single
    return [Outcome("index_error", _MESSAGE, {}, []) if raise_ else Outcome("ok", "", {}, [])
            for raise_ in raises]


patched_many = upstream_many


def patch_inert(record: Record) -> bool:
    """Whether ``patched`` gives exactly ``upstream``'s outcome on ``record``: always (no patch)."""
    return True


def judge(record: Record, outcome: Outcome) -> list[dict[str, Any]]:
    """Findings of one record, the same for every variant: each id of ``input_ids`` outside
    ``[0, num_embeddings)`` (tensor ``input_ids``, element its position)."""
    ids = np.asarray(record["input_ids"])
    rows = rows_of_slots(record.get("cu_num_tokens"), np.arange(len(ids)))
    return ids_outside(ids, 0, record["num_embeddings"], "input_ids", rows,
                       record.get("req_ids"))
