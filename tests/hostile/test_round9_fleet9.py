"""Hostile input, round 9 (fleet9), on triage, ``open_many``, rank stitching and the probe's
capture folder: the claims T48a-T48h of docs/threat-model.md."""

from __future__ import annotations

import os
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


# ------------------- T48b: a forked copy of the engine writes under a process name of its own


def test_a_forked_copys_records_are_not_found_for_a_killed_writer(tmp_path: Path) -> None:
    """The engine forks after its writer process started; the copy records 8 records and
    closes. The engine's writer is then stopped, given 8 records it never writes, and killed:
    it wrote none of them, yet the copy's segments (under the engine's process name) were
    counted as what it wrote ("found" 8, "dropped" 0). The copy names its own process, so
    none of its records is taken for the engine's, and each keeps its own events file."""
    import signal
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "probe"))
    from probe_fakes import make_settings, record_batch_changes

    import forensics
    from forensics.probe.session import ProbeSession, ProcessBackend

    session = ProbeSession(make_settings(tmp_path, capture=tmp_path / "k.capture", ring=64,
                                         flush_every=4))
    assert isinstance(session.backend, ProcessBackend)
    record_batch_changes(session, [[0, 1]] * 4)
    assert session.drain(timeout=30)
    pid = os.fork()
    if pid == 0:  # the forked copy
        code = 1
        try:
            record_batch_changes(session, [[0, 1]] * 8)
            session.close()
            code = 0
        finally:
            os._exit(code)
    assert os.waitpid(pid, 0)[1] == 0
    assert len(forensics.load(session.settings.capture)) == 12
    proc = session.backend.channel.proc
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        record_batch_changes(session, [[0, 1]] * 8)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
    session.close()
    capture = forensics.load(session.settings.capture)
    (lost,) = [e for e in capture.events if e["kind"] == "probe_writer_lost"]
    assert lost["found"] == 0, lost
    assert session.counts["records"] == 12 and \
        session.counts["written"] == 4 + lost["recovered"], session.counts
    assert len({e["process"] for e in capture.events}) == 2
