"""forensics simulate: write a synthetic capture of a scenario (async scheduling + spec decoding).

Scenarios (V1): clean, stale-prev-row, vocab-sentinel, placeholder-leak, misattribution,
clamped-placeholder (vLLM's clamp turns a leaked -1 into token 0), soak (a long run with rare
mixed faults); Model Runner V2: v2-clean, v2-negative-draft, v2-vocab-sample,
v2-wrong-last-token, v2-zeroed-combine. Settings not given take the scenario's own; the same
seed gives the same capture.
"""

from __future__ import annotations

import argparse
import sys
import time

EXAMPLE = """example:
  forensics simulate vocab-sentinel -o sentinel.capture --steps 200 --seed 1
  forensics replay sentinel.capture
  forensics simulate soak -o soak.capture --steps 250000 --batch 64 --spec-tokens 4"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare SCENARIO, -o OUT.capture, --steps, --seed, --batch, --spec-tokens, --vocab,
    --force."""
    from forensics.commands._numbers import Number
    from forensics.simulator.scenarios import MAX_SEED, MAX_STEP_TOKENS, MAX_STEPS, MAX_VOCAB

    parser.add_argument("scenario", metavar="SCENARIO",
                        help="a scenario named above (V1 or v2-...)")
    parser.add_argument("-o", "--output", required=True, metavar="OUT.capture",
                        help="capture directory to create")
    parser.add_argument("--steps", type=Number("--steps", 1, MAX_STEPS, "a number of steps", 200),
                        default=None, help=f"engine steps to record (1 to {MAX_STEPS:,})")
    parser.add_argument("--seed", type=Number("--seed", 0, MAX_SEED, "a seed", 1), default=0,
                        help="random seed (default 0)")
    parser.add_argument("--batch", default=None, help="max concurrent requests",
                        type=Number("--batch", 1, MAX_STEP_TOKENS, "a number of requests", 8))
    parser.add_argument("--spec-tokens", dest="spec_tokens", default=None,
                        type=Number("--spec-tokens", 0, MAX_STEP_TOKENS - 1, "a number of drafts",
                                    4),
                        help="draft tokens per decode row (default 4)")
    parser.add_argument("--vocab", default=None, help=f"vocabulary size (2 to {MAX_VOCAB:,})",
                        type=Number("--vocab", 2, MAX_VOCAB, "a vocabulary size", 32000))
    parser.add_argument("--force", action="store_true",
                        help="replace an existing capture at OUT.capture")


def run(args: argparse.Namespace) -> int:
    """Simulate and write the capture; print one line naming it. Returns 0.

    Raises UnknownScenarioError, ConfigurationError or OutputExistsError (exit 2 in the CLI).
    """
    from forensics.escaping import terminal
    from forensics.simulator.runs import simulate
    from forensics.simulator.scenarios import configure, none_fired

    sc = configure(args.scenario, steps=args.steps, batch=args.batch,
                   spec_tokens=args.spec_tokens, vocab=args.vocab)
    start = time.perf_counter()
    out = simulate(sc, seed=args.seed, out=args.output, force=args.force,
                   progress=sys.stderr.isatty())
    none = none_fired(sc, injected_by(out))
    print(f"wrote {terminal(out)}: scenario {sc.name}, {sc.steps} steps, batch {sc.batch}, "
          f"{sc.spec_tokens} drafts, vocab {sc.vocab}, seed {args.seed} "
          f"({time.perf_counter() - start:.1f} s)"
          + (f"; {none} (its faults are drawn at random: give more --steps or another --seed)"
             if none else ""))
    return 0


def injected_by(out: object) -> dict[str, int] | None:
    """The counts of the faults the simulated capture ``out`` says it injected (its
    manifest's ``simulation.injected``; None when it says none)."""
    import forensics

    simulation = forensics.load(str(out)).manifest.get("simulation") or {}
    injected = simulation.get("injected") if isinstance(simulation, dict) else None
    return injected if isinstance(injected, dict) else None
