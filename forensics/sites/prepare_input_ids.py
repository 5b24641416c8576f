"""Site ``prepare_input_ids``: the async branch of ``GPUModelRunner._prepare_input_ids``.

vLLM 0.33.0 skips rows with ``prev_position < 0``; the others are the common rows. When some rows
are not common (``num_common < total - drafts of the common rows``) the CPU staging is copied to
the device buffer first. The **fast path** (every common row has ``prev_position ==
cu_num_tokens[row] - 1`` and the largest is ``num_common - 1``) copies
``prev_sampled_token_ids[:num_common, 0]`` as one slice: a one-row source is silently broadcast.
The **slow path** scatters ``prev_sampled_token_ids[prev_position, 0]`` to slot
``cu_num_tokens[row] - 1 - num_draft_tokens[row]``, then (only when drafts were captured) draft
``j`` from ``draft_token_ids.flatten()[prev_position * prev_num_spec_tokens + j]``.
The patched model also skips common rows at or past ``prev_sampled_token_ids.shape[0]``.

The total number of scheduled tokens is ``cu_num_tokens[-1]`` (0 without rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from forensics.outcome import Access, Outcome
from forensics.records import FieldSpec, Record
from forensics.sites._common import (
    MISATTRIBUTED,
    BatchColumns,
    access_findings,
    aligned,
    failed,
    finding,
    ids_outside,
    require,
    require_rows,
    row_last,
    row_steps,
    rows_of_slots,
    rows_with_any,
    screen_rows,
)

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
SUMMARY_TENSOR = "out.input_ids_device"
OUTPUT_TENSOR = "out.input_ids_device"
#: dtypes the numpy path handles exactly as torch does (others go through torch)
_PLAIN = (np.dtype(np.int32), np.dtype(np.int64))

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
    require(bool((counts >= 1 + drafts).all()), where, "cu_num_tokens",
            "must give each row at least 1 + num_draft_tokens[row] tokens")
    total = total_tokens(record)
    for name in ("input_ids", "input_ids_device"):
        if name in record:
            require(len(record[name]) >= total, where, name,
                    f"must hold the {total} scheduled tokens (cu_num_tokens[-1])")
    require(record["prev_num_spec_tokens"] >= 0, where, "prev_num_spec_tokens", "must be >= 0")
    require(record["vocab_size"] > 0, where, "vocab_size", "must be > 0")


def check_batch(cols: BatchColumns) -> np.ndarray:
    """:func:`check_record` on a whole batch at once: the records it may reject."""
    bad = screen_rows(cols, _ROWS)
    cu, drafts, counts = aligned(cols, ("cu_num_tokens", "num_draft_tokens"))
    bad |= rows_with_any((drafts < 0) | (row_steps(cu, counts) < 1 + drafts), counts)
    total = row_last(cu, counts)
    for name in ("input_ids", "input_ids_device"):
        bad |= cols.present(name) & (cols.length(name) < total)
    return bad | (cols.ints("prev_num_spec_tokens") < 0) | (cols.ints("vocab_size") <= 0)


@dataclass
class _Plan:
    """What the loop over rows of ``_prepare_input_ids`` computes."""

    common: np.ndarray        # common rows, in row order
    prev: np.ndarray          # their previous positions
    sample_slots: np.ndarray  # slot of each common row's sampled token
    spec_slots: np.ndarray    # slots of their drafts
    spec_rows: np.ndarray     # row of each draft slot
    draft_index: np.ndarray   # flat index into draft_token_ids of each draft
    fast: bool                # the one-slice fast path applies
    copy_cpu: bool            # the CPU staging is copied to the device first


def plan(record: Record, guard: bool) -> _Plan:
    """The common rows, slots and paths the call takes on ``record`` (``guard``: patched)."""
    pp = np.asarray(record["prev_positions"], dtype=np.int64)
    cu = np.asarray(record["cu_num_tokens"], dtype=np.int64)
    drafts = np.asarray(record["num_draft_tokens"], dtype=np.int64)
    keep = pp >= 0
    if guard:
        keep &= pp < record["prev_sampled_token_ids"].shape[0]
    common = np.flatnonzero(keep)
    flat = cu[common] - 1
    nd = drafts[common]
    spec_rows = np.repeat(common, nd)
    within = np.arange(len(spec_rows)) - np.repeat(np.cumsum(nd) - nd, nd)
    spec_slots = np.repeat(flat - nd + 1, nd) + within
    draft_index = np.repeat(pp[common] * record["prev_num_spec_tokens"], nd) + within
    num_common = len(common)
    fast = bool(num_common and (pp[common] == flat).all() and flat.max() == num_common - 1)
    copy_cpu = num_common < total_tokens(record) - int(nd.sum())
    return _Plan(common, pp[common], flat - nd, spec_slots, spec_rows, draft_index, fast,
                 copy_cpu)


def upstream(record: Record) -> Outcome:
    """vLLM 0.33.0 on one record: outputs ``input_ids_device`` (the whole device buffer after the
    call); accesses of ``prev_sampled_token_ids`` (the fast path's broadcast included) and of
    ``draft_token_ids``."""
    return _run(record, guard=False)


def patched(record: Record) -> Outcome:
    """As :func:`upstream`, with common rows at or past the sampled rows skipped like new rows."""
    return _run(record, guard=True)


def patch_inert(record: Record) -> bool:
    """Whether ``patched`` gives exactly ``upstream``'s outcome on ``record``: when no common row
    is at or past the sampled rows, the guard skips nothing and both take the same plan."""
    pp = np.asarray(record["prev_positions"])
    return not len(pp) or int(pp.max()) < record["prev_sampled_token_ids"].shape[0]


def _run(record: Record, guard: bool) -> Outcome:
    p = plan(record, guard)
    fast = _run_numpy(record, p)
    return fast if fast is not None else _run_torch(record, p)


def _run_numpy(record: Record, p: _Plan) -> Outcome | None:
    """The call in numpy when it cannot fail (every read in range, matching dtypes): the same
    outcome as :func:`_run_torch`, without torch's per-call overhead. None otherwise."""
    sampled = record["prev_sampled_token_ids"]
    device = np.array(record["input_ids_device" if "input_ids_device" in record
                             else "input_ids"], copy=True)
    num_common = len(p.common)
    drafts = record.get("draft_token_ids") if len(p.spec_slots) else None
    arrays = (sampled, device, record["input_ids"], *(() if drafts is None else (drafts,)))
    if any(a.dtype not in _PLAIN for a in arrays) or sampled.shape[1] < 1:
        return None
    if num_common and not p.fast and (
            sampled.dtype != device.dtype or int(p.prev.max()) >= sampled.shape[0]
            or (drafts is not None and (device.dtype != np.int32
                                        or int(p.draft_index.max()) >= drafts.size))):
        return None
    if num_common and p.fast and min(sampled.shape[0], num_common) not in (1, num_common):
        return None
    total = total_tokens(record)
    if p.copy_cpu:
        device[:total] = record["input_ids"][:total]
    if num_common and p.fast:
        device[:num_common] = sampled[:num_common, 0]  # one source row: broadcast, as torch
    elif num_common:
        device[p.sample_slots] = sampled[p.prev, 0]
        if drafts is not None:
            device[p.spec_slots] = drafts.reshape(-1).astype(np.int32)[p.draft_index]
    return Outcome("ok", "", {"input_ids_device": device}, _accesses(record, p))


def _run_torch(record: Record, p: _Plan) -> Outcome:
    import torch

    cpu = record.tensor("input_ids")
    device = record.tensor("input_ids_device" if "input_ids_device" in record
                           else "input_ids").clone()
    sampled = record.tensor("prev_sampled_token_ids")
    total = total_tokens(record)
    accesses = _accesses(record, p)
    try:
        if p.copy_cpu:
            device[:total].copy_(cpu[:total])
        if len(p.common) == 0:
            pass
        elif p.fast:
            device[: len(p.common)].copy_(sampled[: len(p.common), 0])
        else:
            _scatter(record, p, device, sampled, torch)
    except Exception as exc:  # noqa: BLE001  (the outcome records any failure of the call)
        return failed(exc, accesses)
    return Outcome("ok", "", {"input_ids_device": device.numpy()}, accesses)


def _scatter(record: Record, p: _Plan, device: Any, sampled: Any, torch: Any) -> None:
    index = torch.from_numpy(p.sample_slots)
    device.scatter_(0, index, sampled[torch.from_numpy(p.prev), 0])
    if "draft_token_ids" not in record or len(p.spec_slots) == 0:
        return
    drafts = record.tensor("draft_token_ids").to(dtype=torch.int32)
    device.scatter_(0, torch.from_numpy(p.spec_slots),
                    drafts.flatten()[torch.from_numpy(p.draft_index)])


def _accesses(record: Record, p: _Plan) -> list[Access]:
    rows_sampled = record["prev_sampled_token_ids"].shape[0]
    if len(p.common) == 0:
        return []
    if p.fast:
        slots = np.arange(len(p.common), dtype=np.int64)
        rows = rows_of_slots(record["cu_num_tokens"], slots)
        return [Access("prev_sampled_token_ids", rows, slots, slots, 0, rows_sampled)]
    found = [Access("prev_sampled_token_ids", p.common, p.sample_slots, p.prev, 0,
                    rows_sampled)]
    if "draft_token_ids" in record and len(p.spec_slots):
        found.append(Access("draft_token_ids", p.spec_rows, p.spec_slots, p.draft_index, 0,
                            int(np.asarray(record["draft_token_ids"]).size)))
    return found


def judge(record: Record, outcome: Outcome) -> list[dict[str, Any]]:
    """Findings of one outcome: accesses outside their tensor, drafts read from another
    request's row, and every id of the resulting ``input_ids[:total]`` outside the vocabulary."""
    req_ids = record.get("req_ids")
    found = access_findings(outcome.accesses, req_ids)
    found += _misread_drafts(record, outcome, req_ids)
    produced = outcome.outputs.get("input_ids_device") if outcome.status == "ok" else None
    if produced is not None:
        ids = np.asarray(produced)[: total_tokens(record)]
        rows = rows_of_slots(record["cu_num_tokens"], np.arange(len(ids)))
        found += ids_outside(ids, 0, record["vocab_size"], OUTPUT_TENSOR, rows, req_ids)
    return found


def _misread_drafts(record: Record, outcome: Outcome,
                    req_ids: list[str] | None) -> list[dict[str, Any]]:
    if "draft_token_ids" not in record:
        return []
    width = record["draft_token_ids"].shape[1]
    pp = np.asarray(record["prev_positions"], dtype=np.int64)
    found = []
    for acc in outcome.accesses or ():
        if acc.tensor != "draft_token_ids" or acc.rows is None:
            continue
        values = np.asarray(acc.values, dtype=np.int64)
        inside = (values >= acc.lower) & (values < acc.upper)
        for i in np.flatnonzero(inside & (values // max(width, 1) != pp[acc.rows])):
            row = int(acc.rows[i])
            found.append(finding(MISATTRIBUTED, "draft_token_ids", values[i], acc.lower,
                                 acc.upper, row, acc.elements[i],
                                 None if req_ids is None else req_ids[row]))
    return found
