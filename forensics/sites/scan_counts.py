"""What a site's scan reads and reports: the captured index checks as counts over columns.

A site's ``scan_indices(cols)`` (a :class:`~forensics.sites.base.Site` operation) checks the
indices whose bounds the capture alone decides, over a run of records of one batch held as
flat columns (:class:`ScanColumns`), and reports per tensor how many it checked and how many
lie outside their range (:class:`IndexCount`). :func:`forensics.judge.scan.scan` runs it over every
batch of a capture; it never builds a record or replays anything. The counting helpers below
compare whole columns at their captured width, in as few passes as numpy allows.

numpy only (``import forensics.sites`` stays light).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass
class IndexCount:
    """One tensor's indices checked in a run of records, and how many lie outside their
    range. ``replay``: the count equals the ``out_of_bounds`` findings of the ``upstream``
    replay on that site and tensor (False for a screen with no replay counterpart)."""

    tensor: str
    checked: int
    out_of_range: int
    replay: bool = True


class ScanColumns(Protocol):
    """The flat integer columns of a run of non-summary records of one batch, as a site's
    ``scan_indices`` reads them (tensors at their captured width)."""

    def has(self, name: str) -> bool:
        """Whether the batch has a column ``name``."""

    def tensor(self, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Tensor ``name``: all records' values end to end, each record's count of values and
        whether it carries the tensor."""

    def first_dim(self, name: str) -> np.ndarray:
        """Each record's first dimension of tensor ``name`` (0 where absent)."""

    def ints(self, name: str) -> np.ndarray:
        """The int field ``name`` of each record."""

    def bools(self, slot: str, n: int) -> np.ndarray:
        """A writable boolean scratch array of ``n`` items, the same memory for ``slot`` on
        every call of one scan (large temporaries are not allocated afresh per run)."""

    def int64s(self, slot: str, n: int) -> np.ndarray:
        """A writable int64 scratch array of ``n`` items (as :meth:`bools`)."""


def outside(values: np.ndarray, bounds: np.ndarray, sizes: np.ndarray,
            out: np.ndarray | None = None) -> int:
    """Count of ``values`` outside ``[0, bound)``, each record's ``sizes[r]`` values against
    its ``bounds[r]`` (``out``: a boolean buffer like ``values`` for the comparison)."""
    if len(values) == 0:
        return 0
    low, high = int(bounds.min()), int(bounds.max())
    if low == high:  # one bound: compare with a scalar
        return count_outside(values, low, out)
    if _all_below(values, low):
        return 0
    per_value = np.repeat(bounds, sizes)
    return int(np.count_nonzero((values < 0) | (values >= per_value)))


def count_outside(values: np.ndarray, high: int, out: np.ndarray | None = None) -> int:
    """Count of ``values`` outside ``[0, high)``. Signed values are compared as unsigned where
    that is exact (``0 <= high <= 2**(bits-1)``: a negative value wraps past ``high``): one
    comparison (into ``out`` when given) instead of two and an or, and none at all when the
    largest value (one read-only reduction) is below ``high``, the usual case."""
    if len(values) == 0:
        return 0
    unsigned = _as_unsigned(values, high)
    if unsigned is None:
        return int(np.count_nonzero((values < 0) | (values >= high)))
    if int(unsigned.max()) < high:
        return 0
    return int(np.count_nonzero(np.greater_equal(unsigned, high, out=out)))


def _as_unsigned(values: np.ndarray, high: int) -> np.ndarray | None:
    """``values`` viewed as unsigned where comparing them so with ``high`` tells ``[0, high)``
    exactly (a negative value wraps past ``high``), else None."""
    if values.dtype.kind == "u":
        return values
    if 0 <= high <= 1 << (8 * values.dtype.itemsize - 1):
        return values.view(np.dtype(f"u{values.dtype.itemsize}"))
    return None


def _all_below(values: np.ndarray, high: int) -> bool:
    """Whether every one of the (non-empty) ``values`` lies in ``[0, high)``, from one
    reduction where the unsigned view applies."""
    unsigned = _as_unsigned(values, high)
    if unsigned is not None:
        return int(unsigned.max()) < high
    return int(values.min()) >= 0 and int(values.max()) < high


def at_or_past(values: np.ndarray, bounds: np.ndarray, sizes: np.ndarray,
               out: np.ndarray | None = None) -> int:
    """Count of ``values`` at or past their record's bound (no lower check; ``out`` as in
    :func:`outside`)."""
    if len(values) == 0:
        return 0
    low, high = int(bounds.min()), int(bounds.max())
    if int(values.max()) < low:
        return 0  # one read-only reduction: nothing reaches the smallest bound
    if low == high:
        return int(np.count_nonzero(np.greater_equal(values, low, out=out)))
    return int(np.count_nonzero(values >= np.repeat(bounds, sizes)))


def per_value(bounds: np.ndarray, sizes: np.ndarray) -> np.ndarray | int:
    """Each record's bound repeated for its values; a plain int when every record has the
    same."""
    if len(bounds) and bounds.min() == bounds.max():
        return int(bounds[0])
    return np.repeat(bounds, sizes)


def run_starts(n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Records with values (``n > 0``) and where each one's run of values starts."""
    filled = n > 0
    return filled, (np.cumsum(n) - n)[filled]


def run_max(values: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The largest of each record's run of ``values`` (the dtype's minimum for none)."""
    out = np.full(len(n), np.iinfo(values.dtype).min, dtype=values.dtype)
    filled, starts = run_starts(n)
    if len(starts):
        out[filled] = np.maximum.reduceat(values, starts)
    return out


def distinct(values: np.ndarray) -> list[int]:
    """The distinct values, ascending (no sort when all are equal, the usual case)."""
    if len(values) and values.min() == values.max():
        return [int(values[0])]
    return sorted(set(values.tolist()))
