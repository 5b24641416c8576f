"""Write, load, equal: records of every site, every integer width, summary records."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_helpers import INT_DTYPES, any_record, assert_records_equal, embedding

import forensics
from forensics.errors import CaptureFormatError, OutputExistsError, UnknownSiteError
from forensics.records import Record
from forensics.sites import REGISTRY, SITES, pipeline_key
from forensics.store.reader import load
from forensics.store.writer import CaptureWriter, write_capture


@pytest.fixture(scope="module", autouse=True)
def schema_only() -> Iterator[None]:
    """Round trips test the store, not the sites' consistency rules: random records only need
    to satisfy the field schema, so each site's ``check_record`` (and its columnar form
    ``check_batch``) is set aside here."""
    sites = [REGISTRY.get(name) for name in SITES]
    for site in sites:
        REGISTRY.register(site.name, replace(site, check_record=None, check_batch=None))
    try:
        yield
    finally:
        for site in sites:
            REGISTRY.register(site.name, site)


def roundtrip(records: list[Record]) -> list[Record]:
    with tempfile.TemporaryDirectory() as tmp:
        path = write_capture(Path(tmp) / "rt.capture", [_copy(r) for r in records])
        capture = load(path)
        assert len(capture) == len(records)
        return [_copy(r) for r in capture]


def _call(record: Record) -> tuple[str, int, int]:
    """One call of a site per step and rank: two byte-identical segments (the same records
    written twice) are refused by the reader as a copied file."""
    return record.site, record.step, record.rank


def _copy(record: Record) -> Record:
    fields = {k: (np.array(v) if isinstance(v, np.ndarray) else v) for k, v in
              record.fields.items()}
    return Record(record.site, record.step, record.rank, fields, record.summary)


@pytest.mark.parametrize("site", SITES)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_roundtrip_every_site(site: str, data: st.DataObject) -> None:
    records = data.draw(st.lists(any_record(site), min_size=1, max_size=5, unique_by=_call))
    back = roundtrip(records)
    expected = sorted(records, key=pipeline_key)
    for i, (a, b) in enumerate(zip(expected, back, strict=True)):
        assert_records_equal(a, b, f"record {i}")


@settings(max_examples=10, deadline=None)
@given(st.lists(st.sampled_from(SITES).flatmap(any_record), min_size=1, max_size=8,
                unique_by=_call))
def test_roundtrip_mixed_sites_in_pipeline_order(records: list[Record]) -> None:
    back = roundtrip(records)
    for i, (a, b) in enumerate(zip(sorted(records, key=pipeline_key), back, strict=True)):
        assert_records_equal(a, b, f"record {i}")


@settings(max_examples=10, deadline=None)
@given(st.lists(st.sampled_from(SITES).flatmap(any_record), min_size=1, max_size=12,
                unique_by=_call), st.integers(1, 3))
def test_chunks_place_each_stored_row_where_records_has_it(records: list[Record],
                                                           size: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        capture = load(write_capture(Path(tmp) / "ch.capture", [_copy(r) for r in records]))
        ordered = capture.records()
        placed = []
        for view, start, stop, positions in capture.chunks(size):
            assert 0 < stop - start <= size and len(positions) == stop - start
            for row, position in zip(range(start, stop), positions.tolist(), strict=True):
                assert_records_equal(view.record(row), ordered[position], f"row {row}")
            placed += positions.tolist()
        assert sorted(placed) == list(range(len(records)))


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_width_is_kept(tmp_path: Path, dtype: str) -> None:
    info = np.iinfo(dtype)
    ids = np.array([info.min, 0, info.max], dtype=dtype)
    write_capture(tmp_path / "w.capture", [Record("embedding", 0, 0, {"input_ids": ids,
                                                                       "num_embeddings": 3})])
    (back,) = list(load(tmp_path / "w.capture"))
    assert back["input_ids"].dtype == np.dtype(dtype)
    assert back["input_ids"].tolist() == ids.tolist()


def test_width_change_opens_a_new_segment_and_keeps_order(tmp_path: Path) -> None:
    records = [embedding(0), embedding(1), embedding(2)]
    records[1].fields["input_ids"] = records[1]["input_ids"].astype(np.int64)
    write_capture(tmp_path / "c.capture", records)
    capture = load(tmp_path / "c.capture")
    assert len(capture.segments) == 3
    assert [r["input_ids"].dtype for r in capture] == [np.int32, np.int64, np.int32]
    assert capture.steps == [0, 1, 2]


def test_tensors_are_zero_copy_read_only_views(tmp_path: Path) -> None:
    write_capture(tmp_path / "z.capture", [embedding(0, size=1000)])
    (record,) = list(load(tmp_path / "z.capture"))
    ids = record["input_ids"]
    assert not ids.flags.owndata and not ids.flags.writeable
    tensor = record.tensor("input_ids")
    assert tensor.data_ptr() == ids.ctypes.data
    assert tensor.tolist() == list(range(1000))


def test_records_filters_and_properties(tmp_path: Path) -> None:
    records = [embedding(s, rank=s % 2) for s in range(10)]
    records.append(Record("async_output", 3, 0, {"min": 5, "max": 9, "vocab_size": 9},
                          summary=True))
    write_capture(tmp_path / "f.capture", records)
    capture = forensics.load(tmp_path / "f.capture")
    assert isinstance(capture, forensics.Capture)
    assert capture.sites == ["async_output", "embedding"]
    assert capture.ranks == [0, 1] and capture.steps == list(range(10))
    assert [r.step for r in capture.records(site="embedding", steps=range(2, 8, 2))] == [2, 4, 6]
    assert [r.step for r in capture.records(rank=1)] == [1, 3, 5, 7, 9]
    assert [r.site for r in capture.records(steps=3)] == ["async_output", "embedding"]
    assert capture.records(steps=[4, 9])[1].step == 9
    with pytest.raises(UnknownSiteError):
        capture.records(site="nope")
    summary = capture.summary()
    assert summary["records"] == 11 and summary["sites"] == {"async_output": 1, "embedding": 10}
    assert summary["steps"] == [0, 9] and summary["ranks"] == [0, 1]
    assert summary["truncated"] is False and summary["segments"] == 3


def test_to_frame_columns(tmp_path: Path) -> None:
    records = [embedding(s, size=s + 1) for s in range(4)]
    records.append(Record("embedding", 9, 0, {"min": 0, "max": 7, "num_embeddings": 7},
                          summary=True))
    write_capture(tmp_path / "t.capture", records)
    frame = load(tmp_path / "t.capture").to_frame("embedding")
    assert list(frame.columns[:3]) == ["step", "rank", "summary"]
    assert frame["input_ids_len"].tolist()[:4] == [1, 2, 3, 4]
    assert frame["summary"].tolist() == [False] * 4 + [True]
    assert frame["max"].iloc[4] == 7 and frame["num_embeddings"].iloc[0] == 1000
    empty = load(tmp_path / "t.capture").to_frame("batch_change")
    assert len(empty) == 0 and "prev_positions_len" in empty.columns


def test_opening_does_not_touch_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_capture(tmp_path / "l.capture", [embedding(s) for s in range(100)])
    from forensics.store.segment import Segment

    def refuse(self: Segment, i: int) -> None:
        raise AssertionError("a batch was decoded while opening")

    monkeypatch.setattr(Segment, "batch", refuse)
    capture = load(tmp_path / "l.capture")
    assert len(capture) == 100 and capture.summary()["steps"] == [0, 99]


def test_write_capture_refuses_existing_output(tmp_path: Path) -> None:
    out = write_capture(tmp_path / "o.capture", [embedding(0)])
    with pytest.raises(OutputExistsError):
        write_capture(out, [embedding(1)])
    write_capture(out, [embedding(1), embedding(2)], force=True)
    assert len(load(out)) == 2
    other = tmp_path / "precious"
    other.mkdir()
    (other / "thesis.tex").write_text("x")
    with pytest.raises(OutputExistsError):
        write_capture(other, [embedding(0)], force=True)
    assert (other / "thesis.tex").exists()


def test_failed_write_leaves_nothing(tmp_path: Path) -> None:
    bad = Record("embedding", 0, 0, {"input_ids": np.zeros(2, np.int32)})
    with pytest.raises(CaptureFormatError, match="num_embeddings"):
        write_capture(tmp_path / "bad.capture", [embedding(0), bad])
    assert list(tmp_path.iterdir()) == []


def test_writer_appends_validate_and_events(tmp_path: Path) -> None:
    with CaptureWriter(tmp_path / "e.capture", {"notes": "hello"}, process="a") as writer:
        with pytest.raises(CaptureFormatError, match="float|integer"):
            writer.append(Record("embedding", 0, 0, {"input_ids": np.zeros(2),
                                                     "num_embeddings": 3}))
        with pytest.raises(CaptureFormatError, match="outside int64"):
            writer.append(Record("embedding", 0, 0, {"min": 0, "max": 2**70,
                                                     "num_embeddings": 3}, summary=True))
        writer.append(embedding(0))
        writer.add_event({"kind": "probe_error", "message": "x"})
        with pytest.raises(CaptureFormatError):
            writer.add_event({"bad": object()})
        live = load(tmp_path / "e.capture")  # still being written: flushed records only
        assert len(live) == 0 and live.events[0]["kind"] == "probe_error"
        writer.flush()
        assert len(load(tmp_path / "e.capture")) == 1
    capture = load(tmp_path / "e.capture")
    assert capture.manifest["notes"] == "hello" and capture.manifest["format"] == 1
    assert capture.events == [{"kind": "probe_error", "message": "x", "process": "a"}]


def test_empty_capture(tmp_path: Path) -> None:
    write_capture(tmp_path / "n.capture", [])
    capture = load(tmp_path / "n.capture")
    assert len(capture) == 0 and list(capture) == [] and capture.summary()["steps"] is None
