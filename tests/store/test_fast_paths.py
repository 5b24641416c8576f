"""The store's fast paths give what the checked paths give: bulk decoding of a batch, and
``append(record, validated=True)`` for trusted records."""

from __future__ import annotations

import filecmp
from pathlib import Path

import numpy as np

from forensics.simulator.runs import simulate
from forensics.simulator.scenarios import configure, manifest_for
from forensics.store.reader import load
from forensics.store.writer import write_capture

DATA = Path(__file__).resolve().parents[2] / "data"


def _same(a, b) -> bool:
    if (a.site, a.step, a.rank, a.summary, sorted(a.fields)) != \
            (b.site, b.step, b.rank, b.summary, sorted(b.fields)):
        return False
    for name, value in a.fields.items():
        other = b.fields[name]
        if isinstance(value, np.ndarray):
            if value.dtype != other.dtype or not np.array_equal(value, other):
                return False
        elif value != other:
            return False
    return True


def test_bulk_iteration_equals_row_by_row_decoding() -> None:
    for path in sorted(DATA.glob("*.capture")):
        capture = load(path)
        records = capture.records()
        bulk = list(records)
        assert len(bulk) == len(records)
        assert all(_same(bulk[i], records[i]) for i in range(len(records))), path.name


def test_trusted_append_writes_the_same_bytes(tmp_path: Path) -> None:
    trusted = simulate("stale-prev-row", steps=60, out=tmp_path / "a.capture")
    checked = write_capture(tmp_path / "b.capture", simulate("stale-prev-row", steps=60),
                            manifest_for(configure("stale-prev-row", steps=60), 0))
    segments = sorted(p.name for p in Path(trusted).iterdir() if ".arrows" in p.name)
    assert segments
    for name in segments:
        assert filecmp.cmp(Path(trusted) / name, Path(checked) / name, shallow=False), name


def test_release_keeps_decoded_records_and_later_reads_intact(tmp_path: Path) -> None:
    path = simulate("stale-prev-row", steps=30, out=tmp_path / "r.capture")
    capture = load(path)
    before = list(capture.records())
    copies = [{k: np.array(v, copy=True) if isinstance(v, np.ndarray) else v
               for k, v in r.fields.items()} for r in before]
    capture.release()  # the mapped pages leave the resident set; nothing is lost
    assert all(all(np.array_equal(r.fields[k], v) if isinstance(v, np.ndarray)
                   else r.fields[k] == v for k, v in c.items())
               for r, c in zip(before, copies, strict=True))
    again = list(capture.records())
    assert all(_same(a, b) for a, b in zip(before, again, strict=True))
    assert len(again) == len(capture)


def _tensor_column_row_by_row(values, dtype):
    """The tensor column as one record at a time would give it: (values, shape) per row."""
    rows = [None if v is None else (np.asarray(v).astype(dtype).ravel().tolist(),
                                    list(np.shape(v))) for v in values]
    return [None if r is None else r[0] for r in rows], [None if r is None else r[1] for r in rows]


def test_columnar_tensor_encoding_equals_row_by_row() -> None:
    from forensics.store.arrow_codec import encode_tensor

    big_endian = np.arange(5, dtype=">i4")
    cases = {
        "int32": [np.arange(3, dtype=np.int32), None, big_endian, np.zeros((2, 3), np.int32),
                  np.array(7, np.int32), np.zeros(0, np.int32), [1, 2]],
        "int64": [None, None],
        "uint8": [np.arange(4, dtype=np.uint8).reshape(2, 2), np.zeros((0, 2), np.uint8)],
        "int16": [np.array(3, np.int16), np.zeros((1, 1), np.int16)],  # 0-d next to 2-d
    }
    for dtype, values in cases.items():
        data, shapes = encode_tensor(values, dtype)
        data.validate(full=True)
        shapes.validate(full=True)
        assert str(data.type.value_type) == dtype
        assert (data.to_pylist(), shapes.to_pylist()) == _tensor_column_row_by_row(values, dtype)


def _batch_change_fields(rows: int = 2):
    i32 = np.int32
    return {"prev_positions": np.zeros(rows, np.int64), "valid_sampled_token_count":
            np.ones(4, i32), "num_computed_tokens": np.ones(8, i32),
            "num_accepted_tokens": np.ones(rows, i32), "prev_num_draft_tokens": np.ones(8, i32),
            "cpu_num_computed_tokens": np.ones(rows, i32)}


def test_typed_validation_cache_still_checks_every_record() -> None:
    """Typed records of one value signature skip the per-value checks after the first, never
    the step, rank and cross-field checks; another signature (a rank-2 tensor, an ndarray
    subclass) is checked in full."""
    import pytest

    from forensics.errors import CaptureFormatError
    from forensics.records import Record
    from forensics.validate import validate_record

    validate_record(Record("batch_change", 0, 0, _batch_change_fields()), "good", typed=True)
    short = _batch_change_fields()
    short["num_accepted_tokens"] = np.ones(3, np.int32)  # same signature, wrong row count
    with pytest.raises(CaptureFormatError, match="num_accepted_tokens"):
        validate_record(Record("batch_change", 1, 0, short), "short", typed=True)
    with pytest.raises(CaptureFormatError, match="step"):
        validate_record(Record("batch_change", -1, 0, _batch_change_fields()), "x", typed=True)
    flat = _batch_change_fields()
    flat["num_computed_tokens"] = np.ones((2, 4), np.int32)
    with pytest.raises(CaptureFormatError, match="num_computed_tokens"):
        validate_record(Record("batch_change", 2, 0, flat), "rank 2", typed=True)
    for _ in range(2):  # a subclass's rank is not in the signature: checked every time
        sub = _batch_change_fields()
        sub["num_computed_tokens"] = np.ones((2, 4), np.int32).view(np.matrix)
        with pytest.raises(CaptureFormatError, match="num_computed_tokens"):
            validate_record(Record("batch_change", 3, 0, sub), "matrix", typed=True)


def test_trusted_columns_follow_the_value_signature() -> None:
    from forensics.records import Record
    from forensics.store.arrow_codec import trusted_columns

    narrow = trusted_columns(Record("batch_change", 0, 0, _batch_change_fields()))
    wide_fields = _batch_change_fields()
    wide_fields["num_computed_tokens"] = np.ones(8, np.int64)
    wide = trusted_columns(Record("batch_change", 0, 0, wide_fields))
    assert narrow["num_computed_tokens"] == ("tensor", "int32")
    assert wide["num_computed_tokens"] == ("tensor", "int64")
    assert trusted_columns(Record("batch_change", 5, 1, _batch_change_fields())) is narrow


def test_releasing_pages_leaves_no_garbage_for_the_paused_collector() -> None:
    """The replay releases pages per chunk with the cyclic collector paused: a call must make
    no reference cycle (a ``ctypes.CDLL`` per call made one)."""
    import gc
    import mmap

    from forensics.store.segment import release_pages

    with mmap.mmap(-1, 1 << 16) as area:
        address = np.frombuffer(area, dtype=np.uint8).ctypes.data
        release_pages(address, 1 << 16)  # libc loaded once
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            for _ in range(20):
                release_pages(address, 1 << 16)
            gc.collect()
            garbage = list(gc.garbage)
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
    assert not garbage, [type(o) for o in garbage[:5]]
