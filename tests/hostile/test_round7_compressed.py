"""Hostile input, round 7 (T38a): a segment's record batch whose body is compressed (Arrow IPC
``ZSTD`` or ``LZ4_FRAME``) is refused before it is decoded. pyarrow decompresses a body to
whatever its buffers claim: a 39 KiB segment holding one zstd batch of 300 million zeros took
``forensics inspect`` to 1.26 GB of memory. The probe never writes a compressed batch."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from forensics.store.ipc_header import compression_of

ROOT = Path(__file__).resolve().parents[2]
CLEAN = ROOT / "data" / "clean.capture"
SEGMENT = "embedding.r0.w0.0000.arrows"
#: int32 zeros in the bomb's one row: 256 MiB once decoded, a few KiB compressed
BOMB_VALUES = 64 << 20


def _bomb(tmp_path: Path, codec: str, *, keep_index: bool) -> Path:
    """``clean.capture`` with its embedding segment replaced by one ``codec``-compressed batch
    whose one row holds :data:`BOMB_VALUES` input ids (and, with ``keep_index``, an index
    naming that batch, so it is decoded only when read, not when the segment is opened)."""
    capture = tmp_path / f"bomb-{codec}.capture"
    shutil.copytree(CLEAN, capture)
    path = capture / SEGMENT
    with pa.ipc.open_stream(path.read_bytes()) as reader:
        schema = reader.schema
    n = BOMB_VALUES
    columns = {
        "step": pa.array([0], pa.int64()), "rank": pa.array([0], pa.int64()),
        "summary": pa.array([False]),
        "input_ids": pa.ListArray.from_arrays(pa.array([0, n], pa.int32()),
                                              pa.array(np.zeros(n, np.int32))),
        "input_ids.shape": pa.array([[n]], pa.list_(pa.int64())),
        "num_embeddings": pa.array([100], pa.int64()),
        "req_ids": pa.array([["a"]], pa.list_(pa.string())),
        "cu_num_tokens": pa.array([[n]], pa.list_(pa.int32())),
        "cu_num_tokens.shape": pa.array([[1]], pa.list_(pa.int64()))}
    batch = pa.RecordBatch.from_arrays([columns[f.name] for f in schema], schema=schema)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(
            sink, schema, options=pa.ipc.IpcWriteOptions(compression=codec)) as writer:
        writer.write_batch(batch)
    index = path.with_name(path.name + ".idx")
    index.unlink()
    if keep_index:
        _index_one_batch(path, index)
    assert path.stat().st_size < 2 << 20  # 256 MiB claimed: lz4 holds it in about 1 MiB
    return capture


def _index_one_batch(path: Path, index: Path) -> None:
    """Write the ``.idx`` sidecar of ``path``'s one batch (1 row, steps 0..0)."""
    from forensics.store.index import IndexWriter

    data = pa.py_buffer(path.read_bytes())
    reader = pa.BufferReader(data)
    assert pa.ipc.read_message(reader).type == "schema"
    start = reader.tell()
    assert pa.ipc.read_message(reader).type == "record batch"
    writer = IndexWriter(index)
    writer.append(start, reader.tell() - start, 1, 0, 0)
    writer.close()


def _run(*args: str) -> tuple[int, str, int]:
    """``forensics ARGS`` in a child: its exit status, its stderr, its peak memory (KiB)."""
    code = ("import resource, sys\nfrom forensics.cli import main\n"
            "try:\n    status = main(sys.argv[1:])\nexcept SystemExit as exc:\n"
            "    status = exc.code\n"
            "peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            "sys.stderr.write('\\nmaxrss=%d' % peak)\n"
            "sys.exit(status)\n")
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    err, _, rss = done.stderr.rpartition("\nmaxrss=")
    return done.returncode, err, int(rss)


@pytest.fixture(scope="module")
def clean_rss() -> int:
    """The peak memory (KiB) of replaying ``clean.capture`` itself."""
    status, err, rss = _run("replay", str(CLEAN))
    assert status == 0, err
    return rss


@pytest.mark.parametrize("keep_index", [False, True], ids=["scanned", "indexed"])
@pytest.mark.parametrize("codec", ["zstd", "lz4"])
def test_a_compressed_batch_is_refused_before_it_is_decoded(
        tmp_path: Path, codec: str, keep_index: bool, clean_rss: int) -> None:
    capture = _bomb(tmp_path, codec, keep_index=keep_index)
    status, err, bomb_rss = _run("replay", str(capture))
    assert status == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert SEGMENT in lines[0] and "is compressed" in lines[0]
    assert ("ZSTD" if codec == "zstd" else "LZ4_FRAME") in lines[0]
    # decoded, the bomb's row alone is 256 MiB: refused first, the peak is the clean one's
    assert bomb_rss < 1.5 * clean_rss, (bomb_rss, clean_rss)


def test_open_many_skips_a_capture_with_a_compressed_batch(tmp_path: Path) -> None:
    import forensics
    from forensics.errors import CaptureFormatError

    bomb = _bomb(tmp_path, "zstd", keep_index=False)
    with pytest.raises(CaptureFormatError, match="is compressed"):
        forensics.open_many([bomb])
    alone = forensics.open_many([CLEAN])["embedding"].to_table()
    beside = forensics.open_many([bomb, CLEAN], on_error="skip")["embedding"].to_table()
    assert beside.equals(alone)


def _messages(codec: str | None) -> list[pa.ipc.Message]:
    batch = pa.record_batch([pa.array(np.arange(64)), pa.array([json.dumps(i) for i in
                                                                range(64)])], names=["x", "s"])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema,
                           options=pa.ipc.IpcWriteOptions(compression=codec)) as writer:
        writer.write_batch(batch)
    reader = pa.BufferReader(sink.getvalue())
    return [pa.ipc.read_message(reader), pa.ipc.read_message(reader)]


@pytest.mark.parametrize("codec,named", [(None, None), ("zstd", "ZSTD"), ("lz4", "LZ4_FRAME")])
def test_the_header_reader_agrees_with_pyarrows_writer(codec: str | None,
                                                       named: str | None) -> None:
    schema, batch = _messages(codec)
    assert (schema.type, batch.type) == ("schema", "record batch")
    assert compression_of(schema.metadata.to_pybytes()) is None
    assert compression_of(batch.metadata.to_pybytes()) == named


def test_a_malformed_header_is_a_value_error_and_never_read_outside() -> None:
    """Random corruptions of a real header: each gives an answer or ValueError, nothing else
    (no IndexError, no struct.error, no read past the bytes)."""
    header = _messages("zstd")[1].metadata.to_pybytes()
    rng = random.Random(38)
    refused = 0
    for _ in range(5000):
        corrupt = bytearray(header[:rng.randrange(len(header) + 1)])
        for _ in range(rng.randint(0, 4)):
            if corrupt:
                corrupt[rng.randrange(len(corrupt))] = rng.randrange(256)
        try:
            assert compression_of(bytes(corrupt)) in (None, "ZSTD", "LZ4_FRAME") or \
                compression_of(bytes(corrupt)).startswith("codec ")  # type: ignore[union-attr]
        except ValueError:
            refused += 1
    assert refused > 0
