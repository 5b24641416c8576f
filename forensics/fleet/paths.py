"""``forensics triage PATH...`` -> capture directories: a capture, a folder of them, a glob."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable
from pathlib import Path

from forensics.errors import ConfigurationError
from forensics.store.paths import MANIFEST

CAPTURE_SUFFIX = ".capture"


def is_capture(path: Path) -> bool:
    """Whether ``path`` is a capture directory (named ``*.capture`` or holding a manifest)."""
    return path.is_dir() and (path.name.endswith(CAPTURE_SUFFIX) or (path / MANIFEST).exists())


def find_captures(patterns: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Every capture under ``patterns``, sorted and without repeats.

    A pattern is a capture directory, a folder whose ``*.capture`` children (one level, then
    their folders recursively) are captures, or a glob of either.
    Raises ConfigurationError when a pattern names nothing.
    """
    found: dict[str, Path] = {}
    for pattern in patterns:
        text = os.fspath(pattern)
        matches = sorted(glob.glob(text)) if glob.has_magic(text) else [text]
        hits = [c for m in matches for c in _captures_at(Path(m))]
        if not hits:
            raise ConfigurationError(f"'{text}' names no capture directory; give NAME.capture "
                                     "directories, folders holding them, or a glob")
        for hit in hits:
            found.setdefault(os.path.abspath(hit), hit)
    return [found[key] for key in sorted(found)]


def _captures_at(path: Path) -> list[Path]:
    """``path`` itself when it is a capture, else the captures inside it (recursively; a
    capture's own folders are not searched)."""
    if is_capture(path):
        return [path]
    found: list[Path] = []
    for root, dirs, _ in os.walk(path):
        children = [Path(root) / name for name in sorted(dirs)]
        found += [child for child in children if is_capture(child)]
        dirs[:] = [child.name for child in children if not is_capture(child)]
    return found
