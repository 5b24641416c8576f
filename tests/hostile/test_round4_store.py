"""Round 4 attack on the capture store's guarded reader and on what ``report``, ``summary`` and
``inspect`` write from a capture (issue 38's standard; T5, T6, T10, T14, T17 of
docs/threat-model.md): each test is a defect this attack found, failing before its fix."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from test_round2 import run_cli

import forensics
from forensics.errors import CaptureFormatError
from forensics.records import Record
from forensics.store.index import ENTRY
from forensics.store.writer import write_capture

CONTINUATION = (0xFFFFFFFF).to_bytes(4, "little")


def embedding(steps: int = 3) -> list[Record]:
    """Small valid embedding records."""
    return [Record("embedding", s, 0, {"input_ids": np.arange(4, dtype=np.int32),
                                       "num_embeddings": 10}) for s in range(steps)]


# ------------------------------ 1. a sparse hole behind a planted message head holds no rows


def test_a_planted_head_over_a_sparse_hole_claims_no_rows(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Round 3 refused an index entry pointing into a hole by looking for an Arrow message
    head at its offset; 8 planted bytes (a continuation marker and a metadata length) passed
    that check, and a 12 KiB capture claimed 134 million records (``inspect`` printed them,
    ``replay`` and ``summary`` grew to gigabytes before 'out of memory'). The rows a segment
    claims are now held to the bytes it stores."""
    capture = write_capture(tmp_path / "sparse.capture", embedding())
    segment = next(capture.glob("*.arrows"))
    index = segment.with_name(segment.name + ".idx")
    last = np.fromfile(index, dtype=ENTRY, offset=8)[-1]
    tail = int(last["offset"] + last["length"])
    hole = 2 << 30
    with open(segment, "r+b") as handle:
        handle.seek(tail)
        handle.write(CONTINUATION + (100).to_bytes(4, "little"))
    os.truncate(segment, tail + hole)
    with open(index, "ab") as handle:
        handle.write(np.array([(tail, hole, hole // 16, 5, 5)], dtype=ENTRY).tobytes())
    assert os.stat(segment).st_blocks * 512 < 1 << 20  # sparse: nothing stored in the hole
    code, out, err = run_cli(capsys, "inspect", capture)
    assert code == 2, out
    assert len(err.strip().splitlines()) == 1, err
    assert segment.name in err and "stores only" in err and "134217731" in err, err
    import forensics

    with pytest.raises(CaptureFormatError, match="sparse"):
        forensics.load(capture)


# ------------------------------------ 2. what a capture's events make a reader hold is bounded


def test_events_of_empty_lists_are_refused_before_they_fill_memory(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each line under the 1 MiB line cap, each file under the 64 MiB file cap and the events
    under the 200,000-event cap, lines of empty lists (2 bytes read, 64 held each) made a
    57 MiB events file hold 1.4 GB in ``inspect`` (and files are not counted: ten were 14 GB).
    The lists and objects of a capture's events are now counted before each line is parsed
    and refused past MAX_CONTAINERS (8 million; 600,000 here, for a cheap test), in one line
    naming the file and the line; the events below the cap are read."""
    from forensics.store import events

    monkeypatch.setattr(events, "MAX_CONTAINERS", 600_000)
    capture = write_capture(tmp_path / "ev.capture", embedding())
    line = b'{"kind": "x", "a": [' + b"[]," * 99_999 + b"[]]}\n"  # 100,001 containers
    (capture / "events-w8.jsonl").write_bytes(line * 5)
    assert len(forensics.load(capture).events) == 5
    lines = 6
    (capture / "events-w9.jsonl").write_bytes(line * lines)
    MAX_CONTAINERS = events.MAX_CONTAINERS
    code, out, err = run_cli(capsys, "inspect", capture)
    assert code == 2, out[:200]
    assert len(err.strip().splitlines()) == 1, err
    assert "events-w9.jsonl' line 1:" in err and str(MAX_CONTAINERS) in err, err


@pytest.mark.parametrize("name", ["manifest.json", "expected.json"])
def test_a_manifest_of_empty_lists_is_refused_before_it_is_parsed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    """A 15 MB manifest (under its 16 MiB cap) of five million empty lists made ``inspect``
    hold 450 MB (each capture of a triage holds its manifest); the lists and objects of a
    manifest or expected.json are now counted before it is parsed."""
    from forensics.store.manifest import MAX_CONTAINERS

    capture = write_capture(tmp_path / "m.capture", embedding())
    body = b'{"format": 1, "x": [' + b"[]," * MAX_CONTAINERS + b"[]]}"
    (capture / name).write_bytes(body)
    code, out, err = run_cli(capsys, "check" if name == "expected.json" else "inspect",
                             capture)
    assert code == 2, out[:200]
    assert len(err.strip().splitlines()) == 1, err
    assert name in err and f"past {MAX_CONTAINERS}" in err, err


# ---------------------- 3. a segment file is read by its own name, never as another file's


@pytest.mark.parametrize("alias", ["embedding.r00.w0.0000.arrows",
                                   "embedding.r0.w0.00000.arrows"])
def test_a_segment_named_like_another_is_refused_by_its_own_name(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], alias: str) -> None:
    """A segment named with extra leading zeros parsed as the writer's name of the same site,
    rank, process and sequence and was opened under that name: beside the real file, the real
    file was read twice and the refusal said to delete 'the copy', naming the real file twice
    (the alias, holding other records, was never read); alone, it was 'No such file' naming a
    file that is not there. It is now refused under its own name."""
    capture = write_capture(tmp_path / "a.capture", embedding(3))
    other = write_capture(tmp_path / "b.capture", embedding(5))
    source = next(other.glob("*.arrows"))
    os.rename(source, capture / alias)
    os.rename(f"{source}.idx", capture / f"{alias}.idx")
    code, out, err = run_cli(capsys, "inspect", capture)
    assert code == 2, out
    assert len(err.strip().splitlines()) == 1, err
    assert f"segment file '{alias}'" in err and "embedding.r0.w0.0000.arrows'" in err, err
    assert "same batches" not in err and "No such file" not in err, err


# ------------------------------------ 4. an open capture holds no descriptor per segment


def test_an_open_capture_holds_no_descriptor_per_segment(tmp_path: Path) -> None:
    """Each segment's memory map kept a duplicate descriptor (Python's ``mmap``): under the
    usual limit of 1024 open files a capture of about a thousand segments (``inspect`` is
    asked to open 2,000 in under 2 s) failed with 'Too many open files'. A segment's map now
    keeps none."""
    import forensics

    records = [Record("embedding", 0, rank, {"input_ids": np.arange(4, dtype=np.int32),
                                             "num_embeddings": 10}) for rank in range(64)]
    path = write_capture(tmp_path / "many.capture", records)
    before = len(os.listdir("/proc/self/fd"))
    capture = forensics.load(path)
    assert len(capture.segments) == 64 and len(capture) == 64
    assert len(os.listdir("/proc/self/fd")) - before < 8
    assert [r.rank for r in capture.records()] == list(range(64))


# ------------------- 5. checking a sparse segment reads none of its holes (a hole read is held)


def peak_growth(action: object) -> int:
    """Bytes the process's peak resident set grew by while ``action()`` ran (Linux: the peak
    is reset through ``/proc/self/clear_refs`` first)."""
    def hwm() -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmHWM")

    Path("/proc/self/clear_refs").write_text("5")
    before = hwm()
    action()  # type: ignore[operator]
    return hwm() - before


def test_an_index_of_many_entries_over_a_hole_reads_none_of_it(tmp_path: Path) -> None:
    """An index of 20,000 entries (800 KB) over a 5 GB hole made ``inspect`` read a head in
    each entry's page of the hole (each a page of zeros held, with read-around: 5 GB resident,
    from 12 KiB stored); the index is now capped by the bytes the segment stores, and a head is
    looked for only where the file stores data."""
    import forensics
    from forensics.store.index import MAGIC

    capture = write_capture(tmp_path / "s.capture", embedding(1))
    segment = next(capture.glob("*.arrows"))
    index = segment.with_name(segment.name + ".idx")
    start = int(np.fromfile(index, dtype=ENTRY, offset=8)[0]["offset"])
    count, length = 2000, 1 << 18
    os.truncate(segment, start + count * length)
    entries = np.zeros(count, dtype=ENTRY)
    entries["offset"] = start + np.arange(count) * length
    entries["length"], entries["rows"] = length, 1
    index.write_bytes(MAGIC + entries.tobytes())

    def load() -> None:
        with pytest.raises(CaptureFormatError, match="segment index .* bytes it may hold"):
            forensics.load(capture)

    assert peak_growth(load) < 64 << 20


def test_a_scanned_batch_over_a_hole_is_refused_before_its_columns_are_read(
        tmp_path: Path) -> None:
    """Without an index, a planted batch head claiming a million rows whose body is a 32 MB
    hole was decoded and its columns read (their zero pages held: 955 MB for 50 million)
    before the segment's claimed rows were held to its stored bytes; each batch is now checked
    against the bytes its own range stores before a column is read."""
    import pyarrow as pa

    import forensics

    capture = write_capture(tmp_path / "s.capture", embedding(1))
    segment = next(capture.glob("*.arrows"))
    index = segment.with_name(segment.name + ".idx")
    tail = int(sum(np.fromfile(index, dtype=ENTRY, offset=8)[0][["offset", "length"]]
                   .tolist()))
    schema = pa.ipc.open_stream(segment.read_bytes()).schema
    rows = 1_000_000
    columns = [pa.array(np.zeros(rows, np.int64)) if f.name in ("step", "rank")
               else pa.array(np.zeros(rows, bool)) if f.name == "summary"
               else pa.nulls(rows, f.type) for f in schema]
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        writer.write_batch(pa.RecordBatch.from_arrays(columns, schema=schema))
    stream = sink.getvalue()
    message = stream.slice(8 + int.from_bytes(stream.slice(4, 4).to_pybytes(), "little"))
    head = message.slice(0, 8 + int.from_bytes(message.slice(4, 4).to_pybytes(), "little"))
    with open(segment, "r+b") as handle:
        handle.seek(tail)
        handle.write(head.to_pybytes())
    os.truncate(segment, tail + message.size - 8)  # the body a hole; no end-of-stream
    index.unlink()
    assert os.stat(segment).st_blocks * 512 < 1 << 20

    def load() -> None:
        with pytest.raises(CaptureFormatError, match=f"record batch at byte {tail} claims "
                                                     f"{rows} records"):
            forensics.load(capture)

    assert peak_growth(load) < 4 << 20


# ------------------------ 6. releasing pages per chunk is linear in a capture's segments


def test_releasing_per_chunk_touches_only_the_segments_in_use(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The replay releases the capture's mapped pages after every chunk, and the capture
    released every segment each time: chunks times segments ``madvise`` calls, quadratic in
    the segments (3,200 one-rank segments: replay 66 s, summary 70 s, where 800 took 4 s).
    Only the segments in use since the last release are released now."""
    import forensics
    from forensics.store import segment

    records = [Record("embedding", step, rank, {"input_ids": np.arange(4, dtype=np.int32),
                                                "num_embeddings": 10})
               for rank in range(200) for step in range(2)]
    capture = forensics.load(write_capture(tmp_path / "ranks.capture", records))
    calls = []
    real = segment.release_pages
    monkeypatch.setattr(segment, "release_pages",
                        lambda address, size: (calls.append(size), real(address, size)))
    chunks = 0
    for view, start, stop, _ in capture.chunks(4096):
        assert view.steps[start:stop].tolist() == [0, 1]
        capture.release()
        chunks += 1
    assert chunks == 200
    assert len(calls) <= chunks + len(capture.segments), len(calls)
