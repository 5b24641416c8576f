"""forensics repro: write a standalone pytest file that reproduces a capture's out-of-range
indices on the installed vLLM's own code, for a vLLM maintainer (it imports only torch, vllm
and pytest; the failing records are inline).

Each test calls vLLM's real function for one site with that site's first failing record and the
smallest stand-ins the function reads on CPU, and asserts the index stays in range: it fails on
the unpatched code and passes once a fix is applied. Needs vLLM 0.32.x or 0.33.x installed.
"""

from __future__ import annotations

import argparse

from forensics.quiet import quietly

EXAMPLE = """example:
  forensics repro data/incident-b-vocab-sentinel.capture -o test_repro.py
  pytest test_repro.py        # with the vLLM under test installed"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare CAPTURE, -o FILE.py and --force."""
    parser.add_argument("capture", metavar="CAPTURE", help="a NAME.capture directory")
    parser.add_argument("-o", "--output", required=True, metavar="FILE.py",
                        help="the pytest file to write")
    parser.add_argument("--force", action="store_true", help="replace an existing FILE.py")


@quietly
def run(args: argparse.Namespace) -> int:
    """Write the reproducer; print the file and its tests. Returns 0."""
    from forensics.share.repro import write_repro

    path = write_repro(args.capture, args.output, force=args.force)
    tests = [line.split("(")[0][4:] for line in path.read_text().splitlines()
             if line.startswith("def test_")]
    print(f"wrote {path}: {', '.join(tests)}")
    return 0
