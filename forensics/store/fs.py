"""File-system steps the store's writers share: whole appends and durable directory entries."""

from __future__ import annotations

import errno
import fcntl
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


def owner_only(fd: int) -> int:
    """Give the file just made at ``fd`` ``0600`` whatever the umask (``0200`` under
    ``0477``: its owner could not read back what was written, a capture unreadable); return
    ``fd``, closed when that fails."""
    try:
        os.fchmod(fd, 0o600)
    except BaseException:
        os.close(fd)
        raise
    return fd


#: the bits a folder this process made keeps whatever the umask: its owner may write and search
OWNER_WRITES = 0o300


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


#: open a folder, never a link at its name, as a descriptor this process keeps to itself
_FOLDER = os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_dir(folder: str | os.PathLike[str], dir_fd: int | None = None) -> int:
    """A descriptor of ``folder`` (in the open folder ``dir_fd``), a link at its name not
    followed: for reading, or where its owner may not read it (made under umask ``0477``, or
    a folder of search alone, ``0711``: the open was a PermissionError) for its path alone
    (Linux's ``O_PATH``: enough to make, open and rename what is in it, and to set its mode
    with :func:`chmod_open`)."""
    try:
        return os.open(folder, os.O_RDONLY | _FOLDER, dir_fd=dir_fd)
    except PermissionError:
        if not hasattr(os, "O_PATH"):
            raise
        return os.open(folder, os.O_PATH | _FOLDER, dir_fd=dir_fd)


def reopened(fd: int) -> int:
    """A descriptor that reads the folder open at ``fd``: ``fd`` itself, or for a path-only
    one (:func:`open_dir`) a new one opened through ``/proc/self/fd/N`` (the folder it holds,
    no name looked up again), ``fd`` then closed (left open when that fails: OSError)."""
    if not fcntl.fcntl(fd, fcntl.F_GETFL) & getattr(os, "O_PATH", 0):
        return fd
    readable = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    os.close(fd)
    return readable


def chmod_open(fd: int, mode: int) -> None:
    """Give the folder open at ``fd`` ``mode``: an ``O_PATH`` descriptor, which ``fchmod``
    refuses (``EBADF``), through ``/proc/self/fd/N``, which names the folder it holds (as
    glibc's ``fchmodat`` does), never its name looked up again."""
    try:
        os.fchmod(fd, mode)
    except OSError as exc:
        if exc.errno != errno.EBADF:
            raise
        os.chmod(f"/proc/self/fd/{fd}", mode)
