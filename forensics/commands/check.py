"""Replay a capture and compare its verdicts and first finding with CAPTURE/expected.json.

Exit 0 when they match, 1 when they differ (the obtained result is written to
CAPTURE/expected.obtained.json) or when records of a site this install does not know were
judged by no variant (named, counted), 2 for bad input. ``--accept`` writes the capture's baseline
(its expected.json) from this replay instead, and prints the file it wrote.
"""

from __future__ import annotations

import argparse
import sys

from forensics.escaping import json_text, terminal, terminal_lines
from forensics.quiet import quietly

EXAMPLE = """example:
  forensics check data/incident-b-vocab-sentinel.capture
  forensics check my.capture --variant vllm --json
  forensics check my.capture --accept     # write (or rewrite) my.capture/expected.json"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of ``forensics check``."""
    parser.add_argument("capture", help="a NAME.capture directory with an expected.json")
    parser.add_argument("--variant", action="append", default=None, metavar="NAME",
                        help="variants to check (default: the built-in ones in "
                             "expected.json; a vllm+PATH.diff runs only when named here)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--accept", action="store_true",
                        help="write this replay as the capture's expected.json (its baseline)")
    parser.add_argument("--trust-expected", action="store_true",
                        help="also run the registered variants expected.json names (vllm, "
                             "plugins); default: only upstream and patched unless --variant")


@quietly
def run(args: argparse.Namespace) -> int:
    """Check one capture; print the differences; return 0, 1 or (via ForensicsError) 2."""
    from forensics.share.expectations import DEFAULT_VARIANTS, check, regenerate

    if args.accept:
        written = regenerate(args.capture, args.variant or DEFAULT_VARIANTS)
        print(f"wrote {terminal(written)}")
        return 0
    result = check(args.capture, args.variant, trust_expected=args.trust_expected)
    if args.json:
        print(json_text({"capture": str(result.capture), "ok": result.ok,
                         "differences": result.differences,
                         "not_known": result.not_known,
                         "launches_not_checked": result.launches,
                         "variants_not_checked": result.unchecked,
                         "not_read": result.unread,
                         "obtained": result.obtained}, indent=2))
    elif result.ok:
        print(result.matched())
    else:
        print(terminal_lines(result.explain()))
    if result.note and (args.json or result.ok):  # else explain() says it
        print(f"forensics check: {terminal(result.note)}", file=sys.stderr)
    return 0 if result.ok else 1
