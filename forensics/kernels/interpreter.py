"""Triton's interpreter with every masked load and store checked first: the one hook both
worker processes that run vLLM's kernels in it install (the kernel sanitizer's replay worker,
:mod:`forensics.kernels.replay_worker`, and the ``vllm`` variant's,
:mod:`forensics.variants.triton_worker`). Triton is imported inside the function: the worker
imports it only once ``TRITON_INTERPRET`` is set."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

#: ``check(addresses, mask, itemsize, what)``: the mask of the lanes to perform
Check = Callable[[Any, Any, int, str], Any]


def check_masked_accesses(check: Check, load: str, store: str, atomic: str | None = None
                          ) -> Any:
    """Route the interpreter's masked loads and stores, and its atomics, through ``check``
    (``what``: ``load``, ``store`` or ``atomic`` as given; an atomic is a ``store`` unless
    named) and return the interpreter module. An atomic compare-and-swap has no mask: a lane
    ``check`` leaves out swaps in a scratch cell of its own instead of the memory it names."""
    from triton.runtime import interpreter as interp

    builder = interp.InterpreterBuilder
    load_op, store_op = builder.create_masked_load, builder.create_masked_store
    rmw_op, cas_op = builder.create_atomic_rmw, builder.create_atomic_cas
    atomic = atomic or store

    def masked_load(self: Any, ptrs: Any, mask: Any, other: Any, *rest: Any) -> Any:
        size = np.dtype(interp._get_np_dtype(ptrs.get_element_ty())).itemsize
        safe = interp.TensorHandle(check(ptrs.data, mask.data, size, load), mask.dtype)
        return load_op(self, ptrs, safe, other, *rest)

    def masked_store(self: Any, ptrs: Any, value: Any, mask: Any, *rest: Any) -> Any:
        size = np.asarray(value.data).dtype.itemsize
        safe = interp.TensorHandle(check(ptrs.data, mask.data, size, store), mask.dtype)
        return store_op(self, ptrs, value, safe, *rest)

    def atomic_rmw(self: Any, op: Any, ptr: Any, value: Any, mask: Any, *rest: Any) -> Any:
        size = np.asarray(value.data).dtype.itemsize
        safe = interp.TensorHandle(check(ptr.data, mask.data, size, atomic), mask.dtype)
        return rmw_op(self, op, ptr, value, safe, *rest)

    def atomic_cas(self: Any, ptr: Any, cmp: Any, value: Any, *rest: Any) -> Any:
        addresses = np.asarray(ptr.data, dtype=np.uint64)
        size = np.asarray(value.data).dtype.itemsize
        keep = np.asarray(check(addresses, np.ones(addresses.shape, dtype=bool), size, atomic))
        scratch = np.zeros(addresses.shape, dtype=np.uint64)  # 8 bytes a lane, alive below
        if not keep.all():
            cells = np.uint64(scratch.ctypes.data) + np.arange(
                scratch.size, dtype=np.uint64).reshape(addresses.shape) * np.uint64(8)
            ptr = interp.TensorHandle(np.where(keep, addresses, cells), ptr.dtype)
        return cas_op(self, ptr, cmp, value, *rest)

    builder.create_masked_load, builder.create_masked_store = masked_load, masked_store
    builder.create_atomic_rmw, builder.create_atomic_cas = atomic_rmw, atomic_cas
    return interp
