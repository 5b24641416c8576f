"""Hostile input, round 4: ``forensics kernels`` and the kernel records a capture holds.

Each test is an attack a capture author (or a shared folder) made on the kernel sanitizer that
once worked: a launch record whose view reaches outside its storage (read process memory, then
a segmentation fault), a zero-stride view of 2**40 elements, a storage of no whole number of
elements. No test here imports vLLM, Triton or torch: the replay worker, where one is needed,
is a stand-in (``hostile_kernel_worker.py``).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from forensics.errors import CaptureFormatError

HERE = Path(__file__).resolve().parent
MODULE, KERNEL = "vllm.v1.worker.gpu.input_batch", "_prepare_pos_seq_lens_kernel"


def launch(step: int = 0, **tensor: Any) -> dict[str, Any]:
    """A ``kernel_launch`` event of one int32 ``idx_mapping_ptr`` (values 0, 1; 4 slots), its
    keys replaced by ``tensor``'s."""
    idx = {"dtype": "int32", "shape": [2], "strides": [1], "offset": 0, "storage": 8,
           "contents": "storage", "data": b64(b"\0\0\0\0\1\0\0\0")}
    return {"kind": "kernel_launch", "format": 1, "step": step, "rank": 0, "ordinal": 0,
            "path": "compiled", "grid": [2], "args": ["idx_mapping_ptr", "max_num_reqs"],
            "kernel": {"module": MODULE, "name": KERNEL, "source_sha256": ""},
            "constexprs": {}, "scalars": {"max_num_reqs": 4}, "unrecorded": {},
            "tensors": {"idx_mapping_ptr": {**idx, **tensor}}}


def b64(data: bytes) -> str:
    """``data`` as base64 text."""
    return base64.b64encode(data).decode("ascii")


# ------------------------------------- 1. a view outside its storage, a view of 2**40 elements


@pytest.mark.parametrize("view", [
    {"shape": [100_000_000]},                      # once: a segmentation fault
    {"shape": [1000]},                             # once: 4 KB of process memory as "values"
    {"shape": [2], "strides": [-1]},               # before the storage's first byte
    {"shape": [2], "offset": 1},                   # one past its last element
    {"shape": [2, 2], "strides": [1, 1]},          # element 2 of a 2-element storage
])
def test_a_view_reaching_outside_its_storage_is_refused(view: dict[str, Any]) -> None:
    """The contracts read a ``storage`` record through its shape, strides and offset: a view
    past the storage once read the process's memory beyond the decoded bytes (and reported it
    as index values, or crashed ``forensics kernels`` with SIGSEGV). The format refuses it in
    one line naming the tensor, the field and the fix."""
    from forensics.kernels.format import check_launch

    event = launch(**{"strides": [1] * len(view["shape"]), **view})
    with pytest.raises(CaptureFormatError) as raised:
        check_launch(event, "capture 'k.capture' kernel_launch event 0")
    line = str(raised.value)
    assert line.startswith("capture 'k.capture' kernel_launch event 0 tensor "
                           "'idx_mapping_ptr': field 'shape'"), line
    assert "outside its storage of 2 int32 element(s)" in line and "fix" in line, line
    assert len(line.splitlines()) == 1


def test_a_view_inside_its_storage_is_read() -> None:
    """The check above refuses nothing a torch tensor can be: a reversed or offset view inside
    its storage, a repeated (zero-stride) one, an empty one."""
    from forensics.kernels import contracts
    from forensics.kernels.format import check_launch

    for view in ({"shape": [1], "offset": 1}, {"shape": [2], "strides": [0]},
                 {"shape": [0], "offset": 5}, {"shape": [], "strides": [], "offset": 1},
                 {"shape": [2, 1], "strides": [1, 7]}):
        found = contracts.check(check_launch(launch(**view), "test"), {})
        assert found == [], view
    bad = check_launch(launch(data=b64(b"\7\0\0\0\1\0\0\0")), "test")
    assert [(f["elements"], f["values"]) for f in contracts.check(bad, {})] == [([0], [7])]


def test_a_repeated_view_past_the_budget_is_that_launchs_line() -> None:
    """A zero-stride view of 2**40 elements fits its 8-byte storage; the contracts once asked
    for 4 TiB (and 1 TiB of booleans) to judge it, ending ``forensics kernels`` with an error.
    Now that launch is not replayable, in one line naming the tensor, 'shape' and the budget;
    the launch next to it is judged."""
    from forensics.kernels.format import check_launch
    from forensics.kernels.sanitizer import _one

    huge = check_launch(launch(shape=[2**40], strides=[0]), "test")
    result = _one(huge, {}, set(), None, {})  # type: ignore[arg-type]
    assert result.status == "not_replayable", result
    assert result.reason.startswith("tensor idx_mapping_ptr: 'shape' is [1099511627776], "
                                    "which would allocate 4398046511104 bytes"), result.reason
    assert "allocation budget" in result.reason and len(result.reason.splitlines()) == 1
    beside = check_launch(launch(data=b64(b"\0\0\0\0\11\0\0\0")), "test")
    result = _one(beside, {}, set(), None, {})  # type: ignore[arg-type]
    assert [f["values"] for f in result.findings] == [[9]], result


def test_a_storage_of_no_whole_number_of_elements_is_judged() -> None:
    """An int32 view of the first 8 bytes of a 9-byte storage (a torch ``view(dtype)`` of a
    byte buffer) once ended ``forensics kernels`` in numpy's 'buffer size must be a multiple
    of element size'; its contracts are judged on its whole elements."""
    from forensics.kernels import contracts
    from forensics.kernels.format import check_launch

    event = launch(storage=9, data=b64(b"\0\0\0\0\5\0\0\0\0"))
    found = contracts.check(check_launch(event, "test"), {})
    assert [(f["argument"], f["elements"], f["values"], f["upper"]) for f in found] == [
        ("idx_mapping_ptr", [1], [5], 4)]
    assert json.dumps(found)
