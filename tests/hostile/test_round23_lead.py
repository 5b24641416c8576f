"""Round 23, the lead's own: a split triage's step ranges are cut by records, not by step width."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from forensics.fleet.carry import most_origins
from forensics.fleet.tasks import plan, ranges
from forensics.records import Record
from forensics.store.writer import write_capture

FAR = 10**15


@pytest.fixture(scope="module")
def outlier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """5,500 embedding records at steps 0..5,499 and one at step 10**15."""
    root = tmp_path_factory.mktemp("outlier")
    records = [Record("embedding", step, 0, {"input_ids": np.arange(4, dtype=np.int32),
                                             "num_embeddings": 10})
               for step in [*range(5_500), FAR]]
    return Path(write_capture(root / "outlier.capture", records))


def test_one_far_step_does_not_put_every_record_in_one_piece(outlier: Path) -> None:
    """Pieces of about 1,000 records each, none empty, covering every step (one far step made
    the ranges 10**15 / 6 steps wide: one piece held all 5,500 records, four held none)."""
    tasks = plan([outlier], 1_000)
    assert [t.steps for t in tasks] == [1_000] * 5 + [501]
    assert (tasks[0].start, tasks[-1].stop) == (0, FAR + 1)
    assert all(a.stop == b.start for a, b in zip(tasks, tasks[1:], strict=False))


def test_a_piece_reruns_no_more_origins_than_it_holds_steps(outlier: Path) -> None:
    """The last piece's range is about 10**15 steps wide; it reruns as many origin steps as
    the steps it holds (501), not its width (T136c's bound, which the width undid)."""
    assert most_origins(plan([outlier], 1_000)[-1]) == 501


def test_a_step_is_never_cut() -> None:
    """A step of 5,000 records stays whole, in the piece its first record falls in."""
    steps, counts = np.array([0, 1, 2, 3]), np.array([1, 5_000, 1, 1])
    assert ranges((steps, counts), 1_000) == [(0, 2, 2), (2, 4, 2)]
