"""forensics.judge.scan: columnar bounds counts agree with the upstream replay's findings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import forensics
from forensics.judge.scan import SCAN_COLUMNS, scan
from forensics.store.reader import load
from forensics.store.writer import write_capture

DATA = Path(__file__).resolve().parents[1] / "data"
CAPTURES = sorted(DATA.glob("*.capture"))


def _replay_counts(capture: forensics.Capture) -> dict[tuple[str, str], int]:
    result = forensics.replay(capture, variants=("upstream",))
    counts: dict[tuple[str, str], int] = {}
    for _, f in result.findings.iterrows():
        if f["kind"] == "out_of_bounds" and not result.records[f["record"]].summary:
            key = (f["site"], f["tensor"])
            counts[key] = counts.get(key, 0) + 1
    return counts


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_scan_agrees_with_replay(path: Path) -> None:
    capture = load(path)
    result = scan(capture)
    counts = _replay_counts(capture)
    assert result.records == sum(1 for r in capture if not r.summary)
    covered = [e for e in result.entries.values() if e.replay]
    assert covered
    for entry in covered:
        assert entry.out_of_range == counts.get((entry.site, entry.tensor), 0), entry
        assert entry.checked >= entry.out_of_range


def test_scan_finds_the_stale_rows_and_reports_a_frame() -> None:
    result = scan(DATA / "stale-prev-row.capture")
    assert result.count("batch_change", "valid_sampled_token_count") > 0
    assert result.count("prepare_input_ids", "prev_sampled_token_ids") > 0
    assert list(result.to_frame().columns) == list(SCAN_COLUMNS)
    assert result.to_json()["out_of_range"] == result.out_of_range
    assert result.checked > result.out_of_range


def test_scan_of_a_clean_capture_counts_every_embedding_id() -> None:
    capture = load(DATA / "clean.capture")
    ids = sum(len(r["input_ids"]) for r in capture.records(site="embedding") if not r.summary)
    result = scan(capture)
    assert result.out_of_range == 0
    assert result.entries[("embedding", "input_ids")].checked == ids


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_scan_in_small_runs_of_records_counts_the_same(path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    whole = scan(load(path)).to_json()["entries"]
    monkeypatch.setattr("forensics.judge.scan.CHUNK_VALUES", 1)  # one record per pass
    assert scan(load(path)).to_json()["entries"] == whole


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint32"])
def test_counting_outside_a_range_agrees_with_two_comparisons(dtype: str) -> None:
    from forensics.sites.scan_counts import count_outside as _count_outside

    info = np.iinfo(dtype)
    values = np.array([info.min, info.min + 1, -2, -1, 0, 1, 5, 100, info.max - 1, info.max],
                      dtype=np.int64).clip(info.min, info.max).astype(dtype)
    for high in (-3, -1, 0, 1, 6, 100, int(info.max), int(info.max) + 1, int(info.max) + 2):
        if dtype.startswith("u") and high < 0:
            continue
        expected = int(np.count_nonzero((values.astype(object) < 0)
                                        | (values.astype(object) >= high)))
        assert _count_outside(values, high) == expected, (dtype, high)


@st.composite
def _draft_records(draw: st.DrawFn) -> list[forensics.Record]:
    """prepare_input_ids records whose drafts may be read past ``draft_token_ids``."""
    records = []
    for step in range(draw(st.integers(1, 4))):
        n = draw(st.integers(0, 4))
        drafts = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
        cu = np.cumsum([1 + d for d in drafts]).astype(np.int32)
        aligned = (cu.astype(np.int64) - 1).tolist()
        pp = draw(st.one_of(st.just(aligned),
                            st.lists(st.integers(-1, 6), min_size=n, max_size=n)))
        total = int(cu[-1]) if n else 0
        rows, width = draw(st.integers(0, 6)), draw(st.integers(0, 4))
        records.append(forensics.Record("prepare_input_ids", step, 0, {
            "prev_positions": np.array(pp, dtype=np.int64),
            "prev_sampled_token_ids": np.arange(draw(st.integers(0, 6)),
                                                dtype=np.int32).reshape(-1, 1),
            "input_ids": np.zeros(total, dtype=np.int32), "cu_num_tokens": cu,
            "num_draft_tokens": np.array(drafts, dtype=np.int32),
            "prev_num_spec_tokens": draw(st.integers(0, 4)),
            "draft_token_ids": np.zeros((rows, width), dtype=np.int32), "vocab_size": 100}))
    return records


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=_draft_records())
def test_scan_counts_the_draft_reads_the_replay_finds(records: list[forensics.Record],
                                                      tmp_path: Path) -> None:
    path = write_capture(tmp_path / "drafts.capture", records, force=True)
    result = scan(path)
    counts = _replay_counts(load(path))
    for tensor in ("draft_token_ids", "prev_sampled_token_ids"):
        assert result.count("prepare_input_ids", tensor) == counts.get(
            ("prepare_input_ids", tensor), 0), tensor


@st.composite
def _runs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Runs of values of one integer dtype, each record's against its own bound (often one
    bound for all, as in captures); small values and bounds often, so that values fall on,
    just under and just past a bound."""
    dtype = np.dtype(draw(st.sampled_from(["int8", "int32", "int64", "uint8", "uint32"])))
    info = np.iinfo(dtype)
    small = st.integers(max(-3, int(info.min)), 8)
    sizes = np.array(draw(st.lists(st.integers(0, 5), min_size=1, max_size=6)), dtype=np.int64)
    value = st.one_of(small, st.integers(int(info.min), int(info.max)))
    values = np.array(draw(st.lists(value, min_size=int(sizes.sum()),
                                    max_size=int(sizes.sum()))), dtype=dtype)
    top = min(int(info.max) + 2, int(np.iinfo(np.int64).max))  # bounds are int64 fields
    bound = st.one_of(st.integers(-3, 9), st.integers(-3, top))
    one = draw(bound)
    bounds = np.array(draw(st.one_of(st.just([one] * len(sizes)),
                                     st.lists(bound, min_size=len(sizes), max_size=len(sizes)))),
                      dtype=np.int64)
    return values, bounds, sizes


@settings(max_examples=300, deadline=None)
@given(runs=_runs())
@example(runs=(np.array([0, 3, 2], dtype=np.int32), np.array([3, 5]), np.array([2, 1])))  # on
@example(runs=(np.array([0, 2, 4], dtype=np.int64), np.array([3, 5]), np.array([2, 1])))  # under
def test_the_scan_counts_agree_with_comparing_every_value(
        runs: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    from forensics.sites.scan_counts import at_or_past, outside

    values, bounds, sizes = runs
    exact = values.astype(object)  # Python ints: no wrapping, no casting
    per_value = np.repeat(bounds, sizes).astype(object)
    assert outside(values, bounds, sizes) == int(np.count_nonzero(
        (exact < 0) | (exact >= per_value)))
    assert at_or_past(values, bounds, sizes) == int(np.count_nonzero(exact >= per_value))
