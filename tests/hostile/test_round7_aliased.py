"""Hostile input, round 7 (T38c): a segment's record batch whose body buffers overlap (several
columns decoded from the same bytes) is refused before it is decoded. Zero-copy, aliasing costs
nothing; copied, each column costs the whole buffer again: a 15 MB segment of 16 tensor columns
sharing one 2,000,000-value buffer took ``Capture.to_frame`` to 1.4 GB (``to_arrow`` to 1.66 GB).
Arrow's writers lay a batch's buffers one after another, so no capture written holds one."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from forensics.errors import CaptureFormatError
from forensics.store import ipc_header
from tests.hostile.test_round7_compressed import _run

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"
CLEAN = DATA / "clean.capture"
SEGMENT = "embedding.r0.w0.0000.arrows"
COLUMNS, VALUES = 8, 200_000
_STRUCT = 16  # a FieldNode or a Buffer: two int64


def _vector(meta: memoryview, field: int) -> int:
    """Where the RecordBatch's vector ``field`` (1: nodes, 2: buffers) starts (its count)."""
    message = ipc_header._uoffset(meta, 0)
    batch = ipc_header._table_field(meta, message, ipc_header._HEADER)
    assert batch is not None
    vector = ipc_header._table_field(meta, batch, field)
    assert vector is not None
    return vector


def _aliased(tmp_path: Path) -> Path:
    """``clean.capture`` whose embedding segment holds one summary record with
    :data:`COLUMNS` tensor extras, every one's nodes and buffers pointing at the first's
    :data:`VALUES` int64 values (the file holds them once)."""
    capture = tmp_path / "aliased.capture"
    shutil.copytree(CLEAN, capture)
    path = capture / SEGMENT
    with pa.ipc.open_stream(path.read_bytes()) as reader:
        schema = reader.schema
    fields = [schema.field(n) for n in ("step", "rank", "summary", "num_embeddings")]
    arrays = [pa.array([1], pa.int64()), pa.array([0], pa.int64()), pa.array([True]),
              pa.array([10], pa.int64())]
    for name in ("min", "max"):
        fields.append(pa.field(name, pa.int64(), metadata={"kind": "int", "dtype": ""}))
        arrays.append(pa.array([3], pa.int64()))
    for k in range(COLUMNS):
        n = VALUES if k == 0 else 1
        fields += [pa.field(f"x{k}", pa.list_(pa.int64()),
                            metadata={"kind": "tensor", "dtype": "int64"}),
                   pa.field(f"x{k}.shape", pa.list_(pa.int64()),
                            metadata={"kind": "shape", "dtype": ""})]
        arrays += [pa.ListArray.from_arrays(pa.array([0, n], pa.int32()),
                                            pa.array(np.arange(n, dtype=np.int64))),
                   pa.array([[n]], pa.list_(pa.int64()))]
    wide = pa.schema(fields, metadata=schema.metadata)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, wide) as writer:
        writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=wide))
    data = bytearray(sink.getvalue().to_pybytes())
    reader = pa.BufferReader(pa.py_buffer(bytes(data)))
    pa.ipc.read_message(reader)
    start = reader.tell()
    length = struct.unpack_from("<i", data, start + 4)[0]
    meta = memoryview(data)[start + 8:start + 8 + length]
    # step, rank, summary, num_embeddings, min, max: a node and two buffers each; then per
    # extra, its values and shape: four nodes (two lists, two children), eight buffers
    for vector, first, per_column in ((_vector(meta, 1), 6, 4), (_vector(meta, 2), 12, 8)):
        source = vector + 4 + _STRUCT * first
        block = bytes(meta[source:source + _STRUCT * per_column])
        for k in range(1, COLUMNS):
            at = source + _STRUCT * per_column * k
            meta[at:at + len(block)] = block
    path.write_bytes(bytes(data))
    path.with_name(SEGMENT + ".idx").unlink()
    with pa.ipc.open_stream(path.read_bytes()) as decoded:  # pyarrow takes it whole
        batch = decoded.read_next_batch()
    batch.validate(full=True)
    assert all(len(batch.column(f"x{k}").values) == VALUES for k in range(COLUMNS))
    return capture


def test_a_batch_of_aliased_buffers_is_refused(tmp_path: Path) -> None:
    import forensics

    capture = _aliased(tmp_path)
    with pytest.raises(CaptureFormatError, match="overlapping the one before it"):
        forensics.load(capture).to_frame("embedding")
    status, err, _ = _run("inspect", str(capture))
    assert status == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and SEGMENT in lines[0] and "overlapping" in lines[0], err
    beside = forensics.open_many([capture, CLEAN], on_error="skip")["embedding"].to_table()
    assert beside.equals(forensics.open_many([CLEAN])["embedding"].to_table())


def _batch_headers(path: Path) -> list[bytes]:
    reader = pa.BufferReader(pa.py_buffer(path.read_bytes()))
    headers = []
    while reader.tell() < reader.size():
        try:
            message = pa.ipc.read_message(reader)
        except EOFError:  # the end-of-stream marker
            break
        if message.type == "record batch":
            headers.append(message.metadata.to_pybytes())
    return headers


def test_no_batch_a_writer_made_is_refused(tmp_path: Path) -> None:
    segments = sorted(DATA.glob("*.capture/*.arrows"))
    headers = [h for path in segments for h in _batch_headers(path)]
    assert len(headers) > 20
    assert all(ipc_header.overlapping_buffer(h) is None for h in headers)
    batch = pa.record_batch([pa.array([1, None, 3]), pa.array(["a", None, ""]),
                             pa.array([[], None, [[1, 2]]], pa.list_(pa.list_(pa.int64())))],
                            names=["i", "s", "r"])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
        writer.write_batch(batch.slice(1, 2))
    path = tmp_path / "nulls.arrows"
    path.write_bytes(sink.getvalue().to_pybytes())
    assert [ipc_header.overlapping_buffer(h) for h in _batch_headers(path)] == [None, None]
