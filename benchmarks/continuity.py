"""The token-continuity check's cost beside reading the records it judges (issue 40).

Simulates a clean V1 capture (``--steps`` steps of 64 requests, 4 drafts: 1.15 million fed
tokens judged at the default 4,000 steps), reads each site's records, then runs
:func:`forensics.judge.streams.continuity_of` over them with the cyclic collector paused (as a
replay runs it). Rounds alternate reading and checking. Prints one JSON object: CPU and wall
seconds of each (medians), the check's CPU per judged token, and the ratio of the check's CPU to
the read's (the baseline of the same run).
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def main() -> None:
    """Simulate, then time ``--rounds`` rounds of reading and checking; print the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from forensics.judge.streams import continuity_of
    from forensics.store.reader import load

    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "clean.capture"
        subprocess.run([sys.executable, "-m", "forensics.cli", "simulate", "clean", "--steps",
                        str(args.steps), "--batch", "64", "-o", str(path)], check=True,
                       stdout=subprocess.DEVNULL)
        capture = load(path)
        read, check, judged = [], [], 0
        for _ in range(args.rounds):
            gc.disable()
            records, seconds = _timed(lambda: {s: list(capture.records(site=s))
                                               for s in capture.sites})
            read.append(seconds)
            by_site = records.get
            result, seconds = _timed(functools.partial(
                continuity_of, lambda site, of=by_site: of(site, []), capture.sites,
                capture.manifest))
            check.append(seconds)
            judged = result.judged
            gc.enable()
    print(json.dumps(_figures(read, check, judged, args.steps), indent=1))


def _timed(fn: Any) -> tuple[Any, tuple[float, float]]:
    """``fn()`` and its (CPU, wall) seconds."""
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn()
    return out, (time.process_time() - cpu, time.perf_counter() - wall)


def _figures(read: list[tuple[float, float]], check: list[tuple[float, float]], judged: int,
             steps: int) -> dict[str, Any]:
    """Medians of each phase, the CPU per judged token and the check-to-read CPU ratio."""
    def median(rounds: list[tuple[float, float]], i: int) -> float:
        return round(statistics.median(r[i] for r in rounds), 3)

    return {"steps": steps, "judged_tokens": judged,
            "read_cpu_s": median(read, 0), "read_wall_s": median(read, 1),
            "check_cpu_s": median(check, 0), "check_wall_s": median(check, 1),
            "check_cpu_us_per_token": round(median(check, 0) / max(judged, 1) * 1e6, 2),
            "check_to_read_cpu": round(median(check, 0) / max(median(read, 0), 1e-9), 2)}


if __name__ == "__main__":
    main()
