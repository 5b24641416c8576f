"""Hostile input, round 15 (kern15): what last round's attackers found in the Triton kernel
replay and could not mend.

- The probe's kernel records did not say which tensors of a launch share a storage: views of
  one storage were replayed as separate buffers (a write through one unseen through the
  other: a false ``live_differs``, "evidence of a race", or the launch not judged), and an
  access through one view into memory another's storage holds was out of bounds. Records now
  carry ``storage_id`` and ``storage_at`` (T75a); storages that partly overlap are one memory
  in the replay (T75b).
- The ``vllm`` variant's worker said "no buffer's pointer is null" of an access through the
  null pointer of a numpy-made empty buffer (T75c).
- The block-index contract of ``_compute_slot_mappings_kernel`` judged every token under
  context parallelism, where the kernel reads the block table for the tokens of its rank only,
  by their local block index (T75d).

The recorded launches are REAL vLLM kernels run in Triton's interpreter on CPU
(:mod:`tests.hostile.kern15_launches`, the probe with ``FORENSICS_KERNELS=all``), replayed by
one ``forensics kernels --json``; the format's refusals and the replay of a partial overlap use
the tiny kernels of :mod:`tests.hostile.test_round9_attack9a`.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.hostile.test_round9_attack9a import launch, replayed, tensor

HERE = Path(__file__).resolve().parent
CASES = [{"kernel": "shared_views"}, {"kernel": "overlapping"},
         {"kernel": "cp_slots", "rank": 1, "pos": [13, 24]},
         {"kernel": "cp_slots", "rank": 0, "pos": [13, 24]}]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[int, Any], dict[str, Any]]:
    """(the launches recorded, by step; the ``forensics kernels --json`` answer)."""
    root = tmp_path_factory.mktemp("kern15")
    (root / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CASES))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parents[1]), *sys.path])}
    done = subprocess.run([sys.executable, str(HERE / "kern15_launches.py"), str(root / "caps"),
                           str(root / "cases.jsonl")], capture_output=True, text=True,
                          timeout=900, check=True, env=env)
    capture = Path(done.stdout.strip().splitlines()[-1])
    events = [json.loads(line) for f in sorted(capture.glob("events-*.jsonl"))
              for line in f.read_text().splitlines()]
    launches = {e["step"]: e for e in events if e.get("kind") == "kernel_launch"}
    answer = subprocess.run([sys.executable, "-m", "forensics.cli", "kernels", str(capture),
                             "--json"], capture_output=True, text=True, timeout=900, env=env)
    assert answer.returncode in (0, 1), answer.stderr
    return launches, json.loads(answer.stdout)


def sharing(event: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """Per tensor of a recorded launch: its (``storage_id``, ``storage_at``)."""
    return {n: (t["storage_id"], t["storage_at"]) for n, t in event["tensors"].items()}


def at_step(answer: dict[str, Any], step: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The launch of ``step`` in the answer, and its findings."""
    [found] = [one for one in answer["launches"] if one["step"] == step]
    return found, [f for f in answer["findings"] if f["step"] == step]


# ------------------------------------- T75a: views of one storage


def test_views_of_one_storage_are_recorded_and_replayed_as_one(
        recorded: tuple[dict[int, Any], dict[str, Any]]) -> None:
    """``prepare_pos_seq_lens`` of four int32 arguments, views of one storage: the record says
    they share it (one ``storage_id``, each at byte 0 of it), ``pos`` is apart; the replay
    gives them one storage, so ``seq_lens``' write is read through the other views, and the
    launch is judged against live (it was "not judged": the record did not say they share
    one) and equals it."""
    launches, answer = recorded
    ids = sharing(launches[0])
    views = ("idx_mapping_ptr", "query_start_loc_ptr", "num_computed_tokens_ptr", "seq_lens_ptr")
    assert {ids[n] for n in views} == {(ids["seq_lens_ptr"][0], 0)}
    assert ids["pos_ptr"][0] != ids["seq_lens_ptr"][0]
    found, findings = at_step(answer, 0)
    assert (found["status"], found["reason"], findings) == ("replayed", "", []), found


def refused(tensors: dict[str, Any]) -> str:
    """The one line ``forensics kernels`` gives a capture of a tiny launch of ``tensors``."""
    from forensics.errors import CaptureFormatError
    from forensics.kernels.format import launches_of

    event = launch("scale_kernel", tensors, ["x_ptr", "out_ptr", "factor", "BLOCK"],
                   {"factor": 2.0}, {"BLOCK": 4})
    with pytest.raises(CaptureFormatError) as caught:
        launches_of([event], "/tmp/c.capture")
    return str(caught.value)


def floats(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def test_an_impossible_sharing_is_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A record claiming memory no storage can hold is one line naming the capture, the
    event, the tensor, the field and the fix: an id on one tensor only, storages of one id
    that do not overlap, two storages of one memory unlike on a byte they share, a
    ``storage_at`` without an id, none of the id's storages at its byte 0; ``forensics
    kernels`` exits 2 with that line."""
    from forensics.cli import main
    from tests.hostile.test_round4_kernels import write_capture

    x, out = tensor(floats(1, 2, 3)), tensor(floats(3, 4, 5, 6))
    cases = {
        "one id": ({**x, "storage_id": 0}, out, "'out_ptr': field 'storage_id' is missing"),
        "apart": ({**x, "storage_id": 0}, {**out, "storage_id": 0, "storage_at": 16},
                  "'out_ptr': field 'storage_at' puts its storage at bytes 16..32, apart from "
                  "the rest of storage_id 0 (bytes 0..12)"),
        "unlike": ({**x, "storage_id": 0}, {**tensor(floats(9, 4, 5, 6)), "storage_id": 0,
                                            "storage_at": 8},
                   "'out_ptr': field 'data' holds byte 2 of its storage unlike the storage of "
                   "storage_id 0 it shares it with: one memory holds one value; fix"),
        "no id": (x, {**out, "storage_at": 8}, "'out_ptr': field 'storage_at' needs a "
                                               "'storage_id'"),
        "no start": ({**x, "storage_id": 0, "storage_at": 4},
                     {**out, "storage_id": 0, "storage_at": 8},
                     "'x_ptr': field 'storage_at' is 4, yet no storage of storage_id 0 starts "
                     "at byte 0"),
    }
    for name, (first, second, said) in cases.items():
        line = refused({"x_ptr": first, "out_ptr": second})
        assert "\n" not in line and line.startswith(
            "capture '/tmp/c.capture' kernel_launch event 0 tensor ") and said in line and \
            line.endswith("; fix or delete the event line"), (name, line)
    event = launch("scale_kernel", {"x_ptr": {**x, "storage_id": 0},
                                    "out_ptr": {**out, "storage_id": 0, "storage_at": 16}},
                   ["x_ptr", "out_ptr", "factor", "BLOCK"], {"factor": 2.0}, {"BLOCK": 4})
    capture = write_capture(tmp_path / "apart.capture", [event])
    assert main(["kernels", str(capture)]) == 2
    line = capsys.readouterr().err.strip()
    assert line == (f"forensics kernels: error: capture '{capture}' events file "
                    "'events-h-1.jsonl' line 1, kernel_launch event 0 tensor 'out_ptr': "
                    "field 'storage_at' puts its storage at bytes 16..32, "
                    "apart from the rest of storage_id 0 (bytes 0..12): storages of one id "
                    "overlap; give it an id of its own; fix or delete the event line"), line


# ------------------------------------- T75b: storages that partly overlap


def test_storages_that_partly_overlap_are_one_memory(
        recorded: tuple[dict[int, Any], dict[str, Any]]) -> None:
    """``prepare_pos_seq_lens`` on numpy-made storages over one array (``idx_mapping``
    elements 0-1, ``query_start_loc`` 2-4, ``num_computed_tokens``' storage 1-11, ``seq_lens``'
    8-15): the record places each in the memory they share; the replay lays them out as one,
    so ``seq_lens``' write reaches ``num_computed_tokens``' storage as it did live. It was a
    false ``live_differs`` of ``num_computed_tokens_ptr`` (elements 8 and 9), "evidence the
    kernel read inputs that changed under it (a race)"."""
    launches, answer = recorded
    ids = sharing(launches[1])
    assert {n: at for n, (_, at) in ids.items() if n != "pos_ptr"} == {
        "idx_mapping_ptr": 0, "num_computed_tokens_ptr": 4, "query_start_loc_ptr": 8,
        "seq_lens_ptr": 32}
    assert len({i for n, (i, _) in ids.items() if n != "pos_ptr"}) == 1
    found, findings = at_step(answer, 1)
    assert (found["status"], found["reason"], findings) == ("replayed", "", []), findings


def overlap(shared: bool) -> dict[str, Any]:
    """``out = x * 2`` (4 lanes) where ``x``'s storage is floats 0-2 of a memory of 6 and
    ``out``'s floats 2-5: ``x``'s lane 3 reads float 3, ``out``'s memory (live, inside);
    ``shared``: the record says so (``storage_id``, ``storage_at``)."""
    def b64(array: np.ndarray) -> str:
        return base64.b64encode(array.tobytes()).decode("ascii")

    x = {**tensor(floats(1, 2, 3)), "after": b64(floats(1, 2, 2))}
    out = {**tensor(floats(3, 4, 5, 6)), "after": b64(floats(2, 4, 6, 8))}
    if shared:
        x.update(storage_id=0, storage_at=0)
        out.update(storage_id=0, storage_at=8)
    return launch("scale_kernel", {"x_ptr": x, "out_ptr": out},
                  ["x_ptr", "out_ptr", "factor", "BLOCK"], {"factor": 2.0}, {"BLOCK": 4})


def test_an_access_across_overlapping_storages_is_inside(tmp_path: Path) -> None:
    """The replay gave ``x`` a storage of its own: its lane 3 was an out-of-bounds load of
    ``x_ptr`` (element 3), and ``out``'s write over ``x``'s float 2 was missing from it (a
    ``live_differs``). Told the storages overlap, the load is inside and the replay equals
    live; a record that does not say so (written before the fields) is replayed as before,
    each tensor its own storage."""
    shared, unknown = replayed(tmp_path, [overlap(True), overlap(False)])
    assert (shared["status"], shared["accesses"], shared["differs"]) == (
        "replayed", [], []), shared
    assert [(a["argument"], a["op"], a["elements"]) for a in unknown["accesses"]] == [
        ("x_ptr", "load", [3])], unknown


# ------------------------------------- T75c: a numpy-made empty buffer of a V2 kernel


def test_a_null_access_through_a_numpy_made_empty_v2_buffer_is_its(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``post_update`` of a record whose ``sampled_tokens`` has no columns: the worker makes
    the buffer with numpy, whose empty storage has an address while torch hands the kernel 0
    (``data_ptr()``). The load through it at byte 4 was "attributed to no buffer: no buffer's
    pointer is null"; it is the empty buffer's now, as the kernel sanitizer's replay worker
    says of a launch's one empty tensor."""
    from forensics.variants import triton_kernels

    monkeypatch.syspath_prepend(str(HERE.parent / "sites"))
    # the worker runs `python -P -m`: this checkout's forensics, whichever one is installed
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE.parents[1]), *sys.path]))
    from v2_records import post

    [outcome] = triton_kernels.run_kernels([post(sampled_tokens=np.zeros((2, 0), np.int32))])
    assert (outcome.status, outcome.message) == (
        "index_error", "IndexError: the Triton kernel made a load at an address outside every "
        "buffer of the launch (through the null pointer of the empty 'sampled_tokens_ptr', at "
        "byte 4)"), outcome


def test_both_workers_take_a_zero_pointer_for_an_empty_tensor() -> None:
    """One rule (:func:`forensics.kernels.bounds.null_pointer`): a tensor is empty, its
    pointer null, when torch hands 0 for it, whatever its storage's address (numpy's has
    one; an empty view of a storage of 8 bytes has one)."""
    import torch

    from forensics.kernels.bounds import null_pointer
    from forensics.variants.triton_worker import Observer

    made = [torch.from_numpy(np.zeros(0, np.int32)), torch.zeros(2, dtype=torch.int32)[2:],
            torch.zeros(0, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)]
    assert [null_pointer(t) for t in made] == [True, True, True, False]
    v2 = Observer()
    v2.launch(["a", "b", "c", "d"], made)
    assert [(start, end) for start, end, _ in v2.regions[:3]] == [(0, 0)] * 3


# ------------------------------------- T75d: the block-index contract under context parallelism


def test_the_block_contract_judges_what_the_kernel_reads_under_context_parallelism(
        recorded: tuple[dict[int, Any], dict[str, Any]]) -> None:
    """Two ranks, interleave 1, block size 4, rows of 3 blocks: rank 1 reads the block table
    for position 13 only (its local block 1; 24 is rank 0's, masked), rank 0 for 24 only
    (local block 3: past the row). Both were judged by ``pos // 4``: 13 and 24 past the row on
    both ranks (blocks 3 and 6), three false findings of four."""
    _, answer = recorded
    assert at_step(answer, 2)[1] == []
    [found] = at_step(answer, 3)[1]
    assert (found["kind"], found["elements"], found["positions"], found["values"],
            found["count"], found["upper"]) == ("kernel_contract", [1], [24], [3], 1, 3), found
    assert "context parallel: 2 ranks, interleave 1, rank 0, sharded" in found["bound"]


def cp_launch(sharded: dict[str, Any] | None, rank: Any = 0) -> Any:
    """A checked CP launch (2 ranks) of one request at positions 13 and 24, block size 4, rows
    of 3 blocks; ``sharded``: its ``dcp_sharded`` record (None: not recorded)."""
    from forensics.kernels.format import check_launch
    from tests.hostile.test_round8b_kernels import tensor as record

    raw = {"kind": "kernel_launch", "format": 1, "step": 0, "rank": 0, "ordinal": 0,
           "grid": [1, 3], "args": [], "scalars": {"cp_rank": rank},
           "constexprs": {"CP_SIZE": 2, "CP_INTERLEAVE": 1},
           "kernel": {"module": "vllm.v1.worker.gpu.block_table",
                      "name": "_compute_slot_mappings_kernel", "source_sha256": ""},
           "tensors": {"pos": record(np.array([13, 24], dtype=np.int64)),
                       "block_sizes": record(np.array([4], dtype=np.int32)),
                       "query_start_loc": record(np.array([0, 2], dtype=np.int32)),
                       "block_table_ptrs[0]": record(np.zeros(12, dtype=np.int32),
                                                     shape=[4, 3])}}
    if sharded is not None:
        raw["tensors"]["dcp_sharded"] = sharded
    return check_launch(raw, "test")


def test_the_block_contract_is_not_judged_where_the_masking_is_unknown() -> None:
    """Under context parallelism, a group not ``dcp_sharded`` reads every token's block (24:
    block 6, 13: block 3, both past the row); with ``dcp_sharded`` or ``cp_rank`` unknown,
    which tokens the kernel masks is unknown: none is judged."""
    from forensics.kernels import contracts
    from tests.hostile.test_round8b_kernels import tensor as record

    flags = record(np.array([False]))
    [found] = contracts.check(cp_launch(flags), {})
    assert (found["elements"], found["values"]) == ([0, 1], [3, 6]), found
    assert contracts.check(cp_launch(record(np.array([True]))), {})[0]["positions"] == [24]
    assert contracts.check(cp_launch(None), {}) == []
    assert contracts.check(cp_launch({**flags, "contents": "none", "data": ""}), {}) == []
    assert contracts.check(cp_launch(record(np.array([True])), rank=None), {}) == []
