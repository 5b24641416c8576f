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


def check_masked_accesses(check: Check, load: str, store: str) -> Any:
    """Route the interpreter's masked loads and stores through ``check`` (``what``: ``load``
    or ``store`` as given) and return the interpreter module."""
    from triton.runtime import interpreter as interp

    builder = interp.InterpreterBuilder
    load_op, store_op = builder.create_masked_load, builder.create_masked_store

    def masked_load(self: Any, ptrs: Any, mask: Any, other: Any, *rest: Any) -> Any:
        size = np.dtype(interp._get_np_dtype(ptrs.get_element_ty())).itemsize
        safe = interp.TensorHandle(check(ptrs.data, mask.data, size, load), mask.dtype)
        return load_op(self, ptrs, safe, other, *rest)

    def masked_store(self: Any, ptrs: Any, value: Any, mask: Any, *rest: Any) -> Any:
        size = np.asarray(value.data).dtype.itemsize
        safe = interp.TensorHandle(check(ptrs.data, mask.data, size, store), mask.dtype)
        return store_op(self, ptrs, value, safe, *rest)

    builder.create_masked_load, builder.create_masked_store = masked_load, masked_store
    return interp
