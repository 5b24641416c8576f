"""The rank captures of one engine for the triage tests of round 19 (T107a, T112b-d): ranks
that call a site unlike numbers of times at a step, diverge at a step, or hold no record of a
site."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import cast

import numpy as np

from forensics.records import Record
from forensics.store.writer import write_capture


def engine_ranks(root: Path, ranks: int, calls: dict[int, int],
                 changed: Collection[tuple[int, int]] = (),
                 dropped: Collection[tuple[int, str]] = ()) -> list[str]:
    """Write under ``root`` the ``ranks`` rank captures of one engine (``clean`` scenario, 12
    steps, one host and run start: the engine's claim corroborated) whose embedding is called
    ``calls[rank]`` times at step 5 (none for 0; each further call's ids one more than the
    last's); ``changed``: ``(rank, step)`` pairs at which that rank's embedding ids differ from
    the others'; ``dropped``: ``(rank, site)`` whose records that rank's capture leaves out.
    Return the captures' paths, by rank."""
    from forensics.fleet.generate import _manifest, _scenario, without_positions
    from forensics.simulator.runs import simulate

    sc = _scenario("clean", 12, 4, ranks=ranks)
    records: list[Record] = []
    for record in without_positions(cast(list[Record], simulate(sc, seed=3))):
        if record.site == "embedding" and (record.rank, record.step) in changed:
            ids = np.array(record.fields["input_ids"])
            ids[0] = (ids[0] + 7) % sc.vocab
            record = Record(record.site, record.step, record.rank,
                            {**record.fields, "input_ids": ids})
        records.append(record)
        if record.site == "embedding" and record.step == 5:
            if not calls[record.rank]:
                records.pop()  # none of this step on that rank
            ids = np.array(record.fields["input_ids"])
            for _ in range(calls[record.rank] - 1):
                ids = (ids + 1) % sc.vocab
                records.append(Record(record.site, record.step, record.rank,
                                      {**record.fields, "input_ids": ids}))
    root.mkdir()
    paths = []
    for rank in range(ranks):
        entries = {**_manifest(1, "engine-x", sc, 3, "node-x", rank, "engine-x"),
                   "created": "2026-12-07T05:00:00Z"}
        paths.append(str(write_capture(
            root / f"engine-x-rank{rank}.capture",
            [r for r in records if r.rank == rank and (r.rank, r.site) not in dropped],
            entries, validated=True)))
    return paths
