"""What handing each record to the writer process as it is made costs (issue 41, point 1).

``FORENSICS_HANDOFF=record`` (the default) frames each record into the shared-memory ring and
pokes the writer process as the record is made, so that a SIGSEGV, SIGABRT or SIGKILL of the
engine loses at most the record in flight; ``batch`` (the hand-off before) does so every
``FORENSICS_FLUSH_EVERY`` (256) records, and a crash lost up to that many. One process, two
sessions (one per hand-off, each with its writer process), rounds of ``PROBE_ROUND`` plain,
batch and record calls of the ``batch_change`` reference, interleaved and rotated; figures
are medians over rounds, per call, minus the plain call: the calling thread's CPU (what the
engine's thread pays) and the wall clock; and the writer process's CPU over all its calls.

    .venv/bin/python benchmarks/handoff.py [--rounds 40] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import (  # noqa: E402
    PROBE_ROUND,
    _batch_change_args,
    _fresh,
    _median,
    _round,
    machine,
    writer_process_cpu,
)

HANDOFFS = ("batch", "record")


def measure(rounds: int, work: Path) -> dict[str, Any]:
    """Interleaved rounds of plain, batch and record calls; the per-call figures."""
    import torch

    from forensics.probe import hooks
    from forensics.probe.reference import batch_change_reference as plain
    from forensics.probe.session import ProbeSession
    from forensics.probe.settings import Settings

    sessions = {h: ProbeSession(Settings(directory=work, capture=work / f"{h}.capture",
                                         handoff=h)) for h in HANDOFFS}
    wrapped = hooks.wrap_batch_change(plain)
    args = _batch_change_args(torch)
    timed: dict[str, list[tuple[float, float, float]]] = {"plain": [], **{h: [] for h in HANDOFFS}}

    def probed(session: Any) -> tuple[float, float, float]:
        hooks.activate(session)
        try:
            return _round(lambda: (session.begin_step(), wrapped(*_fresh(args))),
                          inference=True)
        finally:
            hooks.activate(None)

    order = ["plain", *HANDOFFS]
    for i in range(rounds):
        for name in order[i % 3:] + order[:i % 3]:  # each takes each place equally often
            timed[name].append(_round(lambda: plain(*_fresh(args)), inference=True)
                               if name == "plain" else probed(sessions[name]))
    writer_cpu = {h: writer_process_cpu(s) for h, s in sessions.items()}
    for session in sessions.values():
        session.close()
    calls = rounds * PROBE_ROUND
    figures: dict[str, Any] = {}
    for h in HANDOFFS:
        extra = [(_median(timed[h], i) - _median(timed["plain"], i)) / PROBE_ROUND * 1e6
                 for i in range(2)]
        figures[h] = {"us_per_call": round(extra[0], 2), "cpu_us_per_call": round(extra[1], 2),
                      "writer_process_cpu_us_per_call": round(writer_cpu[h] / calls * 1e6, 2),
                      "written": sessions[h].counts["written"],
                      "dropped": sessions[h].counts["dropped"]}
    return {"what": "probe cost per batch_change call by hand-off (record: each record to the "
                    "writer process as it is made; batch: every 256)",
            "rounds": rounds, "calls_per_round": PROBE_ROUND, "handoff": figures,
            "record_over_batch_cpu": round(figures["record"]["cpu_us_per_call"]
                                           / max(figures["batch"]["cpu_us_per_call"], 1e-9), 2),
            "machine": machine()}


def main(argv: list[str]) -> int:
    """Measure; print (and with ``--json``, write) the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        report = measure(args.rounds, Path(work))
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
