"""Which lanes of a kernel's access lie inside the tensors handed to its launch, and to which
tensor a lane outside them is attributed: the one judgement, and the one attribution, of both
worker processes that run vLLM's kernels in Triton's interpreter (the kernel sanitizer's
:mod:`forensics.kernels.replay_worker` and the ``vllm`` variant's
:mod:`forensics.variants.triton_worker`). Each notes the lanes outside in its own words (see
:meth:`Bounds.allowed`, :meth:`Bounds.owners` and :func:`null_owner`). numpy only."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

#: addresses below this hold no allocation (Linux's ``mmap_min_addr``): an access there is
#: through a null pointer
NULL_REACH = 1 << 16
#: an access outside every storage is attributed to the storage nearest it only within this
#: many bytes of it (the kernel sanitizer's replay leaves as many unused on either side of each
#: storage); farther, no storage is named (a wild index, a live address of another process)
REACH = 1 << 16
#: what :meth:`Bounds.owners` gives an address through a null pointer, and one outside every
#: storage's reach
AT_NULL, FAR = -2, -1

T = TypeVar("T")


class Bounds:
    """Storages ``[start, end)`` in bytes (they may overlap or repeat: two views of one
    storage), sorted by start. A lane of ``size`` bytes at ``address`` is inside when one
    storage holds all of it: ``start <= address <= end - size`` (not ``address + size <=
    end``: that wraps past 2**64 for an address in the last bytes of the address space, which
    was taken for inside and performed, a SIGSEGV of the worker). Judged by a binary search
    per lane against the greatest end of the storages starting at or before it."""

    def __init__(self, spans: Sequence[tuple[int, int]]) -> None:
        #: the index in ``spans`` of each storage, in order of start (the first listed first)
        self.order = np.array(sorted(range(len(spans)), key=lambda i: spans[i][0]),
                              dtype=np.int64)
        self.starts = np.array([spans[i][0] for i in self.order], dtype=np.uint64)
        self.ends = np.array([spans[i][1] for i in self.order], dtype=np.uint64)
        self._reach = np.maximum.accumulate(self.ends) if len(spans) else self.ends
        # per sorted index, the sorted index of the storage reaching farthest among those
        # starting at or before it (the first listed on a tie)
        rank = np.empty(len(spans), dtype=np.int64)
        rank[np.lexsort((-self.order, self.ends))] = np.arange(len(spans))
        by_rank = np.empty(len(spans), dtype=np.int64)
        by_rank[rank] = np.arange(len(spans))
        self._farthest = by_rank[np.maximum.accumulate(rank)] if len(spans) else rank

    def left(self, addr: np.ndarray) -> np.ndarray:
        """Per address, the sorted index of the last storage starting at or before it (-1)."""
        return np.searchsorted(self.starts, addr, side="right").astype(np.int64) - 1

    def inside(self, addr: np.ndarray, size: int) -> np.ndarray:
        """Per address (uint64), whether one storage holds its ``size`` bytes."""
        if not len(self.starts):
            return np.zeros(addr.shape, dtype=bool)
        left = self.left(addr)
        end = self._reach[np.maximum(left, 0)]
        wide = np.uint64(size)
        return (left >= 0) & (end >= wide) & (addr <= end - wide)

    def allowed(self, addresses: Any, mask: Any, size: int,
                note: Callable[[np.ndarray], None]) -> np.ndarray:
        """``mask`` without the active lanes outside every storage, whose addresses are handed
        to ``note`` first (only when there are some)."""
        addr = np.asarray(addresses, dtype=np.uint64).reshape(-1)
        active = np.asarray(mask, dtype=bool).reshape(-1).copy()
        inside = self.inside(addr, size)
        bad = active & ~inside
        if bad.any():
            note(addr[bad])
            active &= inside
        return active.reshape(np.shape(mask))

    def owners(self, addresses: Any) -> np.ndarray:
        """Per address (uint64), the index in ``spans`` of the storage it is attributed to:
        :data:`AT_NULL` below :data:`NULL_REACH` (through a null pointer: see
        :func:`null_owner`); else the storage nearest it (by its end for an address at or
        past its start, by its start for one before it; the first listed on a tie) when it
        lies within :data:`REACH` bytes of it (past the end: under REACH; before the start: at
        most REACH), else :data:`FAR`: an address far from every storage was the nearest
        one's, whatever the distance (a live address 8 GiB away, a wild index). Storages
        may be disjoint, equal, or overlap in part (storages the record says share memory, in
        one allocation of the replay); of two that overlap in part, an address past both starts
        is the one's reaching farthest."""
        addr = np.asarray(addresses, dtype=np.uint64).reshape(-1)
        if not len(self.starts):
            return np.where(addr < np.uint64(NULL_REACH), AT_NULL, FAR).astype(np.int64)
        last = len(self.starts) - 1
        left = self.left(addr)
        lo, hi = self._farthest[np.maximum(left, 0)], np.minimum(left + 1, last)
        far = np.uint64(2**64 - 1)
        below = np.where(addr < self.ends[lo], np.uint64(0), addr - self.ends[lo])
        to_left = np.where(left >= 0, below, far)
        to_right = np.where(left < last, self.starts[hi] - addr, far)
        first = np.where(self.order[lo] <= self.order[hi], lo, hi)
        on_left = (to_left < to_right) | ((to_left == to_right) & (first == lo))
        reach = np.uint64(REACH)
        held = np.where(on_left, to_left < reach, to_right <= reach)
        owner = np.where(held, self.order[np.where(on_left, lo, hi)], FAR)
        return np.where(addr < np.uint64(NULL_REACH), AT_NULL, owner).astype(np.int64)


def null_pointer(tensor: Any) -> bool:
    """Whether a kernel is handed a null pointer for ``tensor``: torch's ``data_ptr()`` of an
    empty tensor is 0, whatever its storage's address (a numpy-made empty buffer's storage has
    one), in the live launch and in Triton's interpreter alike. Both workers take such a
    tensor for an empty one, whose null pointer an access below :data:`NULL_REACH` may have
    gone through (:func:`null_owner`)."""
    return int(tensor.data_ptr()) == 0


def null_owner(empty: Sequence[T]) -> T | None:
    """The tensor an access through a null pointer went through: the launch's one tensor whose
    pointer is null (torch hands a kernel 0 for an empty tensor, in the live launch too), or
    None (attributed to no tensor) when the launch has none or several: whose it was is
    unknown."""
    return empty[0] if len(empty) == 1 else None
