"""Index contracts of the kernels that index request state, declared once, checked on the
recorded values of a launch (``kernel_contract`` findings).

- request slot: every ``idx_mapping`` entry ``< max_num_reqs`` (the ``max_num_reqs`` scalar,
  else the rows of the launch's per-request state tensor, :data:`SLOT_STATE`);
- block index: in ``_compute_slot_mappings_kernel``, ``pos // block_size <`` the blocks per row
  of each enabled group's block table (a block index past the row reads the next request's row:
  inside the allocation, outside its row);
- position: written ``pos`` values ``< max_model_len`` (from the capture's manifest, its
  ``model`` facts; not judged without it);
- token id: ``input_ids`` values a launch wrote ``< vocab_size`` (from the manifest; not judged
  without it).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from forensics.budget import require_alloc
from forensics.kernels.format import Launch, TensorArg

SLOT_INDEX = ("idx_mapping", "idx_mapping_ptr")
#: per-request state tensors (one row per request slot), in the order their rows are trusted
SLOT_STATE = ("num_computed_tokens_ptr", "num_computed_tokens", "prefill_len_ptr",
              "prefill_len", "total_len_ptr", "last_sampled_tokens_ptr", "block_table_ptrs[0]")
POSITIONS = ("pos", "pos_ptr", "positions", "positions_ptr")
TOKEN_IDS = ("input_ids", "input_ids_ptr")
MOST = 16


def _values(arg: TensorArg, which: str = "data") -> np.ndarray | None:
    """The tensor's elements (row-major), or None when they were not recorded; the view lies
    inside the storage (:func:`forensics.kernels.format.check_launch` saw to it), and its
    elements (a zero stride repeats one) are held to the allocation budget.

    Raises:
        AllocationBudgetError: the view's elements would pass the budget.
    """
    if arg.contents == "none" or (which == "after" and arg.after is None):
        return None
    flat = arg.array(which)
    if arg.contents == "view":
        return flat
    require_alloc(math.prod(arg.shape) * arg.itemsize, f"tensor {arg.name}", "shape",
                  list(arg.shape))
    return np.lib.stride_tricks.as_strided(
        flat[arg.offset:], arg.shape, [s * arg.itemsize for s in arg.strides],
        writeable=False).reshape(-1) if arg.shape else flat[arg.offset:arg.offset + 1]


def _finding(launch: Launch, arg: str, what: str, values: np.ndarray, bad: np.ndarray,
             lower: int, upper: int, bound: str) -> dict[str, Any]:
    where = np.flatnonzero(bad)
    return {"kind": "kernel_contract", "kernel": launch.name, "module": launch.module,
            "step": launch.step, "rank": launch.rank, "launch": launch.ordinal,
            "argument": arg, "contract": what, "elements": where[:MOST].tolist(),
            "values": values[where[:MOST]].tolist(), "count": int(len(where)),
            "lower": lower, "upper": upper, "bound": bound}


def _slots(launch: Launch) -> list[dict[str, Any]]:
    index = next((launch.tensors[n] for n in SLOT_INDEX if n in launch.tensors), None)
    if index is None:
        return []
    bound, source = launch.scalars.get("max_num_reqs"), "the max_num_reqs argument"
    if not isinstance(bound, int):
        state = next((launch.tensors[n] for n in SLOT_STATE
                      if n in launch.tensors and launch.tensors[n].shape), None)
        if state is None:
            return []
        bound, source = state.shape[0], f"the rows of {state.name}"
    values = _values(index)
    if values is None:
        return []
    bad = (values < 0) | (values >= bound)
    return [_finding(launch, index.name, "request slot", values, bad, 0, bound, source)] \
        if bad.any() else []


def _blocks(launch: Launch) -> list[dict[str, Any]]:
    if launch.name != "_compute_slot_mappings_kernel" or "pos" not in launch.tensors:
        return []
    pos = _values(launch.tensors["pos"])
    sizes = launch.tensors.get("block_sizes")
    enabled = launch.tensors.get("slot_mapping_enabled")
    qsl = launch.tensors.get("query_start_loc")
    if pos is None or sizes is None or qsl is None:
        return []
    size_values, on, starts = _values(sizes), _values(enabled) if enabled else None, _values(qsl)
    if size_values is None or starts is None:
        return []
    pos = pos[:int(starts[-1])] if len(starts) else pos
    out = []
    for group, block_size in enumerate(size_values.tolist()):
        table = launch.tensors.get(f"block_table_ptrs[{group}]")
        if table is None or len(table.shape) != 2 or block_size <= 0 or (
                on is not None and group < len(on) and not on[group]):
            continue
        blocks = pos // block_size
        bad = (blocks < 0) | (blocks >= table.shape[1])
        if bad.any():
            found = _finding(launch, "pos", "block index", blocks, bad, 0, table.shape[1],
                             f"the blocks per row of {table.name} (block size {block_size})")
            found["positions"] = pos[np.flatnonzero(bad)[:MOST]].tolist()
            out.append(found)
    return out


def _bounded(launch: Launch, names: tuple[str, ...], bound: int | None, what: str,
             source: str) -> list[dict[str, Any]]:
    """Written values of the first of ``names`` outside ``[0, bound)``."""
    arg = next((launch.tensors[n] for n in names if n in launch.tensors), None)
    if arg is None or bound is None or arg.after is None:
        return []
    before, after = _values(arg), _values(arg, "after")
    if before is None or after is None:
        return []
    bad = (after != before) & ((after < 0) | (after >= bound))
    return [_finding(launch, arg.name, what, after, bad, 0, bound, source)] if bad.any() else []


def check(launch: Launch, manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The launch's ``kernel_contract`` findings (the bounds from the manifest's ``model``
    facts, where the probe and the importers put them)."""
    model = manifest.get("model")
    facts = model if isinstance(model, dict) else {}
    model_len, vocab = facts.get("max_model_len"), facts.get("vocab_size")
    return (_slots(launch) + _blocks(launch)
            + _bounded(launch, POSITIONS, model_len if isinstance(model_len, int) else None,
                       "position", "max_model_len (manifest)")
            + _bounded(launch, TOKEN_IDS, vocab if isinstance(vocab, int) else None,
                       "token id", "vocab_size (manifest)"))
