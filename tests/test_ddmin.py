"""forensics.share.ddmin: 1-minimal subsets, each subset tested once."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.share.ddmin import ddmin, split


def test_split_covers_in_order_without_empty_chunks() -> None:
    assert split([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4, 5]]
    assert split([1, 2], 5) == [[1], [2]]


def test_finds_the_two_needed_items_and_counts_tests() -> None:
    calls: list[frozenset[int]] = []

    def test(items: list[int]) -> bool:
        calls.append(frozenset(items))
        return {3, 17} <= set(items)

    kept, count = ddmin(list(range(40)), test)
    assert kept == [3, 17]
    assert count == len(calls) == len(set(calls))  # no subset tested twice


@given(st.sets(st.integers(0, 63), min_size=1, max_size=5), st.integers(1, 64))
@settings(max_examples=60, deadline=None)
def test_result_keeps_the_property_and_is_one_minimal(needed: set[int], size: int) -> None:
    items = list(range(64))[:max(size, max(needed) + 1)]

    def test(subset: list[int]) -> bool:
        return needed <= set(subset)

    kept, _ = ddmin(items, test)
    assert test(kept)
    assert all(not test([x for x in kept if x != drop]) for drop in kept) or len(kept) == 1
    assert set(kept) == needed
