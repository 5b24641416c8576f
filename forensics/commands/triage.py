"""forensics triage: replay many captures (local processes or Ray), one row each, grouped by
known issue, then by signature, a table per group: the host, vLLM version, runner, events,
verdicts, first finding, the known issue it matches, and any (corroborated) rank divergence of
an engine spread over several captures.
"""

from __future__ import annotations

import argparse
import sys

EXAMPLE = """example:
  forensics triage data/ --format markdown       # the bundled captures
  forensics triage 'fleet/*/*.capture' -o triage.parquet --html triage-html/
  forensics triage captures/ --ray               # a Ray cluster started here
  forensics triage captures/ --ray ray://head:10001"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare PATH..., --format, -o, --html, --ray [ADDRESS], --workers, --split-records."""
    from forensics.commands._numbers import Number
    from forensics.fleet.output import FORMATS
    from forensics.fleet.runners import WORKERS_PER_CPU, most_workers
    from forensics.fleet.tasks import MAX_SPLIT_RECORDS, MIN_SPLIT_RECORDS, SPLIT_RECORDS

    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="capture directories, folders holding them, or globs")
    parser.add_argument("--format", choices=FORMATS, default="text", help="stdout format")
    parser.add_argument("-o", "--output", metavar="F.parquet|F.csv",
                        help="also write one row per capture to a Parquet or CSV file")
    parser.add_argument("--html", metavar="DIR",
                        help="write DIR/index.html and a report per group's first capture")
    parser.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                        help="run on Ray (no ADDRESS: a cluster started on this machine)")
    parser.add_argument("--workers", default=None,
                        type=Number("--workers", 1, most_workers(), "a number of processes", 4),
                        help=f"local processes (default: the CPUs; at most {WORKERS_PER_CPU} per "
                             "CPU, and never more than tasks)")
    parser.add_argument("--split-records", dest="split_records", default=SPLIT_RECORDS,
                        type=Number("--split-records", MIN_SPLIT_RECORDS, MAX_SPLIT_RECORDS,
                                    "a number of records", SPLIT_RECORDS),
                        help=f"replay a larger capture in step ranges of about this many records "
                             f"({MIN_SPLIT_RECORDS:,} to {MAX_SPLIT_RECORDS:,}; default "
                             f"{SPLIT_RECORDS:,})")


def run(args: argparse.Namespace) -> int:
    """Triage and print; write the table and the HTML index when asked. Returns 0."""
    from pathlib import Path

    from forensics.atomic import real_folder, real_output, refuse_inside_captures
    from forensics.escaping import terminal
    from forensics.fleet.output import render, write_html, write_table
    from forensics.fleet.paths import find_captures, unlisted_note, unread_note
    from forensics.fleet.triage import triage

    unlisted: list[tuple[Path, OSError]] = []
    captures = find_captures(args.paths, unlisted)
    for note in (unread_note(captures), unlisted_note(unlisted)):
        if note:
            print(note, file=sys.stderr)
    for option, path in (("-o", args.output), ("--html", args.html)):
        if path is not None:  # "" (an unset "$OUT") is refused: it wrote nothing, unsaid
            refuse_inside_captures(path, captures, option)
            (real_output if option == "-o" else real_folder)(path)  # before any replay
    result = triage(args.paths, ray=args.ray, workers=args.workers,
                    split_records=args.split_records, progress=sys.stderr.isatty())
    sys.stdout.write(render(result, args.format))
    if args.output is not None:  # a name made of a capture's (a script's -o) is inert
        print(f"wrote {terminal(write_table(result, args.output))}", file=sys.stderr)
    if args.html is not None:
        print(f"wrote {terminal(write_html(result, args.html))}", file=sys.stderr)
    return 0
