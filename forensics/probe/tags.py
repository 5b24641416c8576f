"""This process's tag in the capture (``host-pid``: the name of its segments and events file),
one that no file of the capture holds yet, claimed by making its events file.

A pid is reused: a process that ended and a new one given its pid (on the same host), or two
sessions of one process in sequence, took the same tag, and the later one appended its events
to the events file of the earlier (two ``probe_start`` and two ``probe_stop`` in one file),
which the probe never does to what it did not create. A tag taken already becomes
``host-N-pid`` with the least N from 2 that no file holds. A capture folder shared by hosts
holds tags that read alike (host ``vm-2`` pid 4242, and host ``vm``'s second session of pid
4242, are both ``vm-2-4242``), and two processes may list the folder before either writes: a
tag is this process's only once it made the tag's events file itself, new (``O_EXCL``); one
another made first is passed over for the next.
"""

from __future__ import annotations

import os
from typing import Any

from forensics.probe.settings import process_tag

#: the tags tried past those the folder's listing shows free before the plain tag is taken
#: unclaimed (others claiming them all as fast: not seen)
MORE_TRIES = 64


def unclaimed(session: Any) -> str:
    """This process's tag, made distinct from those of the files in ``session``'s capture
    folder and claimed there (:func:`claim`); the plain tag when the folder is not held or
    cannot be listed."""
    tag = process_tag()
    try:
        fd = session.folder().fd
        names = os.listdir(fd)
    except OSError:
        return tag
    taken = _taken(names)
    host, pid = tag.rsplit("-", 1)
    tries = (tag, *(f"{host}-{n}-{pid}" for n in range(2, len(taken) + MORE_TRIES)))
    return next((name for name in tries if name not in taken and claim(session, fd, name)),
                tag)


def claim(session: Any, fd: int, tag: str) -> bool:
    """Whether this process made ``tag``'s events file in the folder ``fd``, new (empty, for
    its writer to append to; kept as ``session.claimed``: pid, name, device, inode); False when a
    file of that name is there (another process's); True when it cannot be made for another
    reason (the writer says why when it writes)."""
    from forensics.store.events import events_filename

    name = events_filename(tag)
    try:
        made = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                       | os.O_CLOEXEC, 0o600, dir_fd=fd)
    except FileExistsError:
        return False
    except OSError:
        return True
    status = os.fstat(made)
    os.close(made)
    session.claimed = (os.getpid(), name, status.st_dev, status.st_ino)
    return True


def let_go(session: Any, fd: int) -> None:
    """Remove the events file this process claimed in the folder ``fd`` when it is still
    that empty file (a session that wrote no event leaves no file, nor so an empty folder); a
    forked copy never removes the claim of the process it was copied from."""
    pid, name, device, inode = getattr(session, "claimed", None) or (0, "", 0, 0)
    try:
        status = os.stat(name, dir_fd=fd, follow_symlinks=False) if pid == os.getpid() else None
        if status is not None and (status.st_dev, status.st_ino, status.st_size) == (
                device, inode, 0):
            os.unlink(name, dir_fd=fd)
    except OSError:
        pass  # gone, or not ours to remove: left as it is


def _taken(names: list[str]) -> set[str]:
    """The process tags the segments and events files of ``names`` are named with."""
    from forensics.store.paths import EVENTS_RE, parse_segment_name

    taken = {match["process"] for name in names if (match := EVENTS_RE.fullmatch(name))}
    return taken | {segment.process for name in names
                    if (segment := parse_segment_name(name)) is not None}
