"""forensics demo: not built yet."""

from __future__ import annotations

import argparse
import sys

EXAMPLE = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare this command's arguments."""
    parser.add_argument("args", nargs="*")


def run(args: argparse.Namespace) -> int:
    """Say plainly that this command does not exist yet."""
    print("forensics demo: not built yet (see the open issues)", file=sys.stderr)
    return 2
