"""forensics replay: replay a capture through variants and print the verdict of each site.

Without --json: a verdict table (sites x variants), per variant the outcome counts, the findings
(how many resolved) and the first unresolved violation, then the conclusion (see
forensics.present.conclusion). With --json: one JSON object (capture, records, variants, verdicts,
findings, outcomes, first_finding: per variant the conclusion's first violation with its bound,
origin, request and ``resolved``, null when the text says "no unresolved out-of-bounds finding";
conclusion). Exit 0 when done (findings are results), 1 when the --fail-on variant has a
`violation` or `error` verdict, 2 for bad input or usage. ``--deadline``: the seconds from the
replay's start within which the kernel worker of the ``vllm`` variants (Model Runner V2 sites)
must answer its records; the records it leaves are ``error`` outcomes the conclusion says were
not judged.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Callable
from typing import Any

from forensics.escaping import json_text
from forensics.quiet import quietly

EXAMPLE = """examples:
  forensics replay data/incident-b-vocab-sentinel.capture
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
    from forensics.budget import DEFAULT_REPLAY_DEADLINE
    from forensics.commands._numbers import add_deadline

    add_deadline(parser, DEFAULT_REPLAY_DEADLINE,
                 "the replay, from its start, until the vllm variants' kernel worker (V2 "
                 "sites) has answered",
                 "the records it leaves are errors, said not judged")


@quietly
def run(args: argparse.Namespace) -> int:
    """Replay, print, and return the exit code."""
    from forensics.budget import DEFAULT_REPLAY_DEADLINE
    from forensics.present.conclusion import conclude
    from forensics.replaying import replay
    from forensics.variants import DEFAULT_VARIANTS

    variants = list(args.variant or DEFAULT_VARIANTS)
    if args.fail_on and args.fail_on not in variants:
        variants.append(args.fail_on)
    result = replay(args.capture, variants=variants, progress=sys.stderr.isatty(),
                    deadline=DEFAULT_REPLAY_DEADLINE if args.deadline is None else args.deadline)
    conclusion = conclude(result)
    if args.json:
        print(json_text({**result.to_json(first=conclusion.first),
                         "silent_inputs": conclusion.silent,
                         "conclusion": conclusion.to_json()}, indent=2))
    else:
        print(format_result(result, conclusion))
    if args.fail_on and any(v in FAILING_VERDICTS
                            for v in result.verdicts[args.fail_on].values()):
        return 1
    return 0


def format_result(result: Any, conclusion: Any = None) -> str:
    """The human-readable report: verdict table, one line per variant, the conclusion, then
    the wrong tokens the model was fed silently (``forensics.judge.wrong_tokens``). ``conclusion``:
    ``conclude(result)`` when already computed."""
    from forensics.present.conclusion import conclude
    from forensics.store.unjudged import not_known_text

    conclusion = conclusion if conclusion is not None else conclude(result)
    silent = conclusion.silent
    from forensics.escaping import inert, terminal

    unknown = f"; not judged: {not_known_text(conclusion.not_known)}" \
        if conclusion.not_known else ""
    lines = [f"capture {terminal(result.source)}: {len(result.records)} records{unknown}",
             *verdict_table(result.verdicts, result.variants, result.shown_verdict)]
    lines += [inert(variant_line(result, conclusion, v)) for v in result.variants]
    lines += ["", "conclusion:", textwrap.fill(inert(conclusion.paragraph()), width=100,
                                               initial_indent="  ", subsequent_indent="  ")]
    if silent:
        from forensics.judge.wrong_tokens import describe

        lines.append(f"fed silently: {len(silent)} slot(s)")
        lines.extend(f"  {terminal(describe(slot))}" for slot in silent[:10])
    return "\n".join(lines)


def verdict_table(verdicts: dict[str, dict[str, str]], variants: list[str],
                  show: Callable[[str, str], str] | None = None) -> list[str]:
    """The verdicts as aligned text lines: one column per variant, one line per site, each
    verdict as ``show(variant, site)`` gives it (``ReplayResult.shown_verdict``: "(as
    installed)" beside one a diff variant reached through the installed code); a variant's
    name (``vllm+PATH.diff`` names a file) inert (``escaping.terminal``)."""
    from forensics.escaping import terminal

    sites = list(next(iter(verdicts.values()), {}))
    width = max([len("site"), *map(len, sites)])
    names = [terminal(v) for v in variants]
    shown = {v: {s: show(v, s) if show else verdicts[v][s] for s in sites} for v in variants}
    cols = [max(len(name), 9, *(len(t) for t in shown[v].values()))
            for name, v in zip(names, variants, strict=True)]
    lines = ["  ".join([f"{'site':<{width}}", *(f"{name:<{c}}" for name, c in
                                               zip(names, cols, strict=True))])]
    for site in sites:
        lines.append("  ".join([f"{site:<{width}}", *(
            f"{shown[v][site]:<{c}}" for v, c in zip(variants, cols, strict=True))]))
    return lines


def variant_line(result: Any, conclusion: Any, variant: str) -> str:
    """``variant: ok N, index_error N, error N; F findings (R resolved at their origin); first
    violation ...``: R counts the sink findings whose origin, replayed under ``variant``, no
    longer writes the value (not the conclusion's "resolves N of M": findings a patch made go
    away)."""
    from forensics.judge.findings import is_judged
    from forensics.present.conclusion import describe_finding

    counts = result.outcome_counts[variant]
    mine = result.findings[result.findings["variant"] == variant]
    resolved = int(mine["resolved"].map(lambda r: r is True).sum())
    unseen = int((~is_judged(mine)).sum())
    first = conclusion.first.get(variant)
    where = ("no unresolved out-of-bounds finding" if first is None
             else f"first violation: {describe_finding(first)}")
    judged = f", {unseen} not judged" if unseen else ""
    note = getattr(result, "notes", {}).get(variant)
    return (f"{variant}: ok {counts['ok']}, index_error {counts['index_error']}, "
            f"error {counts['error']}; {len(mine)} findings ({resolved} resolved at their origin"
            f"{judged}); "
            f"{where}{'' if note is None else '; ' + note}")
