"""Hostile input, round 9 (fleet9), on triage, ``open_many``, rank stitching and the probe's
capture folder: the claims T48a-T48h of docs/threat-model.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from forensics.records import Record
from forensics.store.writer import write_capture


def _ids_capture(path: Path, ranks: dict[int, list[int]],
                 manifest: dict[str, Any] | None = None) -> str:
    """A capture of two steps of embedding records, one per rank of ``ranks`` (its ids)."""
    return str(write_capture(path, [
        Record("embedding", step, rank, {"input_ids": np.array(ids, dtype=np.int64),
                                         "num_embeddings": 1000})
        for step in range(2) for rank, ids in ranks.items()], manifest))


def _row(capture: str, ranks: str, **facts: Any) -> dict[str, Any]:
    """A readable triage row of ``capture`` as the stitching reads it."""
    return {"capture": capture, "ranks": ranks, "error": None, "engine_id": "unknown",
            "host": "unknown", "started": "unknown", "history": "", "divergence": None,
            **facts}


# ---------------------------- T48a: an engine id never takes the stitching key of a capture


def test_an_engine_id_naming_a_capture_does_not_hide_its_divergence(tmp_path: Path) -> None:
    """A capture ``v#0`` whose two ranks diverge, beside two captures claiming the engine id
    ``capture:.../v`` (corroborated by one host and run start): the stitching keyed an engine
    by ``ID#N`` and a lone capture by ``capture:PATH``, so that engine's key was the victim's,
    its captures compared in the victim's stead, and the victim's row said nothing of its
    divergence. Each is stitched under a key of its own."""
    from forensics.fleet.stitch import engines
    from forensics.fleet.triage import _stitch

    victim = _ids_capture(tmp_path / "v#0", {0: [1, 2, 3], 1: [1, 2, 99]})
    claim = {"engine_id": "capture:" + victim[:-2]}
    forged = [_ids_capture(tmp_path / f"h{rank}.capture", {rank: [5, 5]}, claim)
              for rank in (0, 1)]
    rows = [_row(victim, "0,1"),
            *(_row(path, str(rank), engine_id=claim["engine_id"], host="h",
                   started="2026-01-01") for rank, path in enumerate(forged))]
    stitched = sorted(sorted(captures) for captures in engines(rows).values())
    assert stitched == sorted([[victim], sorted(forged)]), stitched
    _stitch(rows)
    hit = rows[0]["divergence"]
    assert hit is not None and (hit["step"], hit["element"], hit["values"]) == (0, 2, [3, 99])
    assert rows[1]["divergence"] is None and rows[2]["divergence"] is None
