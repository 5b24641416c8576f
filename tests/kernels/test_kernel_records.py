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
    # each glob must name an installed kernel (T89a): two are given here
    assert K.selection({"FORENSICS_KERNELS": "_a, _b*"},
                       [("vllm.v1.worker.m", "_a"), ("vllm.v1.worker.m", "_bc")]) == ("_a", "_b*")
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


class Session(Steps):
    """A probe session that keeps the events handed to it."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    def keep_event(self, kind: str, **fields: object) -> None:
        self.events.append((kind, fields))


def test_keep_all_hands_each_launch_to_the_writer_when_it_returns() -> None:
    """FORENSICS_KERNELS_KEEP=all: a launch is handed off as soon as it returns, not when the
    next step begins, so a crash of the engine after it loses nothing of it."""
    recorder = K.FlightRecorder(("*",), None, 64, Session())
    recorder._torch = torch
    meta = recorder.kernel(Jit())
    for step, launches in ((0, 2), (1, 1)):
        recorder.session.step = step
        for n in range(launches):
            ptr = torch.zeros(2, dtype=torch.int32)
            pending = recorder.before(meta, (ptr, torch.zeros(2), n), {}, (1,))
            ptr[1] = 7
            recorder.after(pending)
            kind, fields = recorder.session.events[-1]
            assert (kind, fields["step"], fields["ordinal"]) == (K.KIND, step, n)
            launch = check_launch(json.loads(json.dumps(fields)), "test")
            assert launch.tensors["ptr"].array("after").tolist() == [0, 7]
    assert recorder.written == 3 and recorder.take() == []


def test_keep_all_hands_off_a_launch_that_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = K.FlightRecorder(("*",), None, 64, Session())
    recorder._torch = torch
    monkeypatch.setattr(K, "RECORDER", recorder)

    def crashing_launch(self: object, *args: object, grid: object, warmup: bool) -> None:
        raise RuntimeError("illegal memory access")

    run = K.wrap_run(crashing_launch)
    with pytest.raises(RuntimeError):
        run(Jit(), torch.zeros(2, dtype=torch.int32), torch.zeros(2), 1, grid=(1,),
            warmup=False)
    kinds = [kind for kind, _ in recorder.session.events]
    assert kinds == [K.KIND, K.SUMMARY_KIND]
    launch = check_launch(json.loads(json.dumps(recorder.session.events[0][1])), "test")
    assert launch.tensors["ptr"].after is None
    assert recorder.session.events[1][1]["handed_off"] == 1


def _positions_fn(pos_ptr, input_ids_ptr, n):  # noqa: ANN001 (a kernel's shape)
    """A kernel that writes positions and input ids."""


_positions_fn.__module__ = "vllm.v1.worker.gpu.stand_in"


class PositionsJit:
    fn = staticmethod(_positions_fn)


def test_position_and_token_id_contracts_read_the_manifests_model_facts() -> None:
    """The probe writes max_model_len and vocab_size among the manifest's ``model`` facts; the
    contracts judge written positions and ids against them, and without them judge neither."""
    from forensics.kernels import contracts

    recorder = _recorder(budget=1 << 10)
    pos, ids = torch.zeros(4, dtype=torch.int64), torch.zeros(4, dtype=torch.int32)
    pending = recorder.before(recorder.kernel(PositionsJit()), (pos, ids, 4), {}, (1,))
    pos[:] = torch.tensor([5, 6, 7, 8])  # "the launch" writes one position past 8 - 1
    ids[:] = torch.tensor([1, 2, 3, 9])
    recorder.after(pending)
    launch = check_launch(json.loads(json.dumps(K.event_fields(pending))), "test")
    found = contracts.check(launch, {"model": {"max_model_len": 8, "vocab_size": 4}})
    assert [(f["contract"], f["argument"], f["elements"], f["values"], f["upper"])
            for f in found] == [("position", "pos_ptr", [3], [8], 8),
                                ("token id", "input_ids_ptr", [3], [9], 4)]
    assert contracts.check(launch, {"max_model_len": 8, "vocab_size": 4}) == []


@pytest.mark.parametrize("make", [
    lambda: torch.arange(64, dtype=torch.int32),  # a whole buffer (the direct byte view)
    lambda: torch.arange(64, dtype=torch.int64)[3:9],  # a slice past the start
    lambda: torch.arange(64, dtype=torch.int32)[:10],  # a slice from the start
    lambda: torch.arange(24, dtype=torch.int16).reshape(4, 6),  # two dimensions
    lambda: torch.arange(24, dtype=torch.int32).reshape(4, 6).t(),  # not contiguous
    lambda: torch.arange(30, dtype=torch.int32)[::3],  # strided
    lambda: torch.tensor([True, False, True]),
    lambda: torch.arange(8, dtype=torch.float32),
    lambda: torch.arange(8, dtype=torch.float32)[2:5],
    lambda: torch.arange(8, dtype=torch.float32, requires_grad=True),
])
@pytest.mark.parametrize("contents", ["storage", "view"])
def test_the_bytes_copied_are_the_storage_or_the_elements(make, contents: str) -> None:
    """The recorder's byte view (a direct one for a whole one-dimensional buffer) holds what
    the plain form would: every element of the storage, or the tensor's elements in order."""
    tensor = make()
    count = tensor.untyped_storage().nbytes() // tensor.element_size()
    if contents == "storage":
        plain = torch.as_strided(tensor.detach(), (count,), (1,), 0)
    else:
        plain = tensor.detach().contiguous().reshape(-1)
    got = K._flat(tensor, contents, count, torch)
    assert got.dtype == torch.uint8 and not got.requires_grad
    assert got.numpy().tobytes() == plain.view(torch.uint8).numpy().tobytes()
