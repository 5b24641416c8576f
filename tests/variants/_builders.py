"""Small builders of hand-written records for the variant tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from forensics.records import Record
from forensics.validate import validate_record

I32, I64 = np.int32, np.int64
PATCHES = Path(__file__).resolve().parents[2] / "data" / "patches"
STALE_DIFF = PATCHES / "stale-prev-rows.diff"
VOCAB_DIFF = PATCHES / "vocab-guard.diff"


def rec(site: str, **fields: object) -> Record:
    """A validated record whose arrays are read-only (a variant must not write into them)."""
    record = validate_record(Record(site, 1, fields=dict(fields)), "test record")
    for value in record.fields.values():
        if isinstance(value, np.ndarray):
            value.setflags(write=False)
    return record


def a32(*values: int) -> np.ndarray:
    """An int32 vector."""
    return np.array(values, dtype=I32)


def a64(*values: int) -> np.ndarray:
    """An int64 vector."""
    return np.array(values, dtype=I64)


def col(*values: int) -> np.ndarray:
    """An int32 column [p, 1] (``prev_sampled_token_ids``)."""
    return np.array(values, dtype=I32).reshape(-1, 1)


def prep(prev: np.ndarray, sampled: np.ndarray, input_ids: np.ndarray, cu: np.ndarray,
         drafts: np.ndarray, spec: int = 0, **extra: object) -> Record:
    """A ``prepare_input_ids`` record with vocab_size 100."""
    return rec("prepare_input_ids", prev_positions=prev, prev_sampled_token_ids=sampled,
               input_ids=input_ids, cu_num_tokens=cu, num_draft_tokens=drafts,
               prev_num_spec_tokens=spec, vocab_size=100, **extra)
