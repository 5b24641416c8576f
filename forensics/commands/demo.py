"""Replay every bundled capture through upstream and patched, print the verdict table, and write
DIR/index.html linking one HTML report per incident plus the figures."""

from __future__ import annotations

import argparse
import sys

EXAMPLE = """example:
  forensics demo                 # writes reports/index.html
  forensics demo -o /tmp/demo --no-reports"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of ``forensics demo``."""
    parser.add_argument("-o", "--output", default="reports", metavar="DIR",
                        help="where to write index.html, reports and figures (default: reports)")
    parser.add_argument("--no-reports", action="store_true",
                        help="skip the per-incident HTML reports (faster)")


def run(args: argparse.Namespace) -> int:
    """Run the demo; print the table and a line per report not written; return 0, or 2 when
    some report was not written (the others were)."""
    from forensics.atomic import user_path
    from forensics.escaping import terminal
    from forensics.present.demo import INDEX, format_table, run_demo

    def progress(message: str) -> None:
        if sys.stderr.isatty():
            print(f"  {message}...", file=sys.stderr)

    demo = run_demo(args.output, with_reports=not args.no_reports, progress=progress)
    print(format_table(demo.rows))
    print(f"\nwrote {terminal(user_path(args.output) / INDEX)}")
    for name, why in demo.failed:
        print(f"forensics demo: error: the report of {terminal(name)} was not written: {why}",
              file=sys.stderr)
    return 2 if demo.failed else 0
