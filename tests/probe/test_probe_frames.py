"""The ``RECORD`` frame written from cached pieces (``frames.record_header``) is byte for byte
the frame of one encoding of its whole header, whatever the record holds and in whatever order
records come (a list of request ids kept while the same ids come again, a set of arrays' shapes
kept once seen)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.probe import frames
from forensics.probe.copy import PendingRecord


def one_encoding(pending: PendingRecord) -> bytes:
    """The frame as one encoding of the whole header (the frame before the cached pieces)."""
    record = pending.to_record()
    plain = {k: v for k, v in record.fields.items() if not isinstance(v, np.ndarray)}
    arrays = {k: [v.dtype.str, list(v.shape)] for k, v in record.fields.items()
              if isinstance(v, np.ndarray)}
    return frames.blob(frames.RECORD, {"site": record.site, "step": record.step,
                                       "rank": record.rank, "fields": plain,
                                       "arrays": arrays},
                       tuple(v for v in record.fields.values() if isinstance(v, np.ndarray)))


IDS = st.lists(st.sampled_from(["r0", "r1", "é\"\\", "\x00", "cmpl-7"]), max_size=4)
PLAIN = st.one_of(st.integers(-2**63, 2**63 - 1), IDS, st.lists(st.integers(), max_size=3),
                  st.lists(st.one_of(st.booleans(), st.integers(0, 1)), max_size=3),
                  st.dictionaries(st.sampled_from(["a", "b"]), st.integers(), max_size=2),
                  st.booleans(), st.text(max_size=3))
ARRAY = st.tuples(st.sampled_from(["<i4", "<i8", "|b1", "<f4"]),
                  st.lists(st.integers(0, 3), max_size=2)).map(
                      lambda t: np.zeros(tuple(t[1]), np.dtype(t[0])))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["req_ids", "vocab_size", "x", "ü", "idx"]),
                                st.one_of(PLAIN, ARRAY), max_size=5), min_size=1, max_size=6),
       st.integers(0, 10))
def test_a_record_frame_is_the_frame_of_its_whole_header(records: list[dict[str, Any]],
                                                         step: int) -> None:
    for i, fields in enumerate(records):
        pending = PendingRecord("combine_tokens" if i % 2 else "ü_site", step + i, i % 2,
                                dict(fields))
        assert frames.record_blob(pending) == one_encoding(pending)


def test_an_equal_list_of_other_types_is_not_taken_for_the_last_ids() -> None:
    """``[1] == [True]`` in Python: only a list of str reuses the last request ids' JSON."""
    for fields in ({"req_ids": ["a", "b"]}, {"req_ids": ["a", "b"]}, {"flags": [True]},
                   {"flags": [1]}, {"req_ids": ["a", "c"]}, {"n": np.int64(3)}):
        pending = PendingRecord("s", 1, 0, dict(fields))
        assert frames.record_blob(pending) == one_encoding(pending)


def test_a_value_json_cannot_hold_still_raises() -> None:
    with pytest.raises(ValueError):
        frames.record_blob(PendingRecord("s", 1, 0, {"x": float("nan")}))
    with pytest.raises(TypeError):
        frames.record_blob(PendingRecord("s", 1, 0, {"x": object()}))
