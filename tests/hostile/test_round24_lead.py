"""Round 24, the lead's own: a split triage's plan counts steps without ordering every record."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from forensics.records import Record
from forensics.store.reader import _merged_counts, load
from forensics.store.writer import write_capture


def _capture(root: Path) -> Path:
    """Embedding and sampler records over two sites, steps repeated and out of order."""
    steps = [5, 3, 3, 9, 0, 5, 5, 10**15, 2]
    records = [Record("embedding", s, 0, {"input_ids": np.arange(4, dtype=np.int32),
                                          "num_embeddings": 10}) for s in steps]
    records += [Record("embedding", s, 1, {"input_ids": np.arange(2, dtype=np.int32),
                                           "num_embeddings": 10}) for s in steps[:4]]
    return Path(write_capture(root / "mixed.capture", records))


def test_step_counts_agree_with_the_ordered_records(tmp_path: Path) -> None:
    """The distinct steps and each one's records, as ordering every record gives them."""
    capture = load(_capture(tmp_path), mapped=False)
    steps, counts = capture.step_counts()
    want_steps, want_counts = np.unique([r.step for r in load(capture.path).records()],
                                        return_counts=True)
    assert steps.tolist() == want_steps.tolist()
    assert counts.tolist() == want_counts.tolist()


def test_step_counts_do_not_order_the_capture(tmp_path: Path) -> None:
    """The plan's count holds one batch's steps and the distinct steps so far, not the
    capture's record order (about 64 bytes a record, held by the plan's parent)."""
    capture = load(_capture(tmp_path), mapped=False)
    capture.step_counts()
    assert capture._order is None


def test_merged_counts_add_the_counts_of_a_step_seen_twice() -> None:
    """Parts that share steps merge into one count a step."""
    parts = [(np.array([1, 4]), np.array([2, 3])), (np.array([0, 4, 7]), np.array([1, 1, 5])),
             (np.array([], np.int64), np.array([], np.int64))]
    steps, counts = _merged_counts(parts)
    assert (steps.tolist(), counts.tolist()) == ([0, 1, 4, 7], [1, 2, 4, 5])
    assert _merged_counts([])[0].tolist() == []
