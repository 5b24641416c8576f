"""Hostile input, round 4, on ``triage`` and ``open_many`` (T16): a capture reached twice (a
link planted in a shared folder, a folder named twice) is one capture and never hides another
capture's rank divergence; stitching the engines of a fleet is linear in its captures."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from forensics.fleet.paths import find_captures
from forensics.fleet.stitch import engines
from forensics.fleet.triage import Triage, triage
from forensics.records import Record
from forensics.store.writer import write_capture
from tests.instructions import assert_linear, scaling

MANIFEST = {"engine_id": "E1", "created": "2026-01-01T00:00:00"}


def _rank(root: Path, name: str, rank: int, ids: list[int]) -> Path:
    """A capture of rank ``rank`` of engine ``E1`` on host ``h`` (three steps of ``ids``)."""
    records = [Record("embedding", s, rank, {"input_ids": np.array(ids, np.int32),
                                             "num_embeddings": 10}) for s in range(3)]
    path = write_capture(root / name, records)
    manifest = json.loads((path / "manifest.json").read_text())
    manifest.update(MANIFEST, process={"host": "h", "pid": 100 + rank})
    (path / "manifest.json").write_text(json.dumps(manifest))
    return path


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two ranks of one engine whose ids differ at element 2, a link to rank 0 planted beside
    them, and a link to their folder."""
    root = tmp_path_factory.mktemp("engine")
    shared = root / "shared"
    shared.mkdir()
    made = {"a": _rank(shared, "a.capture", 0, [1, 2, 3, 4]),
            "b": _rank(shared, "b.capture", 1, [1, 2, 9, 4])}
    made["link"] = shared / "c.capture"
    os.symlink(made["a"], made["link"])
    made["folder"], made["folder_link"] = shared, root / "also-shared"
    os.symlink(shared, made["folder_link"])
    return made


def _divergences(result: Triage) -> dict[str, Any]:
    return {row["name"]: row["divergence"] for row in result.rows}


def test_a_link_to_a_capture_is_that_capture_once(engine: dict[str, Path]) -> None:
    """A link planted beside a capture is not a second capture: one row each, and the real
    divergence of the two ranks still shows, naming the captures compared."""
    found = find_captures([engine["folder"]])
    assert sorted(p.name for p in found) == ["a.capture", "b.capture"]
    result = triage([engine["folder"]], workers=1)
    assert sorted(r["name"] for r in result.rows) == ["a.capture", "b.capture"]
    for row in result.rows:
        assert row["conclusion"] == "rank divergence", row
        hit = row["divergence"]
        assert (hit["tensor"], hit["element"], hit["values"]) == ("input_ids", 2, [3, 9])
        assert hit["captures"] == [str(engine["a"]), str(engine["b"])]


def test_a_folder_named_twice_is_read_once(engine: dict[str, Path]) -> None:
    """The same folder named directly and through a link: each capture is one row, under the
    direct name, and the divergence is unchanged."""
    alone = _divergences(triage([engine["folder"]], workers=1))
    both = triage([engine["folder_link"], engine["folder"]], workers=1)
    assert sorted(r["capture"] for r in both.rows) == [str(engine["a"]), str(engine["b"])]
    assert _divergences(both) == alone
    only_link = find_captures([engine["folder_link"]])
    assert [p.name for p in only_link] == ["a.capture", "b.capture"]


def _claims(count: int) -> list[dict[str, Any]]:
    """``count`` readable rows claiming one engine id, none corroborating another (the worst
    case of pairing every capture with every other)."""
    return [{"capture": f"/fleet/{i}.capture", "engine_id": "E", "host": f"h{i}",
             "started": "s", "history": f"x{i}", "ranks": str(i), "error": ""}
            for i in range(count)]


def _corroborated(count: int) -> list[dict[str, Any]]:
    """``count`` rows of one engine, host and run start, all claiming rank 0 (every one
    contested)."""
    return [{"capture": f"/fleet/{i}.capture", "engine_id": "E", "host": "h",
             "started": "s", "history": "x", "ranks": "0", "error": ""} for i in range(count)]


ROWS = {"uncorroborated": _claims, "contested": _corroborated}


@pytest.mark.parametrize("rows", list(ROWS))
def test_stitching_is_linear_in_the_captures(rows: str, tmp_path: Path) -> None:
    """4x the captures claiming one engine cost under 6x the instructions to stitch."""
    assert_linear(scaling(__file__, dict.fromkeys(ROWS, 500), tmp_path)[rows])


def make_work(rows: str, count: int, scratch: Path) -> Callable[[], object]:
    """Stitching ``count`` rows of ``rows`` (run by :mod:`tests.instructions`)."""
    made = ROWS[rows](count)
    return lambda: engines(made, {})  # each contested row named, its sentence made (T84c)


def test_stitching_still_links_what_corroborates() -> None:
    """Captures corroborated through a chain (same host and start, or same history) are one
    engine; a claim nothing corroborates is an engine of its own; a shared rank splits."""
    table = [("a", "E", "h", "s", "1", "0"), ("b", "E", "h", "s", "2", "1"),
             ("c", "E", "k", "t", "2", "2"), ("d", "E", "z", "u", "3", "3"),
             ("e", "F", "h", "s", "1", "0"), ("f", "F", "h", "s", "1", "0")]
    rows = [{"capture": f"/f/{name}", "engine_id": engine, "host": host, "started": started,
             "history": history, "ranks": ranks, "error": ""}
            for name, engine, host, started, history, ranks in table]
    groups = sorted(sorted(captures) for captures in engines(rows).values() if captures)
    assert groups == [["/f/a", "/f/b", "/f/c"], ["/f/d"], ["/f/e"], ["/f/f"]]


def test_a_huge_host_is_not_copied_onto_every_row(tmp_path: Path) -> None:
    """A manifest host of 1 MiB, repeated on each of 64 rows, took 64 MiB in open_many (16 MiB
    manifests times millions of rows: terabytes); a host longer than any host name is unknown
    (null), and the rows' other columns are unchanged."""
    import pyarrow as pa

    from forensics.fleet.dataset import open_many

    records = [Record("embedding", s, 0, {"input_ids": np.arange(4, dtype=np.int32),
                                          "num_embeddings": 10}) for s in range(64)]
    path = write_capture(tmp_path / "host.capture", records)
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["process"] = {"host": "H" * (1 << 20), "pid": 3}
    (path / "manifest.json").write_text(json.dumps(manifest))
    before = pa.total_allocated_bytes()
    table = open_many([path])["embedding"].to_table()
    assert pa.total_allocated_bytes() - before < (1 << 20)
    assert table.num_rows == 64 and set(table["host"].to_pylist()) == {None}
    assert set(table["pid"].to_pylist()) == {3}
