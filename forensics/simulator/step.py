"""One simulated step in compact form: what the step model (:mod:`forensics.simulator.runs`) hands
to the records it builds and to the columnar writer (:mod:`forensics.simulator.columns`).

Both read this module and neither imports the other for it (the writer is the simulator's
``out=`` path). numpy only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np


class Derived(Enum):
    """Fields of :class:`StepFields` kept compact, spelled out when records are built."""

    REQ_IDS = "req_ids"  #: ``req-<id>`` of each row's request
    PREV_REQ_IDS = "prev_req_ids"  #: the previous batch's, None for a discarded row
    OUTPUT_TAIL = "output_tail"  #: each row's output tail, from its counts


@dataclass
class StepFields:
    """One step at the four sites, compact: request ids as integers, output tails as counts.

    ``sites`` maps each site to its fields in record order; a :class:`Derived` value stands for
    a field built from ``rids``, ``prev_rids``/``discarded`` or ``tails``. Arrays are never
    changed after the step that made them (safe to keep).
    """

    step: int
    rids: np.ndarray  # [n] int64: each row's request id
    prev_rids: np.ndarray  # [p] int64: the previous batch's request ids
    discarded: list[int]  # previous rows recorded as None (placeholder_leak)
    tails: np.ndarray  # [3, n] int64: output lengths, trailing placeholders, last ids before
    sites: dict[str, dict[str, Any]]


def request_names(ids: Iterable[int]) -> list[str]:
    """The request id that records carry for each integer id: ``req-<id>``."""
    return [f"req-{i}" for i in ids]
