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

from collections.abc import Sequence
from typing import Any

import numpy as np

from forensics.outcome import INDEX_ERROR, STATUSES, Access, Outcome
from forensics.records import FieldSpec, Record
from forensics.sites._common import (
    MISATTRIBUTED,
    BatchColumns,
    failed,
    judged_findings,
    prev_holders,
    require_rows,
    screen_rows,
)
from forensics.sites.core import BatchRun, CheckList, Checks

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
        self.compute(guard)
        return [self._outcome(r) for r in range(len(self.records))]

    def compute(self, guard: bool) -> None:
        """Run every record: which rows gather (``used``), the gathered tensors' lengths, the
        failed records and the new buffers."""
        values, self.uppers = {}, {}
        oob = np.zeros(len(self.pp), dtype=bool)
        for name in GATHERED:
            flat, offsets, lengths = _concat(self.records, name)
            self.uppers[name] = lengths
            bad = self.gather >= lengths[self.rec]
            oob |= bad
            index = np.where(bad, len(flat) - 1, offsets[self.rec] + self.gather)
            values[name] = flat[index]
        previous = (self.pp >= 0) & ~oob
        self.used = previous if guard else np.ones(len(self.pp), dtype=bool)
        self.failed = np.zeros(len(self.records), dtype=bool)
        if not guard:
            self.failed[self.rec[oob]] = True
        participating = (self.pp >= 0) & (values["prev_num_draft_tokens"] > 0) & self.used
        valid = values["valid_sampled_token_count"]
        corrected = values["num_computed_tokens"] + valid.astype(np.int32).astype(np.int64)
        self.new_computed = np.where(participating, corrected,
                                     _concat(self.records, "cpu_num_computed_tokens")[0][:-1])
        self.new_accepted = np.where(participating, valid,
                                     _concat(self.records, "num_accepted_tokens")[0][:-1])

    def checks(self) -> CheckList:
        """The gathers of every record as checks, then its misattributed rows."""
        rec, rows = self.rec[self.used], self.local[self.used]
        gather = self.gather[self.used]
        parts = [Checks.of(name, rec, rows, rows, gather, 0, self.uppers[name][rec])
                 for name in GATHERED]
        outside = np.zeros(len(self.pp), dtype=bool)
        for name in GATHERED:
            outside |= self.gather >= self.uppers[name][self.rec]
        wrong = self.used & ~outside & (self.pp >= 0) & _other_holder(self.records, self.pp)
        parts.append(Checks.of("prev_positions", self.rec[wrong], self.local[wrong],
                               self.local[wrong], self.pp[wrong], None, None, MISATTRIBUTED))
        return Checks.concat(parts)

    def _outcome(self, r: int) -> Outcome:
        record = self.records[r]
        sl = slice(self.starts[r], self.starts[r] + self.ns[r])
        used = self.used[sl]
        rows, gather = self.local[sl][used], self.gather[sl][used]
        accesses = [_access(name, rows, gather, self.uppers[name][r]) for name in GATHERED]
        if self.failed[r]:
            return Outcome("index_error", _bounds_message(gather, self.uppers, r), {}, accesses)
        computed = np.array(record["num_computed_tokens"], copy=True)
        computed[: self.ns[r]] = self.new_computed[sl].astype(computed.dtype)
        accepted = self.new_accepted[sl].astype(np.asarray(record["num_accepted_tokens"]).dtype)
        outputs = {"num_computed_tokens": computed, "num_accepted_tokens": accepted}
        return Outcome("ok", "", outputs, accesses)


def _other_holder(records: list[Record], pp: np.ndarray) -> np.ndarray:
    """Per row of ``records`` end to end: whether its previous row was held by another request
    (False where the request ids or the previous batch are unknown)."""
    flags: list[bool] = []
    for record in records:
        req_ids = record.get("req_ids")
        n = len(record["prev_positions"])
        if req_ids is None or ("prev_req_ids" not in record
                               and "prev_req_id_to_index" not in record):
            flags += [False] * n
            continue
        holders = prev_holders(record)
        start = len(flags)
        flags += [holders.get(p, req) != req
                  for p, req in zip(pp[start:start + n].tolist(), req_ids, strict=True)]
    return np.array(flags, dtype=bool)


def prepare(records: Sequence[Record]) -> tuple[Sequence[Record], list[int]]:
    """What :func:`run_batch` runs: the records and which of them are regular."""
    return records, [i for i, r in enumerate(records) if _is_regular(r)]


def run_batch(prepared: tuple[Sequence[Record], list[int]], patched: bool) -> BatchRun:
    """The columnar run of prepared records as the judge reads it (regular records in one
    numpy pass, the others one by one through torch)."""
    records, regular = prepared
    status = np.zeros(len(records), dtype=np.int8)
    messages: dict[int, str] = {}
    parts = []
    if regular:
        batch = _Batch([records[i] for i in regular])
        batch.compute(patched)
        parts.append(batch.checks().renumbered(np.array(regular, dtype=np.int64)))
        for j in np.flatnonzero(batch.failed).tolist():
            status[regular[j]] = STATUSES.index(INDEX_ERROR)
            messages[regular[j]] = batch._outcome(j).message
    for i in sorted(set(range(len(records))) - set(regular)):
        outcome = _run(records[i], patched)
        status[i] = STATUSES.index(outcome.status)
        if outcome.message:
            messages[i] = outcome.message
        parts.append(outcome_checks(records[i], outcome).renumbered(np.array([i])))
    return BatchRun(status, messages, Checks.concat(parts), [r.get("req_ids") for r in records])


def outcome_checks(record: Record, outcome: Outcome) -> CheckList:
    """The checks of any variant's outcome on one record: its gathers, then the misattributed
    rows among the in-range gathers (request ids known)."""
    accesses = list(outcome.accesses or ())
    parts = [Checks.of(a.tensor, 0, a.rows, a.elements, a.values, a.lower, a.upper)
             for a in accesses]
    if accesses and accesses[0].rows is not None:
        pp = np.asarray(record["prev_positions"], dtype=np.int64)
        read = np.zeros(len(pp), dtype=bool)
        read[np.asarray(accesses[0].rows, dtype=np.int64)] = True
        for a in accesses:
            values = np.asarray(a.values, dtype=np.int64)
            outside = (values < a.lower) | (values >= a.upper)
            read[np.asarray(a.rows, dtype=np.int64)[outside]] = False
        wrong = np.flatnonzero(read & (pp >= 0) & _other_holder([record], pp))
        parts.append(Checks.of("prev_positions", 0, wrong, wrong, pp[wrong], None, None,
                               MISATTRIBUTED))
    return Checks.concat(parts)


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
    return judged_findings(outcome_checks(record, outcome), [record.get("req_ids")])


from forensics.sites.base import Site  # noqa: E402  (the SITE declaration closes the module)

#: this module's site: its schema and operations (the registry holds it)
SITE = Site(name=NAME, fields=FIELDS, output_fields=OUTPUT_FIELDS, summary_bound=SUMMARY_BOUND,
            summary_tensor=SUMMARY_TENSOR, upstream=upstream, patched=patched, judge=judge,
            check_record=check_record, check_batch=check_batch, prepare=prepare,
            run_batch=run_batch, upstream_many=upstream_many, patched_many=patched_many)
