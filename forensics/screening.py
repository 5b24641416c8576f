"""What a columnar screen raises when it cannot vouch for a batch, and the int64 read that
raises it: shared by the store's columns and the sites' (numpy only, imports no site).

A screen (``validate.screen_batch``, a site's ``check_batch``, the probe's guard) reads a
batch's columns as int64; a column it cannot read so makes it give up on the whole batch
(:class:`ScreenUnsure`), and every row is then checked record by record.

A replay rule may instead read a tensor at its captured width (:func:`as_exact`, what
``RunColumns.flat(name, widen=False)`` returns): every integer dtype but ``uint64`` holds only
values that int64 holds too, so such a column is exact as it is; ``uint64`` is screened and
widened as :func:`as_int64` does. Narrow columns suit comparisons with a bound, ``max``/``min``
and gathers whose indices were bounds-checked (numpy compares mixed widths exactly). Arithmetic
that can leave the captured width (offsets, sums, products, ``+ 1``) must widen first.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ScreenUnsure", "as_exact", "as_int64"]


class ScreenUnsure(Exception):
    """A columnar screen cannot vouch for any row of the batch: check every row per record."""


def as_int64(values: np.ndarray, name: str) -> np.ndarray:
    """``values`` (field ``name``) as int64, without a copy where they are int64 already.

    Raises:
        ScreenUnsure: an unsigned value does not fit int64 (records not validated yet, such
            as the probe's screen reads).
    """
    if values.dtype == np.uint64 and len(values) and values.max() > np.iinfo(np.int64).max:
        raise ScreenUnsure(f"{name!r} holds values past int64")
    return values.astype(np.int64, copy=False)


def as_exact(values: np.ndarray, name: str) -> np.ndarray:
    """``values`` (field ``name``) at their captured width when every value of that dtype fits
    int64 (signed integers, unsigned ones narrower than 64 bits: no copy); otherwise
    :func:`as_int64` of them.

    Raises:
        ScreenUnsure: an unsigned value does not fit int64.
    """
    if values.dtype.kind == "i" or (values.dtype.kind == "u" and values.dtype.itemsize < 8):
        return values
    return as_int64(values, name)
