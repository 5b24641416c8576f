"""Write a self-contained HTML report of a capture.

Runs an investigation notebook (default 03_triage) against the capture, in a child process
(as papermill would, without a kernel; a cell that outlives FORENSICS_CHILD_TIMEOUT, 600 s, is
ended with the processes it started), and exports it with an offline template: figures embedded,
nothing loaded from the network, no script, code hidden unless --with-code. The header opens
with the conclusion as short lines (see forensics.present.conclusion), the verdict table and a
contents list; the pictures come next; every finding is listed, grouped per (variant, site, step,
row), in one collapsed section per variant and site.
--variant (repeatable) chooses the variants replayed, real-code ones included. One line per
stage goes to stderr on a terminal. An existing REPORT.html is overwritten.
"""

from __future__ import annotations

import argparse
import sys

from forensics.escaping import terminal
from forensics.quiet import quietly

EXAMPLE = """example:
  forensics report data/incident-b-vocab-sentinel.capture -o incident-b.html
  forensics report my.capture -o my.html --notebook 00_quickstart --with-code
  forensics report my.capture -o my.html --notebook path/to/mine.ipynb
  forensics report my.capture -o fix.html --variant upstream --variant vllm+my-fix.diff"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of ``forensics report``."""
    parser.add_argument("capture", help="a NAME.capture directory")
    parser.add_argument("-o", "--output", required=True, metavar="REPORT.html",
                        help="the HTML file to write")
    parser.add_argument("--notebook", default="03_triage", metavar="NAME",
                        help="a notebook of notebooks/ (00_quickstart, 01_stale_prev_rows, "
                             "02_vocab_sentinel, 03_triage) or a path to an .ipynb "
                             "(default: 03_triage); 01_ and 02_ tell one incident each and "
                             "run on that incident's bundled capture only")
    parser.add_argument("--with-code", action="store_true", help="show the code cells")
    parser.add_argument("--variant", action="append", metavar="NAME", default=None,
                        help="upstream, patched, vllm or vllm+PATH.diff (repeatable; default: "
                             "the notebook's, upstream and patched)")


@quietly
def run(args: argparse.Namespace) -> int:
    """Write the report; print its path; return 0 (bad input raises a ForensicsError)."""
    from forensics.present.report import write_report

    path = write_report(args.capture, args.output, notebook=args.notebook,
                        with_code=args.with_code, variants=args.variant,
                        progress=sys.stderr.isatty())
    print(terminal(path))  # a name made of a capture's (a script's -o) is inert
    return 0
