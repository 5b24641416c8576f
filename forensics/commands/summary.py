"""forensics summary: a write-up of a capture's replay to paste into a bug thread or a pull
request.

markdown (default): the conclusion, the verdict table, the first violations and their origin
chains, the capture's facts and the commands that reproduce it. text: one line per variant, for
CI logs. json: the same facts as one object.
"""

from __future__ import annotations

import argparse
import sys

from forensics.present.writeup import FORMATS
from forensics.quiet import quietly

EXAMPLE = """examples:
  forensics summary data/incident-b-vocab-sentinel.capture > incident-b.md
  forensics summary run.capture --variant upstream --variant vllm+my-fix.diff --format text
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare this command's arguments."""
    parser.add_argument("capture", metavar="CAPTURE", help="a NAME.capture directory")
    parser.add_argument("--variant", action="append", metavar="NAME", default=None,
                        help="upstream, patched, vllm or vllm+PATH.diff (repeatable; default: "
                             "upstream and patched)")
    parser.add_argument("--format", choices=FORMATS, default="markdown",
                        help="markdown (default), text (one line per variant) or json")


@quietly
def run(args: argparse.Namespace) -> int:
    """Replay the capture and print its write-up; return 0. The Markdown one, made to be
    shared, names a diff variant as a report does (its file name and digest, never the
    user's folders); its reproduce commands keep the path, which runs."""
    from forensics.present.writeup import render
    from forensics.replaying import replay
    from forensics.variants import DEFAULT_VARIANTS, diffs_named, shared_diffs

    given = list(args.variant or DEFAULT_VARIANTS)
    shown, diffs = shared_diffs(given) if args.format == "markdown" else (given, {})
    with diffs_named(diffs):
        result = replay(args.capture, variants=shown, progress=sys.stderr.isatty())
    print(render(result, args.format, given))
    return 0
