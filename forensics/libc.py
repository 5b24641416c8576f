"""Functions of the C library that the memory management calls (Linux only; loaded once)."""

from __future__ import annotations

import functools
import sys
from typing import Any


@functools.cache
def libc_function(name: str) -> Any:
    """libc's function ``name`` (``madvise``, ``malloc_trim``), or None off Linux or where libc
    cannot be reached. Loaded once per name: each ``ctypes.CDLL`` leaves a reference cycle,
    and the replay calls these per chunk with the cyclic collector paused."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None
