"""Hostile input, round 4: ``forensics shrink``'s window on captures whose step numbers are
huge or sparse (step 0 and step 2**62), whose witnesses are only at the last step, and whose
evidence needs a step far from every witness: each replay of the window is on more stored
steps than the one before, so replays are bounded by the stored steps, not by the step
values."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import pytest

from forensics.share.shrinking import _Search


def _window(steps: Sequence[int], witness: int, needed: int) -> tuple[list[int], list[list[int]]]:
    """The window of a search over one record per step in ``steps``, whose evidence is kept
    exactly when the record at step ``needed`` is in (a record far before the witness at step
    ``witness``); and the record positions of each replay."""
    search = object.__new__(_Search)
    search.index = pd.DataFrame({"step": np.array(steps, np.int64), "site": "embedding"})
    position = list(steps).index(witness)
    search.witnesses = lambda: {position}  # type: ignore[method-assign]
    replays: list[list[int]] = []

    def keeps(positions: Sequence[int]) -> bool:
        replays.append(sorted(positions))
        return list(steps).index(needed) in positions

    search.keeps = keeps  # type: ignore[method-assign]
    return search.window(), replays


@pytest.mark.parametrize(("steps", "witness", "needed", "most"), [
    ([0, 2**62], 2**62, 0, 2),                       # once 63 replays of the same record
    ([0, 1, 2**62 - 1, 2**62], 2**62, 0, 3),
    ([k << 50 for k in range(1000)], 999 << 50, 0, 12),  # thousands of sparse steps
    ([0, 2**63 - 1], 2**63 - 1, 0, 2),               # the largest gap a step can make
])
def test_the_window_replays_each_set_of_steps_once(steps: list[int], witness: int, needed: int,
                                                   most: int) -> None:
    window, replays = _window(steps, witness, needed)
    assert needed in window and witness in window
    assert len(replays) <= most, len(replays)
    assert len({tuple(r) for r in replays}) == len(replays)  # no set replayed twice
    assert all(len(a) < len(b) for a, b in zip(replays, replays[1:], strict=False))


def test_a_dense_window_still_widens_by_doubling() -> None:
    """Consecutive steps, the needed one 100 before the witness: widths 0, 1, 2, 4, ... 128 (as
    before), each taking in more steps."""
    window, replays = _window(list(range(1000)), 999, 899)
    assert [len(r) for r in replays] == [1, 2, 3, 5, 9, 17, 33, 65, 129]
    assert window == list(range(871, 1000))
