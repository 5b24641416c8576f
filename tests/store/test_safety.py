"""Paths stay inside the capture; corrupt structures raise CaptureFormatError; big opens fast."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from store_helpers import embedding, valid_records

from forensics.errors import CaptureFormatError, UnsafeInputError
from forensics.store.index import IndexWriter
from forensics.store.reader import load
from forensics.store.writer import CaptureWriter, _SegmentFile, write_capture
from tests.instructions import instructions


@pytest.fixture
def capture(tmp_path: Path) -> Path:
    return write_capture(tmp_path / "s.capture", valid_records())


def _manifest(capture: Path, **entries: object) -> None:
    data = json.loads((capture / "manifest.json").read_text())
    data.update(entries)
    (capture / "manifest.json").write_text(json.dumps(data))


@pytest.mark.parametrize("entry", ["../outside.txt", "/etc/passwd", "a/../../x", ""])
def test_manifest_paths_leaving_the_capture_are_refused(capture: Path, entry: str) -> None:
    _manifest(capture, attachments=[entry])
    with pytest.raises(UnsafeInputError):
        load(capture)


def test_manifest_path_inside_is_accepted(capture: Path) -> None:
    (capture / "notes.txt").write_text("ok")
    _manifest(capture, attachments=["notes.txt"])
    assert load(capture).manifest["attachments"] == ["notes.txt"]


def test_symlinked_segment_pointing_out_is_refused(capture: Path, tmp_path: Path) -> None:
    segment = sorted(capture.glob("*.arrows"))[0]
    outside = tmp_path / "elsewhere.arrows"
    segment.rename(outside)
    segment.symlink_to(outside)
    with pytest.raises(UnsafeInputError, match="outside the capture"):
        load(capture)


def test_symlinked_manifest_pointing_out_is_refused(capture: Path, tmp_path: Path) -> None:
    (capture / "manifest.json").rename(tmp_path / "m.json")
    (capture / "manifest.json").symlink_to(tmp_path / "m.json")
    with pytest.raises(UnsafeInputError):
        load(capture)


def test_non_segment_files_are_ignored(capture: Path) -> None:
    for name in ("README", "x.arrows", "embedding.r0.p.0.arrows.bak", "../weird", "a.r0.b.c"):
        if "/" not in name:
            (capture / name).write_bytes(b"\x00garbage")
    (capture / "subdir.arrows").mkdir()
    assert len(load(capture)) == len(valid_records())


@pytest.mark.parametrize("text", ["", "[]", "{", '{"format": 99}', '{"format": "1"}',
                                  "\xff\xfe", "[" * 100000])
def test_bad_manifests_raise_capture_format_error(capture: Path, text: str) -> None:
    (capture / "manifest.json").write_text(text, errors="surrogateescape")
    with pytest.raises(CaptureFormatError):
        load(capture)


def test_missing_manifest_and_missing_dir(tmp_path: Path, capture: Path) -> None:
    with pytest.raises(CaptureFormatError, match="does not exist"):
        load(tmp_path / "nope.capture")
    (capture / "manifest.json").unlink()
    with pytest.raises(CaptureFormatError, match="no manifest.json"):
        load(capture)


def test_index_that_disagrees_with_the_segment_raises(capture: Path) -> None:
    index = sorted(capture.glob("*.idx"))[0]
    data = bytearray(index.read_bytes())
    data[8:16] = (12345).to_bytes(8, "little")
    index.write_bytes(bytes(data))
    with pytest.raises(CaptureFormatError, match="index entry 0"):
        load(capture)


def test_index_rows_lie_is_caught_when_the_batch_is_used(capture: Path) -> None:
    index = sorted(capture.glob("*.idx"))[0]
    data = bytearray(index.read_bytes())
    data[8 + 16:8 + 24] = (2).to_bytes(8, "little")  # claims 2 rows, batch holds 1
    index.write_bytes(bytes(data))
    loaded = load(capture)
    with pytest.raises(CaptureFormatError, match="does not match its index entry"):
        list(loaded)


def test_a_header_claiming_a_huge_length_is_not_allocated(capture: Path) -> None:
    segment = sorted(capture.glob("*.arrows"))[0]
    data = bytearray(segment.read_bytes())
    data[4:8] = (2**31 - 1).to_bytes(4, "little")
    segment.write_bytes(bytes(data))
    (segment.with_name(segment.name + ".idx")).unlink()
    # nothing allocated, and its records are not dropped silently: an error naming it
    with pytest.raises(CaptureFormatError, match=f"{segment.name}.*claims 2147483647 bytes"):
        load(capture)


def test_a_schema_cut_short_by_a_crash_is_truncated_not_an_error(capture: Path) -> None:
    segment = sorted(capture.glob("*.arrows"))[0]
    schema_length = int.from_bytes(segment.read_bytes()[4:8], "little")
    segment.write_bytes(segment.read_bytes()[: 8 + schema_length // 2])
    index = segment.with_name(segment.name + ".idx")
    index.write_bytes(index.read_bytes()[:8])  # the index held only its magic then
    assert load(capture).truncated == [segment.name]


def _indexed_capture(path: Path, batches: int) -> Path:
    """A capture of 4 segments (ranks 0-3), each of ``batches`` indexed batches of 1,000
    records."""
    CaptureWriter(path, process="big").close()
    for rank in range(4):
        seg = _SegmentFile(path, "embedding", rank, "big", {"input_ids": ("tensor", "int32"),
                                                             "num_embeddings": ("int", "")})
        payload = _batch_bytes(seg, [embedding(0, rank, size=2) for _ in range(1000)])
        for b in range(batches):
            _append_raw(seg, payload, b)
        seg.close()
    return path


def test_million_record_capture_opens_fast(tmp_path: Path) -> None:
    """1,000,000 records in 1,000 batches of 4 segments: opening and ``summary()`` read the
    index, not the records: 83 times the records cost under 10 times the instructions of
    12,000 (counted by callgrind: :mod:`tests.instructions`)."""
    _indexed_capture(tmp_path / "3.capture", 3)
    path = _indexed_capture(tmp_path / "250.capture", 250)
    small, big = instructions(__file__, [("open", 3), ("open", 250)], tmp_path)
    print(f"open + summary(): {small:,} instructions for 12,000 records, {big:,} for 1,000,000")
    assert big < 10 * small, (small, big)
    capture = load(path)
    summary = capture.summary()
    assert summary["records"] == 1_000_000 and summary["steps"] == [0, 0]
    assert summary["ranks"] == [0, 1, 2, 3] and summary["segments"] == 4
    assert capture.records(rank=3)[999_999 // 4].rank == 3


def make_work(case: str, batches: int, scratch: Path) -> Callable[[], object]:
    """Opening the capture of ``batches`` batches and its summary (:mod:`tests.instructions`)."""
    return lambda: load(scratch / f"{batches}.capture").summary()


def _batch_bytes(seg: _SegmentFile, records: list) -> bytes:
    from forensics.store.arrow_codec import encode_batch

    return encode_batch(records, seg.schema).serialize().to_pybytes()


def _append_raw(seg: _SegmentFile, payload: bytes, _b: int) -> None:
    """The same 1,000-record batch (all at step 0) appended again, with its index entry."""
    pos = os.fstat(seg.fd).st_size
    os.write(seg.fd, payload)
    seg.index.append(pos, len(payload), 1000, 0, 0)


def test_index_writer_is_exclusive(tmp_path: Path) -> None:
    IndexWriter(tmp_path / "a.idx").close()
    with pytest.raises(FileExistsError):
        IndexWriter(tmp_path / "a.idx")
    assert np.frombuffer((tmp_path / "a.idx").read_bytes(), np.uint8).size == 8


def test_a_column_is_fully_validated_when_first_read(tmp_path: Path) -> None:
    """Batches get the structural check on decode and each column the full one on first use:
    a bad UTF-8 request id leaves the integer columns readable (the scan) and is caught, naming
    the column, as soon as the records are decoded."""
    from forensics.judge.scan import scan

    path = write_capture(tmp_path / "u.capture", [embedding(2, req="rqZQ")])
    segment = next(path.glob("embedding*.arrows"))
    data = segment.read_bytes()
    assert data.count(b"rqZQ") == 1
    segment.write_bytes(data.replace(b"rqZQ", b"rq\xff\xfe"))
    assert scan(load(path)).entries[("embedding", "input_ids")].checked == 8
    with pytest.raises(CaptureFormatError, match="column 'req_ids' is malformed"):
        list(load(path))
