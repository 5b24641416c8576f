"""The one out-of-bounds judgement of both Triton workers (:mod:`forensics.kernels.bounds`),
against the lane-by-lane rule it replaces: inside when one storage holds all of the access."""

from __future__ import annotations

import numpy as np
import pytest

from forensics.kernels.bounds import AT_NULL, FAR, NULL_REACH, REACH, Bounds, null_owner


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


def brute_owner(spans: list[tuple[int, int]], a: int) -> int:
    """The storage ``a`` is attributed to, against every storage in Python's exact ints: the
    nearest (0 inside, else the distance to its start before it, to its end past it), the
    first listed on a tie, held within REACH (before a start: at most REACH)."""
    if a < NULL_REACH:
        return AT_NULL

    def distance(i: int) -> int:
        start, end = spans[i]
        return start - a if a < start else max(0, a - end)

    best = min(range(len(spans)), key=lambda i: (distance(i), i))
    held = distance(best) <= REACH if a < spans[best][0] else distance(best) < REACH
    return best if held else FAR


def test_an_address_is_attributed_to_the_nearest_storage_within_reach_or_to_none() -> None:
    """Disjoint storages, repeated ones (two views of one storage) and empty ones, listed out
    of order; addresses inside, at the reach's edges, at ties between two storages, far, in the
    last bytes and through a null pointer: each is attributed as the rule in Python says."""
    rng = np.random.default_rng(11)
    starts = np.cumsum(rng.integers(1, 3 * REACH, 30)) + (1 << 30)
    spans = [(int(s), int(s) + int(n)) for s, n in zip(starts, rng.integers(0, 300, 30),
                                                       strict=True)]
    spans += [spans[3], spans[7], spans[3]]
    order = rng.permutation(len(spans))
    spans = [spans[i] for i in order]
    addresses = [int(a) for a in rng.integers(int(starts[0]) - 4 * REACH,
                                              int(starts[-1]) + 4 * REACH, 4000)]
    for start, end in spans:
        addresses += [start - REACH - 1, start - REACH, end + REACH - 1, end + REACH, end]
    for (_, end), (start, _) in zip(sorted(spans), sorted(spans)[1:], strict=False):
        addresses.append((end + start) // 2)  # a tie when the gap is even
    addresses += [0, 8, NULL_REACH - 1, NULL_REACH, 2**64 - 1, 2**63]
    got = Bounds(spans).owners(np.array(addresses, dtype=np.uint64)).tolist()
    assert got == [brute_owner(spans, a) for a in addresses]
    assert {AT_NULL, FAR} < set(got) and len(set(got)) > 20
    assert Bounds([]).owners(np.array([4, 1 << 40], dtype=np.uint64)).tolist() == [AT_NULL, FAR]


def test_a_null_pointer_is_the_one_empty_tensors_or_none() -> None:
    assert (null_owner([]), null_owner(["a"]), null_owner(["a", "b"])) == (None, "a", None)
