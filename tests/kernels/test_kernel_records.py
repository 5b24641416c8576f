"""The flight recorder's settings, its steps kept, and the ``kernel_launch`` format (no vLLM:
a stand-in kernel object whose function lives in a vLLM worker module name)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from forensics.errors import CaptureFormatError, ConfigurationError
from forensics.kernels.format import check_launch
from forensics.probe import kernels as K


def _fn(ptr, other_ptr, n, BLOCK: tl.constexpr = 4):  # noqa: F821, N803 (a kernel's shape)
    """A kernel's signature."""


_fn.__module__ = "vllm.v1.worker.gpu.stand_in"


class Jit:
    """What the recorder reads of a Triton kernel object."""

    fn = staticmethod(_fn)


class Steps:
    step, rank = 0, 0


def _recorder(keep: int | None = 2, budget: int = 64) -> K.FlightRecorder:
    recorder = K.FlightRecorder(("*",), keep, budget, Steps())
    recorder._torch = torch
    return recorder


def test_settings() -> None:
    assert K.selection({}) is None
    assert K.selection({"FORENSICS_KERNELS": "all"}) == ("*",)
    assert K.selection({"FORENSICS_KERNELS": "_a, _b*"}) == ("_a", "_b*")
    assert K.keep_steps({}) == 32
    assert K.keep_steps({"FORENSICS_KERNELS_KEEP": "all"}) is None
    with pytest.raises(ConfigurationError, match="FORENSICS_KERNELS_KEEP='-1'"):
        K.keep_steps({"FORENSICS_KERNELS_KEEP": "-1"})


def test_only_vllm_worker_kernels_matching_the_globs_are_recorded() -> None:
    assert K.KernelMeta(Jit(), ("*",)).wanted
    assert not K.KernelMeta(Jit(), ("_other",)).wanted

    class Elsewhere:
        def fn(self) -> None:
            """Not vLLM's."""
    assert not K.KernelMeta(Elsewhere(), ("*",)).wanted


def test_a_launch_round_trips_through_the_format() -> None:
    recorder = _recorder()
    meta = recorder.kernel(Jit())
    ptr = torch.arange(6, dtype=torch.int32)[1:4]  # a view: offset 1 into 6 elements
    floats = torch.ones(100, dtype=torch.float32)  # 400 bytes, past the 64-byte budget
    pending = recorder.before(meta, (ptr, floats, 7), {}, (3,))
    ptr[0] = 42  # "the launch" writes
    recorder.after(pending)
    launch = check_launch(json.loads(json.dumps(K.event_fields(pending))), "test")
    arg = launch.tensors["ptr"]
    assert (arg.shape, arg.strides, arg.offset, arg.storage, arg.contents) == (
        (3,), (1,), 1, 24, "storage")
    assert arg.array().tolist() == [0, 1, 2, 3, 4, 5]
    assert arg.array("after").tolist() == [0, 42, 2, 3, 4, 5]
    other = launch.tensors["other_ptr"]
    assert other.contents == "none" and "budget" in other.reason
    assert (launch.scalars, launch.constexprs, launch.grid) == ({"n": 7}, {"BLOCK": 4}, (3,))


def test_the_recorder_keeps_the_last_steps() -> None:
    recorder = _recorder(keep=2)
    meta = recorder.kernel(Jit())
    for step in range(5):
        recorder.session.step = step
        recorder.after(recorder.before(meta, (torch.zeros(2), torch.zeros(2), 1), {}, (1,)))
    assert [p.step for p in recorder.take()] == [3, 4]
    assert recorder.dropped_steps == 3


@pytest.mark.parametrize(("change", "field"), [
    ({"format": 2}, "format"),
    ({"grid": [1, 2, 3, 4]}, "grid"),
    ({"kernel": {"module": "os; x", "name": "k"}}, "kernel"),
])
def test_a_bad_launch_names_its_field(change: dict, field: str) -> None:
    recorder = _recorder()
    pending = recorder.before(recorder.kernel(Jit()), (torch.zeros(2), torch.zeros(2), 1), {},
                              (1,))
    event = {**K.event_fields(pending), **change}
    with pytest.raises(CaptureFormatError, match=f"'{field}'"):
        check_launch(event, "test")


def test_data_of_the_wrong_size_is_refused() -> None:
    recorder = _recorder()
    pending = recorder.before(recorder.kernel(Jit()),
                              (torch.zeros(2, dtype=torch.int64), torch.zeros(2), 1), {}, (1,))
    event = K.event_fields(pending)
    event["tensors"]["ptr"]["data"] = "AAAA"
    with pytest.raises(CaptureFormatError, match="'data'"):
        check_launch(event, "test")
    assert np.frombuffer(b"\0" * 16, dtype=np.int64).size == 2
