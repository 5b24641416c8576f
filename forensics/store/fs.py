"""File-system steps the store's writers share: whole appends and durable directory entries."""

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


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Write all of ``data`` to ``fd`` (os.write may write less than asked)."""
    view = memoryview(data)
    while view.nbytes:
        written = os.write(fd, view)
        view = view[written:]


def append_whole(fd: int, data: bytes | memoryview) -> None:
    """Append all of ``data`` to the file ``fd`` (opened for appending) and fsync it, or
    nothing: when the disk refuses part way (``ENOSPC``, ``EDQUOT``, ``EFBIG``) the file is
    cut back to its size before, so that a later append never follows a part of this one.
    Raises the OSError of the write."""
    start = os.fstat(fd).st_size
    try:
        write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        cut_back(fd, start)
        raise


def cut_back(fd: int, size: int) -> None:
    """Cut the file ``fd`` back to ``size`` bytes (best effort: it only ever shrinks)."""
    try:
        os.ftruncate(fd, size)
    except OSError:
        pass
