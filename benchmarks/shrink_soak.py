"""Shrink on a soak with one injected fault (issue 17): ``python benchmarks/shrink_soak.py``.

Simulates the ``soak`` scenario (batch 64, 4 drafts) with every fault rate set to 0 and one
``vocab_sentinel`` fault forced at 60% of the run, then runs ``forensics.shrink`` on it and
reports records and bytes before and after, replays, and wall and CPU time (the replay of the
original apart). Writes ``benchmarks/shrink-latest.json`` (``--json`` to change). Figures, not
assertions: the machine is shared.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def size_of(root: Path) -> int:
    """Bytes of every file under ``root``."""
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def cpu_seconds() -> float:
    """CPU time of this process and its finished children."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def measure(steps: int, batch: int, seed: int, work: Path) -> dict[str, Any]:
    """Simulate the soak, shrink it, and return the figures."""
    import forensics
    from forensics.simulator.scenarios import Faults, get_scenario

    fault = int(steps * 0.6)
    sc = replace(get_scenario("soak"), steps=steps, batch=batch,
                 faults=Faults(forced={"vocab_sentinel": (fault,)}))
    t0 = time.perf_counter()
    src = forensics.simulate(sc, seed=seed, out=work / "soak.capture")
    simulate_s = time.perf_counter() - t0
    c0, t0 = cpu_seconds(), time.perf_counter()
    result = forensics.shrink(src, work / "small.capture", progress=sys.stderr.isatty())
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    before, after = size_of(Path(src)), size_of(result.path)
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(), "steps": steps, "batch": batch, "fault_step": fault,
        "simulate_seconds": round(simulate_s, 1),
        "records_before": result.records_before, "records_kept": result.records_kept,
        "percent_kept": round(100 * result.fraction_kept, 4), "steps_kept": result.steps_kept,
        "bytes_before": before, "bytes_after": after, "size_ratio": round(before / after, 1),
        "replays": result.replays, "shrink_wall_seconds": round(wall, 1),
        "shrink_cpu_seconds": round(cpu, 1),
        "reference_replay_seconds": round(result.reference_seconds, 1),
        "search_write_verify_seconds": round(wall - result.reference_seconds, 1),
        "first_finding": result.evidence.first,
    }


def main() -> None:
    """Parse the options, measure, print and write the JSON figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=250_000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=HERE / "shrink-latest.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="shrink-soak-") as tmp:
        figures = measure(args.steps, args.batch, args.seed, Path(tmp))
    text = json.dumps(figures, indent=2)
    print(text)
    args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
