"""Hostile input, round 4, on ``forensics import`` (T2, T24i): an unsigned tensor past int64, a
field given twice (a zip member twice, a JSON key twice, a metadata key that is also a member
or tensor) and crash events past what a capture's events file holds each end in exit 2 with one
line naming the file and the field, and leave nothing at the output."""

from __future__ import annotations

import io
import json
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from forensics.cli import main
from forensics.errors import CaptureFormatError
from forensics.importers import read_source
from tests.instructions import assert_linear, scaling

BASE = {"site": np.array("embedding"), "step": np.array(1), "input_ids": np.arange(4),
        "num_embeddings": np.array(10)}
META = {"site": "embedding", "step": "1", "num_embeddings": "10"}
IDS = {"dtype": "I64", "shape": [4], "data_offsets": [0, 32]}
DUMP = ("(EngineCore_DP0 pid=1) ERROR 12-02 10:46:44 [dump_input.py:72] Dumping scheduler output "
        "for model execution: ")


def _npy(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()


def _npz(path: Path, members: list[tuple[str, np.ndarray]]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, array in members:
            archive.writestr(name, _npy(array))
    return path


def _members(**changes: np.ndarray) -> list[tuple[str, np.ndarray]]:
    return [(f"{k}.npy", v) for k, v in {**BASE, **changes}.items()]


def _safetensors(path: Path, header: bytes | dict[str, object], body: bytes) -> Path:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + body)
    return path


def refused(source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
             *words: str) -> str:
    """Import ``source``: exit 2, one line naming its file and ``words``, no capture left."""
    out = tmp_path / "out.capture"
    assert main(["import", str(source), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert source.name in err and all(w in err for w in words), err
    assert not out.exists() and not list(tmp_path.glob(".out.capture*"))
    return err


def test_an_unsigned_tensor_past_int64_is_refused_at_import(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A uint64 id of 2**64 - 1 (read as -1 by anything that casts it) is refused, in an
    ``.npz`` and a ``.safetensors``, naming the field; one inside int64 is imported."""
    huge = np.array([1, 2**64 - 1], dtype=np.uint64)
    npz = _npz(tmp_path / "u64.npz", _members(input_ids=huge))
    refused(npz, tmp_path, capsys, "'input_ids'", "outside int64")
    body = np.array([0, 1, 2**64 - 1, 3], dtype="<u8").tobytes()
    st = _safetensors(tmp_path / "u64.safetensors",
                      {"__metadata__": META, "input_ids": {**IDS, "dtype": "U64"}}, body)
    refused(st, tmp_path, capsys, "'input_ids'", "outside int64")
    fine = _npz(tmp_path / "fine.npz", _members(input_ids=np.arange(4, dtype=np.uint64)))
    assert main(["import", str(fine), "-o", str(tmp_path / "fine.capture")]) == 0


def test_a_zip_member_given_twice_is_refused(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Two ``input_ids.npy`` members (one tool reads the first, another the last) are
    refused, naming the member."""
    members = _members() + [("input_ids.npy", np.arange(4) + 100)]
    with pytest.warns(UserWarning, match="Duplicate name"):
        npz = _npz(tmp_path / "twice.npz", members)
    refused(npz, tmp_path, capsys, "'input_ids.npy'", "twice")


def test_an_npz_metadata_key_that_is_also_a_member_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``__metadata__`` naming ``step`` beside a ``step`` member is two values of one field."""
    meta = np.array(json.dumps({"step": 9}))
    npz = _npz(tmp_path / "meta.npz", _members(__metadata__=meta))
    refused(npz, tmp_path, capsys, "'step'", "__metadata__")


def test_a_json_key_given_twice_in_an_npz_field_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A JSON object field holding one key twice is refused, naming the member."""
    meta = np.array('{"num_embeddings": 10, "num_embeddings": 99999}')
    npz = _npz(tmp_path / "key.npz",
               [(n, a) for n, a in _members(__metadata__=meta) if n != "num_embeddings.npy"])
    refused(npz, tmp_path, capsys, "'num_embeddings'", "twice")


def test_a_safetensors_key_given_twice_is_refused(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A header naming ``input_ids`` twice (the second's bytes never checked), a metadata key
    twice, and a metadata key that is also a tensor are each refused."""
    body = np.arange(8, dtype="<i8").tobytes()
    meta = json.dumps(META)
    twice = (f'{{"__metadata__": {meta}, "input_ids": {json.dumps(IDS)}, "input_ids": '
             '{"dtype": "I64", "shape": [4], "data_offsets": [32, 64]}}').encode()
    refused(_safetensors(tmp_path / "t1.safetensors", twice, body), tmp_path, capsys,
             "'input_ids'", "twice")
    meta_twice = (f'{{"__metadata__": {meta[:-1]}, "step": "7"}}, '
                  f'"input_ids": {json.dumps(IDS)}}}').encode()
    refused(_safetensors(tmp_path / "t2.safetensors", meta_twice, body[:32]), tmp_path,
             capsys, "'step'", "twice")
    both = {"__metadata__": {**META, "input_ids": "[1, 2]"}, "input_ids": IDS}
    refused(_safetensors(tmp_path / "t3.safetensors", both, body[:32]), tmp_path, capsys,
             "'input_ids'", "__metadata__")


def _dump_log(path: Path, dumps: int, requests: int) -> Path:
    """A log of ``dumps`` crash dumps, each scheduling ``requests`` requests."""
    batch = ", ".join(f"r{i}: 1" for i in range(requests))
    line = DUMP + f"SchedulerOutput(num_scheduled_tokens={{{batch}}})\n"
    path.write_text(line * dumps)
    return path


def test_crash_events_past_the_events_file_limit_are_refused_before_writing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A log whose crash dumps take more bytes than a capture's events file may hold is
    refused naming the log (it used to be written, then unreadable); nothing is left."""
    from forensics.store import guarded

    monkeypatch.setitem(guarded.LIMITS, "events file", 1 << 20)
    log = _dump_log(tmp_path / "dumps.log", 40, 3000)
    assert log.stat().st_size < guarded.LIMITS["log"]
    refused(log, tmp_path, capsys, "events", "split the log")
    small = _dump_log(tmp_path / "small.log", 2, 30)
    assert main(["import", str(small), "-o", str(tmp_path / "small.capture")]) == 0
    assert main(["inspect", str(tmp_path / "small.capture")]) == 0


def test_crash_events_of_several_logs_past_the_count_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two logs each under the capture's event count but over it together are refused, not
    written as a capture that cannot be opened."""
    from forensics.importers import logs
    from forensics.store import events

    monkeypatch.setattr(events, "MAX_EVENTS", 50)
    monkeypatch.setattr(logs, "MAX_EVENTS", 50)
    first, second = (_dump_log(tmp_path / f"{n}.log", 30, 1) for n in ("a", "b"))
    out = tmp_path / "out.capture"
    assert main(["import", str(first), str(second), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "50" in err and "a.log" in err, err
    assert not out.exists()


#: probe lines whose ``k=v`` pairs are engineered against the pair pattern (the length grows)
PAIR_LINES = {
    "one long word": lambda n: "a" * n,
    "words without a value": lambda n: "ab= " * (n // 4),
    "values without a digit": lambda n: "ab=-" * (n // 4),
}


@pytest.mark.parametrize("shape", list(PAIR_LINES))
def test_probe_line_pairs_parse_in_linear_time(tmp_path: Path, shape: str) -> None:
    """An ``OUT-PATH`` probe line 4x longer (16 KiB -> 64 KiB) costs under 6x the instructions
    (one long word among its pairs took 40 s for two 60 KiB lines: quadratic)."""
    assert make_work(shape, 100, tmp_path)().records[0].fields["x"] == 5  # parsed as measured
    assert_linear(scaling(__file__, dict.fromkeys(PAIR_LINES, 16_000), tmp_path)[shape])


def make_work(shape: str, size: int, scratch: Path) -> Callable[[], Any]:
    """Reading 12 ``OUT-PATH`` lines of ``shape`` and ``size`` (:mod:`tests.instructions`)."""
    from forensics.importers import logs

    line = ("OUT-PATH out-of-range sampled ids [1] (vocab_size=10 " + PAIR_LINES[shape](size)
            + " x=5)")
    path = scratch / f"pairs-{size}.log"
    path.write_text((line + "\n") * 12)
    return lambda: logs.read(path)


def test_a_zip_listing_many_members_is_refused_before_they_are_parsed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An ``.npz`` listing 40,000 empty members is refused from its end record: zipfile
    builds an object per listed member (a 1 GiB archive of them took gigabytes before the
    member count was checked), so the import's peak memory stays far below the listing's."""
    import tracemalloc

    path = tmp_path / "many.npz"
    with zipfile.ZipFile(path, "w") as archive:
        for i in range(40_000):
            archive.writestr(f"{i}.npy", b"")
    refused(path, tmp_path, capsys, "40000 members")
    tracemalloc.start()
    try:
        with pytest.raises(CaptureFormatError, match="40000 members"):
            read_source(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < path.stat().st_size // 4, f"peak {peak} bytes for {path.stat().st_size}"
