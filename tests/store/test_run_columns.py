"""The store's batch columns and ``RecordColumns`` over the same records read alike.

A site's run reads records only through ``RunColumns``: the replay hands it the
store's screened batches (``BatchView.screened``), the per-record forms a ``RecordColumns``. The
two must give the same values for every field of every bundled capture and a simulated soak.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import forensics
from forensics.records import Record
from forensics.screening import ScreenUnsure
from forensics.simulator.runs import simulate
from forensics.sites import pipeline_key
from forensics.sites._common import RecordColumns, RunColumns
from forensics.store.writer import write_capture
from forensics.validate import site_field_specs

DATA = Path(__file__).resolve().parents[2] / "data"
CAPTURES = sorted(p.name for p in DATA.glob("*.capture"))


def canonical(codes: np.ndarray) -> list[int]:
    """String codes renumbered by first appearance (-1 kept): equal strings, equal numbers."""
    seen: dict[int, int] = {}
    return [-1 if c < 0 else seen.setdefault(c, len(seen)) for c in codes.tolist()]


def assert_same_columns(site: str, got: RunColumns, want: RunColumns) -> None:
    for name, spec in site_field_specs(site).items():
        where = f"{site}.{name}"
        assert got.present(name).tolist() == want.present(name).tolist(), where
        if spec.kind != "int":
            assert got.length(name).tolist() == want.length(name).tolist(), where
        if spec.kind == "int":
            assert got.ints(name).tolist() == want.ints(name).tolist(), where
        elif spec.kind == "tensor":
            for a, b in zip(got.flat(name), want.flat(name), strict=True):
                assert a.tolist() == b.tolist(), where
            assert_narrow_alike(got, want, name, where)
            for dim in range(spec.ndim):
                assert got.shape(name, dim).tolist() == want.shape(name, dim).tolist(), where
            assert got.dtype(name) == want.dtype(name), where
        elif spec.kind == "ragged":
            for a, b in zip(got.ragged(name), want.ragged(name), strict=True):
                assert a.tolist() == b.tolist(), where
        elif spec.kind in ("str_list", "opt_str_list"):
            names = (name, "req_ids")
            for (a, na), (b, nb) in zip(got.str_codes(names), want.str_codes(names),
                                        strict=True):
                assert na.tolist() == nb.tolist(), where
                assert canonical(a) == canonical(b), where


def assert_narrow_alike(got: RunColumns, want: RunColumns, name: str, where: str) -> None:
    """``flat(name, widen=False)``: the same values as the int64 read, at the captured width
    (int64 only when widened) in both column kinds."""
    wide = got.flat(name)[0]
    assert wide.dtype == np.int64, where
    for cols in (got, want):
        narrow, counts = cols.flat(name, widen=False)
        assert narrow.tolist() == wide.tolist(), where
        assert counts.tolist() == got.flat(name)[1].tolist(), where
        captured = cols.dtype(name)
        if captured is not None and len(narrow):
            assert narrow.dtype == captured, where


def check_capture(path: Path) -> int:
    """Compare every bulk-readable batch of the capture at ``path``; the batches compared."""
    compared = 0
    for view in forensics.load(path).batches():
        cols = view.screened()
        if cols is None:
            continue
        assert_same_columns(view.site, cols, RecordColumns(view.records()))
        compared += 1
    return compared


@pytest.mark.parametrize("name", CAPTURES)
def test_bundled_captures_read_alike(name: str) -> None:
    assert check_capture(DATA / name) > 0


def test_a_simulated_soak_reads_alike(tmp_path: Path) -> None:
    records = sorted(simulate("soak", steps=30, batch=8, seed=1), key=pipeline_key)
    write_capture(tmp_path / "s.capture", records)
    assert check_capture(tmp_path / "s.capture") == 4  # one batch a site, each compared


def _batch_of(tmp_path: Path, values: np.ndarray) -> RunColumns:
    """The store's columns of one ``embedding`` record whose ``input_ids`` are ``values``."""
    record = Record("embedding", 0, 0, {"input_ids": values, "num_embeddings": 4})
    write_capture(tmp_path / "n.capture", [record])
    (view,) = forensics.load(tmp_path / "n.capture").batches()
    cols = view.screened()
    assert cols is not None
    return cols


def test_narrow_reads_share_the_captured_buffer(tmp_path: Path) -> None:
    cols = _batch_of(tmp_path, np.array([3, -1, 7], dtype=np.int32))
    narrow, counts = cols.flat("input_ids", widen=False)
    wide, _ = cols.flat("input_ids")
    assert narrow.dtype == np.int32 and wide.dtype == np.int64
    assert narrow.tolist() == wide.tolist() == [3, -1, 7] and counts.tolist() == [3]
    assert narrow.base is not None and not narrow.flags.writeable  # a view, read-only
    assert cols.flat("input_ids", widen=False)[0] is narrow  # kept for the next reader


@pytest.mark.parametrize("widen", [True, False])
def test_unsigned_past_int64_stays_unsure_narrow_or_wide(widen: bool) -> None:
    big = RecordColumns([Record("embedding", 0, 0, {
        "input_ids": np.array([1, 2**63], dtype=np.uint64), "num_embeddings": 4})])
    with pytest.raises(ScreenUnsure):
        big.flat("input_ids", widen=widen)
    small = RecordColumns([Record("embedding", 0, 0, {
        "input_ids": np.array([1, 2**62], dtype=np.uint64), "num_embeddings": 4})])
    values, _ = small.flat("input_ids", widen=widen)
    assert values.dtype == np.int64 and values.tolist() == [1, 2**62]  # uint64: widened
    narrow = RecordColumns([Record("embedding", 0, 0, {
        "input_ids": np.array([1, 2**32 - 1], dtype=np.uint32), "num_embeddings": 4})])
    values, _ = narrow.flat("input_ids", widen=widen)
    assert values.dtype == (np.int64 if widen else np.uint32)
    assert values.tolist() == [1, 2**32 - 1]
