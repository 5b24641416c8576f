"""What a variant returns for one record: its outcome, its outputs and (models only) its accesses.

Variants run and never judge; :mod:`forensics.findings` judges these objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

OK, INDEX_ERROR, ERROR = "ok", "index_error", "error"
STATUSES = (OK, INDEX_ERROR, ERROR)


@dataclass
class Access:
    """Indices a model variant used to read ``tensor`` (after its own clamping).

    ``rows`` are batch rows (or None), ``elements`` flat positions in the index tensor, ``values``
    the indices actually used, ``[lower, upper)`` the valid range. Arrays have equal length.
    """

    tensor: str
    rows: np.ndarray | None
    elements: np.ndarray
    values: np.ndarray
    lower: int
    upper: int


@dataclass
class Outcome:
    """Result of one variant on one record.

    ``status`` is one of ``ok``, ``index_error``, ``error``; ``outputs`` maps produced field
    names (the input field names the call changes, e.g. ``input_ids_device``) to values;
    ``accesses`` is None for real-code and user variants, which expose no access pattern.
    """

    status: str = OK
    message: str = ""
    outputs: dict[str, Any] = field(default_factory=dict)
    accesses: list[Access] | None = None
