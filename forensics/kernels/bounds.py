"""Which lanes of a kernel's access lie inside the tensors handed to its launch: the one
out-of-bounds judgement of both worker processes that run vLLM's kernels in Triton's
interpreter (the kernel sanitizer's :mod:`forensics.kernels.replay_worker` and the ``vllm``
variant's :mod:`forensics.variants.triton_worker`). Each notes the lanes outside in its own
words (see :meth:`Bounds.allowed`). numpy only."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


class Bounds:
    """Storages ``[start, end)`` in bytes (they may overlap or repeat: two views of one
    storage), sorted by start. A lane of ``size`` bytes at ``address`` is inside when one
    storage holds all of it: ``start <= address <= end - size`` (not ``address + size <=
    end``: that wraps past 2**64 for an address in the last bytes of the address space, which
    was taken for inside and performed, a SIGSEGV of the worker). Judged by a binary search
    per lane against the greatest end of the storages starting at or before it."""

    def __init__(self, spans: Sequence[tuple[int, int]]) -> None:
        #: the index in ``spans`` of each storage, in order of start
        self.order = np.array(sorted(range(len(spans)), key=lambda i: spans[i][0]),
                              dtype=np.int64)
        self.starts = np.array([spans[i][0] for i in self.order], dtype=np.uint64)
        self.ends = np.array([spans[i][1] for i in self.order], dtype=np.uint64)
        self._reach = np.maximum.accumulate(self.ends) if len(spans) else self.ends

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
