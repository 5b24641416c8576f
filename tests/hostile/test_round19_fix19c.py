"""Round 19, fix 19c: triage's rank window of a site taken from each rank's steps of every
site (T113a); a capture naming no vLLM version replayed by the installed one said (T113b); the
probe's SIGTERM handler waiting for another thread's close (T113c)."""

from __future__ import annotations

from pathlib import Path

from forensics.records import Record
from forensics.store.writer import write_capture

# ------------------------------ T113a: a rank's site held only outside the others' steps


def _moved(root: Path, step: int) -> None:
    """Two rank captures of one engine (``clean`` scenario, 12 steps) whose rank 1 holds its
    embedding records at ``step`` only (one record), its other sites at steps 1-12."""
    from typing import cast

    from forensics.fleet.generate import _manifest, _scenario, without_positions
    from forensics.simulator.runs import simulate

    sc = _scenario("clean", 12, 4, ranks=2)
    records: list[Record] = []
    for record in without_positions(cast(list[Record], simulate(sc, seed=3))):
        if record.site == "embedding" and record.rank == 1:
            if record.step != 1:
                continue
            record = Record(record.site, step, record.rank, record.fields)
        records.append(record)
    root.mkdir()
    for rank in range(2):
        entries = {**_manifest(1, "engine-x", sc, 2, "node-x", rank, "engine-x"),
                   "created": "2026-12-07T05:00:00Z"}
        write_capture(root / f"engine-x-rank{rank}.capture",
                      [r for r in records if r.rank == rank], entries, validated=True)


def test_a_rank_holding_a_site_only_outside_the_others_steps_is_not_compared(
        tmp_path: Path) -> None:
    """Rank 1's embedding record is at step 100 only, rank 0's at steps 1-12, rank 1's other
    sites at steps 1-12: the window of the embedding was taken from its own rows (rank 0's
    steps 1-12 and rank 1's 100: none), so rank 0's ids there were compared with nothing and
    every row read `clean`. The window is now each rank's steps of every site: step 1 is not
    compared, rank 1 holding 0 there."""
    from forensics.fleet.output import render
    from forensics.fleet.triage import triage

    _moved(tmp_path / "fleet", 100)
    result = triage([tmp_path / "fleet"], workers=1)
    assert [r["conclusion"] for r in result.rows] == ["divergence not judged"] * 2, \
        [(r["name"], r["conclusion"]) for r in result.rows]
    out = render(result, "text")
    assert "rank divergence not judged at step 1: embedding input_ids not compared: rank 0 " \
        "(engine-x-rank0.capture) holds 1 record of it, rank 1 (engine-x-rank1.capture) " \
        "holds 0" in out, out
    assert "clean" not in out, out
