"""forensics.open_many: one dataset per site over many captures, queried with DuckDB and Polars."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import forensics
from forensics.errors import CaptureFormatError, ConfigurationError
from forensics.fleet.dataset import open_many
from forensics.fleet.paths import find_captures
from forensics.simulator.runs import simulate
from forensics.simulator.scenarios import configure


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three small captures in two folders, one of them with int64 embedding ids."""
    from dataclasses import replace

    from forensics.simulator.scenarios import Faults

    root = tmp_path_factory.mktemp("fleet")
    leak = replace(configure("placeholder-leak", steps=10, batch=3),
                   faults=Faults(forced={"placeholder_leak": (4,)}))
    for name, scenario, seed in (("a/one", "clean", 1), ("a/two", leak, 2),
                                 ("b/three", "vocab-sentinel", 3)):
        simulate(scenario, steps=10, batch=3, seed=seed, out=root / f"{name}.capture")
    manifest = root / "a/one.capture/manifest.json"
    entries = json.loads(manifest.read_text())
    entries["process"] = {"host": "node-7", "pid": 4242, "rank": 0}
    manifest.write_text(json.dumps(entries))
    return root


def test_find_captures_takes_dirs_folders_and_globs(fleet: Path) -> None:
    names = [p.name for p in find_captures([fleet / "a", str(fleet / "b" / "*.capture"),
                                            fleet / "a" / "one.capture"])]
    assert names == ["one.capture", "two.capture", "three.capture"]
    with pytest.raises(ConfigurationError, match="names no capture"):
        find_captures([fleet / "missing"])


def test_open_many_has_every_record_and_the_origin_columns(fleet: Path) -> None:
    sets = forensics.open_many([fleet])
    assert list(sets) == ["batch_change", "prepare_input_ids", "async_output", "embedding"]
    for site, dataset in sets.items():
        table = dataset.to_table()
        assert {"capture", "host", "pid", "rank", "step"} <= set(table.column_names)
        expected = sum(len(forensics.load(p).records(site)) for p in find_captures([fleet]))
        assert table.num_rows == expected == 30
    emb = sets["embedding"].to_table().to_pandas()
    one = emb[emb["capture"].str.endswith("one.capture")]
    assert set(one["host"]) == {"node-7"} and set(one["pid"]) == {4242}
    assert emb[~emb["capture"].str.endswith("one.capture")]["host"].isna().all()


def test_open_many_reads_in_place(fleet: Path) -> None:
    before = pa.total_allocated_bytes()
    sets = open_many([fleet])
    grown = pa.total_allocated_bytes() - before
    size = sum(f.stat().st_size for f in fleet.rglob("*.arrows"))
    assert grown < size / 4, (grown, size)  # only the three added columns are allocated
    assert sets["embedding"].count_rows() == 30


def test_duckdb_and_polars_agree_with_the_capture(fleet: Path) -> None:
    import duckdb
    import polars as pl

    emb = forensics.open_many([fleet])["embedding"]
    rows = duckdb.sql("SELECT capture, min(list_min(input_ids)) AS low FROM emb "
                      "GROUP BY capture ORDER BY capture").fetchall()
    frame = (pl.scan_pyarrow_dataset(emb)
             .select("capture", pl.col("input_ids").list.min().alias("low"))
             .group_by("capture").agg(pl.col("low").min()).sort("capture").collect())
    expected = []
    for path in find_captures([fleet]):
        ids = [int(np.min(r["input_ids"])) for r in forensics.load(path).records("embedding")]
        expected.append((str(path.resolve()), min(ids)))
    assert rows == expected
    assert list(frame.iter_rows()) == expected
    assert dict(expected)[str((fleet / "a/two.capture").resolve())] == -1  # the leak


def test_mixed_integer_widths_are_widened(tmp_path: Path) -> None:
    from dataclasses import replace

    sc = configure("clean", steps=4, batch=2)
    simulate(sc, out=tmp_path / "narrow.capture")
    simulate(replace(sc, embedding_dtype="int64"), out=tmp_path / "wide.capture")
    table = open_many([tmp_path])["embedding"].to_table()
    assert table.schema.field("input_ids").type == pa.list_(pa.int64())
    assert table.num_rows == 8


def test_an_unreadable_capture_raises_or_is_skipped(fleet: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.capture"
    bad.mkdir()
    (bad / "manifest.json").write_text("{not json")
    with pytest.raises(CaptureFormatError, match="bad.capture"):
        open_many([bad, fleet / "b"])
    assert open_many([bad, fleet / "b"], on_error="skip")["embedding"].count_rows() == 10
