"""Files and folders of ours whatever the umask: a new file its owner may read back
(:func:`owner_only`), a folder opened without reading it or following a link at its name
(:func:`open_dir`, :func:`reopened`) and its mode set through that descriptor
(:func:`chmod_open`). A base module: the output writer (:mod:`forensics.atomic`) and the
capture store (:mod:`forensics.store.fs`) both use it."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
from collections.abc import Iterator

from forensics.libc import libc_function

#: the bits a folder this process made keeps whatever the umask: its owner may write and search
OWNER_WRITES = 0o300


#: open a folder, never a link at its name, as a descriptor this process keeps to itself
_FOLDER = os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


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


def path_only(fd: int) -> bool:
    """Whether ``fd`` is a path-only descriptor (Linux's ``O_PATH``: :func:`open_dir` of a
    folder its owner may not read), which can neither list nor read."""
    return bool(fcntl.fcntl(fd, fcntl.F_GETFL) & getattr(os, "O_PATH", 0))


def reopened(fd: int) -> int:
    """A descriptor that reads the folder open at ``fd``: ``fd`` itself, or for a path-only
    one (:func:`open_dir`) a new one opened through ``/proc/self/fd/N`` (the folder it holds,
    no name looked up again), ``fd`` then closed (left open when that fails: OSError)."""
    if not path_only(fd):
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


def sync_file_system(inside: str | os.PathLike[str], dir_fd: int | None = None) -> bool:
    """Flush the whole file system that holds ``inside`` (in the open folder ``dir_fd``):
    ``syncfs`` through a descriptor of it, a link at its name not followed; whether it was
    flushed. The one flush of a folder its owner may not read (Linux fsyncs no ``O_PATH``
    descriptor, and reopens none for reading through ``/proc``)."""
    syncfs = libc_function("syncfs")
    try:
        fd = os.open(inside, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return False
    try:
        return syncfs is not None and syncfs(fd) == 0
    finally:
        os.close(fd)


#: where Linux (4.7 and later) states the process's umask, read without changing it
_STATUS = "/proc/self/status"


def current_umask() -> int:
    """The process's umask, read from its ``Umask:`` line in :data:`_STATUS`; where there is
    none, set to ``077`` for a moment and put back (the only other way: a file another thread
    makes in that moment gets ``077``)."""
    try:
        with open(_STATUS, "rb") as status:
            for line in status:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


#: guards :data:`_LIFTED`: the threads inside :func:`owner_read_write` and the umask before
#: the first of them entered
_LIFT_LOCK = threading.Lock()
_LIFTED: list[int] = [0, 0]


@contextlib.contextmanager
def owner_read_write() -> Iterator[None]:
    """While inside, what this process makes keeps its owner's read and write whatever the
    umask (the umask's owner bits lifted, the others' left): a process pool's semaphores
    (``/dev/shm/sem.*``, made ``0600 & ~umask``) were ``0200`` under umask ``0477``, that
    the pool's own processes could not open (each died, and each row blamed a signal). The
    umask is the process's: a file another thread makes meanwhile keeps its owner's read and
    write too, never more for others, and never less (it is read without setting ``077``:
    :func:`current_umask`). Threads inside at once (or one inside twice) share one lift: the
    first lifts it, the last puts back what the first found (each putting back its own
    left the umask lifted when the two ended in the order they began)."""
    with _LIFT_LOCK:
        if not _LIFTED[0]:
            _LIFTED[1] = _lift()
        _LIFTED[0] += 1
    try:
        yield
    finally:
        with _LIFT_LOCK:
            _LIFTED[0] -= 1
            if not _LIFTED[0]:
                os.umask(_LIFTED[1])


def _lift() -> int:
    """Lift the umask's owner bits; the umask it replaced."""
    read = current_umask()
    mask = os.umask(read & ~0o600)
    if mask != read:  # changed since it was read (outside this module): lift its own
        os.umask(mask & ~0o600)
    return mask
