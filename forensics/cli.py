"""The ``forensics`` command line: parse, call the public API, print. Nothing else lives here.

Each subcommand is a module in :mod:`forensics.commands` with ``add_arguments(parser)`` and
``run(args) -> int``; a :class:`~forensics.errors.ForensicsError` becomes exit 2 with one line.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from typing import NoReturn

from forensics.commands import COMMANDS
from forensics.commands._numbers import check as check_numbers
from forensics.errors import one_line
from forensics.escaping import inert
from forensics.quiet import add_verbose

__all__ = ["COMMANDS", "build_parser", "main", "one_line"]


class _Parser(argparse.ArgumentParser):
    """argparse's parser whose usage error is one inert line: argparse quotes the words it
    refuses raw (``unrecognized arguments: ...``, ``ambiguous option: ...``), and a word may
    be a capture's name a glob gave (``forensics triage *``)."""

    def error(self, message: str) -> NoReturn:
        """Print the usage and ``PROG: error: MESSAGE`` (inert), exit 2."""
        super().error(inert(message))


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with one subparser per command (each a :class:`_Parser`)."""
    parser = _Parser(
        prog="forensics",
        description="Capture, replay and explain out-of-range indices in vLLM.",
    )
    add_verbose(parser)
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
        add_verbose(sp, default=argparse.SUPPRESS)
        sp.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit code (0 done, 1 failed check, 2 bad input or usage).

    Every error ends as one line on stderr and exit 2 (the traceback only with ``-v``): a
    number an option refused (:mod:`forensics.commands._numbers`) or a ForensicsError as its
    message, an OSError as the file and the reason, anything else as
    an internal error to report.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    warnings.showwarning = _warning_line
    try:
        check_numbers(args)
        _check_capture(args)
        return int(args._run(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader left early (``| head``): not an error to report
        _silence_stdout()
        return BROKEN_PIPE
    except Exception as exc:  # noqa: BLE001  (the one place that turns errors into exit 2)
        if args.verbose:
            raise
        print(f"forensics {args.command}: error: {one_line(exc)}", file=sys.stderr)
        return 2


def _check_capture(args: argparse.Namespace) -> None:
    """A command's CAPTURE (every command names it ``capture``) is a folder this user can read,
    before the command opens anything: a FIFO, a device, a file or a loop of links is one line
    naming it (:func:`~forensics.store.paths.capture_dir`, the one check)."""
    capture = getattr(args, "capture", None)
    if isinstance(capture, str):
        from forensics.store.paths import capture_dir

        capture_dir(capture)


#: the exit code when stdout's reader went away, as a shell reports a SIGPIPE (128 + 13)
BROKEN_PIPE = 141


def _silence_stdout() -> None:
    """Point stdout at the null device, so the interpreter's last flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass  # not a real file (a test's capture): nothing is left to flush


def _warning_line(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: object = None, line: str | None = None) -> None:
    """Show a warning as one line on stderr: ``forensics: warning: MESSAGE``."""
    text = " ".join(str(message).removeprefix("forensics: ").split())
    print(f"forensics: warning: {inert(text)}", file=sys.stderr)  # a message


if __name__ == "__main__":
    sys.exit(main())
