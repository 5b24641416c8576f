"""Run one vLLM engine (CPU build) on the tiny model and write what happened as JSON.

``python drive.py --model DIR --out RESULT.json [--spec 3] [--penalties] ...`` in
``.venv-engine``. The result holds each request's generated token ids, tokens/s, and the
exception (type and message) if generation raised. Used by tests/engine and
benchmarks/engine.py; the probe and the harness are configured by the environment.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any


def parse(argv: list[str]) -> argparse.Namespace:
    """The driver's options."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--spec", type=int, default=3, help="draft tokens (0: no spec decode)")
    parser.add_argument("--penalties", action="store_true")
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=1, help="generate calls (timed each)")
    parser.add_argument("--serve", action="store_true",
                        help="after start, generate once per 'generate' line read from stdin, "
                             "appending one JSON line per round to --out (benchmarks)")
    return parser.parse_args(argv)


def prompts(count: int) -> list[list[int]]:
    """``count`` fixed prompts of 6 to 12 token ids (ids 4..511 are words)."""
    return [[4 + (7 * i + 13 * j) % 500 for j in range(6 + (i % 7))] for i in range(count)]


def make_llm(args: argparse.Namespace) -> Any:
    """The engine: async scheduling is whatever the harness makes it; draft_model drafts."""
    from vllm import LLM

    options: dict[str, Any] = dict(model=args.model, dtype="float32", enforce_eager=True,
                                   max_model_len=256, max_num_seqs=8, seed=0,
                                   gpu_memory_utilization=0.5)
    if args.spec:
        options["speculative_config"] = {"method": "draft_model", "model": args.model,
                                         "num_speculative_tokens": args.spec}
    return LLM(**options)


def generate(llm: Any, args: argparse.Namespace) -> tuple[list[list[int]], float, int]:
    """Generate once: (token ids per request, seconds, tokens)."""
    from vllm import SamplingParams, TokensPrompt

    extra = {"repetition_penalty": 1.3, "frequency_penalty": 0.4} if args.penalties else {}
    params = SamplingParams(temperature=0.0, max_tokens=args.max_tokens, ignore_eos=True,
                            detokenize=False, **extra)
    start = time.perf_counter()
    outputs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts(args.prompts)],
                           params, use_tqdm=False)
    seconds = time.perf_counter() - start
    tokens = [list(o.outputs[0].token_ids) for o in outputs]
    return tokens, seconds, sum(len(t) for t in tokens)


def serve(args: argparse.Namespace) -> int:
    """Start the engine, append ``{"startup_s"}``, then one round per ``generate`` line read."""
    out = Path(args.out)
    started = time.perf_counter()
    llm = make_llm(args)
    _append(out, {"startup_s": time.perf_counter() - started})
    for line in sys.stdin:
        if line.strip() != "generate":
            break
        cpu = cpu_seconds()
        _, seconds, count = generate(llm, args)
        _append(out, {"seconds": seconds, "cpu_s": cpu_seconds() - cpu, "tokens": count,
                      "tokens_per_s": count / seconds})
    return 0


def cpu_seconds() -> float:
    """CPU seconds (user + system) used so far by this process and the engine's processes."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for process in (me, *me.children(recursive=True)):
        try:
            times = process.cpu_times()
            total += times.user + times.system
        except psutil.Error:  # a process that has just exited
            continue
    return total


def _append(path: Path, entry: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")


def main(argv: list[str]) -> int:
    """Start the engine, generate ``--rounds`` times, write the result; 0, or 1 if it raised."""
    args = parse(argv)
    if args.serve:
        return serve(args)
    result: dict[str, Any] = {"rounds": []}
    try:
        started = time.perf_counter()
        llm = make_llm(args)
        result["startup_s"] = time.perf_counter() - started
        for _ in range(args.rounds):
            tokens, seconds, count = generate(llm, args)
            result["rounds"].append({"seconds": seconds, "tokens": count,
                                     "tokens_per_s": count / seconds})
            result["token_ids"] = tokens
    except BaseException as exc:  # the test reads what the engine raised
        result["error"] = {"type": type(exc).__name__, "message": str(exc)[:4000],
                           "traceback": traceback.format_exc()[-6000:]}
    Path(args.out).write_text(json.dumps(result))
    return 1 if "error" in result else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
