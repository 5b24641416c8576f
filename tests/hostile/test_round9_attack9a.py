"""Hostile input, round 9 (attack 9a): ``forensics kernels``' replay worker, the V2 kernel
worker's observer and ``forensics simulate``.

Each test is an attack that once worked: a simulation of 1,000,000 steps of 65,536 tokens
(about 28 hours, 3.6 TB), a launch of a NaN float scalar never replayed, out-of-bounds lanes
attributed one by one against every tensor, a table of live addresses not named ``*_ptrs``
judged as out-of-bounds accesses of an innocent tensor, and an address in the last bytes of
the address space taken for one inside a tensor. The kernels run here are tiny ones of this
file's own (:data:`KERNELS`), in Triton's interpreter in a child process: no vLLM is imported.
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

from forensics.errors import ConfigurationError
from tests.instructions import assert_scales_linearly

# ------------------------------------------------ 1. simulate: steps x batch x tokens, capped


def test_a_simulation_of_more_tokens_than_four_soaks_is_one_line() -> None:
    """``--steps`` (at most 1,000,000) and a step's tokens (at most 65,536) were capped each
    alone: ``simulate clean --steps 1000000 --batch 13107 --spec-tokens 4`` was let through,
    3.6 MB written a step for about 28 hours, until the disk was full. The whole run's tokens
    are held to four times the soak scenario's, in one line before anything is drawn."""
    from forensics.simulator.scenarios import MAX_STEPS, MAX_TOKENS, SCENARIOS, configure

    soak = SCENARIOS["soak"]
    assert MAX_TOKENS == 4 * soak.steps * soak.batch * (1 + soak.spec_tokens)
    with pytest.raises(ConfigurationError) as raised:
        configure("clean", steps=MAX_STEPS, batch=13107, spec_tokens=4)
    line = str(raised.value)
    assert line == ("simulate 'clean': steps x batch x (1 + spec_tokens) = 1000000 x 13107 x 5 "
                    "= 65,535,000,000 tokens, past 320,000,000 (four times the soak "
                    "scenario's); give fewer --steps or a smaller --batch or --spec-tokens")
    assert configure("soak", steps=MAX_STEPS).steps == MAX_STEPS  # four soaks: still run


def test_the_simulate_command_writes_nothing_past_the_cap(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The command refuses in one line before it simulates: were it let through, the run is
    ended at once here (it filled a 59 GB disk in two minutes) and the test fails."""
    from forensics.cli import main
    from forensics.simulator import runs

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the simulation was let through the cap")

    monkeypatch.setattr(runs, "simulate", refuse)
    out = tmp_path / "huge.capture"
    assert main(["simulate", "clean", "-o", str(out), "--steps", "400000", "--batch",
                 "1000"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "past 320,000,000" in err, err
    assert not out.exists()


# ------------------------------------------ 2. the replay worker's observer, in Python alone


def observer(sizes: list[int]) -> tuple[Any, list[Any]]:
    """An observer of regions of ``sizes`` bytes (int32) at scattered addresses, listed out of
    address order."""
    from forensics.kernels.replay_worker import Observer, Region

    rng = np.random.default_rng(7)
    starts = np.cumsum(rng.integers(1 << 17, 1 << 20, len(sizes))) + (1 << 30)
    regions = [Region(f"t{i}", int(s), int(s) + size, 4)
               for i, (s, size) in enumerate(zip(starts.tolist(), sizes, strict=True))]
    rng.shuffle(regions)
    watcher = Observer()
    watcher.use(regions)
    return watcher, regions


def reference(regions: list[Any], addresses: list[int], size: int
              ) -> tuple[dict[Any, int], dict[Any, list[int]]]:
    """What the observer noted before (each lane against every region, in Python): a lane
    below NULL_REACH through a null pointer, no tensor's (the launch has no empty tensor);
    else the region it lies in or nearest to, when its allocation (the storage and its GAP
    either side) holds the lane, else no tensor (round 14: it was the nearest's, however
    far), no element listed."""
    from forensics.kernels.replay_worker import GAP, NULL, NULL_REACH, OUTSIDE

    counts: dict[Any, int] = {}
    found: dict[Any, list[int]] = {}
    for a in addresses:
        if any(r.start <= a and a + size <= r.end for r in regions):
            continue
        region = min(regions, key=lambda r: 0 if r.start <= a < r.end else
                     min(abs(a - r.start), abs(a - r.end)))
        name = NULL if a < NULL_REACH else region.name \
            if region.start - GAP <= a < region.end + GAP else OUTSIDE
        key = (name, "load", True, (0, 0, 0))
        counts[key] = counts.get(key, 0) + 1
        mine = found.setdefault(key, [])
        if name == OUTSIDE:
            continue
        element = a if name == NULL else (a - region.start) // region.itemsize
        if len(mine) < 16 and element not in mine:
            mine.append(element)
    return counts, found


def test_out_of_bounds_lanes_are_attributed_as_before() -> None:
    """The bulk attribution below notes what the lane-by-lane one does (in Python's exact
    ints): the region each lane lies in or nearest to (no tensor when no allocation holds
    it), the lanes' count and the first 16 elements, in lane order."""
    watcher, regions = observer([16, 0, 64, 4, 1 << 12] * 4)
    rng = np.random.default_rng(3)
    lows = [r.start for r in regions]
    addresses = [int(x) for x in rng.choice(lows, 600) + rng.integers(-(1 << 18), 1 << 18, 600)]
    addresses += [min(lows) + 2, 0, 2**64 - 4, 2**63, max(lows) + (1 << 40)]
    mask = watcher.check(np.array(addresses, dtype=np.uint64), np.ones(len(addresses), bool),
                         4, "load")
    counts, found = reference(regions, addresses, 4)
    assert (watcher.counts, watcher.accesses) == (counts, found)
    assert sum(watcher.counts.values()) == len(addresses) - int(mask.sum())


def test_an_address_in_the_last_bytes_is_outside_every_tensor() -> None:
    """``address + size`` wraps past 2**64: a 4-byte load at ``2**64 - 2`` was taken for one
    inside the first tensor and performed (the worker died of SIGSEGV, the launch 'crashed the
    interpreter's process'); the V2 kernel worker's observer alike. Both refuse it now."""
    from forensics.variants.triton_worker import Observer as V2Observer

    watcher, regions = observer([16])
    top = np.array([2**64 - 2, regions[0].start, regions[0].start + 12], dtype=np.uint64)
    assert watcher.check(top, np.ones(3, bool), 4, "load").tolist() == [False, True, True]
    assert sum(watcher.counts.values()) == 1
    v2 = V2Observer()
    v2.regions = [(regions[0].start, regions[0].end, "t0")]
    assert v2.allowed(top, np.ones(3, bool), 4, "a load").tolist() == [False, True, True]
    assert len(v2.outside) == 1


def test_out_of_bounds_lanes_take_time_linear_in_lanes_and_tensors(tmp_path: Path) -> None:
    """Each lane outside every tensor was attributed in Python against every tensor: a launch
    of 100 tensors took 20x the time on lanes outside as on lanes inside (a record of 8,000
    tensors, within the allocation budget, hours). Four times the tensors and the lanes now
    cost under six times the instructions."""
    assert_scales_linearly(__file__, "lanes outside", 200, tmp_path)


def make_work(case: str, n: int, scratch: Path) -> Any:
    """Checking ``40 n`` lanes outside all of ``n`` tensors (run by :mod:`tests.instructions`)."""
    watcher, regions = observer([64] * n)
    far = np.uint64(max(r.end for r in regions) + (1 << 20))
    lanes = far + np.arange(40 * n, dtype=np.uint64) * np.uint64(4)
    mask = np.ones(len(lanes), bool)
    return lambda: watcher.check(lanes, mask, 4, "load")


# ------------------------------------- 3. tiny kernels replayed in Triton's interpreter


KERNELS = '''
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, factor, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * factor)


@triton.jit
def deref_kernel(table, out_ptr):
    p = tl.load(table).to(tl.pointer_type(tl.int32))
    tl.store(out_ptr, tl.load(p) + 1)


@triton.jit
def offset_kernel(table, off_ptr, out_ptr):
    p = (tl.load(table) + tl.load(off_ptr)).to(tl.pointer_type(tl.int32))
    tl.store(out_ptr, tl.load(p))
'''

REPLAY = '''
import json, sys
from forensics.kernels import replay_worker
replay_worker.install_observer()
for line in sys.stdin:
    print(json.dumps(replay_worker.answer(line)), flush=True)
'''


def tensor(array: np.ndarray, **more: Any) -> dict[str, Any]:
    """A ``storage`` record of ``array``."""
    return {"dtype": array.dtype.name, "shape": list(array.shape), "strides": [1],
            "offset": 0, "storage": array.nbytes, "contents": "storage",
            "data": base64.b64encode(array.tobytes()).decode("ascii"), **more}


def launch(name: str, tensors: dict[str, Any], args: list[str], scalars: dict[str, Any],
           constexprs: dict[str, Any]) -> dict[str, Any]:
    """A ``kernel_launch`` of :data:`KERNELS`' kernel ``name``."""
    return {"kind": "kernel_launch", "format": 1, "step": 0, "rank": 0, "ordinal": 0,
            "grid": [1], "args": args, "scalars": scalars, "constexprs": constexprs,
            "kernel": {"module": "tiny_kernels", "name": name, "source_sha256": ""},
            "tensors": tensors}


def replayed(tmp_path: Path, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The replay worker's answers to ``events`` (its observer, Triton's interpreter), the
    kernels being :data:`KERNELS`."""
    (tmp_path / "tiny_kernels.py").write_text(KERNELS)
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": "",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    done = subprocess.run([sys.executable, "-c", REPLAY], input="".join(
        json.dumps(e) + "\n" for e in events), capture_output=True, text=True, env=env,
        timeout=300, check=True)
    return [json.loads(line) for line in done.stdout.splitlines()]


def scale(factor: Any) -> dict[str, Any]:
    x = np.array([1, 2], dtype=np.float32)
    return launch("scale_kernel", {"x_ptr": tensor(x), "out_ptr": tensor(x * 0)},
                  ["x_ptr", "out_ptr", "factor", "BLOCK"], {"factor": factor}, {"BLOCK": 2})


def deref(resolved: bool) -> dict[str, Any]:
    """A launch reading an int32 through the address its ``table`` holds: a live address, or
    (``resolved``) the replay's address of a recorded ``table[0]`` holding 41."""
    tensors = {"table": tensor(np.array([0x7F3A12345000], dtype=np.int64)),
               "out_ptr": tensor(np.zeros(1, dtype=np.int32))}
    if resolved:
        tensors["table[0]"] = tensor(np.array([41], dtype=np.int32), pointer_of="table",
                                     pointer_index=0)
    return launch("deref_kernel", tensors, ["table", "out_ptr"], {}, {})


def wild(offset: int) -> dict[str, Any]:
    """A launch reading an int32 ``offset`` bytes past the replay's address of ``table[0]``
    (its pointer made of the resolved address plus the offset)."""
    tensors = {"table": tensor(np.array([0x7F3A12345000], dtype=np.int64)),
               "off_ptr": tensor(np.array([offset], dtype=np.int64)),
               "out_ptr": tensor(np.zeros(1, dtype=np.int32)),
               "table[0]": tensor(np.array([41], dtype=np.int32), pointer_of="table",
                                  pointer_index=0)}
    return launch("offset_kernel", tensors, ["table", "off_ptr", "out_ptr"], {}, {})


def test_launches_of_nan_scalars_and_raw_addresses(tmp_path: Path) -> None:
    """Four attacks on one worker (one child process: Triton and torch are slow to import):

    - a float scalar recorded as NaN or infinity (the recorder writes it as the text ``nan``,
      ``inf``, JSON having no such number) reached the kernel as that text, which raised
      ("'str' object has no attribute 'type'"): the launch worth replaying never was. It is
      replayed as the float (``out = x * nan``: NaN).
    - a table of raw addresses not named ``*_ptrs`` (vLLM's ``_apply_write_kernel``'s
      ``output_ptr`` with ``MULTI_GROUP``, in every engine of several KV-cache groups) is not
      resolved by the recorder: the kernel loaded through a live address and the replay
      reported a ``kernel_out_of_bounds`` of the nearest innocent tensor. Such a launch is not
      replayable now, saying why; a table whose entry the record resolves still replays, and
      a wild offset past its address is still an out-of-bounds access.
    - a value the record names for a parameter the installed kernel lacks was dropped by
      Triton's launch, unsaid ('replayed', no note): the launch is not replayable now.
    """
    other = scale(2.0)
    other["scalars"]["scale"] = 3.0  # a parameter of another kernel's signature
    answers = replayed(tmp_path, [scale("nan"), scale("-inf"), scale(2.0),
                                  deref(resolved=False), deref(resolved=True), other,
                                  wild(1 << 40)])
    nan, minus, two, raw, resolved, signature, far = answers
    assert nan["status"] == "replayed", nan
    [differ] = nan["differs"]
    assert [e[2] != e[2] for e in differ["elements"]] == [True, True], differ  # NaN
    assert [e[2] for e in minus["differs"][0]["elements"]] == [-float("inf")] * 2, minus
    assert [e[2] for e in two["differs"][0]["elements"]] == [2.0, 4.0], two
    assert raw == {"status": "not_replayable", "reason": (
        "the kernel made a pointer of table's recorded value 0x7f3a12345000, which points into "
        "no tensor of the replay: an address of the live process the record does not resolve "
        "(only a '*_ptrs' table's entries are); accesses through it are not judged")}, raw
    assert resolved["status"] == "replayed" and resolved["accesses"] == [], resolved
    [wrote] = resolved["differs"]
    assert (wrote["argument"], wrote["elements"]) == ("out_ptr", [[0, 0, 42]]), wrote
    assert signature == {"status": "not_replayable", "reason": (
        "the record's argument scale is no parameter of the installed scale_kernel (x_ptr, "
        "out_ptr, factor, BLOCK): the record is of another kernel's signature")}, signature
    assert far["status"] == "replayed", far  # a wild offset past a resolved address: judged
    assert [(a["op"], a["count"]) for a in far["accesses"]] == [("load", 1)], far
