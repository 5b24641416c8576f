"""File-system steps the store's writers share: whole appends and durable directory entries."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from forensics.modes import OWNER_WRITES, chmod_open, open_dir, sync_file_system


def fsync_dir(root: Path, inside: Path | None = None) -> None:
    """Flush ``root``'s directory entries to disk (best effort: a file system that cannot
    fsync a directory is left as it is). A folder its owner may not read (``0300``, made
    under umask ``0477``) cannot be opened for an fsync on Linux (``O_PATH`` gives ``EBADF``,
    a reopening through ``/proc`` ``EACCES``, and its mode is not ours to change); its file
    system is then flushed whole (``syncfs``) through ``inside``, a folder or file in it that
    can be opened. Without ``inside`` it was skipped, unsaid."""
    try:
        fd = os.open(root, os.O_RDONLY)
    except PermissionError:
        if inside is not None:
            sync_file_system(inside)
        return
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


def make_folders(path: Path, mode: int | None = 0o700) -> None:
    """``path`` and its missing parents, made as ``mkdir -p`` makes them whatever the umask
    (``path.mkdir(mode, parents=True)`` gave ``0500`` folders under umask ``0277``, that no
    file could then be made in): ``path``, if made here, takes ``mode``, each parent made here
    (and ``path`` for a ``mode`` of None) keeps what the umask left and the owner's write and
    search. A folder already there is
    left as it is; one replaced by a link before it is set is not followed."""
    missing: list[Path] = []
    at = Path(path)
    while not os.path.lexists(at) and at != at.parent:
        missing.append(at)
        at = at.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o777 if folder != missing[0] or mode is None else mode)
        except FileExistsError:  # made by another process meanwhile: theirs, left as it is
            continue
        set_mode(folder, mode if folder == missing[0] else None)
    if not os.path.isdir(path):
        raise FileExistsError(errno.EEXIST, "not a folder", str(path))


def set_mode(folder: Path, mode: int | None) -> None:
    """Give the folder just made at ``folder`` ``mode`` (None: its own mode and
    :data:`OWNER_WRITES`), through a descriptor (a link put at its name is not followed)."""
    fd = open_dir(folder)
    try:
        info = os.fstat(fd)
        if info.st_uid == os.geteuid():
            chmod_open(fd, (info.st_mode & 0o7777 | OWNER_WRITES) if mode is None else mode)
    finally:
        os.close(fd)
