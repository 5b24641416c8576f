"""forensics repro: write a standalone pytest file that reproduces a capture's out-of-range
indices on the installed vLLM's own code, for a vLLM maintainer, and its data file beside it
(FILE.json: the failing records; the pytest file holds no text of the capture and reads the
JSON at run time). It imports only the standard library, torch, vllm and pytest.

Each test calls vLLM's real function for one site in violation (the origin first) with that
site's first failing record and the smallest stand-ins the function reads on CPU, under a
deadline ("timed out after N s"). It fails while the call raises IndexError (naming the tensor,
element, value and bound the capture holds) or writes an id outside the capture's vocabulary,
and passes once a fix keeps the index in range. Without the vLLM minor version that reproduced
the failure the tests skip, saying why. Writing it needs vLLM 0.32.x or 0.33.x installed.
Model Runner V2's Triton-kernel sites get a test each too: vLLM's kernel runs in Triton's
interpreter on CPU, in a process of its own (the file run with --case N); it checks the ids the
kernel writes and that it writes nothing past its buffers (a read outside a buffer is not
observed there).
"""

from __future__ import annotations

import argparse

from forensics.quiet import quietly

EXAMPLE = """example:
  forensics repro data/incident-b-vocab-sentinel.capture -o test_repro.py
  pytest test_repro.py        # with the vLLM under test installed; test_repro.json beside it"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare CAPTURE, -o FILE.py, --deadline and --force."""
    from forensics.commands._numbers import Number
    from forensics.share.repro import DEFAULT_DEADLINE, MAX_DEADLINE

    parser.add_argument("capture", metavar="CAPTURE", help="a NAME.capture directory")
    parser.add_argument("-o", "--output", required=True, metavar="FILE.py",
                        help="the pytest file to write (its data goes to FILE.json beside it)")
    parser.add_argument("--deadline", default=DEFAULT_DEADLINE, metavar="SECONDS",
                        type=Number("--deadline", 1, MAX_DEADLINE, "a number of seconds",
                                DEFAULT_DEADLINE),
                        help="the seconds each test's vLLM call may run before it fails with "
                             f"'timed out after N s' (1 to {MAX_DEADLINE}; default "
                             f"{DEFAULT_DEADLINE})")
    parser.add_argument("--force", action="store_true",
                        help="replace an existing FILE.py and FILE.json")


@quietly
def run(args: argparse.Namespace) -> int:
    """Write the reproducer and its data; print both files and the tests. Returns 0."""
    import json

    from forensics.escaping import terminal
    from forensics.share.repro import data_path, write_repro

    path = write_repro(args.capture, args.output, force=args.force, deadline=args.deadline)
    data = data_path(path)
    cases = json.loads(data.read_text(encoding="utf-8"))["cases"]
    tests = [f"test_index_stays_in_range[{c['site']}-step{c['step']}-rank{c['rank']}]"
             for c in cases]
    print(terminal(f"wrote {path} and {data}: {', '.join(tests)}"))
    return 0
