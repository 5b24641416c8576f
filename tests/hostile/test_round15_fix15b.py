"""Round 15's second fixes (fix15b) of what its first helpers found and left: a triage's held
check over every file it reads, segments truncated under the stitch, a Ray cluster the caller
started, kernel records' shared storages: the claims T80a-T80f of docs/threat-model.md."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

CHANGED = "changed while the triage ran"
EVENT = b'{"kind": "probe_start", "step": null, "rank": 1}\n'


# ------------------------- T80a: the manifest, events, expected verdicts and .idx sidecars held


def _rewrite(path: Path, old: bytes, new: bytes) -> None:
    """Write ``path``'s bytes again in place, ``old`` made ``new`` (same length: same size),
    its access and modification times put back: only its change time moves."""
    before = os.stat(path)
    data = path.read_bytes()
    assert len(old) == len(new) and old in data
    with open(path, "r+b") as f:
        f.write(data.replace(old, new))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino, before.st_size, before.st_mtime_ns)


def _engine(root: Path) -> list[Path]:
    """The two captures of one two-rank engine under ``root``, rank 1 diverging at step 6, each
    with an events file and expected verdicts."""
    from forensics.fleet.generate import Fleet, _engine

    fleet = Fleet(root)
    root.mkdir(parents=True)
    _engine(fleet, "engine-x", 12, 4, 3, True)
    captures = sorted(Path(p) for p in fleet.kinds)
    for capture in captures:
        (capture / "events-w0.jsonl").write_bytes(EVENT)
        (capture / "expected.json").write_text('{"note": "none"}')
    return captures


#: each kind of file a triage reads of a capture (other than segments, T76a), and a change of
#: it that leaves its size and modification time as they were (or adds a file)
CHANGES: dict[str, Callable[[Path], None]] = {
    "manifest": lambda c: _rewrite(c / "manifest.json", b'"engine-x"', b'"engine-y"'),
    "events": lambda c: _rewrite(c / "events-w0.jsonl", b"probe_start", b"probe_stop!"),
    "expected": lambda c: _rewrite(c / "expected.json", b"none", b"some"),
    "idx": lambda c: _rewrite(c / "embedding.r1.w0.0000.arrows.idx", b"", b""),
    "events added": lambda c: (c / "events-w1.jsonl").write_bytes(EVENT),
    "events removed": lambda c: (c / "events-w0.jsonl").unlink(),
}


@pytest.mark.parametrize("kind", sorted(CHANGES))
def test_a_file_changed_between_the_pieces_and_the_stitch_is_its_error_row(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """Rank 1's manifest (the engine id the stitch groups by), events file, expected verdicts
    or ``.idx`` sidecar rewritten in place after its piece read it, or an events file added
    or removed: the stitch checked its segments only, and compared rank 1 as one engine with
    rank 0 ("rank divergence at step 6") though its manifest now claims another. It is its
    error row, one line; rank 0 is compared with nothing."""
    from forensics.fleet import runners
    from forensics.fleet.triage import triage

    rank0, rank1 = _engine(tmp_path / "fleet")
    real = runners.run_local

    def run_local(*args: Any, **kwargs: Any) -> list[bytes]:
        results = real(*args, **kwargs)
        CHANGES[kind](rank1)
        return results

    monkeypatch.setattr(runners, "run_local", run_local)
    rows = {r["name"]: r for r in triage([rank0, rank1], workers=1).rows}
    assert rows[rank0.name]["divergence"] is None, rows
    error = rows[rank1.name]["error"]
    assert CHANGED in error and rank1.name in error and "\n" not in error, rows
    assert "its files are not those it held when its replay read it" in error


@pytest.mark.parametrize("kind", sorted(CHANGES))
def test_a_file_changed_while_its_piece_reads_it_is_its_error_row(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """The change lands while the piece replays the capture (after it read the file): the
    piece's row said what the file held before. The piece checks every file again once it
    replayed them: its row is the error naming the file."""
    from forensics.fleet import piece
    from forensics.fleet.tasks import Task
    from forensics.fleet.triage import decoded, merged

    _, rank1 = _engine(tmp_path / "fleet")
    real = piece.replayed_range

    def replayed_range(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        CHANGES[kind](rank1)
        return out

    monkeypatch.setattr(piece, "replayed_range", replayed_range)
    task = Task(str(rank1))
    error = merged([task], decoded([task], [piece.replay_piece(task.path)]))[0]["error"]
    name = {"manifest": "manifest.json", "expected": "expected.json",
            "idx": "embedding.r1.w0.0000.arrows.idx", "events added": "events-w1.jsonl"
            }.get(kind, "events-w0.jsonl")
    assert CHANGED in error and f"'{name}' was written to" in error and "\n" not in error


def test_a_capture_whose_files_are_left_alone_is_no_error_row(tmp_path: Path) -> None:
    """The check is the changed capture's only: an engine left alone is stitched as before."""
    from forensics.fleet.triage import triage

    rank0, rank1 = _engine(tmp_path / "fleet")
    rows = {r["name"]: r for r in triage([rank0, rank1], workers=1).rows}
    assert not rows[rank0.name]["error"] and not rows[rank1.name]["error"], rows
    assert rows[rank0.name]["divergence"] is not None


# ------------------------- T80b: a segment cut or rewritten under the stitch's reads

UNDER_THE_STITCH = """
import json, os, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_round15_fix15b import _engine
from forensics.fleet import dataset
from forensics.fleet.triage import triage

import numpy as np
from forensics.store.reader import load

rank0, rank1 = _engine(Path({root!r}))
segment = rank1 / "embedding.r1.w0.0000.arrows"
capture = load(rank1, mapped=True)  # where batch 0's input_ids offsets lie in the file
mapped = np.frombuffer(capture._segments[3]._buf, np.uint8).ctypes.data
assert capture._segments[3].name == segment.name
offsets = next(capture.batches("embedding")).batch.column("input_ids").buffers()[1]
at = offsets.address - mapped
del capture, offsets
real = dataset.fit_together

def fit_together(*args, **kwargs):
    if {how!r} == "truncated":
        os.truncate(segment, 0)
    else:  # list offsets 3-8 of input_ids made 2**30, in place: far past its values
        with open(segment, "r+b") as f:
            f.seek(at + 12)
            f.write(np.full(6, 1 << 30, np.int32).tobytes())
    return real(*args, **kwargs)

dataset.fit_together = fit_together
rows = {{r["name"]: r for r in triage([rank0, rank1], workers=1).rows}}
print(json.dumps({{n: [r["error"], r["divergence"]] for n, r in rows.items()}}))
"""


@pytest.mark.parametrize("how", ["truncated", "rewritten"])
def test_a_segment_cut_or_rewritten_under_the_stitch_is_its_error_row(
        tmp_path: Path, how: str) -> None:
    """Rank 1's segment truncated (or its batches' bytes rewritten in place) once the stitch
    handed its batches on, before it compared them: the stitch read the batches through the
    capture's memory map, so a page past the cut end raised SIGBUS and ended the triage, every
    row lost (exit -7), or it read list offsets no one validated, far past their values
    (SIGSEGV, exit -11). It copies the columns it compares
    as it reads them: the triage ends, rank 1 its error row naming the segment."""
    import json
    import subprocess
    import sys

    script = UNDER_THE_STITCH.format(tests=str(Path(__file__).parent),
                                     root=str(tmp_path / "fleet"), how=how)
    root = str(Path(__file__).parents[2])
    env = {**os.environ, "PYTHONPATH": root}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300, check=False)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    error0, divergence0 = rows["engine-x-rank0.capture"]
    error1, _ = rows["engine-x-rank1.capture"]
    assert not error0 and divergence0 is None, rows
    assert CHANGED in error1 and "'embedding.r1.w0.0000.arrows' was written to" in error1, rows


# ------------------------- T80c: a Ray the caller started before the triage, in a planted folder

@pytest.mark.timeout(300)
def test_a_ray_the_caller_started_in_a_planted_folder_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``ray.init()`` called by the caller in a folder others write, then a triage on Ray: the
    triage kept the cluster's settings (no working directory), so each worker imported the
    ``forensics`` package planted in that folder (it ran, its task retried, then lost). The
    triage refuses such a cluster in one line, before any task is sent."""
    ray = pytest.importorskip("ray", reason="the fleet extra: pip install 'vllm-forensics[fleet]'")
    from forensics.errors import ConfigurationError
    from forensics.fleet.runners import run_ray
    from forensics.fleet.tasks import plan
    from tests.hostile.test_round15_fix15 import PLANTED, _long

    shared = tmp_path / "shared"
    (shared / "forensics").mkdir(parents=True)
    (shared / "forensics" / "__init__.py").write_text(PLANTED.format(name="forensics"))
    _long(shared / "x.capture")
    monkeypatch.chdir(shared)
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False,
             _node_ip_address="127.0.0.1")
    try:
        with pytest.raises(ConfigurationError) as refused:
            run_ray(plan([Path("x.capture")]))
    finally:
        ray.shutdown()
    assert list(shared.rglob("ran-*")) == []  # the planted package never ran
    message = str(refused.value)
    assert "\n" not in message and "ray.shutdown()" in message and "working_dir" in message


# ------------------------- T80d, T80e: kernel records' tensors of one memory, by their elements


def _view(values: Any, offset: int = 0, storage: int = 16, **more: Any) -> dict[str, Any]:
    """A ``view`` record of float32 ``values`` (one dimension, stride 1) at element ``offset``
    of a storage of ``storage`` bytes."""
    import base64

    import numpy as np

    data = np.array(values, dtype=np.float32)
    return {"dtype": "float32", "shape": [len(data)], "strides": [1], "offset": offset,
            "storage": storage, "contents": "view",
            "data": base64.b64encode(data.tobytes()).decode("ascii"), **more}


def _b64(*values: float) -> str:
    import base64

    import numpy as np

    return base64.b64encode(np.array(values, dtype=np.float32).tobytes()).decode("ascii")


def _whole(*values: float, **more: Any) -> dict[str, Any]:
    from tests.hostile.test_round9_attack9a import tensor
    from tests.hostile.test_round15_kern15 import floats

    return {**tensor(floats(*values)), **more}


def test_elements_unlike_the_memory_they_share_are_refused_in_one_line() -> None:
    """``x_ptr`` stored whole (floats 1-4) and ``out_ptr``, a view of the same memory, stored
    element by element (2 where ``x_ptr`` holds 2, then 9 where it holds 3): nothing compared
    them, the replay wrote the elements over the whole copy, and a forged disagreement was
    replayed as written (a false ``live_differs``). Unlike on a byte they share, before the
    launch or after it, or two views unlike each other, the record is refused in one line
    naming the event, the tensor, the element, the field and the fix."""
    from tests.hostile.test_round15_kern15 import refused

    x = _whole(1, 2, 3, 4, storage_id=0)
    cases = {
        "data": ({"x_ptr": x, "out_ptr": _view([2, 9], 1, storage_id=0)},
                 "'out_ptr': field 'data' holds element 1 unlike 'x_ptr' at byte 10 of "
                 "storage_id 0"),
        "after": ({"x_ptr": {**x, "after": _b64(1, 2, 3, 5)},
                   "out_ptr": {**_view([3, 4], 2, storage_id=0), "after": _b64(3, 4)}},
                  "'out_ptr': field 'after' holds element 1 unlike 'x_ptr' at byte 14"),
        "views": ({"x_ptr": _view([1, 2], 0, storage_id=0),
                   "out_ptr": _view([7, 3], 1, storage_id=0)},
                  "'out_ptr': field 'data' holds element 0 unlike 'x_ptr' at byte 6"),
    }
    for name, (tensors, said) in cases.items():
        line = refused(tensors)
        assert "\n" not in line and line.startswith(
            "capture '/tmp/c.capture' kernel_launch event 0 tensor ") and said in line and \
            line.endswith("one memory holds one value; fix or delete the event line"), (
                name, line)


def test_elements_like_the_memory_they_share_are_read() -> None:
    """The check is the disagreement's only: a view agreeing with the whole copy, before and
    after, and two views of one memory that share no byte, are read as recorded."""
    from forensics.kernels.format import launches_of
    from tests.hostile.test_round9_attack9a import launch

    args = ["x_ptr", "out_ptr", "factor", "BLOCK"]
    for tensors in ({"x_ptr": {**_whole(1, 2, 3, 4, storage_id=0), "after": _b64(1, 2, 6, 8)},
                     "out_ptr": {**_view([3, 4], 2, storage_id=0), "after": _b64(6, 8)}},
                    {"x_ptr": _view([1, 2], 0, storage_id=0),
                     "out_ptr": _view([3, 4], 2, storage_id=0)}):
        event = launch("scale_kernel", tensors, args, {"factor": 2.0}, {"BLOCK": 4})
        assert len(launches_of([event], "/tmp/c.capture")) == 1


def test_a_storage_at_no_whole_number_of_elements_is_refused_when_read() -> None:
    """``out_ptr``'s storage starting 6 bytes into the memory it shares with ``x_ptr``
    (float32: 1.5 elements): read, then "not replayable" at the replay. It is refused when
    read, in one line naming the tensor and the field."""
    import numpy as np

    from tests.hostile.test_round15_kern15 import refused

    shared = np.frombuffer(np.array([1, 2, 3, 4], dtype=np.float32).tobytes()[6:14], np.float32)
    line = refused({"x_ptr": _whole(1, 2, 3, 4, storage_id=0),  # its bytes 6-13 are out's
                    "out_ptr": {**_whole(*shared), "storage_id": 0, "storage_at": 6}})
    assert "\n" not in line and line == (
        "capture '/tmp/c.capture' kernel_launch event 0 tensor 'out_ptr': field "
        "'storage_at' is 6, no whole number of float32 elements (4 bytes each) into the memory "
        "it shares; fix or delete the event line"), line
