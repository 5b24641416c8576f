"""Hostile input, round 14 (kern14b): the ``vllm`` variant's Triton worker, which runs Model
Runner V2's kernels in Triton's interpreter, named "the buffer nearest" a bad address in its
IndexError line, however far: a slot index of 2**40 was a load at "byte 4398037459792 of
'all_token_ids_ptr'" (an unrelated buffer), and a store through the null pointer of
``all_token_ids`` in a launch of two empty buffers was blamed on ``output_bin_counts``. The
kernel sanitizer's replay worker attributed such accesses to no tensor since kern14 (T65a,
T65b); both workers now attribute by the one rule of :meth:`forensics.kernels.bounds.Bounds.
owners`.

The first tests run vLLM's ``post_update`` kernel in the worker (:mod:`forensics.variants.
triton_kernels`, one worker for the module's records); the last compares the two workers'
observers in Python alone.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from forensics.outcome import Outcome
from tests.hostile.test_round9_attack9a import observer

PREFIX = "IndexError: the Triton kernel made a "


def post_records() -> dict[str, Any]:
    """``post_update`` records (slots 0-3; the worker hands ``all_token_ids`` and
    ``output_bin_counts`` torch zeros, whose pointers are null when empty): a far slot, a
    slot just past the buffers, and ``all_token_ids`` empty beside an empty or no
    ``output_bin_counts``."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sites"))
    from v2_records import post

    return {"far": post(idx_mapping=np.array([1 << 40, 0], np.int64)),
            "past": post(idx_mapping=np.array([4, 0], np.int64)),
            "two null": post(all_token_ids_width=0, bin_counts_width=0),
            "one null": post(all_token_ids_width=0, bin_counts_rows=0)}


@pytest.fixture(scope="module")
def outcomes() -> dict[str, Outcome]:
    """Each record's outcome from vLLM's kernel, run in the worker (one exchange)."""
    from forensics.variants import triton_kernels

    records = post_records()
    return dict(zip(records, triton_kernels.run_kernels(list(records.values())), strict=True))


def said(outcome: Outcome) -> str:
    """The attribution in an index_error's line (what its parentheses hold)."""
    assert outcome.status == "index_error" and outcome.message.startswith(PREFIX), outcome
    return outcome.message.split(" of the launch (", 1)[1].removesuffix(")")


def test_a_far_access_of_a_v2_kernel_is_attributed_to_no_buffer(
        outcomes: dict[str, Outcome]) -> None:
    """Slot 2**40: ``total_len``'s load lands 4 TiB past every buffer; the line named the
    buffer nearest it (another one, at a byte in the trillions). It says no buffer holds the
    address now, naming none; a slot just past the buffers is still ``total_len``'s."""
    far = said(outcomes["far"])
    assert outcomes["far"].message.startswith(PREFIX + "load ")
    assert re.fullmatch(r"no buffer holds address 0x[0-9a-f]+, nor lies within 65536 bytes "
                        r"of it", far), far
    assert said(outcomes["past"]) == "byte 16 of 'total_len_ptr', 16 bytes long"


def test_a_null_access_of_two_empty_v2_buffers_is_attributed_to_no_buffer(
        outcomes: dict[str, Outcome]) -> None:
    """``all_token_ids`` and ``output_bin_counts`` both empty (torch hands the kernel 0 for
    each): the store through ``all_token_ids``' null pointer was "byte 48 of
    'output_bin_counts_ptr'", the buffer listed first. Which one it went through is unknown:
    it is attributed to none, both named; with one empty buffer it is that one's (T64e)."""
    assert outcomes["two null"].message.startswith(PREFIX + "store ")
    assert said(outcomes["two null"]) == (
        "through a null pointer at address 0x30, attributed to no buffer: the pointers of "
        "'output_bin_counts_ptr' and 'all_token_ids_ptr' are null, which one it went through "
        "is unknown")
    assert said(outcomes["one null"]) == \
        "through the null pointer of the empty 'all_token_ids_ptr', at byte 48"


def v2_attribution(line: str) -> str:
    """The buffer a V2 worker's line names, or ``<null>`` / ``<outside>`` (none)."""
    from forensics.kernels.replay_worker import NULL, OUTSIDE

    named = re.search(r"of (?:the empty )?'([^']+)'", line.split(": the pointers of")[0])
    if named:
        return named.group(1)
    return OUTSIDE if "no buffer holds address" in line else NULL


def kernels_attribution(found: dict[str, Any]) -> str:
    """The tensor the sanitizer's replay worker attributed its one access to (or none)."""
    from forensics.kernels.replay_worker import NULL, OUTSIDE

    [access] = found["accesses"]
    return access["argument"] or {"null": NULL, "outside": OUTSIDE}[access["unattributed"]]


@pytest.mark.parametrize("empty", [[], ["e0"], ["e0", "e1"]])
def test_both_workers_attribute_an_address_alike(empty: list[str]) -> None:
    """The V2 worker's observer and the kernel sanitizer's attribute each access to the same
    tensor, or both to none: inside a storage's reach, far from all, through a null pointer
    of a launch of no, one or two empty tensors."""
    from forensics.kernels.replay_worker import Observer
    from forensics.variants.triton_worker import Observer as V2Observer

    _, regions = observer([16, 0, 64, 4, 1 << 12])
    rng = np.random.default_rng(5)
    lows = [r.start for r in regions]
    addresses = [int(a) for a in rng.choice(lows, 300) + rng.integers(-(1 << 17), 1 << 17, 300)]
    addresses += [0, 48, max(lows) + (1 << 40), min(lows) - (1 << 24)]
    kinds = set()
    for address in addresses:
        kernels = Observer()
        kernels.use(regions, empty=[(name, 4) for name in empty])
        v2 = V2Observer()
        v2.regions = [(r.start, r.end, r.name) for r in regions] + [(0, 0, n) for n in empty]
        lane, mask = np.array([address], dtype=np.uint64), np.ones(1, bool)
        if kernels.check(lane, mask, 4, "load").all():
            continue  # inside: neither notes it
        assert not v2.allowed(lane, mask, 4, "a load").any()
        got = v2_attribution(v2.outside[0])
        assert got == kernels_attribution(kernels.found()), (address, v2.outside[0])
        kinds.add(got if got.startswith("<") else "tensor")
    assert {"<outside>", "tensor"} <= kinds and ("<null>" in kinds) == (len(empty) != 1)
