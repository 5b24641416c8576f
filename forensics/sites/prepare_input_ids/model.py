"""The torch model of ``prepare_input_ids``, one record at a time: the device buffer it writes
and the accesses it makes (the oracle the columnar replay is checked against, and the path of
dtypes numpy does not handle as torch does)."""

from __future__ import annotations

from typing import Any

import numpy as np

from forensics.outcome import Access, Outcome
from forensics.records import Record
from forensics.sites._common import (
    failed,
)
from forensics.sites.core import (
    rows_of_slots,
)
from forensics.sites.prepare_input_ids.plans import Plan
from forensics.sites.prepare_input_ids.records import DRAFTS, DRAFTS_FLAT, SAMPLED, total_tokens


def device_field(record: Record) -> str:
    """The record's field of the device buffer: ``input_ids_device``, else ``input_ids``."""
    return "input_ids_device" if "input_ids_device" in record else "input_ids"


def torch_run(record: Record, p: Plan) -> Outcome:
    import torch

    cpu = record.tensor("input_ids")
    device = record.tensor("input_ids_device" if "input_ids_device" in record
                           else "input_ids").clone()
    sampled = record.tensor("prev_sampled_token_ids")
    total = total_tokens(record)
    accesses = record_accesses(record, p)
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


def _scatter(record: Record, p: Plan, device: Any, sampled: Any, torch: Any) -> None:
    index = torch.from_numpy(p.sample_slots)
    device.scatter_(0, index, sampled[torch.from_numpy(p.prev), 0])
    if "draft_token_ids" not in record or len(p.spec_slots) == 0:
        return
    drafts = record.tensor("draft_token_ids").to(dtype=torch.int32)
    device.scatter_(0, torch.from_numpy(p.spec_slots),
                    drafts.flatten()[torch.from_numpy(p.draft_index)])


def record_accesses(record: Record, p: Plan) -> list[Access]:
    rows_sampled = record["prev_sampled_token_ids"].shape[0]
    if len(p.common) == 0:
        return []
    if p.fast:
        slots = np.arange(len(p.common), dtype=np.int64)
        rows = record_rows(record, slots)
        # the fast path's slice: no captured tensor holds the positions it reads
        return [Access(SAMPLED, rows, slots, slots, 0, rows_sampled, held=False)]
    found = [Access(SAMPLED, p.common, p.sample_slots, p.prev, 0, rows_sampled,
                    "prev_positions", p.common, stale=True)]
    if "draft_token_ids" in record and len(p.spec_slots):
        found.append(Access(DRAFTS, p.spec_rows, p.spec_slots, p.draft_index, 0,
                            int(np.asarray(record["draft_token_ids"]).size), "prev_positions",
                            p.spec_rows, held=False, indexed=DRAFTS_FLAT))
    return found


def record_rows(record: Record, slots: np.ndarray) -> np.ndarray:
    """Batch row of each token slot of one record (-1 past its last row)."""
    cu = np.asarray(record["cu_num_tokens"], dtype=np.int64)
    return rows_of_slots(cu, np.array([len(cu)]), np.zeros(len(slots), np.int64),
                         np.asarray(slots, dtype=np.int64))
