"""Keep third-party noise (torch, vLLM, matplotlib, pandas warnings and log lines) out of the
command line's output unless ``-v``; the toolkit's own warnings always show."""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import os
import warnings
from collections.abc import Callable, Iterator

#: loggers of the libraries a replay or a report imports
NOISY_LOGGERS = ("vllm", "torch", "matplotlib", "papermill", "traitlets", "nbconvert")
#: environment read when torch and vLLM are imported: their own log levels (errors only)
QUIET_ENV = {"VLLM_LOGGING_LEVEL": "ERROR", "TORCH_LOGS": "-all"}


@contextlib.contextmanager
def third_party_quiet(verbose: bool = False) -> Iterator[None]:
    """Inside: warnings raised outside ``forensics`` are ignored and the :data:`NOISY_LOGGERS`
    log only errors (torch and vLLM, imported inside, through :data:`QUIET_ENV` unless the
    variables are already set; restored afterwards). Nothing changes when ``verbose``."""
    if verbose:
        yield
        return
    levels = {name: logging.getLogger(name).level for name in NOISY_LOGGERS}
    added = [name for name in QUIET_ENV if name not in os.environ]
    os.environ.update({name: QUIET_ENV[name] for name in added})
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore")
        warnings.filterwarnings("default", module=r"forensics(\.|$)")
        for name in NOISY_LOGGERS:
            logging.getLogger(name).setLevel(logging.ERROR)
        try:
            yield
        finally:
            for name, level in levels.items():
                logging.getLogger(name).setLevel(level)
            for name in added:
                os.environ.pop(name, None)


VERBOSE_HELP = ("show the traceback of an error (default: one line), and third-party "
                "warnings and log lines (torch, vLLM, ...)")


def add_verbose(parser: argparse.ArgumentParser, *, default: object = False) -> None:
    """Add ``-v/--verbose`` (:data:`VERBOSE_HELP`) to an argparse parser. The CLI adds it to
    the top-level parser and, with ``default=argparse.SUPPRESS`` (so that ``forensics -v
    COMMAND`` is not undone by the command's own default), to every command's."""
    parser.add_argument("-v", "--verbose", action="store_true", default=default,
                        help=VERBOSE_HELP)


def quietly(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Decorate a command's ``run(args)``: third-party noise hidden unless ``args.verbose``."""
    @functools.wraps(run)
    def wrapped(args: argparse.Namespace) -> int:
        with third_party_quiet(bool(getattr(args, "verbose", False))):
            return run(args)
    return wrapped
