"""What each file a capture's reader reads was when it was about to read it: a stat of each.

A reader stamps a capture's files (:func:`stamps`) before it reads any of them; a file written
to, replaced, added or removed after that has another stamp (its change time moves at every
write, and no call sets it back), so comparing the stamps again (:func:`first_changed`) says
whether what was read may be of another file. Segments are also held by their open files
(:meth:`forensics.store.segment.Segment.held`); these stamps cover every file, the manifest,
``expected.json``, the events files and the ``.idx`` sidecars as well.
"""

from __future__ import annotations

import os
from pathlib import Path

from forensics.store.paths import EVENTS_RE, EXPECTED, INDEX_SUFFIX, MANIFEST, parse_segment_name

#: a file's stamp: device, inode, size, modification and change time (None: none there)
Stamp = tuple[int, int, int, int, int] | None


def read_by_a_reader(name: str) -> bool:
    """Whether a capture's reader reads the file ``name`` of its folder."""
    return (name in (MANIFEST, EXPECTED) or EVENTS_RE.fullmatch(name) is not None
            or name.endswith(INDEX_SUFFIX) or parse_segment_name(name) is not None)


def stamps(root: Path) -> dict[str, Stamp]:
    """The stamp of each file of the capture at ``root`` a reader reads (following a link, as
    the guarded reader does), by name; an unlisted folder has none."""
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return {}
    return {name: stamp(root / name) for name in names if read_by_a_reader(name)}


def stamp(path: Path) -> Stamp:
    """The stamp of the file at ``path`` (None: it cannot be stat'd)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


def first_changed(root: Path, then: dict[str, Stamp]) -> str | None:
    """The first name (in order) of a file of ``root`` a reader reads that is not as ``then``
    stamped it (written to, replaced, added or removed since), or None."""
    now = stamps(root)
    return next((name for name in sorted(set(now) | set(then))
                 if now.get(name, False) != then.get(name, False)), None)


def stamps_text(files: dict[str, Stamp]) -> list[str]:
    """``files`` as lines of text (name and stamp), one a file, in name order."""
    return [f"{name}:{files[name]}" for name in sorted(files)]
