"""What holding signals around each record's hand-off would cost (issue 38, round 22, T131f).

The per-record hand-off (``FORENSICS_HANDOFF=record``) frames each record with its signals not
held (:mod:`forensics.probe.held`); the batch hand-off and every waited flush hold them. Rounds
of ``PROBE_ROUND`` plain, ``batch``, ``record`` and ``record_held`` (the per-record hand-off
with the hold forced on) calls of the ``batch_change`` reference, interleaved and rotated;
figures are medians over rounds, per call, minus the plain call: the calling thread's CPU and
the wall clock; and the hold alone (enter and leave, no work), CPU per hold.

    .venv/bin/python benchmarks/handoff_held.py [--rounds 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import PROBE_ROUND, _batch_change_args, _fresh, _median, _round  # noqa: E402

NAMES = ("batch", "record", "record_held")


def hold_alone(times: int = 20000) -> float:
    """CPU microseconds of one hold of the signals (entered and left, nothing inside)."""
    from forensics.probe.held import signals_held

    start = time.process_time()
    for _ in range(times):
        with signals_held(True):
            pass
    return (time.process_time() - start) / times * 1e6


def measure(rounds: int, work: Path) -> dict[str, Any]:
    """Interleaved rounds of the plain call and each hand-off; the per-call figures."""
    import torch

    import forensics.probe.session as session_module
    from forensics.probe import hooks
    from forensics.probe.reference import batch_change_reference as plain
    from forensics.probe.session import ProbeSession
    from forensics.probe.settings import Settings

    real = session_module.signals_held

    def always(hold: bool = True) -> Any:
        return real(True)

    sessions = {n: ProbeSession(Settings(directory=work, capture=work / f"{n}.capture",
                                         handoff="batch" if n == "batch" else "record"))
                for n in NAMES}
    wrapped = hooks.wrap_batch_change(plain)
    args = _batch_change_args(torch)
    timed: dict[str, list[tuple[float, float, float]]] = {"plain": [], **{n: [] for n in NAMES}}

    def probed(name: str) -> tuple[float, float, float]:
        session = sessions[name]
        hooks.activate(session)
        session_module.signals_held = always if name == "record_held" else real
        try:
            return _round(lambda: (session.begin_step(), wrapped(*_fresh(args))),
                          inference=True)
        finally:
            session_module.signals_held = real
            hooks.activate(None)

    order = ["plain", *NAMES]
    for i in range(rounds):
        for name in order[i % 4:] + order[:i % 4]:
            timed[name].append(_round(lambda: plain(*_fresh(args)), inference=True)
                               if name == "plain" else probed(name))
    for session in sessions.values():
        session.close()
    figures: dict[str, Any] = {"hold_alone_cpu_us": round(hold_alone(), 2), "rounds": rounds,
                               "calls_per_round": PROBE_ROUND}
    for name in NAMES:
        extra = [(_median(timed[name], i) - _median(timed["plain"], i)) / PROBE_ROUND * 1e6
                 for i in range(2)]
        figures[name] = {"us_per_call": round(extra[0], 1), "cpu_us_per_call": round(extra[1], 1),
                         "written": sessions[name].counts["written"],
                         "dropped": sessions[name].counts["dropped"]}
    return figures


def main(argv: list[str]) -> int:
    """Measure and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        print(json.dumps(measure(args.rounds, Path(work)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
