"""forensics replay: replay a capture through variants and print the verdict of each site.

Without --json: a verdict table (sites x variants), the outcome counts and the first finding of
each variant. With --json: one JSON object (capture, records, variants, verdicts, findings,
outcomes, first_finding). Exit 0 when done (findings are results), 1 when the --fail-on variant
has a `violation` or `error` verdict, 2 for bad input or usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

EXAMPLE = """examples:
  forensics replay data/captures/sm70-vocab-sentinel.capture
  forensics replay run.capture --variant upstream --variant vllm --json
  forensics replay run.capture --variant patched --fail-on patched   # CI gate
  forensics replay run.capture --variant upstream --variant vllm+my-fix.diff
"""
FAILING_VERDICTS = ("violation", "error")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare this command's arguments."""
    parser.add_argument("capture", metavar="CAPTURE", help="a NAME.capture directory")
    parser.add_argument("--variant", action="append", metavar="NAME", default=None,
                        help="upstream, patched, vllm or vllm+PATH.diff (repeatable; default: "
                             "upstream and patched)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--fail-on", metavar="VARIANT", default=None,
                        help="exit 1 when this variant has a violation or error verdict "
                             "(added to the variants if missing)")


def run(args: argparse.Namespace) -> int:
    """Replay, print, and return the exit code."""
    from forensics.replay import DEFAULT_VARIANTS, replay

    variants = list(args.variant or DEFAULT_VARIANTS)
    if args.fail_on and args.fail_on not in variants:
        variants.append(args.fail_on)
    from forensics.silent import silent_inputs

    result = replay(args.capture, variants=variants, progress=sys.stderr.isatty())
    silent = silent_inputs(result.records)
    if args.json:
        print(json.dumps({**result.to_json(), "silent_inputs": silent}, indent=2))
    else:
        print(format_result(result, silent))
    if args.fail_on and any(v in FAILING_VERDICTS
                            for v in result.verdicts[args.fail_on].values()):
        return 1
    return 0


def format_result(result: Any, silent: list[dict[str, Any]] | None = None) -> str:
    """The human-readable report: verdict table, outcome counts, first finding per variant,
    then the wrong tokens the model was fed silently (``forensics.silent``)."""
    sites = list(next(iter(result.verdicts.values()), {}))
    width = max([len("site"), *map(len, sites)])
    cols = [max(len(v), 9) for v in result.variants]
    lines = [f"capture {result.source}: {len(result.records)} records",
             "  ".join([f"{'site':<{width}}", *(f"{v:<{c}}" for v, c in
                                               zip(result.variants, cols, strict=True))])]
    for site in sites:
        lines.append("  ".join([f"{site:<{width}}", *(
            f"{result.verdicts[v][site]:<{c}}" for v, c in zip(result.variants, cols,
                                                               strict=True))]))
    for variant in result.variants:
        counts = result.outcome_counts[variant]
        first = result.first_finding(variant)
        where = "no findings" if first is None else (
            f"first finding: step {first['step']} rank {first['rank']} {first['site']} row "
            f"{first['row']} {first['tensor']}[{first['element']}] = {first['value']} "
            f"({first['kind']})")
        lines.append(f"{variant}: ok {counts['ok']}, index_error {counts['index_error']}, "
                     f"error {counts['error']}; {where}")
    if silent:
        from forensics.silent import describe

        lines.append(f"fed silently: {len(silent)} slot(s)")
        lines.extend(f"  {describe(slot)}" for slot in silent[:10])
    return "\n".join(lines)
