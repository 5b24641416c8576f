"""The fixed baseline of ``replay_speedup``: a plain per-record loop over records in memory.

For each record it does what one would write without this toolkit: run vLLM 0.33.0's operation
of the record's site on CPU the way vLLM writes it (torch tensor operations for
``batch_change``, ``prepare_input_ids`` and ``embedding``; vLLM's own Python loop over rows for
``async_output``) and count the indices and ids outside their valid range. It is frozen: it
imports nothing from ``forensics`` (records are read through their ``fields`` mapping), so the
ratio keeps its meaning whatever the package becomes. It runs the ``upstream`` rules only (the
replay runs ``upstream`` and ``patched`` and judges both).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

GATHERED = ("valid_sampled_token_count", "num_computed_tokens", "prev_num_draft_tokens")


def _t(value: Any) -> torch.Tensor:
    return torch.from_numpy(np.array(value))


def _outside(values: torch.Tensor, upper: int) -> int:
    return int(((values < 0) | (values >= upper)).sum())


def batch_change(f: dict[str, Any]) -> int:
    """``update_num_computed_tokens_for_batch_change``: gathers at the clamped previous
    positions (IndexError past a gathered tensor)."""
    pp = _t(f["prev_positions"])
    gathered = [_t(f[name]) for name in GATHERED]
    num_computed, num_accepted = _t(f["num_computed_tokens"]), _t(f["num_accepted_tokens"])
    index = pp.clamp(min=0)
    bad = sum(_outside(index, t.shape[0]) for t in gathered)
    if bad:
        return bad
    valid, prev_computed, prev_drafts = (t[index] for t in gathered)
    participating = (pp >= 0) & (prev_drafts > 0)
    n = pp.shape[0]
    num_computed[:n].copy_(torch.where(participating, prev_computed + valid.int(),
                                       _t(f["cpu_num_computed_tokens"])))
    num_accepted.copy_(torch.where(participating, valid, num_accepted))
    return 0


def prepare_input_ids(f: dict[str, Any]) -> int:
    """The async branch of ``_prepare_input_ids`` as vLLM writes it: a Python loop over the
    rows finds the common ones and their slots, then the one-slice fast path or the scatter of
    sampled tokens and drafts; then every scheduled id against the vocabulary."""
    cu = np.asarray(f["cu_num_tokens"]).tolist()
    drafts_n = np.asarray(f["num_draft_tokens"]).tolist()
    sampled = _t(f["prev_sampled_token_ids"])
    device = _t(f.get("input_ids_device", f["input_ids"]))
    total = cu[-1] if cu else 0
    prev, flats, slots, spec_slots, spec_index = [], [], [], [], []
    spec = f["prev_num_spec_tokens"]
    for row, p in enumerate(np.asarray(f["prev_positions"]).tolist()):
        if p < 0:
            continue
        nd = drafts_n[row]
        prev.append(p)
        flats.append(cu[row] - 1)
        slots.append(cu[row] - 1 - nd)
        spec_slots += range(cu[row] - nd, cu[row])
        spec_index += range(p * spec, p * spec + nd)
    if len(prev) < total - len(spec_slots):
        device[:total].copy_(_t(f["input_ids"])[:total])
    if not prev:
        return _outside(device[:total], f["vocab_size"])
    if prev == flats and max(flats) == len(prev) - 1:
        bad = _outside(torch.arange(len(prev)), sampled.shape[0])
        device[:len(prev)].copy_(sampled[:len(prev), 0])
        return bad + _outside(device[:total], f["vocab_size"])
    prev_t = torch.tensor(prev)
    bad = _outside(prev_t, sampled.shape[0])
    if bad:
        return bad
    device.scatter_(0, torch.tensor(slots), sampled[prev_t, 0])
    if "draft_token_ids" in f and spec_slots:
        drafts = _t(f["draft_token_ids"]).to(torch.int32).flatten()
        index = torch.tensor(spec_index)
        bad += _outside(index, drafts.shape[0])
        if bad:
            return bad
        device.scatter_(0, torch.tensor(spec_slots), drafts[index])
    return bad + _outside(device[:total], f["vocab_size"])


def async_output(f: dict[str, Any]) -> int:
    """``InputBatch.update_async_output_token_ids``: vLLM's loop over the current rows; the ids
    written against the vocabulary."""
    prev_ids = f.get("prev_req_ids")
    index = f.get("prev_req_id_to_index") or {q: i for i, q in enumerate(prev_ids or [])
                                              if q is not None}
    sampled = np.array(f["sampled_token_ids_cpu"]).tolist()
    outputs = [list(row) for row in f.get("output_token_ids", f.get("output_tail", []))]
    vocab, bad = f["vocab_size"], 0
    for row, req in enumerate(f["req_ids"]):
        prev = index.get(req)
        ids = outputs[row]
        if prev is None or not ids or ids[-1] != -1:
            continue
        if prev >= len(sampled):
            return bad + 1
        new = sampled[prev]
        if not new:
            continue
        count = len(new) if new[-1] != -1 else new.index(-1)
        first = len(ids)
        while first > 0 and ids[first - 1] == -1:
            first -= 1
        taken = min(count, len(ids) - first)
        ids[first:first + taken] = new[:taken]
        bad += sum(1 for v in new[:taken] if not 0 <= v < vocab)
    return bad


def embedding(f: dict[str, Any]) -> int:
    """The token-embedding lookup: every id against ``num_embeddings``."""
    return _outside(_t(f["input_ids"]), f["num_embeddings"])


RULES = {"batch_change": batch_change, "prepare_input_ids": prepare_input_ids,
         "async_output": async_output, "embedding": embedding}


def run(records: list[Any]) -> int:
    """The loop: every record through its site's rule; the indices and ids out of range."""
    bad = 0
    for record in records:
        try:
            bad += RULES[record.site](record.fields)
        except Exception:  # noqa: BLE001  (a failing call is part of the loop's work)
            bad += 1
    return bad
