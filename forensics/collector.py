"""The cyclic garbage collector paused around bulk work that makes no cycles."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector (a batch's decoding, a replay): they allocate
    millions of small lists and tuples, no cycles, while every record stays alive, and each
    collection would walk them all (a third of a replay's time at soak scale). It resumes
    afterwards if it ran before."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
