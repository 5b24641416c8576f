"""Hostile input, round 14 (the kernel replay's leftovers): what the last attack round found in
``forensics kernels`` and left unmended.

Each test is an attack that once worked: a null-pointer access of a launch of two empty tensors,
and a live address far from every tensor, were blamed on the tensor nearest them; a grid of
programs all out of bounds grew the worker's answer with the grid; a masked request's positions
broke the block-index contract; two views of one storage gave a false ``live_differs``. No test
here imports vLLM: the replay worker runs Triton's interpreter on the tiny kernels of
:mod:`tests.hostile.test_round9_attack9a`.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import numpy as np

from tests.hostile.test_round9_attack9a import launch, observer, replayed, scale, tensor


def b64(array: np.ndarray) -> str:
    """``array``'s bytes as base64 text."""
    return base64.b64encode(array.tobytes()).decode("ascii")


def findings_of(event: dict[str, Any], answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The sanitizer's findings of one replayed launch's answer, folded."""
    from forensics.kernels.format import check_launch
    from forensics.kernels.sanitizer import _findings, fold

    return fold(_findings(check_launch(event, "test"), answer))


# ------------------------------------- 1. a null pointer of a launch of two empty tensors


def test_a_null_access_of_two_empty_tensors_is_attributed_to_none(tmp_path: Path) -> None:
    """Torch hands a kernel 0 for each empty tensor: with two, the replay cannot tell whose
    null pointer a load at address 0 went through, and blamed the tensor nearest address 0
    (an argument it could not attribute). Such an access is attributed to no tensor now, at
    the bytes from address 0, the empty tensors named as the ones whose pointers are null."""
    from forensics.kernels.sanitizer import describe

    event = scale(2.0)
    for name in ("x_ptr", "out_ptr"):
        event["tensors"][name].update(shape=[0], strides=[1], offset=0)
    [answer] = replayed(tmp_path, [event])
    assert answer["status"] == "replayed", answer
    assert [(a["argument"], a.get("unattributed"), a["op"], a["elements"], a["count"],
             a.get("empty_tensors")) for a in answer["accesses"]] == [
        (None, "null", op, [0, 4], 2, ["x_ptr", "out_ptr"]) for op in ("load", "store")], answer
    line = describe(findings_of(event, answer)[0])
    assert "masked load through a null pointer at byte(s) [0, 4], attributed to no tensor " \
        "(2 empty tensors' (x_ptr, out_ptr) pointers are null)" in line, line


def test_a_null_access_without_an_empty_tensor_is_attributed_to_none() -> None:
    """No tensor of the launch is empty: an access at address 8 is through a null pointer
    none of them holds (it was the tensor nearest 0's)."""
    watcher, _ = observer([16, 64])
    watcher.check(np.array([8], dtype=np.uint64), np.ones(1, bool), 4, "load")
    assert watcher.found()["accesses"] == [
        {"argument": None, "unattributed": "null", "empty_tensors": [], "op": "load",
         "masked": True, "program_id": [0, 0, 0], "elements": [8], "count": 1}]


# ------------------------------------- 2. an address far from every tensor


def test_an_address_outside_every_allocation_is_attributed_to_none() -> None:
    """An address 16 MiB before the lowest tensor, or 1 TiB past the highest, lies in no
    tensor's allocation (its storage and 64 KiB gaps): it was the nearest tensor's, at an
    element such as -4194304. It is attributed to no tensor, no element named (the
    replay's addresses mean nothing live); one just past a tensor is still its own."""
    watcher, regions = observer([16, 64])
    low = min(regions, key=lambda r: r.start)
    high = max(regions, key=lambda r: r.start)
    lanes = np.array([low.start - (1 << 24), high.end + (1 << 40), high.end + 4],
                     dtype=np.uint64)
    watcher.check(lanes, np.ones(3, bool), 4, "load")
    assert [(a["argument"], a.get("unattributed"), a["elements"], a["count"])
            for a in watcher.found()["accesses"]] == [
        (None, "outside", [], 2), (high.name, None, [(high.end - high.start) // 4 + 1], 1)]


def raw(offset: int) -> dict[str, Any]:
    """A launch reading an int32 ``offset`` bytes from a live address its ``table`` holds
    (2**44: far from any allocation of the replay), as mamba's state copy reads
    ``state_base_addr + block_id * stride``."""
    tensors = {"table": tensor(np.array([1 << 44], dtype=np.int64)),
               "off_ptr": tensor(np.array([offset], dtype=np.int64)),
               "out_ptr": tensor(np.zeros(1, dtype=np.int32))}
    return launch("offset_kernel", tensors, ["table", "off_ptr", "out_ptr"], {}, {})


def test_a_pointer_far_from_a_live_address_is_not_replayable(tmp_path: Path) -> None:
    """A pointer made of a recorded live address was refused only up to 4 GiB past it: 8 GiB
    past it, or any distance before it (a block id times a stride of more than 2**31 bytes),
    the load was replayed and blamed on the tensor nearest it. Nearer to the live address
    than to any tensor, at any 64-bit distance, the launch is not replayable now; a pointer
    below 64 KiB is a null pointer's access."""
    answers = replayed(tmp_path, [raw(1 << 33), raw(-(1 << 33)), raw(-4), raw(8 - (1 << 44))])
    null = answers.pop()  # 8: below any live memory, a null pointer's access (no tensor's)
    assert [(a["argument"], a.get("unattributed"), a["elements"]) for a in null["accesses"]] \
        == [(None, "null", [8])], null
    assert [a["status"] for a in answers] == ["not_replayable"] * 3, answers
    assert [a["reason"].split(", nearer")[0] for a in answers] == [
        f"the kernel made a pointer {past} table's recorded value 0x100000000000"
        for past in ("8589934592 bytes past", "8589934592 bytes before", "4 bytes before")
    ], answers


# ------------------------------------- 3. a grid of programs all out of bounds


def wide(grid: int) -> dict[str, Any]:
    """A launch of ``grid`` programs, each loading and storing 2 lanes past 2 elements."""
    event = scale(2.0)
    event.update(grid=[grid], constexprs={"BLOCK": 4})
    return event


def test_a_grid_all_out_of_bounds_lists_a_bounded_answer(tmp_path: Path) -> None:
    """The worker's answer listed one access per program: a grid of 2**20 programs out of
    bounds grew it by a line each until the deadline. It lists the first 64 programs of each
    argument, operation and mask, and counts the rest exactly; its size is the same for 200
    programs as for 800."""
    from forensics.kernels.sanitizer import describe

    small, large = replayed(tmp_path, [wide(200), wide(800)])
    for answer, grid in ((small, 200), (large, 800)):
        assert answer["status"] == "replayed", answer
        assert len(answer["accesses"]) == 2 * 64, len(answer["accesses"])
        listed = sum(a["count"] for a in answer["accesses"] if a["op"] == "load")
        [load] = [m for m in answer["more"] if m["op"] == "load"]
        assert (load["programs"], load["listed"], listed + load["count"]) == (
            grid - 64, 64, 2 * grid), answer["more"]
    assert abs(len(json.dumps(large)) - len(json.dumps(small))) < 16
    line = describe(findings_of(wide(800), large)[0])
    assert line.endswith("by the 64 programs (0, 0, 0) to (63, 0, 0), 128 lane(s) in all, and "
                         "736 more program(s), 1472 lane(s), not listed (the replay lists the "
                         "first 64)"), line


# ------------------------------------- 4. a masked request's positions and the block table


def slot_mappings(idx: dict[str, Any], pos: list[int]) -> Any:
    """A checked ``_compute_slot_mappings_kernel`` launch: two requests of ``idx`` (a tensor
    record), the first owning positions 0-1 of ``pos``, the second the rest; one group of
    block size 1 and rows 4 blocks wide."""
    from forensics.kernels.format import check_launch
    from tests.hostile.test_round8b_kernels import event
    from tests.hostile.test_round8b_kernels import tensor as record

    return check_launch({**event("_compute_slot_mappings_kernel", {
        "idx_mapping": idx, "pos": record(np.array(pos, dtype=np.int64)),
        "block_sizes": record(np.array([1], dtype=np.int32)),
        "query_start_loc": record(np.array([0, 2, len(pos)], dtype=np.int32)),
        "block_table_ptrs[0]": record(np.zeros(8, dtype=np.int32), shape=[2, 4])}),
        "kernel": {"module": "vllm.v1.worker.gpu.block_table",
                   "name": "_compute_slot_mappings_kernel", "source_sha256": ""}}, "test")


def test_a_masked_requests_positions_are_not_judged_by_the_block_table() -> None:
    """vLLM 0.33's ``_compute_slot_mappings_kernel`` reads no block-table row for a request
    whose ``idx_mapping`` entry is -1 (``mask=is_local & is_real_req``; its slots are PAD_ID),
    so a dummy request's positions 50 and 60 (past a row of 4 blocks) broke no contract, yet
    were a ``kernel_contract`` finding. A real request's position past its row still is one,
    at its element of ``pos``; with ``idx_mapping`` recorded without values, none is judged."""
    from forensics.kernels import contracts
    from tests.hostile.test_round8b_kernels import tensor as record

    masked = record(np.array([-1, 0], dtype=np.int32))
    assert contracts.check(slot_mappings(masked, [50, 60, 1]), {}) == []
    [found] = contracts.check(slot_mappings(masked, [50, 60, 9, 2]), {})
    assert (found["elements"], found["positions"], found["count"]) == ([2], [9], 1), found
    real = record(np.array([1, 0], dtype=np.int32))
    [found] = contracts.check(slot_mappings(real, [50, 60, 1]), {})
    assert (found["elements"], found["positions"], found["count"]) == ([0, 1], [50, 60], 2)
    unknown = {**masked, "contents": "none", "data": ""}
    assert contracts.check(slot_mappings(unknown, [50, 60, 1]), {}) == []


# ------------------------------------- 5. two views of one storage


def aliased() -> dict[str, Any]:
    """``out = x * 2`` through two views of one 4-element storage (``x``: elements 0-1,
    ``out``: 2-3), as the recorder writes them: each its storage's every byte, before and
    after the launch."""
    before = np.array([1, 2, 3, 4], dtype=np.float32)
    after = np.array([1, 2, 2, 4], dtype=np.float32)
    tensors = {name: {**tensor(before), "shape": [2], "offset": offset, "after": b64(after)}
               for name, offset in (("x_ptr", 0), ("out_ptr", 2))}
    return launch("scale_kernel", tensors, ["x_ptr", "out_ptr", "factor", "BLOCK"],
                  {"factor": 2.0}, {"BLOCK": 2})


def test_two_views_of_one_storage_are_not_judged_against_live(tmp_path: Path) -> None:
    """The record does not say which tensors share a storage; the replay gave each its own,
    so ``x_ptr``'s storage kept 3.0 where the live one (``out_ptr``'s write through the
    other view) held 2.0: a ``live_differs``, evidence of a race that never was. Two
    tensors whose records are alike byte for byte, changed by the launch, are not judged
    against live, the reason saying so; a launch that changed one of two alike storages
    only is still judged."""
    changed, one = aliased(), aliased()
    del one["tensors"]["out_ptr"]["after"]
    one["tensors"]["out_ptr"]["offset"] = 0  # its own storage: out = x * 2 = [2, 4]
    one["tensors"]["out_ptr"]["data"] = b64(np.array([1, 2, 3, 4], dtype=np.float32))
    first, second = replayed(tmp_path, [changed, one])
    assert (first["status"], first["differs"], first["accesses"]) == ("replayed", [], []), first
    assert first["reason"].split("; ")[1:] == [
        "live against replay not judged for x_ptr and out_ptr: their records are alike byte "
        "for byte, storage and change, as two views of one storage are (the record does not "
        "say whether they share one)"], first
    assert [d["argument"] for d in second["differs"]] == ["x_ptr", "out_ptr"], second
