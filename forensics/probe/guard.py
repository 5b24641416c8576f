"""Host-side bound checks run by guard mode before the consuming kernel.

Each site's own per-call check is its module's ``guard`` (``Site.guard``, beside the rule it
mirrors); :func:`check_ids` checks ids against one bound for any site. Each takes host values
(numpy arrays, ints, lists) and returns the first :class:`Violation`, or None.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from forensics.errors import IndexBoundsError
from forensics.escaping import shell_path
from forensics.sites._common import Violation, first_outside

__all__ = ["Violation", "bounds_error", "check_ids", "passed_on_message"]


def check_ids(site: str, tensor: str, ids: np.ndarray, upper: int,
              cu_num_tokens: np.ndarray | None = None) -> Violation | None:
    """Every id must lie in ``[0, upper)``. The row of an offending token comes from
    ``cu_num_tokens`` (inclusive cumulative tokens per row) when given, else it is None."""
    ids = np.asarray(ids).reshape(-1)
    element = first_outside(ids, 0, upper)
    if element is None:
        return None
    row = None
    if cu_num_tokens is not None and len(cu_num_tokens) and element < int(cu_num_tokens[-1]):
        row = int(np.searchsorted(np.asarray(cu_num_tokens), element, side="right"))
    return Violation(site, row, f"{tensor}[{element}]", int(ids[element]), 0, int(upper))


def not_kept(capture: Path | str) -> str:
    """What a guard message says of records the probe could not all write to ``capture``."""
    return (f"records up to this call could not all be written to {capture} (a write failed or "
            "timed out: its events, or the engine's log, say why)")


def passed_on_message(violation: Violation, step: int, rank: int,
                      capture: Path | str | None, kept: bool = True) -> str:
    """The warning for a value out of range that a call only writes or passes on (``kept``:
    whether the records up to the call were all written)."""
    row = "" if violation.row is None else f" row {violation.row}"
    where = f"recorded in {capture}" if capture and kept else \
        not_kept(capture) if capture else "recorded in no capture"
    return (f"forensics guard: site {violation.site!r} step {step} rank {rank}{row} wrote "
            f"{violation.tensor} value {violation.value} outside [{violation.lower}, "
            f"{violation.upper}); not used as an index here, so the engine goes on (guard mode "
            f"raises if it reaches an index); {where}")


def bounds_error(violation: Violation, step: int, rank: int,
                 capture: Path | str | None, kept: bool = True) -> IndexBoundsError:
    """Return the IndexBoundsError describing ``violation`` (its attributes carry the fields;
    ``kept``: whether the records up to the call were all written)."""
    where = f"records up to this call are in {capture}" if capture and kept else \
        not_kept(capture) if capture else "no capture was written"
    row = "" if violation.row is None else f" row {violation.row}"
    error = IndexBoundsError(
        f"forensics guard: site {violation.site!r} step {step} rank {rank}{row}: "
        f"{violation.tensor} value {violation.value} is outside [{violation.lower}, "
        f"{violation.upper}) (bound {violation.upper}); {where}; run "
        f"`forensics replay {shell_path(capture) if capture else 'CAPTURE'}` to trace it")
    for name, value in (("site", violation.site), ("step", step), ("rank", rank),
                        ("row", violation.row), ("value", violation.value),
                        ("bound", violation.upper), ("tensor", violation.tensor),
                        ("capture", str(capture) if capture else None)):
        setattr(error, name, value)
    return error
