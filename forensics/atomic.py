"""Atomic outputs: every file we write is built beside its target and renamed into place, so a
full disk or a crash leaves the old file or the new one, never a truncated one.

A file is private (``0600``) unless its writer says it is for sharing (``shared=True``: reports,
exports, plots, write-ups, the demo's index), which then gets the mode a plain ``open()`` would
give it under the process's umask (``0644`` under umask 022), its owner's read and write kept
(``0600`` under umask ``0477``). Captures, and anything redaction has not passed, stay
private."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from forensics.errors import ConfigurationError, ForensicsError, OutputError, reason
from forensics.escaping import capped, terminal
from forensics.modes import (
    OWNER_WRITES,
    chmod_open,
    current_umask,
    open_dir,
    owner_only,
    path_only,
    reopened,
    sync_file_system,
)


def user_path(path: str | os.PathLike[str]) -> Path:
    """A path as its user gave it (``-o``, ``--html``, an API argument): ``~`` and ``~user``
    expanded as a shell would (a path in quotes, from Python or from a script reaches us as it
    is), nothing else changed. Every output path a command or the API takes goes through this
    first, so ``~`` means the same to all of them.

    Raises ConfigurationError: a ``~user`` with no home directory here (or ``~`` with no
    ``HOME`` and no entry for this user), naming the path; an empty path (``Path("")`` is the
    working directory: ``load("")`` read it) or one holding NUL (Python's ValueError)."""
    unnamed = unnamed_path(path)
    if unnamed is not None:
        raise ConfigurationError(unnamed)
    try:
        return Path(path).expanduser()
    except RuntimeError:  # Path.expanduser's "Could not determine home directory."
        user = capped(os.fspath(path).split(os.sep, 1)[0], 80)
        raise ConfigurationError(f"'{capped(os.fspath(path), 200)}': no home directory for "
                                 f"{user!r} here; give the path without '~', or a user of "
                                 "this machine") from None


def unnamed_path(path: str | os.PathLike[str]) -> str | None:
    """The one line refusing ``path`` when it names no file: empty, or holding a NUL byte
    (no file's name does); None for any other path."""
    text = os.fspath(path)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if text and "\x00" not in text:
        return None
    why = "is empty (an unset variable's \"$DIR\")" if not text else "holds a NUL byte"
    return (f"the path '{terminal(text)}' {why}, so it names no file; give the path of a "
            "file or folder")


def write_atomically(target: str | os.PathLike[str], write: Callable[[Path], object],
                     shared: bool = False, folder: tuple[int, int] | None = None) -> Path:
    """Call ``write(tmp)`` on a new file beside ``target`` (same suffix, so a format chosen by
    suffix is kept), then rename it over ``target``; return ``target``. ``shared``: the file
    is for others to read, so it honours the umask (:func:`shared_mode`); else ``0600``.

    The folder is opened as :func:`open_folder` walks it and held open: the new file is made in
    a private folder (``0700``) made in it, itself held open (``O_EXCL``, ``O_NOFOLLOW``,
    ``0600``), ``write`` is given a path that names it through that open private folder
    (:attr:`Folder.path`), and the rename is made from it into the folder; a link another user
    swaps in on the way once it is open is never followed, and no other user can put one at
    the new file's name (the private folder is removed after, on an error or ``Ctrl-C``
    too). ``folder``: the device and inode the folder must have (:func:`same_folder`).

    Raises:
        OutputError: the file cannot be written (no space, a size limit, permissions), or a
            link another user planted is on the way; the message names ``target``, which is
            left as it was.
    """
    path = Path(target)
    try:
        with open_folder(path.parent) if folder is None else _existing(path.parent) as held:
            same_folder(held, folder, path)
            _write_in(held, path, write, shared_mode() if shared else 0o600)
    except ForensicsError:  # a refusal (a planted link) says itself
        raise
    except IsADirectoryError:  # only the rename meets one: the file is made new
        raise OutputError(f"cannot write '{terminal(path)}': it is a folder, and a file is "
                          "never written over one: remove or rename it") from None
    except OSError as exc:
        raise OutputError(f"cannot write '{terminal(path)}': {exc.strerror or reason(exc)}; "
                          f"check the folder, its permissions and free space") from None
    return path


def _write_in(folder: Folder, path: Path, write: Callable[[Path], object], mode: int) -> None:
    """Make a private folder in ``folder`` (:func:`_private_folder`) and a new file in it,
    ``write`` it, give it ``mode``, fsync it and rename it to ``path.name`` in ``folder``; the
    private folder (and what is left in it) is removed after, when any step fails too. The
    writer (matplotlib, pyarrow) opens the file by the name it is given: in a folder other
    users may write without the sticky bit, one of them could swap that name for a link
    while it writes; in a folder of this user's alone, ``0700``, no one can."""
    private = _private_folder(folder, path.name)
    try:
        fd, tmp = _new_file(private.fd, f".{path.name}.", f".tmp{path.suffix}")
        try:
            write(private.path / tmp)
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path.name, src_dir_fd=private.fd, dst_dir_fd=folder.fd)
    finally:
        _remove_private(folder, private)
    if path_only(folder.fd):  # a folder its owner may not read (umask 0477): no fsync of it
        sync_file_system(path.name, folder.fd)
        return
    with contextlib.suppress(OSError):  # the new name on disk (some file systems refuse)
        os.fsync(folder.fd)


def _private_folder(folder: Folder, name: str) -> Folder:
    """A new folder (``0700``, this user's) in the open ``folder``, open (``O_NOFOLLOW``),
    named ``.NAME.HEX.tmp``; checked once open to be the one made (a folder another user put
    at its name between the ``mkdir`` and the ``open`` is theirs: refused).

    Raises:
        OutputError: what was opened at the name is not this user's private folder.
        OSError: no folder can be made there."""
    for _ in range(100):
        made = f".{name}.{secrets.token_hex(4)}.tmp"
        try:
            os.mkdir(made, 0o700, dir_fd=folder.fd)
        except FileExistsError:
            continue
        fd = open_dir(made, dir_fd=folder.fd)
        info = os.fstat(fd)
        if info.st_uid != os.geteuid() or info.st_mode & 0o077:
            os.close(fd)
            raise OutputError(f"cannot write '{terminal(folder.real / name)}': the private "
                              f"folder it was built in ('{terminal(folder.real / made)}') was "
                              "replaced by another user's; write to a folder of yours")
        try:  # whatever the umask took, the owner can make the file in it
            chmod_open(fd, 0o700)
            fd = reopened(fd)  # read, to remove what a writer left
        except BaseException:
            os.close(fd)
            raise
        return Folder(fd, folder.real / made)
    raise FileExistsError(errno.EEXIST, "no free temporary name", name)


def _remove_private(folder: Folder, private: Folder) -> None:
    """Remove what is in ``private`` (a file a writer left), close it and remove it from
    ``folder`` when its name there is still that very folder."""
    with contextlib.suppress(OSError):
        for entry in os.listdir(private.fd):
            with contextlib.suppress(OSError):
                os.unlink(entry, dir_fd=private.fd)
    try:
        mine = os.fstat(private.fd)
    finally:
        os.close(private.fd)
    with contextlib.suppress(OSError):
        there = os.stat(private.real.name, dir_fd=folder.fd, follow_symlinks=False)
        if (there.st_dev, there.st_ino) == (mine.st_dev, mine.st_ino):
            os.rmdir(private.real.name, dir_fd=folder.fd)


def _new_file(folder: int, prefix: str, suffix: str) -> tuple[int, str]:
    """A new file (``0600``) in the open folder ``folder``: its descriptor and name."""
    for _ in range(100):
        name = f"{prefix}{secrets.token_hex(4)}{suffix}"
        try:
            return owner_only(os.open(name, _NEW_FILE, 0o600, dir_fd=folder)), name
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", prefix)


def write_text_atomically(target: str | os.PathLike[str], text: str,
                          shared: bool = False, folder: tuple[int, int] | None = None) -> Path:
    """Write ``text`` (UTF-8) to ``target`` atomically (:func:`write_atomically`)."""
    return write_atomically(target, lambda tmp: tmp.write_text(text, encoding="utf-8"),
                            shared=shared, folder=folder)


def same_folder(held: Folder, folder: tuple[int, int] | None, path: Path) -> None:
    """Refuse to write or remove ``path`` in the open folder ``held`` unless it is the folder
    of device and inode ``folder`` (None: any), one checked before a long step (a replay): a
    link (or another folder) swapped in at its name meanwhile once had the file written where
    it points.

    Raises:
        OutputError: naming ``path`` and why nothing was written or removed there.
    """
    info = os.fstat(held.fd)
    if folder is not None and (info.st_dev, info.st_ino) != folder:
        raise OutputError(f"'{terminal(path)}' is not written or removed: its folder is no "
                          "longer the one checked before the replay (a link or another "
                          "folder was put at its name meanwhile)")


def remove_in(path: Path, folder: tuple[int, int]) -> None:
    """Remove the file ``path`` (a link at its name is removed, never followed) from its
    folder, which must be the folder of device and inode ``folder`` (:func:`same_folder`).

    Raises:
        OutputError: it is not; OSError: it cannot be removed (a folder at its name).
    """
    with _existing(path.parent) as held:
        same_folder(held, folder, path)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path.name, dir_fd=held.fd)


def shared_mode() -> int:
    """The mode ``open()`` gives a new file under the process's umask (``0o666 & ~umask``),
    its owner's read and write kept: under umask ``0477`` an image was ``0200``, that its
    owner could not open (as :func:`~forensics.store.fs.make_folders` keeps the owner's
    write and search of a folder, as ``mkdir -p`` does)."""
    return 0o666 & ~current_umask() | 0o600  # read without setting it (another thread's)


#: the links one path may go through, as Linux's path walk allows (``ELOOP`` past them)
MAX_LINKS = 40
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
#: where Linux names an open descriptor as a path (a folder's: that very folder)
_FDS = Path("/proc/self/fd")


@dataclass(frozen=True)
class Folder:
    """An output's folder, open: ``fd`` (``O_DIRECTORY``) and ``real``, the path it was
    reached by (every link on the way followed), for messages."""

    fd: int
    real: Path

    @property
    def path(self) -> Path:
        """A path naming this very folder while it is open (``/proc/self/fd/N``: a link swapped
        in on its way since it was opened is not followed), or its real path where the system
        has no such names."""
        return _FDS / str(self.fd) if _FDS.is_dir() else self.real

    def shown(self, path: str | os.PathLike[str]) -> Path:
        """``path`` (one under :attr:`path`) as its real path, for a message."""
        try:
            return self.real / Path(path).relative_to(self.path)
        except ValueError:
            return Path(path)


@contextmanager
def open_folder(path: str | os.PathLike[str]) -> Iterator[Folder]:
    """The folder ``path``, made where missing (as ``mkdir -p``), open while inside.

    It is walked from ``/`` (or the working folder) one component at a time, each opened with
    ``O_NOFOLLOW``; a link is read and followed here as the kernel would (``link/..`` is the
    folder above where it points), unless it is one another user planted (:func:`real_folder`'s
    rule): what is checked is what is opened, and what is written goes into what is open.

    Raises:
        OutputError: a link another user planted is on the way, naming it.
        OSError: a component is not a folder, cannot be made or opened, or too many links.
    """
    fd, real, _ = _walk(path, make=True)
    try:
        yield Folder(fd, real)
    finally:
        os.close(fd)


@contextmanager
def _existing(path: str | os.PathLike[str]) -> Iterator[Folder]:
    """The folder ``path``, walked as :func:`open_folder` walks it but never made, open while
    inside. Raises FileNotFoundError when it is not there (or cannot be reached)."""
    fd, real, rest = _walk(path, make=False)
    try:
        if rest:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), os.fspath(path))
        yield Folder(fd, real)
    finally:
        os.close(fd)


def make_folder(path: str | os.PathLike[str]) -> Path:
    """Make the output folder ``path`` (as :func:`open_folder` walks it); return ``path``.

    Raises:
        OutputError: it cannot be made, or a link another user planted is on its way."""
    try:
        with open_folder(path):
            return Path(path)
    except OSError as exc:
        raise OutputError(f"cannot make the folder '{terminal(path)}': "
                          f"{exc.strerror or reason(exc)}; check its way and permissions") from None


def real_folder(path: str | os.PathLike[str]) -> Path:
    """``path`` (a folder an output goes into, or the output folder itself) with every link
    on its way followed and every ``..`` taken after it, as the kernel walks it; the part
    from the first component that does not exist yet is kept as named (it is made as folders).
    A check made before a long step (a replay); the write itself walks again
    (:func:`open_folder`).

    A link in a sticky folder that every user may write (``/tmp``) is followed only when it
    is this user's or the folder owner's, as Linux's ``fs.protected_symlinks`` rule does: one
    of another user's was planted there, and would send the output where its owner chose.

    Raises:
        OutputError: such a link is on the way, naming it, its owner and the fix.
    """
    fd, real, rest = _walk(path, make=False)
    os.close(fd)
    return Path(real, *rest)


def _owner_writes(fd: int) -> None:
    """Let the owner write in and search the folder just made, open at ``fd`` (``0500`` under
    umask ``0277``: no output could be made in it), if it is this user's."""
    info = os.fstat(fd)
    if info.st_uid == os.geteuid():
        chmod_open(fd, info.st_mode & 0o7777 | OWNER_WRITES)


def _walk(path: str | os.PathLike[str], make: bool) -> tuple[int, Path, tuple[str, ...]]:
    """Open the folder ``path`` names, one component at a time (``O_NOFOLLOW``), following
    the links allowed here: ``(fd, real path, ())``; with ``make``, a missing folder is made;
    without, the walk stops where it cannot go on, returning the named rest.

    Raises:
        OutputError: a link another user planted is on the way.
        OSError: (``make``) a component cannot be made or opened, or too many links.
    """
    named = user_path(path)
    parts = list(named.parts)
    start = parts.pop(0) if named.is_absolute() else "."
    fd, real = os.open(start, _FOLDER), Path(start if named.is_absolute() else os.getcwd())
    pending, links, made = list(reversed(parts)), 0, ""
    try:
        while pending:
            part = pending.pop()
            try:
                step = open_dir(part, dir_fd=fd)
            except FileNotFoundError:
                if not make:
                    return fd, real, (part, *reversed(pending))
                with contextlib.suppress(FileExistsError):  # made by another: opened next
                    os.mkdir(part, 0o777, dir_fd=fd)
                    made = part
                pending.append(part)
                continue
            except NotADirectoryError as exc:  # a link (O_NOFOLLOW) or a file
                target, links = _link(fd, real, part, path), links + 1
                if target is None or links > MAX_LINKS:
                    if make:
                        raise exc if target is None else OSError(
                            errno.ELOOP, os.strerror(errno.ELOOP), str(real / part)) from None
                    return fd, real, (part, *reversed(pending))
                if target.is_absolute():
                    os.close(fd)
                    fd = -1
                    fd, real = os.open(target.anchor, _FOLDER), Path(target.anchor)
                pending += reversed(target.parts[1:] if target.is_absolute() else target.parts)
                continue
            except OSError:
                if make:
                    raise
                return fd, real, (part, *reversed(pending))  # not searchable: the write says
            if made == part:  # as ``mkdir -p``: its owner writes in it whatever the umask
                _owner_writes(step)
            made = ""
            os.close(fd)
            fd, real = step, real.parent if part == ".." else real / part
    except BaseException:
        if fd >= 0:
            os.close(fd)
        raise
    return fd, real, ()


def _link(folder: int, real: Path, name: str, named: str | os.PathLike[str]) -> Path | None:
    """Where the link ``name`` in the open ``folder`` (at ``real``) points, or None when
    ``name`` is no link (a file: not a folder to go through).

    Raises:
        OutputError: it is a link another user planted (:func:`_refuse_planted`)."""
    info = os.stat(name, dir_fd=folder, follow_symlinks=False)
    if not stat.S_ISLNK(info.st_mode):
        return None
    _refuse_planted(real / name, info, os.fstat(folder), named)
    return Path(os.readlink(name, dir_fd=folder))


def _refuse_planted(link: Path, info: os.stat_result, holder: os.stat_result,
                    named: str | os.PathLike[str]) -> None:
    """Raise OutputError when ``link`` (its ``lstat`` is ``info``) lies in a sticky folder
    every user may write (whose ``stat`` is ``holder``) and is neither this user's nor that
    folder's owner's."""
    shared = stat.S_ISVTX | stat.S_IWOTH
    if holder.st_mode & shared != shared or info.st_uid in (os.geteuid(), holder.st_uid):
        return
    raise OutputError(f"'{terminal(named)}': '{terminal(link)}' is a link of uid {info.st_uid} "
                      f"in '{terminal(link.parent)}', a sticky folder every user may write, so "
                      "another user may have planted it: it is not followed; write to a folder "
                      "of yours, or remove the link if you trust it")


def real_output(path: str | os.PathLike[str]) -> Path:
    """The file ``path`` in the :func:`real_folder` of its folder (the file itself, a link or
    not, is replaced by the write, never followed).

    Raises:
        OutputError: a link planted by another user is on the way (:func:`real_folder`)."""
    named = Path(path)
    return real_folder(named.parent) / named.name


def refuse_inside_captures(path: str | os.PathLike[str], captures: Iterable[object],
                           option: str = "-o", reads: bool = True) -> None:
    """Raise ConfigurationError when the output ``path`` (every link and ``..`` on its way
    followed) is one of ``captures`` (paths, or opened captures with a ``path``; records in
    memory have none) or lies inside one: a command never writes into a capture it reads.
    Every command that reads a capture and writes an output the user names checks it first;
    ``reads``: the caller reads ``captures`` (else they are capture folders it found)."""
    folders = {os.path.realpath(where) for where in map(capture_folder, captures) if where}
    written = Path(os.path.realpath(user_path(path)))
    for where in (written, *written.parents):
        if str(where) in folders:
            what = "the capture" if where == written else "inside the capture"
            raise ConfigurationError(
                f"{option} '{terminal(os.fspath(path))}' is {what} '{terminal(where)}', "
                f"{'which this command reads' if reads else 'a capture folder'}: what is "
                "written there changes that capture; write it outside the capture's folder")


def capture_folder(capture: object) -> str | os.PathLike[str] | None:
    """The folder of ``capture``: a path itself, or an opened capture's ``path`` (or None)."""
    where = capture if isinstance(capture, (str, os.PathLike)) else getattr(capture, "path", None)
    return where if isinstance(where, (str, os.PathLike)) else None
