"""Hostile input, round 17 (attack 17): ``kernels``, ``check``, ``plot``, ``findings``,
``known``, ``triage`` and the pytest plugin against hostile captures."""

from __future__ import annotations

import tracemalloc

import pytest

from tests.hostile.test_round4_kernels import launch

# ------------------------------------- T94a: an empty view of a huge dimension, sharing memory


@pytest.mark.parametrize("shape", [[0, 2**40], [2**40, 0], [3, 0, 2**40]])
def test_an_empty_shared_view_of_a_huge_dimension_is_read_without_allocating(
        shape: list[int]) -> None:
    """A ``view`` record of no element (a dimension of 0) holds no bytes, its other dimensions
    are sized by nothing it holds; with a ``storage_id`` its elements' bytes were placed in the
    memory it shares by ranging over every dimension first: ``[0, 2**28]`` made ``forensics
    kernels`` allocate 2 GiB (the worker reads the record too: 2.8 GB resident), past the 1 GiB
    budget, and ``[0, 2**40]`` ended it in 'out of memory'. An empty view holds no element: it
    is read in the little memory its record takes."""
    from forensics.kernels.format import check_launch

    event = launch(shape=shape, strides=[1] * len(shape), contents="view", data="",
                   storage=8, storage_id=0)
    tracemalloc.start()
    try:
        found = check_launch(event, "capture 'k.capture' kernel_launch event 0")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert found.tensors["idx_mapping_ptr"].shape == tuple(shape)
    assert peak < 1 << 20, peak


def test_an_empty_shared_view_within_numpy_reach_allocates_nothing_of_its_size() -> None:
    """The same with ``[0, 2**24]``, which numpy can allocate (128 MiB, once): no allocation
    follows a dimension of an empty view."""
    from forensics.kernels.format import check_launch, element_starts

    event = launch(shape=[0, 2**24], strides=[1, 1], contents="view", data="", storage=8,
                   storage_id=0)
    tracemalloc.start()
    try:
        arg = check_launch(event, "test").tensors["idx_mapping_ptr"]
        starts = element_starts(arg)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert starts.size == 0
    assert peak < 1 << 20, peak
