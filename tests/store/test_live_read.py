"""A capture read while its writer appends: the reader maps each segment at the size it has
when opened and reads its index afterwards, so the index may already list batches the mapping
does not hold. Those are left to the next open, never called a corrupt index."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from store_helpers import valid_records

from forensics.errors import CaptureFormatError
from forensics.store.index import ENTRY
from forensics.store.reader import load
from forensics.store.writer import CaptureWriter


def _three_batches(path: Path) -> Path:
    """A capture whose embedding segment holds three batches (one per flush)."""
    record = next(r for r in valid_records() if r.site == "embedding")
    with CaptureWriter(path) as writer:
        for step in range(3):
            writer.append(record.__class__(record.site, step, 0, record.fields))
            writer.flush()
    return path


def _segment_and_entries(capture: Path) -> tuple[Path, np.ndarray]:
    segment = next(capture.glob("embedding.*.arrows"))
    entries = np.fromfile(Path(f"{segment}.idx"), dtype=ENTRY, offset=8)
    assert len(entries) == 3
    return segment, entries


@pytest.mark.parametrize("cut", ["at a batch's end", "inside the next batch"])
def test_a_segment_mapped_before_its_last_batches_reads_the_batches_it_holds(
        tmp_path: Path, cut: str) -> None:
    """The segment as a reader maps it while the writer's third batch is on its way (cut at
    the second batch's end, or within the third): the index lists all three."""
    capture = _three_batches(tmp_path / "live.capture")
    segment, entries = _segment_and_entries(capture)
    end = int(entries[1]["offset"] + entries[1]["length"])
    os.truncate(segment, end + (0 if cut == "at a batch's end" else 9))
    loaded = load(capture)
    steps = sorted(r.step for r in loaded if r.site == "embedding")
    assert steps == [0, 1]


def test_an_index_whose_chain_breaks_past_the_end_is_still_refused(tmp_path: Path) -> None:
    """Only entries that continue the chain of batches are taken for a live writer's: a
    third entry that does not start where the second ends is a corrupt index."""
    capture = _three_batches(tmp_path / "forged.capture")
    segment, entries = _segment_and_entries(capture)
    end = int(entries[1]["offset"] + entries[1]["length"])
    os.truncate(segment, end)
    entries[2]["offset"] += 1
    index = Path(f"{segment}.idx")
    index.write_bytes(index.read_bytes()[:8] + entries.tobytes())
    with pytest.raises(CaptureFormatError, match="index entry 2 "):
        load(capture)


def test_a_complete_capture_reads_as_before(tmp_path: Path) -> None:
    capture = _three_batches(tmp_path / "whole.capture")
    copy = tmp_path / "copy.capture"
    shutil.copytree(capture, copy)
    assert sorted(r.step for r in load(copy) if r.site == "embedding") == [0, 1, 2]
