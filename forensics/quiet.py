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


@contextlib.contextmanager
def third_party_quiet(verbose: bool = False) -> Iterator[None]:
    """Inside: warnings raised outside ``forensics`` are ignored and the :data:`NOISY_LOGGERS`
    log only errors (vLLM through ``VLLM_LOGGING_LEVEL=ERROR`` unless already set). Nothing
    changes when ``verbose``."""
    if verbose:
        yield
        return
    levels = {name: logging.getLogger(name).level for name in NOISY_LOGGERS}
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
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


def add_verbose(parser: argparse.ArgumentParser) -> None:
    """Add ``-v/--verbose`` (show third-party warnings and log lines) to an argparse parser."""
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="show third-party warnings and log lines (torch, vLLM, ...)")


def quietly(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Decorate a command's ``run(args)``: third-party noise hidden unless ``args.verbose``."""
    @functools.wraps(run)
    def wrapped(args: argparse.Namespace) -> int:
        with third_party_quiet(bool(getattr(args, "verbose", False))):
            return run(args)
    return wrapped
