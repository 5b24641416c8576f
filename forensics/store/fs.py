"""File-system steps the store's writers share: making a directory's entries durable."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(root: Path) -> None:
    """Flush ``root``'s directory entries to disk (best effort: a file system that cannot
    fsync a directory is left as it is)."""
    try:
        fd = os.open(root, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
