"""Hostile input, round 7 (T38b): a segment's schema message is decoded only within a size. A
decoded schema takes many times its bytes and is held while its capture is open: a 29 MiB
segment whose ``forensics`` metadata text held 10 million empty JSON lists took ``forensics
inspect`` to 898 MB, one of 300,000 columns (64 MiB) to 531 MB, and 200 segments of 0.96 MB
schemas with other column names (188 MB on disk) to 1.33 GB. A segment's schema is refused
past 1 MiB, each distinct schema of a capture is decoded once, and the distinct ones take at
most 32 MiB together."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from forensics.errors import CaptureFormatError
from tests.hostile.test_round7_compressed import _run

ROOT = Path(__file__).resolve().parents[2]
CLEAN = ROOT / "data" / "clean.capture"
SEGMENT = "embedding.r0.w0.0000.arrows"


def _schema_of(path: Path) -> pa.Schema:
    with pa.ipc.open_stream(path.read_bytes()) as reader:
        return reader.schema


def _copy(tmp_path: Path, name: str) -> Path:
    capture = tmp_path / name
    shutil.copytree(CLEAN, capture)
    return capture


def _schema_bytes(schema: pa.Schema) -> bytes:
    """A segment holding only ``schema`` (no batch)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema):
        pass
    return sink.getvalue().to_pybytes()


def _wide(schema: pa.Schema, tag: str, columns: int) -> pa.Schema:
    """``schema`` with ``columns`` more ragged columns named after ``tag``."""
    extra = [pa.field(f"{tag}_{i}", pa.list_(pa.list_(pa.int64())),
                      metadata={"kind": "ragged", "dtype": ""}) for i in range(columns)]
    return pa.schema(list(schema) + extra, metadata=schema.metadata)


def _json_bomb(tmp_path: Path, lists: int) -> Path:
    """``clean.capture`` whose embedding segment's schema metadata (its 'forensics' text, the
    site and rank it reads) also holds ``lists`` empty JSON lists; its batches as they were."""
    capture = _copy(tmp_path, "schema-bomb.capture")
    path = capture / SEGMENT
    with pa.ipc.open_stream(path.read_bytes()) as reader:
        schema, batches = reader.schema, list(reader)
    info = json.loads(schema.metadata[b"forensics"])
    text = json.dumps(info)[:-1] + ', "x": [' + "[]," * (lists - 1) + "[]]}"
    bomb = schema.with_metadata({b"forensics": text.encode()})
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, bomb) as writer:
        for batch in batches:
            writer.write_batch(pa.RecordBatch.from_arrays(batch.columns, schema=bomb))
    path.with_name(SEGMENT + ".idx").unlink()
    return capture


def test_a_schema_past_its_size_is_refused_before_it_is_decoded(tmp_path: Path) -> None:
    from forensics.store.segment import MAX_SCHEMA_BYTES

    capture = _json_bomb(tmp_path, 4_000_000)  # 12 MB of text; 350 MB of lists once parsed
    assert (capture / SEGMENT).stat().st_size > 8 * MAX_SCHEMA_BYTES
    status, err, bomb_rss = _run("inspect", str(capture))
    assert status == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert SEGMENT in lines[0] and "schema message takes" in lines[0], err
    assert "delete it" in lines[0]
    clean_status, clean_err, clean_rss = _run("inspect", str(CLEAN))
    assert clean_status == 0, clean_err
    assert bomb_rss < 1.5 * clean_rss, (bomb_rss, clean_rss)


def test_a_schema_within_its_size_is_read_as_before(tmp_path: Path) -> None:
    import forensics

    capture = _json_bomb(tmp_path, 1000)
    assert len(forensics.load(capture)) == len(forensics.load(CLEAN))


def _segments(capture: Path, count: int, *, distinct: bool, columns: int) -> None:
    """Add ``count`` schema-only embedding segments to ``capture``: all of one schema, or each
    with its own column names."""
    schema = _schema_of(capture / SEGMENT)
    same = _schema_bytes(_wide(schema, "f", columns))
    for k in range(1, count + 1):
        data = _schema_bytes(_wide(schema, f"f{k}", columns)) if distinct else same
        (capture / f"embedding.r0.w0.{k:04d}.arrows").write_bytes(data)


def test_distinct_schemas_past_the_captures_budget_are_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import forensics
    from forensics.store import schemas

    capture = _copy(tmp_path, "schemas.capture")
    _segments(capture, 40, distinct=True, columns=200)  # about 45 KB each
    monkeypatch.setattr(schemas, "MAX_CAPTURE_SCHEMA_BYTES", 1 << 20)
    with pytest.raises(CaptureFormatError, match="distinct segment schemas past 1048576 bytes"):
        forensics.load(capture)
    beside = forensics.open_many([capture, CLEAN], on_error="skip")["embedding"].to_table()
    assert beside.equals(forensics.open_many([CLEAN])["embedding"].to_table())


def test_segments_of_one_schema_share_it_within_the_budget(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import forensics
    from forensics.store import schemas

    capture = _copy(tmp_path, "schemas.capture")
    _segments(capture, 40, distinct=False, columns=200)
    monkeypatch.setattr(schemas, "MAX_CAPTURE_SCHEMA_BYTES", 1 << 20)  # 40 copies: 1.8 MB
    opened = forensics.load(capture)
    wide = [s for s in opened._segments if s.site == "embedding" and s.seq > 0]
    assert len(wide) == 40
    assert all(s.schema is wide[0].schema for s in wide)
    assert len(opened) == len(forensics.load(CLEAN))


def test_the_writer_makes_no_schema_the_reader_refuses(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import forensics
    from forensics.records import Record
    from forensics.store import writer
    from forensics.store.writer import write_capture

    def summary(extras: int, width: int = 20) -> Record:
        fields = {"min": 0, "max": 3, "num_embeddings": 10,
                  **{f"extra_field_{i}".ljust(width, "_"): i for i in range(extras)}}
        return Record("embedding", 0, 0, fields, summary=True)

    # since T90c a summary record holds at most 23 names with site, step, rank and summary
    # (it held 100 and 9,000 here before), each of at most 128 characters: no record makes a
    # schema near the reader's 1 MiB, so the writer's check is shown at a lower limit
    write_capture(tmp_path / "fits.capture", [summary(16)])
    assert len(forensics.load(tmp_path / "fits.capture")) == 1
    monkeypatch.setattr(writer, "MAX_SCHEMA_BYTES", 2048)
    with pytest.raises(CaptureFormatError, match="past the 2048 a reader takes"):
        write_capture(tmp_path / "wide.capture", [summary(16, 128)])  # 16 names of 128
    assert not (tmp_path / "wide.capture").exists()
