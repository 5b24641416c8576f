"""Index contracts of the kernels that index request state, declared once, checked on the
recorded values of a launch (``kernel_contract`` findings).

- request slot: every ``idx_mapping`` entry ``< max_num_reqs`` (the ``max_num_reqs`` scalar,
  else the rows of the launch's per-request state tensor, :data:`SLOT_STATE`); a negative
  entry is vLLM's mark of a masked row (``-1``: a dummy, padding or filtered request, which its
  kernels skip: ``if req_state_idx < 0: return``, ``mask=req_state_idx >= 0``), not a slot
  outside the contract: a kernel that reads through one anyway is found by the replay's
  out-of-bounds check;
- block index: in ``_compute_slot_mappings_kernel``, ``pos // block_size`` (truncated toward
  zero, as Triton divides: position -1 reads block 0) ``>= 0`` and ``<`` the blocks per row
  of each enabled group's block table (a block index past the row reads the next request's row:
  inside the allocation, outside its row), for the tokens of real requests: a request whose
  ``idx_mapping`` entry is negative (masked) has its block-table row never read
  (``mask=is_local & is_real_req``: its tokens get ``PAD_ID``), so its positions are not
  judged, and none are when ``idx_mapping`` is recorded without its values; under context
  parallelism (``CP_SIZE`` > 1) a token another rank holds (``is_local`` false) is masked too,
  and a local one is judged by its local block index (:func:`_cp_blocks`);
- position: written ``pos`` values ``< max_model_len`` (from the capture's manifest, its
  ``model`` facts; not judged without it);
- token id: ``input_ids`` values a launch wrote ``< vocab_size`` (from the manifest; not judged
  without it).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from forensics.digits import plain_int
from forensics.kernels.format import Launch, TensorArg, readable

SLOT_INDEX = ("idx_mapping", "idx_mapping_ptr")
#: per-request state tensors (one row per request slot), in the order their rows are trusted
SLOT_STATE = ("num_computed_tokens_ptr", "num_computed_tokens", "prefill_len_ptr",
              "prefill_len", "total_len_ptr", "last_sampled_tokens_ptr", "block_table_ptrs[0]")
POSITIONS = ("pos", "pos_ptr", "positions", "positions_ptr")
TOKEN_IDS = ("input_ids", "input_ids_ptr")
MOST = 16


def _values(arg: TensorArg, which: str = "data") -> np.ndarray | None:
    """The tensor's elements (row-major, as the numbers they are: a bfloat16's value, never its
    bits), or None when they were not recorded or the view
    repeats elements (more of them than its storage holds: a zero stride; the engine's index
    buffers never are, and the contracts' work and memory follow the recorded bytes, not a
    claimed shape). The view lies inside the storage
    (:func:`forensics.kernels.format.check_launch` saw to it)."""
    if arg.contents == "none" or (which == "after" and arg.after is None):
        return None
    flat = arg.array(which)
    if arg.contents == "storage":
        if math.prod(arg.shape) > len(flat):
            return None
        flat = np.lib.stride_tricks.as_strided(
            flat[arg.offset:], arg.shape, [s * arg.itemsize for s in arg.strides],
            writeable=False).reshape(-1) if arg.shape else flat[arg.offset:arg.offset + 1]
    return readable(flat, arg.dtype)


def _bound(value: Any) -> int | None:
    """``value`` when it is a bound an index can be held to (an int >= 1; not a bool, which
    is an int to Python), else None: the contract is not judged (a ``max_num_reqs`` of
    ``true`` or ``-5`` once judged every slot against ``[0, True)`` or ``[0, -5)``)."""
    return value if plain_int(value) and value >= 1 else None


def _finding(launch: Launch, arg: str, what: str, values: np.ndarray, bad: np.ndarray,
             lower: int, upper: int, bound: str) -> dict[str, Any]:
    where = np.flatnonzero(bad)
    return _finding_at(launch, arg, what, where[:MOST], values[where[:MOST]], len(where), lower,
                       upper, bound)


def _finding_at(launch: Launch, arg: str, what: str, elements: np.ndarray, values: np.ndarray,
                count: int, lower: int, upper: int, bound: str) -> dict[str, Any]:
    """The finding of ``count`` elements outside ``[lower, upper)``, the first ones given."""
    return {"kind": "kernel_contract", "kernel": launch.name, "module": launch.module,
            "step": launch.step, "rank": launch.rank, "launch": launch.ordinal,
            "argument": arg, "contract": what, "elements": elements.tolist(),
            "values": values.tolist(), "count": int(count),
            "lower": lower, "upper": upper, "bound": bound}


def _slots(launch: Launch) -> list[dict[str, Any]]:
    index = next((launch.tensors[n] for n in SLOT_INDEX if n in launch.tensors), None)
    if index is None:
        return []
    bound, source = _bound(launch.scalars.get("max_num_reqs")), "the max_num_reqs argument"
    if bound is None:
        state = next((launch.tensors[n] for n in SLOT_STATE
                      if n in launch.tensors and launch.tensors[n].shape), None)
        if state is None:
            return []
        bound, source = state.shape[0], f"the rows of {state.name}"
    values = _values(index)
    if values is None:
        return []
    bad = values >= bound  # a negative entry marks a masked row: see the module
    return [_finding(launch, index.name, "request slot", values, bad, 0, bound, source)] \
        if bad.any() else []


def _blocks(launch: Launch) -> list[dict[str, Any]]:
    """Positions whose block index passes the row of an enabled group's block table, judged
    for every group in time linear in groups plus positions (a record of thousands of groups
    and positions once took their product); integer tensors only (the kernel's are)."""
    if launch.name != "_compute_slot_mappings_kernel" or "pos" not in launch.tensors:
        return []
    pos, sizes, on, starts = (_values(launch.tensors[n]) if n in launch.tensors else None
                              for n in ("pos", "block_sizes", "slot_mapping_enabled",
                                        "query_start_loc"))
    if pos is None or sizes is None or starts is None or any(
            a.dtype.kind not in "iu" for a in (pos, sizes, starts)):
        return []
    pos = pos[:max(0, int(starts[-1]))] if len(starts) else pos
    real = _real_tokens(launch, starts, len(pos))
    if real is None:
        return []
    kept = np.flatnonzero(real)  # the judged positions' indices in pos
    pos = pos[kept]
    groups = [(g, size, launch.tensors[f"block_table_ptrs[{g}]"])
              for g, size in enumerate(sizes.tolist())
              if f"block_table_ptrs[{g}]" in launch.tensors and size > 0
              and len(launch.tensors[f"block_table_ptrs[{g}]"].shape) == 2
              and (on is None or g >= len(on) or on[g])]
    if not groups or not len(pos):
        return []
    if launch.constexprs.get("CP_SIZE", 1) != 1:
        return _cp_blocks(launch, pos, kept, groups)
    return _flat_blocks(launch, pos, kept, groups)


def _flat_blocks(launch: Launch, pos: np.ndarray, kept: np.ndarray,
                 groups: list[tuple[int, int, TensorArg]]) -> list[dict[str, Any]]:
    """The block-index findings of a launch without context parallelism: position ``p`` reads
    block ``p // b`` of a row of ``W`` blocks of size ``b``, truncated toward zero as Triton's
    integers are, so it is past the row exactly when ``p >= b * W`` and before it exactly when
    ``p <= -b`` (a position in ``(-b, 0)`` reads block 0 of its row: no block index outside
    it); the first positions of each found by a descent (:func:`_first_at_least`), all groups
    at once."""
    info = np.iinfo(pos.dtype)
    limits = [size * table.shape[1] for _, size, table in groups]
    firsts = _first_at_least(pos, np.array([min(limit, info.max) for limit in limits],
                                           dtype=pos.dtype), [lim > info.max for lim in limits])
    # ~p is -p - 1 (never overflows): p <= -b exactly when ~p >= b - 1
    signed = info.min < 0
    sizes = [size - 1 if signed and size - 1 <= info.max else None for _, size, _ in groups]
    befores = _first_at_least(~pos if signed else pos, np.array(
        [info.max if low is None else low for low in sizes], dtype=pos.dtype),
        [low is None for low in sizes])
    ordered = np.sort(pos)
    out = []
    for (_, size, table), limit, low, first, before in zip(groups, limits, sizes, firsts,
                                                          befores, strict=True):
        past = 0 if limit > info.max else \
            len(pos) - int(np.searchsorted(ordered, pos.dtype.type(limit)))
        under = 0 if low is None else \
            int(np.searchsorted(ordered, pos.dtype.type(-size), side="right"))
        if not past + under:
            continue
        elements = np.union1d(before, first)[:MOST]
        # in Python's ints: a block size past pos's dtype (2**40 beside int8 positions, a
        # uint64 size beside int64 ones) was an OverflowError that ended `forensics kernels`
        blocks = np.array([_truncated(p, size) for p in pos[elements].tolist()], dtype=object)
        row = _finding_at(launch, "pos", "block index", kept[elements], blocks, past + under, 0,
                          table.shape[1],
                          f"the blocks per row of {table.name} (block size {size})")
        row["positions"] = pos[elements].tolist()
        out.append(row)
    return out


def _truncated(value: int, size: int) -> int:
    """``value // size`` truncated toward zero (``size`` > 0), as Triton's integers divide."""
    return -(-value // size) if value < 0 else value // size


#: the most distinct (block size, sharded) pairs of groups judged under context parallelism
#: (each costs a pass over the positions); past them none is judged
MOST_CP_KINDS = 64


def _cp_blocks(launch: Launch, pos: np.ndarray, kept: np.ndarray,
               groups: list[tuple[int, int, TensorArg]]) -> list[dict[str, Any]]:
    """The block-index findings of a launch under context parallelism (``CP_SIZE`` > 1): of
    each group, the tokens the kernel reads a block-table entry for (``is_local``: in a
    ``dcp_sharded`` group, those whose position falls to this ``cp_rank``; in another, all)
    whose local block index passes the row, computed as the kernel does (C division, int64
    arithmetic). None is judged when ``CP_SIZE``, ``CP_INTERLEAVE``, ``cp_rank`` or
    ``dcp_sharded`` is unknown or unusable (which tokens the kernel masks is then unknown), or
    past :data:`MOST_CP_KINDS` kinds of group."""
    cp, every = _bound(launch.constexprs.get("CP_SIZE")), \
        _bound(launch.constexprs.get("CP_INTERLEAVE"))
    rank = launch.scalars.get("cp_rank")
    sharded = _values(launch.tensors["dcp_sharded"]) if "dcp_sharded" in launch.tensors \
        else None
    if cp is None or every is None or sharded is None or pos.dtype == np.uint64 or \
            not plain_int(rank) or \
            any(g >= len(sharded) for g, _, _ in groups):
        return []
    kinds = {(size, bool(sharded[g])) for g, size, _ in groups}
    if len(kinds) > MOST_CP_KINDS or max(size for _, size, _ in groups) * cp * every >= 2**62:
        return []
    local = {kind: _cp_local(pos.astype(np.int64), *kind, cp, every, rank) for kind in kinds}
    out = []
    for group, size, table in groups:
        index, judged = local[(size, bool(sharded[group]))]
        bad = judged & ((index < 0) | (index >= table.shape[1]))
        where = np.flatnonzero(bad)
        if not len(where):
            continue
        row = _finding_at(launch, "pos", "block index", kept[where[:MOST]], index[where[:MOST]],
                          len(where), 0, table.shape[1],
                          f"the blocks per row of {table.name} (block size {size}; context "
                          f"parallel: {cp} ranks, interleave {every}, rank {rank}"
                          f"{', sharded' if sharded[group] else ''})")
        row["positions"] = pos[where[:MOST]].tolist()
        out.append(row)
    return out


def _cp_local(pos: np.ndarray, size: int, sharded: bool, cp: int, every: int, rank: int
              ) -> tuple[np.ndarray, np.ndarray]:
    """Per position, the block index the kernel reads and whether it reads it (``is_local``),
    as ``_compute_slot_mappings_kernel`` computes them for a group of ``size``-token blocks
    (Triton's integer ``//`` and ``%`` truncate toward zero, as C's do)."""
    if not sharded:
        return _cdiv(pos, size)[0], np.ones(len(pos), dtype=bool)
    virtual, offset = _cdiv(pos, size * cp)
    mine = _cdiv(_cdiv(offset, every)[0], cp)[1] == rank
    rounds, remainder = _cdiv(offset, every * cp)[0], _cdiv(offset, every)[1]
    local = virtual * size + rounds * every + remainder
    return _cdiv(local, size)[0], mine


def _cdiv(a: np.ndarray, b: int) -> tuple[np.ndarray, np.ndarray]:
    """``a // b`` and ``a % b`` truncated toward zero (``b`` > 0), as Triton's integers."""
    remainder = np.fmod(a, b)
    return (a - remainder) // b, remainder


def _real_tokens(launch: Launch, starts: np.ndarray, tokens: int) -> np.ndarray | None:
    """Per token, whether its request is real: not one ``idx_mapping`` marks masked (a
    negative entry: request ``b`` owns tokens ``query_start_loc[b]`` up to ``[b + 1]``), in
    time linear in tokens plus requests; None when ``idx_mapping`` is recorded without its
    integer values (which requests are real is unknown). A record without ``idx_mapping``
    names only real requests."""
    real = np.ones(tokens, dtype=bool)
    index = next((launch.tensors[n] for n in SLOT_INDEX if n in launch.tensors), None)
    if index is None:
        return real
    values = _values(index)
    if values is None or values.dtype.kind not in "iu":
        return None
    rows = np.flatnonzero(values[:max(len(starts) - 1, 0)] < 0)
    bounds = np.clip(starts.astype(np.int64), 0, tokens)
    lo, hi = bounds[rows], bounds[rows + 1]
    lo, hi = lo[lo < hi], hi[lo < hi]
    inside = np.zeros(tokens + 1, dtype=np.int64)  # how many masked requests hold each token
    np.add.at(inside, lo, 1)
    np.add.at(inside, hi, -1)
    return np.cumsum(inside[:-1]) <= 0


def _first_at_least(key: np.ndarray, limits: np.ndarray, never: list[bool]) -> list[np.ndarray]:
    """For each limit, the first :data:`MOST` indices ``i`` with ``key[i] >= limit`` (none
    where ``never``): a descent through a table of range maxima, all limits at once."""
    maxima = [key]  # maxima[j][i]: the largest of key[i : i + 2**j]
    while 1 << len(maxima) <= len(key):
        half = 1 << (len(maxima) - 1)
        maxima.append(np.maximum(maxima[-1][:-half], maxima[-1][half:]))
    start = np.where(never, len(key), 0).astype(np.int64)
    found: list[list[int]] = [[] for _ in limits]
    for _ in range(MOST):
        for level in range(len(maxima) - 1, -1, -1):
            table = maxima[level]
            inside = start < len(table)
            below = table[np.minimum(start, len(table) - 1)] < limits
            start += np.where(inside & below, 1 << level, 0)
        for i in np.flatnonzero(start < len(key)).tolist():
            found[i].append(int(start[i]))
        start += 1
    return [np.array(f, dtype=np.int64) for f in found]


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
    from forensics.manifest_facts import MAX_MODEL_LEN, VOCAB, read_fact

    model_len, _, _ = read_fact(manifest, MAX_MODEL_LEN)
    vocab, _, _ = read_fact(manifest, VOCAB)
    return (_slots(launch) + _blocks(launch)
            + _bounded(launch, POSITIONS, model_len, "position", "max_model_len (manifest)")
            + _bounded(launch, TOKEN_IDS, vocab, "token id", "vocab_size (manifest)"))
