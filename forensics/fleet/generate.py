"""A synthetic fleet for triage tests and benchmarks: many small captures of known shapes.

Single-rank captures cycle through the fault kinds of :mod:`forensics.simulator.runs` (each forced
at one step, so its group is known in advance), a clean run, and a clean run whose engine
crashed (an unexplained crash); vLLM versions, runners and hosts vary. Two engines of two ranks
span two hosts each, one capture per rank sharing the engine id; one of them carries the
**rank divergence** fault (:func:`diverge`: rank 1's embedding ids differ at one step, all ids
still in range). One capture is corrupt. :func:`simulate_fleet` returns what a triage must find.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import numpy as np

from forensics.records import Record
from forensics.sites import SINK

#: kind of a single-rank capture -> (scenario, fault forced at FAULT_STEP, or None)
KINDS: dict[str, tuple[str, str | None]] = {
    "clean": ("clean", None),
    "stale_prev_row": ("stale-prev-row", "stale_prev_row"),
    "vocab_sentinel": ("vocab-sentinel", "vocab_sentinel"),
    "placeholder_leak": ("placeholder-leak", "placeholder_leak"),
    "misattribution": ("misattribution", "misattribution"),
    "crash": ("clean", None),
}
#: the catalogue entry a kind's capture matches on the V1 runner (triage groups it there)
KNOWN_ON_V1 = {"stale_prev_row": "stale-prev-positions-row",
               "misattribution": "stale-prev-positions-row",
               "vocab_sentinel": "vocab-size-sentinel-counted",
               "placeholder_leak": "placeholder-reaches-input-ids"}
VERSIONS = ("0.32.0", "0.33.0")
RUNNERS = ("v1", "v2")
FAULT_STEP = 4
DIVERGENCE_STEP = 6
CRASH_EVENT = {"kind": "cuda_assert", "step": 9, "rank": 0,
               "detail": "srcIndex < srcSelectDimSize",
               "message": "Indexing.cu:1515: indexSelectSmallIndex: Assertion failed"}


@dataclass
class Fleet:
    """What :func:`simulate_fleet` wrote: each capture's kind, and the engines' facts."""

    root: Path
    kinds: dict[str, str] = field(default_factory=dict)  #: capture path -> kind
    groups: dict[str, tuple[str, ...]] = field(default_factory=dict)  #: path -> expected key
    corrupt: str = ""
    divergence: dict[str, Any] = field(default_factory=dict)  #: step, ranks, captures


def simulate_fleet(root: str | Path, count: int = 200, steps: int = 12, batch: int = 4,
                   seed: int = 0) -> Fleet:
    """Write ``count`` captures under ``root`` (4 of them two engines of two ranks, one
    corrupt, the rest single-rank); return the :class:`Fleet` of what each one holds."""
    fleet = Fleet(Path(root))
    fleet.root.mkdir(parents=True, exist_ok=True)
    for number, diverging in enumerate((True, False)):
        _engine(fleet, f"engine-{'ab'[number]}", steps, batch, seed + number, diverging)
    clean = _single(fleet, count - 1, "clean", steps, batch, seed)
    del fleet.kinds[str(clean)], fleet.groups[str(clean)]
    fleet.corrupt = str(clean.rename(clean.with_name(f"c{count - 1:04d}-corrupt.capture")))
    _corrupt(Path(fleet.corrupt))
    fleet.kinds[fleet.corrupt] = "corrupt"
    fleet.groups[fleet.corrupt] = ("corrupt",)
    for i in range(4, count - 1):
        _single(fleet, i, list(KINDS)[i % len(KINDS)], steps, batch, seed + i)
    return fleet


def _manifest(i: int, kind: str, sc: Any, seed: int, host: str, rank: int = 0,
              engine: str | None = None) -> dict[str, Any]:
    """Manifest entries of capture ``i``: version, runner, host, pid, engine, speculation."""
    from forensics.simulator.scenarios import manifest_for

    entries = manifest_for(sc, seed)
    entries["versions"] = {"vllm": VERSIONS[i % 2]}
    entries["runner"] = RUNNERS[(i // 2) % 2]
    entries["model"] = {**entries["model"], "async_scheduling": True,
                        "speculative_config": {"method": "mtp", "num_speculative_tokens": 4}}
    entries["process"] = {"host": host, "pid": 1000 + i, "rank": rank}
    if engine is not None:
        entries["engine_id"] = engine
    entries["notes"] = f"fleet capture {i}: {kind}"
    return entries


def _scenario(kind: str, steps: int, batch: int, ranks: int = 1) -> Any:
    """The scenario of ``kind``: its fault forced at :data:`FAULT_STEP` only."""
    from forensics.simulator.scenarios import Faults, configure

    name, fault = KINDS[kind]
    sc = configure(name, steps=steps, batch=batch)
    forced = {fault: (FAULT_STEP,)} if fault else {}
    return replace(sc, faults=Faults(forced=forced), ranks=ranks)


def _single(fleet: Fleet, i: int, kind: str, steps: int, batch: int, seed: int) -> Path:
    """Write single-rank capture ``i`` of ``kind``; return its path."""
    from forensics.simulator.runs import simulate
    from forensics.store.writer import write_capture

    sc = _scenario(kind, steps, batch)
    entries = _manifest(i, kind, sc, seed, f"host-{i % 12:02d}")
    records = without_positions(cast(list[Record], simulate(sc, seed=seed)))
    path = fleet.root / f"c{i:04d}-{kind}.capture"
    write_capture(path, records, entries, events=[CRASH_EVENT] if kind == "crash" else [],
                  validated=True)
    fleet.kinds[str(path)] = kind
    known = KNOWN_ON_V1.get(kind) if entries["runner"] == "v1" else None
    fleet.groups[str(path)] = (("known", known) if known
                               else (entries["versions"]["vllm"], entries["runner"], kind))
    return path


def _engine(fleet: Fleet, engine: str, steps: int, batch: int, seed: int,
            diverging: bool) -> None:
    """Two captures of one two-rank engine on two hosts (rank 1 diverging when asked)."""
    from forensics.simulator.runs import simulate
    from forensics.store.writer import write_capture

    sc = _scenario("clean", steps, batch, ranks=2)
    records = without_positions(cast(list[Record], simulate(sc, seed=seed)))
    if diverging:
        records = list(diverge(records, rank=1, step=DIVERGENCE_STEP, vocab=sc.vocab))
    paths = []
    for rank in (0, 1):
        i = len(fleet.kinds)
        entries = _manifest(1, engine, sc, seed, f"node-{engine[-1]}{rank}", rank, engine)
        entries["process"]["pid"] = 5000 + i
        path = fleet.root / f"{engine}-rank{rank}.capture"
        write_capture(path, [r for r in records if r.rank == rank], entries, validated=True)
        kind = "divergence" if diverging else "clean"
        fleet.kinds[str(path)] = kind
        fleet.groups[str(path)] = (entries["versions"]["vllm"], entries["runner"], kind)
        paths.append(str(path))
    if diverging:
        fleet.divergence = {"step": DIVERGENCE_STEP, "ranks": [0, 1], "captures": paths}


def without_positions(records: list[Record]) -> list[Record]:
    """``records`` with the embedding's ``positions`` left out, as captures of the probe's
    versions before the token-continuity check were: the fleet's kinds are judged by their
    index findings and rank comparison (a generated divergence would otherwise also be a
    ``substituted`` token on its rank, and a capture split into pieces cannot rebuild the
    token streams a whole one can: continuity is not judged there)."""
    return [Record(r.site, r.step, r.rank,
                   {k: v for k, v in r.fields.items() if k != "positions"}, r.summary)
            if r.site == SINK and "positions" in r.fields else r for r in records]


def diverge(records: Iterable[Record], rank: int, step: int, vocab: int) -> Iterable[Record]:
    """The rank divergence fault: ``rank``'s embedding ``input_ids[0]`` at ``step`` becomes
    another in-range id (what one rank of a tensor-parallel group would see if its copy of
    the batch went astray); every other record unchanged."""
    for record in records:
        if record.site == SINK and record.rank == rank and record.step == step:
            ids = np.array(record.fields["input_ids"], copy=True)
            ids[0] = (int(ids[0]) + 1) % vocab
            record = Record(record.site, record.step, record.rank,
                            {**record.fields, "input_ids": ids}, record.summary)
        yield record


def _corrupt(path: Path) -> None:
    """Overwrite the middle of the capture's first segment with bytes no reader accepts."""
    segment = sorted(path.glob("*.arrows"))[0]
    data = bytearray(segment.read_bytes())
    middle = len(data) // 2
    data[middle - 64:middle + 64] = b"\xff" * 128
    segment.write_bytes(bytes(data))
