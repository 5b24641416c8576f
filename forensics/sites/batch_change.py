"""Site ``batch_change``: ``vllm.v1.spec_decode.utils.update_num_computed_tokens_for_batch_change``.

vLLM 0.33.0 gathers ``valid_sampled_token_count``, ``num_computed_tokens`` and
``prev_num_draft_tokens`` at ``prev_positions.clamp(min=0)`` for every row, with no upper check.
A row takes ``prev_computed + valid_count`` when ``prev_position >= 0`` and its previous drafts
were > 0, otherwise the CPU value; ``num_accepted_tokens`` takes ``valid_count`` on those rows.
The patched model counts a row as previous only when ``0 <= prev_position < len(t)`` for every
gathered tensor ``t`` and gathers nothing for other rows.

``upstream``/``patched`` run one record with the same torch operations as vLLM;
``upstream_many``/``patched_many`` run many records at once in numpy (same results).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from forensics.outcome import Access, Outcome
from forensics.records import FieldSpec, Record
from forensics.sites._common import (
    MISATTRIBUTED,
    BatchColumns,
    access_findings,
    failed,
    finding,
    prev_holders,
    require_rows,
    screen_rows,
)

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
#: the tensor a summary record's min/max describe (unless the record names one in ``tensor``)
SUMMARY_TENSOR = "prev_positions"
#: the tensors gathered at the clamped previous positions, in vLLM's order
GATHERED = ("valid_sampled_token_count", "num_computed_tokens", "prev_num_draft_tokens")
_FAST_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))
#: fields with one entry per current row
_ROWS = ("num_accepted_tokens", "cpu_num_computed_tokens", "req_ids")


def check_record(record: Record, where: str) -> None:
    """Cross-field checks: per-row tensors and request ids have one entry per current row.

    Raises:
        CaptureFormatError: naming the field and the expected length.
    """
    require_rows(record, _ROWS, where)


def check_batch(cols: BatchColumns) -> np.ndarray:
    """:func:`check_record` on a whole batch at once: the records it may reject."""
    return screen_rows(cols, _ROWS)


def upstream(record: Record) -> Outcome:
    """vLLM 0.33.0 on one record: outputs ``num_computed_tokens`` (whole buffer) and
    ``num_accepted_tokens``; ``index_error`` when a clamped position is past a gathered tensor."""
    return _run(record, guard=False)


def patched(record: Record) -> Outcome:
    """The stale-row guard on one record: out-of-range previous rows fall back to the CPU value."""
    return _run(record, guard=True)


def _run(record: Record, guard: bool) -> Outcome:
    import torch

    pp = record.tensor("prev_positions")
    gathered = [record.tensor(name) for name in GATHERED]
    num_computed = record.tensor("num_computed_tokens").clone()
    num_accepted = record.tensor("num_accepted_tokens").clone()
    cpu = record.tensor("cpu_num_computed_tokens")
    n = pp.shape[0]
    previous = pp >= 0
    for tensor in gathered:
        previous &= pp < tensor.shape[0]
    rows = torch.nonzero(previous).reshape(-1) if guard else torch.arange(n)
    gather_indices = pp[rows].clamp(min=0)
    accesses = [_access(name, rows.numpy(), gather_indices.numpy(), t.shape[0])
                for name, t in zip(GATHERED, gathered, strict=True)]
    try:
        valid_counts, prev_computed, prev_drafts = (t[gather_indices] for t in gathered)
        if guard:
            valid_counts, prev_computed, prev_drafts = (
                torch.zeros(n, dtype=v.dtype).index_copy_(0, rows, v)
                for v in (valid_counts, prev_computed, prev_drafts))
        participating = (pp >= 0) & (prev_drafts > 0)
        corrected = prev_computed + valid_counts.int()
        num_computed[:n].copy_(torch.where(participating, corrected, cpu))
        num_accepted.copy_(torch.where(participating, valid_counts, num_accepted))
    except Exception as exc:  # noqa: BLE001  (the outcome records any failure of the call)
        return failed(exc, accesses)
    outputs = {"num_computed_tokens": num_computed.numpy(),
               "num_accepted_tokens": num_accepted.numpy()}
    return Outcome("ok", "", outputs, accesses)


def _access(name: str, rows: np.ndarray, values: np.ndarray, upper: int) -> Access:
    rows = np.asarray(rows, dtype=np.int64)
    return Access(name, rows, rows, np.asarray(values, dtype=np.int64), 0, int(upper))


def upstream_many(records: list[Record]) -> list[Outcome]:
    """:func:`upstream` on many records at once (numpy, no Python loop over rows)."""
    return _run_many(records, guard=False)


def patched_many(records: list[Record]) -> list[Outcome]:
    """:func:`patched` on many records at once (numpy, no Python loop over rows)."""
    return _run_many(records, guard=True)


def _is_regular(record: Record) -> bool:
    n = len(record["prev_positions"])
    tensors = [record[spec.name] for spec in FIELDS if spec.kind == "tensor"]
    return (all(np.asarray(t).dtype in _FAST_DTYPES for t in tensors)
            and len(record["num_accepted_tokens"]) == n
            and len(record["cpu_num_computed_tokens"]) == n
            and len(record["num_computed_tokens"]) >= n)


def _run_many(records: list[Record], guard: bool) -> list[Outcome]:
    outcomes: list[Outcome | None] = [None] * len(records)
    regular = [i for i, r in enumerate(records) if _is_regular(r)]
    for i in sorted(set(range(len(records))) - set(regular)):
        outcomes[i] = _run(records[i], guard)
    if regular:
        batch = [records[i] for i in regular]
        for i, outcome in zip(regular, _Batch(batch).run(guard), strict=True):
            outcomes[i] = outcome
    return [o for o in outcomes if o is not None]


def _concat(records: list[Record], name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All records' ``name`` as int64 (plus one 0 sentinel), their offsets and lengths."""
    arrays = [np.asarray(r[name]) for r in records]
    lengths = np.array([len(a) for a in arrays], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    flat = np.concatenate([*(a.astype(np.int64) for a in arrays), np.zeros(1, np.int64)])
    return flat, offsets, lengths


class _Batch:
    """Many regular records laid end to end: one numpy pass over all their rows."""

    def __init__(self, records: list[Record]) -> None:
        self.records = records
        self.pp, self.starts, self.ns = _concat(records, "prev_positions")
        self.pp = self.pp[:-1]
        self.rec = np.repeat(np.arange(len(records)), self.ns)
        self.local = np.arange(len(self.pp)) - self.starts[self.rec]
        self.gather = np.maximum(self.pp, 0)

    def run(self, guard: bool) -> list[Outcome]:
        """The outcome of every record of the batch."""
        values, uppers = {}, {}
        oob = np.zeros(len(self.pp), dtype=bool)
        for name in GATHERED:
            flat, offsets, lengths = _concat(self.records, name)
            uppers[name] = lengths
            bad = self.gather >= lengths[self.rec]
            oob |= bad
            index = np.where(bad, len(flat) - 1, offsets[self.rec] + self.gather)
            values[name] = flat[index]
        previous = (self.pp >= 0) & ~oob
        used = previous if guard else np.ones(len(self.pp), dtype=bool)
        failed_rec = np.zeros(len(self.records), dtype=bool)
        if not guard:
            failed_rec[self.rec[oob]] = True
        participating = (self.pp >= 0) & (values["prev_num_draft_tokens"] > 0) & used
        valid = values["valid_sampled_token_count"]
        corrected = values["num_computed_tokens"] + valid.astype(np.int32).astype(np.int64)
        new_computed = np.where(participating, corrected,
                                _concat(self.records, "cpu_num_computed_tokens")[0][:-1])
        new_accepted = np.where(participating, valid,
                                _concat(self.records, "num_accepted_tokens")[0][:-1])
        return [self._outcome(r, used, uppers, failed_rec[r], new_computed, new_accepted)
                for r in range(len(self.records))]

    def _outcome(self, r: int, used: np.ndarray, uppers: dict[str, np.ndarray], failed_: bool,
                 new_computed: np.ndarray, new_accepted: np.ndarray) -> Outcome:
        record = self.records[r]
        sl = slice(self.starts[r], self.starts[r] + self.ns[r])
        rows, gather = self.local[sl][used[sl]], self.gather[sl][used[sl]]
        accesses = [_access(name, rows, gather, uppers[name][r]) for name in GATHERED]
        if failed_:
            return Outcome("index_error", _bounds_message(gather, uppers, r), {}, accesses)
        computed = np.array(record["num_computed_tokens"], copy=True)
        computed[: self.ns[r]] = new_computed[sl].astype(computed.dtype)
        accepted = new_accepted[sl].astype(np.asarray(record["num_accepted_tokens"]).dtype)
        outputs = {"num_computed_tokens": computed, "num_accepted_tokens": accepted}
        return Outcome("ok", "", outputs, accesses)


def _bounds_message(gather: np.ndarray, uppers: dict[str, np.ndarray], r: int) -> str:
    for name in GATHERED:
        bad = gather[gather >= uppers[name][r]]
        if len(bad):
            return (f"IndexError: index {int(bad[0])} is out of bounds for dimension 0 "
                    f"with size {int(uppers[name][r])}")
    raise AssertionError("no out-of-bounds index in a failed record")


def judge(record: Record, outcome: Outcome) -> list[dict[str, Any]]:
    """Findings of one outcome: accesses outside their tensor, and in-range previous rows that
    held another request (``misattributed``, when request ids are known)."""
    req_ids = record.get("req_ids")
    found = access_findings(outcome.accesses, req_ids)
    return found + _misattributed(record, outcome, found)


def _misattributed(record: Record, outcome: Outcome,
                   out_of_bounds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    req_ids = record.get("req_ids")
    if req_ids is None or not outcome.accesses or (
            "prev_req_ids" not in record and "prev_req_id_to_index" not in record):
        return []
    holders = prev_holders(record)
    pp = np.asarray(record["prev_positions"], dtype=np.int64).tolist()
    bad_rows = {f["row"] for f in out_of_bounds}
    read_rows = sorted(set(np.asarray(outcome.accesses[0].rows).tolist()) - bad_rows)
    # rows whose previous row was held by another request (plain Python ints: no numpy per row)
    wrong = [row for row in read_rows if pp[row] >= 0
             and holders.get(pp[row], req_ids[row]) != req_ids[row]]
    return [finding(MISATTRIBUTED, "prev_positions", pp[row], None, None, row, row, req_ids[row])
            for row in wrong]
