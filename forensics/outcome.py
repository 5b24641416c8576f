"""What a variant returns for one record: its outcome, its outputs and (models only) its accesses.

Variants run and never judge; :mod:`forensics.judge.findings` judges these objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from forensics.sites.core import CheckList, Checks

OK, INDEX_ERROR, ERROR = "ok", "index_error", "error"
STATUSES = (OK, INDEX_ERROR, ERROR)


@dataclass
class Access:
    """Indices a model variant used to read ``tensor`` (after its own clamping).

    ``rows`` are batch rows (or None), ``elements`` flat positions in the index tensor, ``values``
    the indices actually used, ``[lower, upper)`` the valid range. Arrays have equal length.
    ``index_tensor`` names the captured tensor holding each index at ``index_at`` (None there:
    ``elements``; ``""``: no captured tensor holds it); ``held`` false when the index used is
    computed from that value; ``stale`` when an index past the end is a previous row now
    gone; ``indexed`` what it indexes when not ``tensor`` itself (``draft_token_ids.flatten()``).
    """

    tensor: str
    rows: np.ndarray | None
    elements: np.ndarray
    values: np.ndarray
    lower: int
    upper: int
    index_tensor: str = ""
    index_at: np.ndarray | None = None
    held: bool = True
    stale: bool = False
    indexed: str | None = None


@dataclass
class Outcome:
    """Result of one variant on one record.

    ``status`` is one of ``ok``, ``index_error``, ``error``; ``outputs`` maps produced field
    names (the input field names the call changes, e.g. ``input_ids_device``) to values;
    ``accesses`` is None for real-code and user variants, which expose no access pattern;
    ``checks``: the checks of a model's own run on the record (``Site.run``, a batch of one),
    which the judge reads as they are (None: the judge makes them with the site's ``checks``).
    """

    status: str = OK
    message: str = ""
    outputs: dict[str, Any] = field(default_factory=dict)
    accesses: list[Access] | None = None
    checks: Checks | CheckList | None = None
