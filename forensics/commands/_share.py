"""What ``forensics shrink`` and ``forensics redact`` share: their common arguments, and the
exit-1 refusal of an output whose evidence would change."""

from __future__ import annotations

import argparse
import sys

from forensics.errors import ForensicsError, one_line


def add_common_arguments(parser: argparse.ArgumentParser, out_metavar: str) -> None:
    """Declare CAPTURE, -o OUT (``out_metavar``), --variant and --force."""
    parser.add_argument("capture", metavar="CAPTURE", help="a NAME.capture directory")
    parser.add_argument("-o", "--output", required=True, metavar=out_metavar,
                        help="capture directory to create")
    parser.add_argument("--variant", action="append", metavar="NAME", default=None,
                        help="variants whose verdicts and first findings are kept (repeatable; "
                             "default: upstream and patched)")
    parser.add_argument("--force", action="store_true",
                        help=f"replace an existing capture at {out_metavar}")


def refused(command: str, exc: ForensicsError) -> int:
    """Print the refusal of a capture whose evidence changed (one line); return exit code 1."""
    print(f"forensics {command}: {one_line(exc)}", file=sys.stderr)  # its finding's names
    return 1
