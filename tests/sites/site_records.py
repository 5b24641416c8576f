"""Record builders for the site tests (int32 where vLLM uses it)."""

from __future__ import annotations

from typing import Any

import numpy as np

from forensics.records import Record
from forensics.validate import validate_record


def i32(*values: int) -> np.ndarray:
    """An int32 vector."""
    return np.array(values, dtype=np.int32)


def record(site: str, step: int = 0, rank: int = 0, **fields: Any) -> Record:
    """A validated record of ``site``."""
    return validate_record(Record(site, step, rank, fields), f"test record of {site}")
