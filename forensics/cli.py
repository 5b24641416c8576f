"""The ``forensics`` command line: parse, call the public API, print. Nothing else lives here.

Each subcommand is a module in :mod:`forensics.commands` with ``add_arguments(parser)`` and
``run(args) -> int``; a :class:`~forensics.errors.ForensicsError` becomes exit 2 with one line.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from forensics.errors import ForensicsError

#: subcommand -> (module in forensics.commands, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "import": ("import_", "import foreign dumps and logs into a capture"),
    "inspect": ("inspect", "summarise a capture without replaying it"),
    "replay": ("replay", "replay a capture through variants and print verdicts"),
    "check": ("check", "compare a capture's replay with its expected.json"),
    "plot": ("plot", "draw one figure of a capture's replay"),
    "report": ("report", "write a self-contained HTML report of a capture"),
    "simulate": ("simulate", "generate a synthetic capture of a scenario"),
    "demo": ("demo", "replay every bundled capture and write reports"),
    "summary": ("summary", "write up a capture's replay for a bug thread or pull request"),
    "findings": ("findings", "export a capture's findings (CSV, Parquet, JSON lines)"),
}


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with one subparser per command."""
    parser = argparse.ArgumentParser(
        prog="forensics",
        description="Capture, replay and explain out-of-range indices in vLLM.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module_name, help_text) in COMMANDS.items():
        module = importlib.import_module(f"forensics.commands.{module_name}")
        sp = sub.add_parser(
            name,
            help=help_text,
            description=(module.__doc__ or help_text).strip(),
            epilog=getattr(module, "EXAMPLE", None),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(sp)
        sp.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit code (0 done, 1 failed check, 2 bad input or usage)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args))
    except ForensicsError as exc:
        print(f"forensics {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
