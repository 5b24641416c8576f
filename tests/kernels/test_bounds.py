"""The one out-of-bounds judgement of both Triton workers (:mod:`forensics.kernels.bounds`),
against the lane-by-lane rule it replaces: inside when one storage holds all of the access."""

from __future__ import annotations

import numpy as np
import pytest

from forensics.kernels.bounds import Bounds


def brute(spans: list[tuple[int, int]], addresses: list[int], size: int) -> list[bool]:
    """Each lane against every storage, in Python's exact ints."""
    return [any(start <= a and a + size <= end for start, end in spans) for a in addresses]


@pytest.mark.parametrize("size", [1, 4, 8])
def test_lanes_inside_overlapping_and_repeated_storages_are_those_one_storage_holds(
        size: int) -> None:
    """Storages that repeat (two views of one storage) or overlap, nested or not, listed out
    of order: a lane is inside exactly when one of them holds all its bytes (a lane across
    two overlapping storages' joint is not)."""
    rng = np.random.default_rng(size)
    starts = rng.integers(1 << 20, (1 << 20) + 4096, 40)
    spans = [(int(s), int(s) + int(n)) for s, n in zip(starts, rng.integers(0, 600, 40),
                                                       strict=True)]
    spans += spans[:5] + [(1 << 20, (1 << 20) + 8192), (5, 9)]
    addresses = [int(a) for a in rng.integers((1 << 20) - 64, (1 << 20) + 9000, 3000)]
    addresses += [0, 4, 5, 8, 2**64 - 2, 2**64 - size, 2**63]
    bounds = Bounds(spans)
    got = bounds.inside(np.array(addresses, dtype=np.uint64), size).tolist()
    assert got == brute(spans, addresses, size)
    assert 0 < sum(got) < len(got)


def test_allowed_notes_only_the_active_lanes_outside_and_keeps_the_mask_shape() -> None:
    bounds = Bounds([(100, 116)])
    addresses = np.array([[100, 112], [113, 2**64 - 2]], dtype=np.uint64)
    mask = np.array([[True, True], [False, True]])
    noted: list[list[int]] = []
    allowed = bounds.allowed(addresses, mask, 4, lambda bad: noted.append(bad.tolist()))
    assert allowed.tolist() == [[True, True], [False, False]]
    assert noted == [[2**64 - 2]]
    assert bounds.allowed(addresses[:1], mask[:1], 4, noted.append).tolist() == [[True, True]]
    assert len(noted) == 1  # nothing outside: nothing noted


def test_no_storage_holds_nothing() -> None:
    noted: list[int] = []
    allowed = Bounds([]).allowed(np.array([0, 8], dtype=np.uint64), np.ones(2, bool), 4,
                                 lambda bad: noted.extend(bad.tolist()))
    assert allowed.tolist() == [False, False] and noted == [0, 8]
