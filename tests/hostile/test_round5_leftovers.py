"""Hostile input, round 5: the defects the last round left open (claim T31l), attacked as a
hostile capture author, a hostile data file attached to a bug thread, or a hostile local user
sharing a folder would: ``repro`` writing into the capture it reads, a forged repro data file
missing a field, a planted ``.NAME.tmp-PID`` link adopted by the store's recovery, and the
rest listed on each test.

No test here imports vLLM or starts an engine: the real code's replay is stood in for by the
upstream model's findings, the generated file's vLLM calls by plain stand-ins.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_round4_repro import _AsIfVllm, _case, _fake_vllm, _generated, _InputBatch, _int, _tensor

import forensics
from forensics.cli import main
from forensics.store.replace import recover
from forensics.store.replace import tmp_path as build_path
from tests.conftest import DATA

# ----------------------------------------------- repro never writes into the capture it reads


@pytest.fixture
def as_if_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    """``forensics repro`` with the upstream model's findings for the real code's, vLLM
    0.33.0 (see ``test_round4_repro._AsIfVllm``)."""
    import forensics.variants.vllm_adapters as adapters

    replay = forensics.replay
    monkeypatch.setattr(adapters, "require_vllm", lambda: "0.33.0")
    monkeypatch.setattr(forensics, "replay", lambda capture, variants=None, **kw:
                        _AsIfVllm(replay(capture, variants=["upstream"], **kw)))


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


@pytest.mark.parametrize(("name", "force"), [
    ("manifest.py", True), ("new.py", False), ("new.py", True), ("segments/x.py", True),
    ("../link/manifest.py", True)])
def test_repro_refuses_an_output_inside_the_capture_it_reads(
        tmp_path: Path, as_if_vllm: None, capsys: pytest.CaptureFixture[str], name: str,
        force: bool) -> None:
    """``-o CAPTURE/manifest.py --force`` once replaced the capture's ``manifest.json`` with
    the repro's data file (``NAME.json`` beside ``NAME.py``), and ``-o CAPTURE/new.py`` added
    two files to it; an output inside the capture, through a link to its folder too, is now
    one line and exit 2, ``--force`` or not, and the capture is left byte for byte."""
    capture = tmp_path / "b.capture"
    shutil.copytree(DATA / "incident-b-vocab-sentinel.capture", capture)
    (tmp_path / "link").symlink_to(capture)
    (capture / "segments").mkdir(exist_ok=True)
    before = _snapshot(capture)
    code = main(["repro", str(capture), "-o", str(capture / name)] + ["--force"] * force)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "inside the capture" in err, err
    assert _snapshot(capture) == before


def test_repro_still_writes_beside_the_capture(tmp_path: Path) -> None:
    """The check refuses only paths inside the capture: a sibling whose name starts with the
    capture's (``b.capture-repro``), or the capture's own folder's parent, is allowed (the
    check alone: the replay behind a written repro is tested in tests/test_repro_data.py)."""
    from forensics.atomic import refuse_inside_captures as refuse_inside_capture
    from forensics.errors import ConfigurationError

    capture = tmp_path / "b.capture"
    capture.mkdir()
    for allowed in (tmp_path / "b.capture-repro" / "test_b.py", tmp_path / "test_b.py"):
        refuse_inside_capture(allowed, [capture])
        refuse_inside_capture(allowed, [forensics.load(DATA / "clean.capture")])
    with pytest.raises(ConfigurationError, match="is inside the capture"):
        refuse_inside_capture(DATA / "clean.capture" / "x.json",
                              [forensics.load(DATA / "clean.capture")])


# ----------------------------------------------- a forged data file lacking a field is BadData

ASYNC = {"req_ids": {"kind": "str_list", "value": ["a", "b"]},
         "prev_req_ids": {"kind": "opt_str_list", "value": ["a", "b"]},
         "sampled_token_ids_cpu": _tensor([[100], [7]]),
         "output_tail": {"kind": "ragged", "value": [[5, -1], [-1]]},
         "output_len": _tensor([3, 3]), "vocab_size": _int(100)}


@pytest.mark.parametrize(("change", "says"), [
    ({"vocab_size": None}, "record: lacks the field 'vocab_size', which every async_output "
                           "record holds"),
    ({"sampled_token_ids_cpu": None}, "record: lacks the field 'sampled_token_ids_cpu'"),
    ({"vocab_size": _tensor([100])}, "record['vocab_size'].kind: 'tensor', expected 'int'"),
    ({"req_ids": _int(3)}, "record['req_ids'].kind: 'int', expected 'str_list'"),
    ({"forged": _int(3)}, "record['forged']: not a field of a async_output record"),
])
def test_a_record_lacking_a_field_or_of_the_wrong_kind_is_bad_data(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: dict[str, Any],
        says: str) -> None:
    """A record lacking a field every record of its site holds once reached the call, which
    raised KeyError (a traceback); a field of another kind reached the call as it was. Both
    are now one BadData line naming the field, when the test decodes its record (the other
    cases of the file still run)."""
    record = {k: v for k, v in {**ASYNC, **change}.items() if v is not None}
    module = _generated(tmp_path, [_case("async_output", record)], "repro_round5_lacks")
    _fake_vllm(monkeypatch, {"vllm.v1.worker.gpu_input_batch": {"InputBatch": _InputBatch}})
    with pytest.raises(module.BadData) as refused:
        module.test_index_stays_in_range(module.DATA["cases"][0])
    assert str(refused.value).startswith(f"test_repro.json: {says}"), refused.value
    assert "\n" not in str(refused.value)


def test_a_tensor_of_the_wrong_dimensions_is_bad_data(tmp_path: Path) -> None:
    """``sampled_token_ids_cpu`` is 2-D in every async_output record: a 1-D one is refused
    naming it, not handed to the call."""
    module = _generated(tmp_path, [_case("async_output", {
        **ASYNC, "sampled_token_ids_cpu": _tensor([100, 7])})], "repro_round5_ndim")
    with pytest.raises(module.BadData, match="record\\['sampled_token_ids_cpu'\\].shape: "
                                             "expected 2 dimension"):
        module.record(module.DATA["cases"][0])


def test_an_optional_field_the_call_reads_is_bad_data_not_a_key_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An async_output record holding neither ``output_token_ids`` nor ``output_tail`` (each
    optional alone) once raised KeyError in the call; it is BadData naming the field."""
    record = {k: v for k, v in ASYNC.items() if k not in ("output_tail",)}
    module = _generated(tmp_path, [_case("async_output", record)], "repro_round5_optional")
    _fake_vllm(monkeypatch, {"vllm.v1.worker.gpu_input_batch": {"InputBatch": _InputBatch}})
    with pytest.raises(module.BadData) as refused:
        module.test_index_stays_in_range(module.DATA["cases"][0])
    assert str(refused.value).startswith(
        "test_repro.json: record['output_tail']: the record lacks this field, which the call "
        "reads;"), refused.value


# ----------------------------------------------- the store's recovery adopts nothing planted


def _dead_pid() -> int:
    """The id of a process that has ended (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.mark.parametrize("planted", ["tmp", "old"])
def test_recovery_never_renames_a_planted_link_into_place(tmp_path: Path,
                                                          planted: str) -> None:
    """A journal naming a dead process of this host and a ``.NAME.tmp-PID`` (or
    ``.NAME.old-PID``) that is a link to a forged capture elsewhere: recovery once renamed the
    link into place (``is_dir()`` follows links), so the next reader opened the forged capture
    as the user's. A link is never adopted (nor followed to remove what it names)."""
    forged = tmp_path / "elsewhere" / "forged.capture"
    forged.mkdir(parents=True)
    (forged / "manifest.json").write_text("{}")
    out = tmp_path / "x.capture"
    pid = _dead_pid()
    aside = out.with_name(f".{out.name}.old-{pid}")
    (build_path(out, pid) if planted == "tmp" else aside).symlink_to(forged)
    journal = out.with_name(f".{out.name}.replacing")
    journal.write_text(json.dumps({"pid": pid, "host": socket.gethostname()}))
    recover(out, clean=True)
    assert not os.path.lexists(out)
    assert (forged / "manifest.json").read_text() == "{}"
    with pytest.raises(Exception, match="x.capture"):
        forensics.load(out)


def test_a_link_planted_at_this_process_build_path_is_never_written_through(
        tmp_path: Path) -> None:
    """A shared folder's other user plants ``.NAME.tmp-PID`` for the writer's own pid (alive,
    so recovery leaves it), a link to a folder of theirs: the writer once followed it
    (``exists()``), then failed to remove it, or, planted between that check and the
    writer's ``mkdir(exist_ok=True)``, wrote the new capture into the link's target and renamed
    the link into place. The link is now removed as a link and the build folder made
    exclusively: the capture is written where asked, the target untouched."""
    from forensics.records import Record
    from forensics.store.writer import write_capture

    target = tmp_path / "theirs"
    target.mkdir()
    (target / "kept").write_text("theirs")
    out = tmp_path / "x.capture"
    build_path(out).symlink_to(target)
    write_capture(out, [Record("embedding", 0, 0, {"input_ids": [1, 2], "num_embeddings": 10})])
    assert not out.is_symlink() and len(forensics.load(out)) == 1
    assert sorted(p.name for p in target.iterdir()) == ["kept"]
    assert not os.path.lexists(build_path(out))


# ----------------------------------------------- kernels: one deadline over all the launches


def test_kernel_replays_stop_at_the_overall_deadline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Six launches the worker never answers (each to its per-launch deadline: 600 s by
    default) once cost 6 x 600 s. Now the replays share one deadline (``--deadline``, 1.5 s
    here, the per-launch one 1 s): the first launch times out, the second waits only what is
    left, and the others read 'not run: the overall deadline of 1.5 s passed' (never
    replayed, never "ok"), in the text output and the JSON."""
    from test_round4_kernels import KERNEL, MODULE, STAND_IN, launch, write_capture

    from forensics.kernels import sanitizer

    capture = write_capture(tmp_path / "slow.capture", [launch(1) for _ in range(6)])
    monkeypatch.setenv("FORENSICS_CHILD_TIMEOUT", "1")
    monkeypatch.setattr(sanitizer.Worker, "command",
                        lambda self: [sys.executable, "-P", str(STAND_IN)])
    # the installed vLLM's kernels (2 s to list): the one kernel launched here
    monkeypatch.setattr(sanitizer, "installed_kernels", lambda: [(MODULE, KERNEL)])
    code = main(["kernels", str(capture), "--json", "--deadline", "1.5"])
    out = json.loads(capsys.readouterr().out)
    assert code == 2, out  # no launch replayed: nothing judged (T42e)
    rows = [(r["status"], r["reason"]) for r in out["launches"]]
    assert rows[0] == ("not_replayable", "timed out after 1 s"), rows
    not_run = ("not_run", "not run: the overall deadline of 1.5 s passed")
    assert rows[2:] == [not_run] * 4 and rows[1][0] in ("not_replayable", "not_run"), rows
    assert main(["kernels", str(capture), "--deadline", "0.01"]) == 2
    text = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("not run: the overall deadline of 0.01 s passed: ")
               for line in text) >= 5, text
    assert not [line for line in text if " ok" in line]


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_an_overall_deadline_that_is_no_number_of_seconds_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str) -> None:
    """``--deadline`` must be a positive, finite number of seconds: one line, exit 2."""
    from test_round4_kernels import launch, write_capture

    capture = write_capture(tmp_path / "one.capture", [launch(0)])
    assert main(["kernels", str(capture), "--deadline", value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--deadline" in err, err


# ----------------------------------------------- segments: the map count, a file cut under a map


def _ranks(root: Path, ranks: int, steps: int = 3) -> Path:
    """A capture of one embedding segment per rank (``ranks`` segment files)."""
    import numpy as np

    from forensics.records import Record
    from forensics.store.writer import write_capture

    return write_capture(root, [
        Record("embedding", s, r, {"input_ids": np.arange(4, dtype=np.int32),
                                   "num_embeddings": 10})
        for r in range(ranks) for s in range(steps)])


def test_a_capture_of_more_segments_than_can_be_mapped_is_refused_up_front(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Past ``vm.max_map_count`` (65,530 by default: a capture of 65,000 small segment files)
    the mapping of one more segment once failed as 'Cannot allocate memory', naming neither the
    limit nor the fix. Here the limit stands at the maps in use, the reserve and 3 more: a
    capture of 5 segments is refused before any is mapped, in one line naming the count, the
    limit and the sysctl that raises it; of 3, it opens. (Since T92a only ``load(...,
    mapped=True)`` maps: the commands read their segments into memory, and map none.)"""
    from forensics.errors import CaptureFormatError
    from forensics.store import maps
    from forensics.store.reader import load

    many, few = _ranks(tmp_path / "many.capture", 5), _ranks(tmp_path / "few.capture", 3)
    monkeypatch.setattr(maps, "map_count_limit",
                        lambda: maps.maps_in_use() + maps.RESERVED_MAPS + 3)
    with pytest.raises(CaptureFormatError) as refused:
        load(many, mapped=True)
    err = str(refused.value)
    assert "\n" not in err and "holds 5 segment files, more than this process can map " \
        "(vm.max_map_count is" in err and "sysctl -w vm.max_map_count=" in err, err
    assert len(load(few, mapped=True)) == 3 * 3
    assert main(["inspect", str(many)]) == 0  # it maps no segment
    assert "holds 5 segment files" not in capsys.readouterr().err


def test_a_map_refused_for_want_of_memory_names_the_map_count(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """An ``mmap`` that fails with ENOMEM (the map count, or the address space) is one line
    naming both and the fix, not a bare 'Cannot allocate memory'."""
    import ctypes

    from forensics.store import maps  # where a segment's map is made (it was in segment)

    class _NoMap:
        restype = argtypes = None

        def __call__(self, *args: Any) -> Any:
            return ctypes.c_void_p(-1).value

    from forensics.errors import CaptureFormatError
    from forensics.store.reader import load

    real = maps.libc_function
    monkeypatch.setattr(maps, "libc_function",
                        lambda name: _NoMap() if name == "mmap" else real(name))
    capture = _ranks(tmp_path / "x.capture", 1)
    with pytest.raises(CaptureFormatError) as refused:  # only a caller who asks maps (T92a)
        load(capture, mapped=True)
    err = str(refused.value)
    assert "\n" not in err and "out of memory maps (" in err and \
        "vm.max_map_count" in err and "ulimit -v" in err, err
    assert main(["inspect", str(capture)]) == 0 and not capsys.readouterr().err


#: opens a capture, cuts its segment to nothing, then reads its records (argv: the capture)
TRUNCATE = """
import os, sys
from pathlib import Path
import forensics
from forensics.errors import ForensicsError
capture = forensics.load(sys.argv[1])
for segment in Path(sys.argv[1]).glob("*.arrows"):
    os.truncate(segment, 0)
try:
    print(sum(len(r.fields) for r in capture.records()))
except ForensicsError as exc:
    print(exc)
    sys.exit(2)
"""


def test_a_segment_truncated_after_it_was_opened_is_one_line_not_sigbus(
        tmp_path: Path) -> None:
    """A segment cut to nothing by another process after ``load`` mapped it: reading its
    batches once touched pages past the file's end, and SIGBUS killed the command (in its own
    process here: it would kill the test run). The file is checked again before a batch is
    first read: one line naming the segment, exit 2."""
    capture = _ranks(tmp_path / "cut.capture", 1, steps=200)
    run = subprocess.run([sys.executable, "-c", TRUNCATE, str(capture)], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 2, (run.returncode, run.stderr[-2000:])
    assert run.stdout.count("\n") == 1 and "was truncated while it was read" in \
        run.stdout, run.stdout


# ----------------------------------------------- open_many: a long path is stored once


def test_open_many_stores_a_long_capture_path_once_not_on_every_row(tmp_path: Path) -> None:
    """A capture in a folder nested to a 3.8 KiB path: ``open_many`` once copied the path onto
    every row (1,000 rows: 3.6 MB; a million: 3.6 GB). The ``capture`` column is now
    dictionary-encoded (the path once per batch, 4 bytes a row); its values are the same
    strings."""
    import numpy as np
    import pyarrow as pa

    from forensics.fleet.dataset import open_many
    from forensics.records import Record
    from forensics.store.writer import write_capture

    deep = tmp_path
    while len(str(deep)) < 3600:
        deep = deep / ("d" * 200)
    rows = 1000
    capture = write_capture(deep / "x.capture", [
        Record("embedding", s, 0, {"input_ids": np.arange(4, dtype=np.int32),
                                   "num_embeddings": 10}) for s in range(rows)])
    before = pa.total_allocated_bytes()
    table = open_many([capture])["embedding"].to_table(columns=["capture", "host", "step"])
    grown = pa.total_allocated_bytes() - before
    path = os.path.abspath(capture)
    assert grown < rows * len(path) / 20, (grown, rows * len(path))
    assert table.num_rows == rows and set(table["capture"].to_pylist()) == {path}
    assert table["host"].null_count == rows  # the manifest names none: unknown
