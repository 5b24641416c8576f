"""Hostile input, round 8 (front B): ``forensics kernels`` and the contracts it checks on a
forged ``kernel_launch`` record.

Each test is an attack that once worked: a block size past the positions' dtype ended the
command in an internal error, a ``max_num_reqs`` of ``true`` or ``-5`` (or such a manifest
``max_model_len``) judged every slot against ``[0, True)``, and a bfloat16 tensor's bits were
reported as its values. No test here starts vLLM: the kernels are named under a module the
installed vLLM lacks, so only the contracts run (the launch is not replayable).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_round4_kernels import b64, write_capture

from forensics.errors import CaptureFormatError

STAND_IN = "vllm.v1.worker.gpu.stand_in"


def tensor(array: np.ndarray, dtype: str | None = None, shape: list[int] | None = None
           ) -> dict[str, Any]:
    """A ``storage`` record of ``array`` (``dtype``: the name it is recorded under)."""
    shape = list(array.shape) if shape is None else shape
    strides = [int(np.prod(shape[i + 1:])) for i in range(len(shape))]
    return {"dtype": dtype or array.dtype.name, "shape": shape, "strides": strides,
            "offset": 0, "storage": array.nbytes, "contents": "storage",
            "data": b64(array.tobytes())}


def event(name: str, tensors: dict[str, Any], scalars: dict[str, Any] | None = None
          ) -> dict[str, Any]:
    """A ``kernel_launch`` of kernel ``name`` (under :data:`STAND_IN`)."""
    return {"kind": "kernel_launch", "format": 1, "step": 0, "rank": 0, "ordinal": 0,
            "grid": [1], "args": list(tensors), "constexprs": {}, "scalars": scalars or {},
            "kernel": {"module": STAND_IN, "name": name, "source_sha256": ""},
            "tensors": tensors}


def slot_mappings(pos: np.ndarray, sizes: np.ndarray) -> dict[str, Any]:
    """A ``_compute_slot_mappings_kernel`` launch of ``pos`` and ``block_sizes`` (one group,
    its table 2 blocks wide)."""
    return event("_compute_slot_mappings_kernel", {
        "pos": tensor(pos), "block_sizes": tensor(sizes),
        "query_start_loc": tensor(np.array([0, len(pos)], dtype=np.int32)),
        "block_table_ptrs[0]": tensor(np.zeros(4, dtype=np.int32), shape=[2, 2])})


@pytest.mark.parametrize(("pos", "sizes"), [
    (np.array([-1, 100], dtype=np.int8), np.array([2**40], dtype=np.int64)),
    (np.array([-1, 5], dtype=np.int64), np.array([2**64 - 1], dtype=np.uint64)),
])
def test_a_block_size_past_the_positions_dtype_is_judged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], pos: np.ndarray,
        sizes: np.ndarray) -> None:
    """A block size the positions' dtype cannot hold (2**40 beside int8 positions, a uint64
    size beside int64 ones) ended ``forensics kernels`` in 'internal error OverflowError': the
    block index of a negative position was computed in the positions' dtype. It is computed
    exactly now: position -1 reads block 0 of a row of any size (Triton's ``//`` truncates
    toward zero; round 19, T110b: it was said to be block -1, outside [0, 2)), and -2**40 is
    block -1, outside the row."""
    from forensics.cli import main

    capture = write_capture(tmp_path / "sizes.capture", [slot_mappings(pos, sizes)])
    assert main(["kernels", str(capture), "--json"]) == 2  # no finding, nothing replayed
    said = capsys.readouterr()
    out = json.loads(said.out)
    assert "none of its 1 launch(es) was replayed" in said.err
    assert out["findings"] == [] and out["launches"][0]["status"] == "not_replayable"
    wide = slot_mappings(np.array([-1, -(2**40)], dtype=np.int64),
                         np.array([2**40], dtype=np.int64))
    capture = write_capture(tmp_path / "wide.capture", [wide])
    assert main(["kernels", str(capture), "--json"]) == 1
    [finding] = json.loads(capsys.readouterr().out)["findings"]
    assert (finding["contract"], finding["elements"], finding["values"], finding["positions"],
            finding["upper"]) == ("block index", [1], [-1], [-(2**40)], 2), finding


def idx_launch(values: np.ndarray, dtype: str | None = None, **scalars: Any) -> Any:
    """A checked launch of an ``idx_mapping`` of ``values`` and ``scalars``."""
    from forensics.kernels.format import check_launch

    return check_launch(event("_k", {"idx_mapping": tensor(values, dtype)}, scalars), "test")


@pytest.mark.parametrize("bound", [True, False, 0, -5, -(2**70), 4.0, "4"])
def test_a_bound_that_is_no_count_is_not_judged(bound: Any) -> None:
    """A ``max_num_reqs`` of ``true`` judged slot 2 'outside [0, True)', one of ``-5`` every
    slot 'outside [0, -5)'; a manifest's ``max_model_len`` or ``vocab_size`` the same. A bound
    is an int >= 1 (not a bool); another is not judged (the launch's state rows are, where
    recorded). A record's ``max_num_reqs`` of ``true`` or ``false`` is refused at reading
    (T139c: the replay ran the kernel with 1)."""
    from forensics.kernels import contracts
    from forensics.kernels.format import check_launch

    if isinstance(bound, bool):
        with pytest.raises(CaptureFormatError, match="holds 'max_num_reqs' as"):
            idx_launch(np.array([0, 2], dtype=np.int32), max_num_reqs=bound)
    else:
        assert contracts.check(idx_launch(np.array([0, 2], dtype=np.int32),
                                          max_num_reqs=bound), {}) == []
    written = {**tensor(np.array([0, 9], dtype=np.int64)),
               "after": b64(np.array([3, 7], dtype=np.int64).tobytes())}
    launch = check_launch(event("_k", {"pos": written, "input_ids": written}), "test")
    assert contracts.check(launch, {"model": {"max_model_len": bound, "vocab_size": bound}}) \
        == []
    found = contracts.check(launch, {"model": {"max_model_len": 5, "vocab_size": 5}})
    assert [(f["contract"], f["values"], f["upper"]) for f in found] == [
        ("position", [7], 5), ("token id", [7], 5)]


def test_a_count_bound_is_judged() -> None:
    """The check above leaves every real bound judged: slot 2 of 2 slots is outside."""
    from forensics.kernels import contracts

    [found] = contracts.check(idx_launch(np.array([0, 2], dtype=np.int32), max_num_reqs=2), {})
    assert (found["elements"], found["values"], found["upper"]) == ([1], [2], 2)


def bfloat16_bits(values: list[float]) -> np.ndarray:
    """``values`` as bfloat16 bits (each exact in bfloat16)."""
    return (np.array(values, dtype="<f4").view("<u4") >> 16).astype("<u2")


def test_a_bfloat16_index_is_judged_by_its_value_not_its_bits() -> None:
    """A bfloat16 ``idx_mapping`` holding 1.0 and 5.0 was judged by its bits (16256 and
    16544): both said to be outside [0, 4). Now 5.0 alone is, and the finding says 5.0."""
    from forensics.kernels import contracts

    [found] = contracts.check(idx_launch(bfloat16_bits([1.0, 5.0]), "bfloat16",
                                         max_num_reqs=4), {})
    assert (found["elements"], found["values"]) == ([1], [5.0]), found


def test_a_bfloat16_live_difference_names_values() -> None:
    """The replay worker's ``live_differs`` of a bfloat16 tensor named its bits ('live 16256
    replay 16448'); it names the values (live 1.0, replay 3.0), still comparing bits (a NaN
    equals itself)."""
    from forensics.kernels.format import TensorArg
    from forensics.kernels.replay_worker import _differs

    live = bfloat16_bits([float("nan"), 1.0])
    arg = TensorArg("x", "bfloat16", (2,), (1,), 0, 4, "storage", data=live.tobytes())
    found = _differs(arg, bfloat16_bits([float("nan"), 3.0]).tobytes())
    assert found is not None and found["elements"] == [[1, 1.0, 3.0]], found


@pytest.mark.parametrize("reason", [
    "the installed kernel's source differs from the recorded one's",
    "live against replay not judged: the contents of idx_mapping_ptr were not recorded"])
def test_what_a_replay_could_not_judge_is_said_in_text(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        reason: str) -> None:
    """A launch replayed with a reason (a forged ``source_sha256``: the installed kernel ran in
    the recorded one's stead; a tensor of no recorded contents: live against replay not
    judged) was '1 replayed, 0 finding(s)' in the text output, the reason only in ``--json``:
    read as a launch found clean. The text says it on the launch's line."""
    from test_round4_kernels import launch

    from forensics.cli import main
    from forensics.kernels import sanitizer

    capture = write_capture(tmp_path / "noted.capture", [launch()])
    monkeypatch.setattr(sanitizer.Worker, "ask", lambda self, event, most=0.0: {
        "status": "replayed", "reason": reason, "accesses": [], "overflows": [], "differs": []})
    assert main(["kernels", str(capture)]) == 0
    out = capsys.readouterr().out
    assert "1 replayed, 0 finding(s)" in out, out
    assert f"replayed, but: _prepare_pos_seq_lens_kernel at step 0 rank 0 launch 0: {reason}\n" \
        in out


def test_a_launch_is_named_by_its_rank_too(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The ranks of one engine number their launches alike: a finding of rank 1's launch 0 and
    rank 0's launch 0 were told as the same 'KERNEL (step 0, launch 0)', so the text did not
    say which rank held the index out of range. Each line names the rank."""
    from forensics.cli import main

    launches = [{**event("_k", {"idx_mapping": tensor(np.array(ids, dtype=np.int32))},
                         {"max_num_reqs": 4}), "rank": rank}
                for rank, ids in ((0, [0, 1]), (1, [0, 9]))]
    capture = write_capture(tmp_path / "ranks.capture", launches)
    assert main(["kernels", str(capture)]) == 1
    out = capsys.readouterr().out
    assert "kernel_contract: _k (step 0, rank 1, launch 0): idx_mapping element(s) [1] hold " \
           "request slot [9]" in out, out
    assert "not replayed: _k at step 0 rank 0 launch 0: " in out
    assert "not replayed: _k at step 0 rank 1 launch 0: " in out


def _stand_in_kernel(x_ptr: Any) -> None:
    """A function whose source hash a record may name (it is never run)."""


def test_a_record_of_no_source_hash_says_the_source_was_not_compared() -> None:
    """A launch record whose ``source_sha256`` is empty (or left out) was replayed against the
    installed kernel with no word of it, while one naming another hash said the source differs:
    leaving the hash out hid that the kernel that ran may not be the one recorded."""
    from forensics.kernels.format import source_hash
    from forensics.kernels.replay_worker import source_note

    launch = idx_launch(np.array([0], dtype=np.int32))
    assert launch.source_sha256 == ""
    assert source_note(launch, _stand_in_kernel) == (
        "the record names no source hash: the installed kernel's source was not compared "
        "with the recorded one's")
    launch.source_sha256 = "0" * 64
    assert source_note(launch, _stand_in_kernel) == \
        "the installed kernel's source differs from the recorded one's"
    launch.source_sha256 = source_hash(_stand_in_kernel)
    assert source_note(launch, _stand_in_kernel) == ""
