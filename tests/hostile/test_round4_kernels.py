"""Hostile input, round 4: ``forensics kernels`` and the kernel records a capture holds.

Each test is an attack a capture author (or a shared folder) made on the kernel sanitizer that
once worked: a launch record whose view reaches outside its storage (read process memory, then
a segmentation fault), a zero-stride view of 2**40 elements, a storage of no whole number of
elements, and more (each section below). No test here imports vLLM or torch (one imports
Triton's interpreter alone); the replay worker, where one is needed, is a stand-in
(``hostile_kernel_worker.py``).
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from forensics.errors import CaptureFormatError
from tests.instructions import assert_scales_linearly

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


def test_a_repeated_view_is_not_materialised() -> None:
    """A zero-stride view of 2**40 elements fits its 8-byte storage; the contracts once asked
    for 4 TiB (and 1 TiB of booleans) to judge it, ending ``forensics kernels`` with an error
    (and one of 2**27, within the budget, made the block-index contract's work follow it).
    A view of more elements than its storage holds is not judged by the contracts (the
    engine's index buffers are never such views); the launch beside it is."""
    from forensics.kernels.format import check_launch
    from forensics.kernels.sanitizer import _one

    huge = check_launch(launch(shape=[2**40], strides=[0],
                               data=b64(b"\11\0\0\0\11\0\0\0")), "test")
    result = _one(huge, {}, set(), None, {})  # type: ignore[arg-type]
    assert result.findings == [], result
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


def write_capture(root: Path, events: list[dict[str, Any]],
                  model: dict[str, Any] | None = None) -> Path:
    """A capture folder at ``root`` of a manifest (``model``: its model facts) and ``events``
    (one events sidecar)."""
    root.mkdir(parents=True)
    (root / "manifest.json").write_text(json.dumps({
        "format": 1, "creator": "test", "engine_id": "e" * 32, "model": model or {},
        "process": {"host": "h", "pid": 1, "rank": 0, "tag": "h-1"}, "versions": {}}))
    (root / "events-h-1.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return root


# --------------------------------------------- 2. a replay that never ends; a planted import


STAND_IN = HERE / "hostile_kernel_worker.py"


def test_a_stuck_replay_worker_times_out_and_the_other_launches_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
        ) -> None:
    """A launch the interpreter never finishes (a grid of 2**31 programs) once hung
    ``forensics kernels`` for ever: the worker's answer was read with no deadline. Now that
    launch is not replayable, 'timed out after 1 s' (``FORENSICS_CHILD_TIMEOUT``), the worker
    is killed, a launch that kills its worker is that launch's line, and the others run."""
    from forensics.cli import main
    from forensics.kernels.sanitizer import Worker

    capture = write_capture(tmp_path / "stuck.capture", [
        {**launch(step), "grid": [2**31] if step == 1 else [2]} for step in range(4)])
    monkeypatch.setenv("FORENSICS_CHILD_TIMEOUT", "1")
    monkeypatch.setattr(Worker, "command", lambda self: [sys.executable, "-P", str(STAND_IN)])
    code = main(["kernels", str(capture), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    assert [(r["step"], r["status"], r["reason"]) for r in out["launches"]] == [
        (0, "replayed", ""), (1, "not_replayable", "timed out after 1 s"),
        (2, "not_replayable", "the replay crashed the interpreter's process"),
        (3, "replayed", "")], out


def test_a_worker_that_never_starts_is_waited_for_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker that never says it is ready (an import that hangs) was waited for without a
    deadline, and a worker that failed to start was started again for every launch. Now its
    start has a deadline, every launch says why it was not replayed, and it is started once."""
    from forensics.kernels import sanitizer

    capture = write_capture(tmp_path / "never.capture", [launch(step) for step in range(3)])
    starts: list[int] = []

    def command(self: sanitizer.Worker) -> list[str]:
        starts.append(1)
        return [sys.executable, "-P", "-c", "import time; time.sleep(60)"]

    monkeypatch.setattr(sanitizer.Worker, "command", command)
    monkeypatch.setattr(sanitizer, "START_TIMEOUT", 1.0)
    monkeypatch.setenv("FORENSICS_CHILD_TIMEOUT", "1")
    report = sanitizer.sanitize(capture)
    assert [(r.status, r.reason) for r in report.results] == [
        ("not_replayable", "the replay worker did not start: timed out after 1 s")] * 3
    assert report.note == "the replay worker did not start: timed out after 1 s"
    assert len(starts) == 1


def _run_from_a_planted_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Work in a folder holding a planted ``forensics/`` and ``numpy.py`` (each writes the
    returned marker file when imported), with a child deadline of 1 s."""
    planted = tmp_path / "shared"
    (planted / "forensics").mkdir(parents=True)
    marker = tmp_path / "ran"
    (planted / "forensics" / "__init__.py").write_text(
        f"open({str(marker)!r}, 'w').write('planted code ran')\nraise SystemExit(3)\n")
    (planted / "numpy.py").write_text(f"open({str(marker)!r}, 'w').write('numpy.py ran')\n")
    monkeypatch.chdir(planted)
    monkeypatch.setenv("FORENSICS_CHILD_TIMEOUT", "1")
    return marker


def test_a_module_planted_in_the_working_directory_is_not_imported(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -m`` puts the working directory first on the import path: run from a shared
    folder holding a ``forensics/`` (or ``numpy.py``, ``vllm/``), the replay worker once
    imported it, running whatever it held. Now the worker starts with ``-P``; the real one is
    ended by its start's deadline, 1 s here (it would import vLLM), the planted code never
    ran."""
    from forensics.kernels import sanitizer
    from forensics.kernels.sanitizer import Worker

    marker = _run_from_a_planted_folder(tmp_path, monkeypatch)
    monkeypatch.setattr(sanitizer, "START_TIMEOUT", 1.0)
    worker = Worker()
    try:
        assert not worker.start()
    finally:
        worker.close()
    assert not marker.exists(), marker.read_text()
    assert worker.failed == "the replay worker did not start: timed out after 1 s", worker.failed


# ------------------------------------------------- 3. an atomic at an address the capture chose


def test_an_atomic_outside_every_storage_is_noted_and_not_performed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM's ``_bincount_kernel`` adds 1 at ``output_bin_counts_ptr + token`` with tokens read
    from the capture: the interpreter's atomics were not checked, so a recorded token id made
    the replay worker add to any address it chose (another tensor, the worker's own memory),
    unseen. Now an atomic lane outside the storages is noted as an ``atomic`` and not
    performed, a compare-and-swap's too (Triton's interpreter alone: no kernel, no torch)."""
    import numpy as np
    import triton.language as tl
    from triton._C.libtriton import ir
    from triton.runtime import interpreter as interp

    from forensics.kernels.interpreter import check_masked_accesses

    for name in ("create_masked_load", "create_masked_store", "create_atomic_rmw",
                 "create_atomic_cas"):  # the hook is undone after the test
        monkeypatch.setattr(interp.InterpreterBuilder, name,
                            getattr(interp.InterpreterBuilder, name))
    storage, victim = np.zeros(4, dtype=np.int32), np.zeros(4, dtype=np.int32)
    start, noted = storage.ctypes.data, []

    def check(addresses: Any, mask: Any, size: int, what: str) -> Any:
        address = np.asarray(addresses, dtype=np.uint64)
        inside = (address >= start) & (address + size <= start + storage.nbytes)
        noted.append((what, (np.asarray(mask) & ~inside).tolist()))
        return np.asarray(mask) & inside

    check_masked_accesses(check, "load", "store", "atomic")
    builder = interp.InterpreterBuilder()
    ptr = interp.TensorHandle(np.array([start, victim.ctypes.data + 4], dtype=np.uint64),
                              tl.pointer_type(tl.int32))
    value = interp.TensorHandle(np.array([5, 7], dtype=np.int32), tl.int32)
    every = interp.TensorHandle(np.array([True, True]), tl.int1)
    sem, scope = ir.MEM_SEMANTIC.ACQUIRE_RELEASE, ir.MEM_SYNC_SCOPE.GPU
    builder.create_atomic_rmw(ir.ATOMIC_OP.ADD, ptr, value, every, sem, scope)
    assert storage.tolist() == [5, 0, 0, 0] and victim.tolist() == [0, 0, 0, 0]
    compare = interp.TensorHandle(np.array([5, 0], dtype=np.int32), tl.int32)
    builder.create_atomic_cas(ptr, compare, interp.TensorHandle(
        np.array([6, 9], dtype=np.int32), tl.int32), sem, scope)
    assert storage.tolist() == [6, 0, 0, 0] and victim.tolist() == [0, 0, 0, 0]
    assert noted == [("atomic", [False, True]), ("atomic", [False, True])]


# ------------------------------------------- 4. a launch's allocations together, not one by one


def test_a_launchs_allocations_together_are_held_to_the_budget(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each tensor's storage was held to the budget alone: a launch of many tensors (each
    with 64 KiB of gap on either side: 12,000 empty ones fit an event line, 1.5 GiB) or of
    several storages just under the budget asked for their sum. Now the sum (gaps included)
    is refused in one line before anything is imported or allocated."""
    from forensics.kernels.format import check_launch
    from forensics.kernels.replay_worker import GAP, NotReplayable, replay

    monkeypatch.setenv("FORENSICS_MAX_ALLOC", "1M")
    empty = {"dtype": "int32", "shape": [0], "strides": [1], "offset": 0, "storage": 0,
             "contents": "none"}
    event = {**launch(), "kernel": {"module": "forensics.no_such_module", "name": "_k"}}
    event["tensors"] = {f"t{i}": empty for i in range(1 + (1 << 20) // (2 * GAP))}
    with pytest.raises(NotReplayable) as raised:
        replay(check_launch(event, "test"))
    line = str(raised.value)
    assert line.startswith("the launch's 9 tensor(s): 'storage' is 0 bytes in all (and 131072 "
                           "bytes of gaps each), which would allocate 1179648 bytes"), line
    assert "budget of 1048576 bytes" in line and len(line.splitlines()) == 1, line
    half = {**empty, "shape": [1], "storage": 400_000}
    event["tensors"] = {"a": half, "b": half, "c": half}
    with pytest.raises(NotReplayable, match="'storage' is 1200000 bytes in all"):
        replay(check_launch(event, "test"))


# --------------------------------------------------------- 5. a kernel_summary of other types

SUMMARY = {"kind": "kernel_summary", "format": 1, "step": 0, "rank": 0, "graph_only": [],
           "kernels_seen": {f"{MODULE}.{KERNEL}": 1}, "handed_off": 0, "launches_written": 1}


@pytest.mark.parametrize(("change", "field"), [
    ({"graph_only": 5}, "graph_only"),
    ({"graph_only": [["nested"]]}, "graph_only"),
    ({"kernels_seen": [1]}, "kernels_seen"),
    ({"kernels_seen": {"k": "many"}}, "kernels_seen"),
    ({"kernels_seen": {"k": float("inf")}}, "kernels_seen"),
])
def test_a_kernel_summary_of_other_types_is_one_line_naming_its_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, Any],
        field: str) -> None:
    """The sanitizer read a ``kernel_summary``'s ``graph_only`` and ``kernels_seen`` unchecked
    (``int(count)``, ``.items()``): another type ended ``forensics kernels`` in 'internal
    error ... this is a bug'. Now exit 2 with one line naming the event, the field and the fix
    (the summary's other counts, ``handed_off`` among them, size nothing and are not read)."""
    from forensics.cli import main

    capture = write_capture(tmp_path / "summary.capture", [
        launch(), {**SUMMARY, **change, "handed_off": -(2**70)}])
    assert main(["kernels", str(capture)]) == 2
    line = capsys.readouterr().err.strip()
    assert line.startswith(f"forensics kernels: error: capture '{capture}' events file "
                           f"'events-h-1.jsonl' line 2, kernel_summary event 0: field "
                           f"'{field}' must be"), line
    assert "fix or delete the event line" in line and len(line.splitlines()) == 1, line


# ------------------------------------------------------------- 6. NaN and infinity in a record


def test_an_unchanged_nan_is_no_live_difference() -> None:
    """The replay's span was compared with the live one by value: a float tensor holding a NaN
    the launch never touched differed from itself, a 'race' finding on a clean launch. It is
    compared by bits (and -0.0 written where 0.0 was live is a difference)."""
    import numpy as np

    from forensics.kernels.format import check_launch
    from forensics.kernels.replay_worker import _differs

    values = np.array([np.nan, 1.0, 0.0], dtype=np.float32)
    event = launch(dtype="float32", shape=[3], storage=12, data=b64(values.tobytes()))
    arg = check_launch(event, "test").tensors["idx_mapping_ptr"]
    assert _differs(arg, values.tobytes()) is None
    found = _differs(arg, np.array([np.nan, 1.0, -0.0], dtype=np.float32).tobytes())
    assert found is not None and [e[0] for e in found["elements"]] == [2], found


def test_json_output_holds_no_nan_or_infinity(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A float ``idx_mapping`` holding infinity is a contract finding whose values were printed
    as the bare ``Infinity`` of Python's json, which JSON (and jq) refuse; ``--json`` is now
    strict JSON with such a value as the text "inf"."""
    import numpy as np

    from forensics.cli import main

    values = np.array([np.inf, 1.0], dtype=np.float32)
    capture = write_capture(tmp_path / "inf.capture", [{
        **launch(dtype="float32", data=b64(values.tobytes())),
        "kernel": {"module": "vllm.v1.worker.gpu.stand_in", "name": "_k"}}])
    assert main(["kernels", str(capture), "--json"]) == 1
    out = json.loads(capsys.readouterr().out, parse_constant=lambda name: pytest.fail(name))
    [finding] = out["findings"]
    assert (finding["argument"], finding["values"]) == ("idx_mapping_ptr", ["inf"]), finding


# ------------------------------------------ 7. the block-index contract over groups x positions


def slot_mappings(groups: int, positions: int, qsl: Any = None) -> dict[str, Any]:
    """A ``_compute_slot_mappings_kernel`` launch of ``groups`` KV groups (block size 1, group
    g's table g + 1 blocks wide, its contents not recorded) and ``positions`` positions 0,
    1000, 2000, ... (all but the first past every row)."""
    import numpy as np

    def tensor(array: Any) -> dict[str, Any]:
        return {"dtype": array.dtype.name, "shape": [len(array)], "strides": [1],
                "offset": 0, "storage": array.nbytes, "contents": "storage",
                "data": b64(array.tobytes())}

    starts = np.array([0, positions], dtype=np.int32) if qsl is None else qsl
    tensors = {"pos": tensor(np.arange(positions, dtype=np.int64) * 1000),
               "block_sizes": tensor(np.ones(groups, dtype=np.int32)),
               "query_start_loc": tensor(starts)}
    for g in range(groups):
        tensors[f"block_table_ptrs[{g}]"] = {
            "dtype": "int32", "shape": [1, g + 1], "strides": [g + 1, 1], "offset": 0,
            "storage": 4 * (g + 1), "contents": "none"}
    return {**launch(), "kernel": {"module": "vllm.v1.worker.gpu.block_table",
                                   "name": "_compute_slot_mappings_kernel"},
            "tensors": tensors}


def make_work(case: str, n: int, scratch: Path) -> Any:
    """Checking the block-index contract of ``n // 10`` groups and ``n`` positions."""
    from forensics.kernels import contracts
    from forensics.kernels.format import check_launch

    record = check_launch(slot_mappings(n // 10, n), "test")
    return lambda: contracts.check(record, {})


def test_the_block_index_contract_is_linear_in_groups_and_positions(tmp_path: Path) -> None:
    """The block-index contract checked every position against every group's table: a
    1 MiB event line of 4,400 groups and 48,000 positions took 3.8 s, 19x the time of one a
    quarter its size. It takes linear time now (4x the input, under 6x the instructions), and
    finds what it found before: the first positions past each row, their count."""
    from forensics.kernels import contracts
    from forensics.kernels.format import check_launch

    assert_scales_linearly(__file__, "block index", 6000, tmp_path)
    found = contracts.check(check_launch(slot_mappings(3, 40), "test"), {})
    assert [(f["bound"], f["count"], f["elements"][:3], f["values"][:3], f["positions"][:2])
            for f in found] == [
        (f"the blocks per row of block_table_ptrs[{g}] (block size 1)", 39, [1, 2, 3],
         [1000, 2000, 3000], [1000, 2000]) for g in range(3)]
    assert all(len(f["elements"]) == 16 for f in found)


def test_a_float_query_start_loc_is_not_judged() -> None:
    """A float ``query_start_loc`` whose last entry is NaN once ended ``forensics kernels`` in
    'cannot convert float NaN to integer'; the kernel's tensors are integers, and a record of
    floats is not judged by the block-index contract."""
    import numpy as np

    from forensics.kernels import contracts
    from forensics.kernels.format import check_launch

    event = slot_mappings(1, 4, np.array([0, np.nan], dtype=np.float32))
    assert contracts.check(check_launch(event, "test"), {}) == []


def test_the_v2_variant_worker_imports_nothing_from_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``replay --variant vllm``'s V2 kernel worker started with ``python -m`` too: a
    ``forensics/`` in the folder it is run from ran. Now it starts with ``-P``; the real worker
    is ended by its start's deadline (1 s here: it would import vLLM), the planted code never
    ran."""
    from forensics.variants import triton_kernels

    marker = _run_from_a_planted_folder(tmp_path, monkeypatch)
    monkeypatch.setattr(triton_kernels, "_START_TIMEOUT", 1.0)
    worker = triton_kernels.KernelWorker()
    assert worker._start(None) is None  # its start's deadline (T124d: no longer "it exited")
    assert "timed out after" in worker._stuck
    assert not marker.exists(), marker.read_text()
