"""Two checkouts' probes side by side: rounds of recorded calls, interleaved.

``python benchmarks/probe_compare.py OLD_ROOT NEW_ROOT [--rounds N] [--case CASE]`` starts one
worker process per checkout (each imports ``forensics`` from its root, e.g. ``git worktree
add`` or ``git archive`` of main into a temporary directory) and asks them for rounds in turn
(old, new, new, old, ...), so both codes see the same load on a shared machine. A round is
``benchmarks/run.py``'s: :data:`run.PROBE_ROUND` plain calls of the reference function, then as
many wrapped calls recording into a real capture, its writer working meanwhile (both under
``torch.inference_mode()``, as in vLLM): of V1's ``batch_change`` (``--case v1``, the
default), or of a Model Runner V2 call site (``--case v2:SITE:MODE``, SITE ``combine`` or
``post_update``, MODE ``record`` or ``guard``: ``benchmarks/probe_v2.py``). Prints,
per code, the medians over rounds of the added cost per call: wall clock, the calling thread's
CPU and the process's CPU (writer thread included), in microseconds; and the median of the
per-round differences new - old (the rounds are paired in time). A writer process's CPU per
call, over all rounds (its start included), is under ``counts``.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def worker(root: str, case: str = "v1") -> None:
    """Serve rounds on stdin/stdout with the ``forensics`` of ``root`` (one JSON line each):
    of V1's ``batch_change`` (``case`` "v1"), or of a V2 call site in a mode
    (``v2:SITE:MODE``, ``benchmarks/probe_v2.py``)."""
    sys.path.insert(0, root)
    sys.path.insert(1, str(HERE))
    from forensics.probe import hooks  # ``root``'s, imported before run.py puts its own first

    # this checkout's benchmark helpers (the same calls for both codes), imported after
    # ``root``'s forensics: run.py puts its own checkout first on the path
    bench = importlib.import_module("run")

    assert Path(hooks.__file__).is_relative_to(root), hooks.__file__
    work = Path(tempfile.mkdtemp(prefix="forensics-probe-compare-"))
    if case == "v1":
        probe = bench.ProbeBench(work)
        one_round = probe.round
    else:
        _, site, mode = case.split(":")
        probe = importlib.import_module("probe_v2").V2Bench(work, mode, bench._round)
        one_round = functools.partial(probe.round, site)
    session = probe.session
    for _ in sys.stdin:
        plain, probed = one_round()
        added = [(p - q) / bench.PROBE_ROUND * 1e6 for p, q in zip(probed, plain, strict=True)]
        print(json.dumps(added), flush=True)
    writer_cpu, calls = bench.writer_process_cpu(session), session.counts["records"]
    session.close()
    print(json.dumps({"written": session.counts["written"],
                      "dropped": session.counts["dropped"],
                      "writer_process_cpu_us_per_call": writer_cpu / max(calls, 1) * 1e6}),
          flush=True)


def compare(roots: dict[str, str], rounds: int, case: str = "v1") -> dict[str, Any]:
    """Interleaved rounds of each root's probe (``case``: see :func:`worker`); the figures
    described in the module doc."""
    procs = {name: subprocess.Popen([sys.executable, __file__, "--worker", root, "--case", case],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for name, root in roots.items()}
    names = list(roots)
    got: dict[str, list[list[float]]] = {name: [] for name in names}
    for r in range(rounds + 1):  # the first round warms up and is dropped
        for name in names if r % 2 == 0 else names[::-1]:
            proc = procs[name]
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write("round\n")
            proc.stdin.flush()
            row = json.loads(proc.stdout.readline())
            if r:
                got[name].append(row)
    counts = {}
    for name, proc in procs.items():
        out, _ = proc.communicate("")
        counts[name] = json.loads(out.strip().splitlines()[-1])
    keys = ("wall_us", "thread_cpu_us", "process_cpu_us")
    out: dict[str, Any] = {"rounds": rounds, "counts": counts}
    for name in names:
        out[name] = {k: statistics.median(row[i] for row in got[name])
                     for i, k in enumerate(keys)}
    old, new = names
    out["new_minus_old"] = {k: statistics.median(b[i] - a[i] for a, b in
                                                 zip(got[old], got[new], strict=True))
                            for i, k in enumerate(keys)}
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line: OLD_ROOT NEW_ROOT [--rounds N], or ``--worker ROOT`` (internal)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="*")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--case", default="v1",
                        help="v1 (batch_change, record mode) or v2:SITE:MODE, SITE combine or "
                             "post_update, MODE record or guard")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.case)
        return 0
    if len(args.roots) != 2:
        parser.error("give OLD_ROOT and NEW_ROOT")
    roots = {"old": str(Path(args.roots[0]).resolve()), "new": str(Path(args.roots[1]).resolve())}
    print(json.dumps(compare(roots, args.rounds, args.case), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
