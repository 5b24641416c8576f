"""The store's fast paths give what the checked paths give: bulk decoding of a batch, and
``append(record, validated=True)`` for trusted records."""

from __future__ import annotations

import filecmp
from pathlib import Path

import numpy as np

from forensics.simulate import configure, manifest_for, simulate
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
