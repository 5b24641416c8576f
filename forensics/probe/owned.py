"""The probe's own capture folder: made new by the first process, joined only by its own.

The first process that loads the probe makes its capture folder itself (``mkdir``, mode
0700, a name no one can guess: ``<UTC time>-<pid>-<random>.capture``) and passes its name and
its identity (device, inode and owner: :data:`~forensics.probe.settings.ENV_OWNER`) to the
processes it starts. A process joins an inherited folder only when it is that very folder
(opened without following a symlink, same device and inode, owned by this user, private);
anything else in the way (a symlink, a FIFO, a file, a folder someone made or forged) is
never read, written or adopted: one log line says what was there, and the probe makes a new
folder under a fresh name. Writers then reach the folder through a descriptor held open
(:class:`OwnedFolder`), so that renaming or replacing the name later changes nothing.

A joining process leaves an empty ``.joined-<pid>`` file in the folder as it joins: the first
process removes its folder at exit only when it is empty (an engine that recorded nothing),
and a child that joined but has not written yet (a V2 worker flushes its first records at
shutdown, after the first process has gone) must not lose its folder.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from forensics.escaping import terminal
from forensics.modes import chmod_open, open_dir, path_only, reopened
from forensics.probe.settings import unique_name
from forensics.store.fs import make_folders

LOG = logging.getLogger("forensics.probe")
#: how many fresh names the probe tries before it gives up (each one was in the way)
ATTEMPTS = 16
#: the mark a joining process leaves in the folder it joins (followed by its pid)
JOINED_MARK = ".joined-"
#: the identities of the folders this process made (it never marks those as joined)
_MADE_HERE: set[str] = set()


def identity(st: os.stat_result) -> str:
    """The identity a joining process checks: ``<device>:<inode>:<uid>``."""
    return f"{st.st_dev}:{st.st_ino}:{st.st_uid}"


def describe(path: Path) -> str:
    """What is at ``path``, in a few words, without following it."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"nothing usable ({exc.strerror})"
    kinds = ((stat.S_ISLNK, "a symlink"), (stat.S_ISFIFO, "a FIFO"),
             (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"),
             (stat.S_ISREG, "a file"))
    kind = next((word for test, word in kinds if test(st.st_mode)), "a special file")
    owner = "yours" if st.st_uid == os.getuid() else f"of uid {st.st_uid}"
    return f"{kind} ({owner}, mode {stat.S_IMODE(st.st_mode):o})"


def open_folder(path: Path) -> int:
    """A descriptor of the folder ``path`` itself (never through a symlink). Raises OSError."""
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)


def refusal(path: Path, owner: str) -> str | None:
    """Why ``path`` is not the folder whose identity is ``owner`` (None when it is)."""
    try:
        fd = open_folder(path)
    except OSError:
        return f"{describe(path)} is there"
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    if identity(st) != owner:
        return f"{describe(path)} is there, not the folder the first process made"
    if st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o077:
        return f"{describe(path)} is there, not private to this user"
    return None


def make_folder(directory: Path, first: Path) -> tuple[Path, str]:
    """Make a new private capture folder in ``directory``, named ``first`` unless something
    is in the way (then a fresh name, and one log line saying what was there); return its
    path and identity. Raises OSError when no folder can be made."""
    make_folders(directory)  # 0700 whatever the umask: 0500 under 0277, then refused
    warn_if_shared(directory)
    path = first
    for _ in range(ATTEMPTS):
        try:
            os.mkdir(path, 0o700)
            owner = _opened_new(path)
        except FileExistsError:
            owner = None
        if owner is not None:
            return path, owner
        fresh = directory / unique_name()
        LOG.warning("forensics probe: %s is in the way at %s; it is left untouched and "
                    "the capture goes to %s", describe(path), terminal(path), terminal(fresh))
        path = fresh
    raise FileExistsError(f"{ATTEMPTS} capture names in {terminal(directory)} were all taken")


def _opened_new(path: Path) -> str | None:
    """The identity of the folder just made at ``path``, made private whatever the umask;
    None when what the name leads to now is not it (another user renamed it and put a
    symlink, a file, a folder of theirs, or an old capture of this user's, in its place
    between the ``mkdir`` and this open): it is left untouched."""
    try:
        fd = open_dir(path)  # for its path alone where the umask took its read bit (0477)
    except OSError:
        return None
    try:
        if os.fstat(fd).st_uid != os.getuid() or not path_only(fd) and os.listdir(fd):
            return None  # not the empty folder just made: left untouched, its mode too
        chmod_open(fd, 0o700)
        fd = reopened(fd)
        return None if os.listdir(fd) else identity(os.fstat(fd))
    finally:
        os.close(fd)


def warn_if_shared(directory: Path) -> None:
    """One log line when other users may rename or replace entries of ``directory`` (it is
    writable by its group or by others without the sticky bit, or owned by another user
    than this one or root), or ``directory`` itself: a folder or a symlink on its path that
    such a user may replace (:func:`replaceable`): the capture's contents stay private, but
    its name may be taken away or stand for a folder someone else made once the engine is
    done."""
    st = os.stat(directory)
    if _open_to_others(st):
        what = f"the capture directory {terminal(directory)} is {describe(directory)}"
    else:
        link = replaceable(directory)
        if link is None:
            return
        what = (f"the capture directory {terminal(directory)} has on its path "
                f"{terminal(link)}, {describe(link)} in {describe(link.parent)}")
    LOG.warning("forensics probe: %s: other users may rename or replace the capture folder's "
                "name (its contents stay private to you); point FORENSICS_DIR at a directory "
                "of your own", what)


def _open_to_others(st: os.stat_result) -> bool:
    """True when another user than this one or root may rename or replace the entries of the
    folder of status ``st``: writable by its group or others without the sticky bit, or
    owned by another user."""
    shared = st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX
    return bool(shared) or st.st_uid not in (os.getuid(), 0)


def replaceable(directory: Path) -> Path | None:
    """The first folder or symlink on the path to ``directory`` (as given, then as resolved)
    that another user may rename or replace: its parent is open to them
    (:func:`_open_to_others`), or it is theirs in a sticky folder; None when there is none."""
    for path in (directory, directory.resolve()):
        for entry in reversed(path.parents[:-1]):  # from the root down, the root excluded
            if _replaceable_entry(entry):
                return entry
        if _replaceable_entry(path):
            return path
    return None


def _replaceable_entry(entry: Path) -> bool:
    """True when another user may rename or replace ``entry`` (see :func:`replaceable`)."""
    try:
        parent, own = os.stat(entry.parent), os.lstat(entry)
    except OSError:  # not there yet: the probe makes it, as this user
        return False
    sticky_other = parent.st_mode & stat.S_ISVTX and own.st_uid not in (os.getuid(), 0)
    return _open_to_others(parent) or bool(sticky_other)


def claim(settings: Any) -> Any:
    """``settings`` with a capture folder this process may write: the inherited one when it
    is the folder the first process made (:func:`refusal`), else a new one (a log line says
    why); the same settings when they already name it. Raises OSError when no folder can be
    made."""
    capture: Path = settings.capture
    if settings.owner:
        why = refusal(capture, settings.owner)
        if why is None and settings.owner not in _MADE_HERE:
            why = mark_joined(capture, settings.owner)
        if why is None:
            return settings
        fresh = settings.directory / unique_name()
        LOG.warning("forensics probe: the inherited capture folder %s is not joined: %s; this "
                    "process writes a new capture instead", terminal(capture), why)
        capture = fresh
    path, owner = make_folder(settings.directory, capture)
    _MADE_HERE.add(owner)
    return dataclasses.replace(settings, capture=path, owner=owner)


def mark_joined(path: Path, owner: str) -> str | None:
    """Leave this process's :data:`JOINED_MARK` in the folder ``path`` whose identity is
    ``owner``; why it could not (the folder is gone or replaced), None when it did."""
    return leave_mark(path, owner, f"{JOINED_MARK}{os.getpid()}")


def leave_mark(path: Path, owner: str, name: str) -> str | None:
    """Leave the empty file ``name`` in the folder ``path`` whose identity is ``owner``; why
    it could not (see :func:`mark_joined`), None when it did."""
    return _in_folder(path, owner, lambda fd: os.close(os.open(
        name, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=fd)))


def take_mark(path: Path, owner: str, left: str) -> str | None:
    """Rename the mark ``left`` (left in the folder ``path`` whose identity is ``owner`` for
    this process, a forked copy, before the fork) to this process's :data:`JOINED_MARK`; why
    it could not, None when it did."""
    return _in_folder(path, owner, lambda fd: os.rename(
        left, f"{JOINED_MARK}{os.getpid()}", src_dir_fd=fd, dst_dir_fd=fd))


def drop_mark(path: Path, owner: str, left: str) -> str | None:
    """Remove the mark ``left`` (left for a forked copy that was never made) from the folder
    ``path`` whose identity is ``owner``, if it is still there; why it could not, None when it
    did or it was gone."""
    def unlink(fd: int) -> None:
        try:
            os.unlink(left, dir_fd=fd)
        except FileNotFoundError:
            pass  # the copy took it
    return _in_folder(path, owner, unlink)


def _in_folder(path: Path, owner: str, act: Callable[[int], None]) -> str | None:
    """Do ``act`` with a descriptor of the folder ``path`` when its identity is ``owner``; why
    it could not (see :func:`mark_joined`), None when it did."""
    try:
        fd = open_folder(path)
    except OSError as exc:
        return f"the folder is gone ({exc.strerror})"
    try:
        if identity(os.fstat(fd)) != owner:
            return f"{describe(path)} is there, not the folder the first process made"
        act(fd)
        return None
    except OSError as exc:
        return _unmarked(path, exc)
    finally:
        os.close(fd)


def _unmarked(path: Path, exc: OSError) -> str | None:
    """Why the folder ``path`` is not joined when its join mark could not be made (``exc``):
    removed after it was opened; None (joined, and one log line says so) when the disk or the
    quota is full: the folder is there and is this process's to write when room is made."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        LOG.warning("forensics probe: the capture folder %s is joined without its join mark "
                    "(%s): if the engine's first process ends before this one writes, it may "
                    "remove the folder as empty", terminal(path), exc.strerror)
        return None
    if exc.errno == errno.ENOENT:
        return f"the folder was removed as it was joined ({exc.strerror})"
    return f"no join mark could be made in it ({exc.strerror})"


#: where Linux names an open descriptor as a path (a folder's: that very folder)
FDS = "/proc/self/fd"


def through_descriptor(fd: int, name: str | os.PathLike[str]) -> Path:
    """``/proc/self/fd/<fd>``, when it names the folder ``fd`` holds open (``name``: that
    folder's name, for the message).

    Raises PermissionError, one line naming the folder and the fix, when it does not."""
    through = Path(f"{FDS}/{fd}")
    try:
        same = os.path.samestat(os.stat(through), os.fstat(fd))
    except OSError:
        same = False
    if not same:
        raise PermissionError(
            f"capture folder {terminal(name)}: {through} does not name the folder held open "
            "(no /proc, or it is unreadable here), so the probe cannot write through it, and "
            "it does not write through the folder's name, which another user could replace; "
            "nothing is captured: mount /proc (e.g. run the container with /proc mounted)")
    return through


def check_reachable(path: Path) -> None:
    """Raise PermissionError (:func:`through_descriptor`) when the folder ``path``, held open,
    cannot be reached through ``/proc/self/fd`` (no ``/proc``): the probe then writes
    nothing; OSError when it cannot be opened."""
    fd = open_folder(path)
    try:
        through_descriptor(fd, path)
    finally:
        os.close(fd)


def remove_empty(path: Path) -> None:
    """Remove the folder ``path`` this process made, when it is still empty (else leave it)."""
    try:
        os.rmdir(path)
    except OSError:
        pass


class OwnedFolder:
    """The capture folder held open (after :func:`refusal` cleared it): ``path`` reaches the
    folder through the descriptor (``/proc/self/fd/N``), whatever happens to its name."""

    def __init__(self, path: Path, owner: str) -> None:
        why = refusal(path, owner)
        if why is not None:
            raise PermissionError(f"capture folder {terminal(path)}: {why}; the probe writes "
                                  "only into the folder its first process made")
        self.name = path
        self.fd = open_folder(path)
        if identity(os.fstat(self.fd)) != owner:  # replaced between the check and the open
            os.close(self.fd)
            raise PermissionError(f"capture folder {terminal(path)} was replaced while it was "
                                  "opened")

    @property
    def path(self) -> Path:
        """A path to the folder through the held descriptor (``/proc/self/fd/N``).

        Raises PermissionError (one line naming the folder and the fix) where that path does
        not name the folder held open (no ``/proc``, or it is unreadable): its name is never
        written through (another user may have put a folder of theirs under it), nor would
        ``/proc/self/fd/N`` be made as a folder."""
        return through_descriptor(self.fd, self.name)

    def close(self) -> None:
        """Let go of the folder (closing twice is harmless)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
