"""Atomic outputs: every file we write is built beside its target and renamed into place, so a
full disk or a crash leaves the old file or the new one, never a truncated one.

A file is private (``0600``) unless its writer says it is for sharing (``shared=True``: reports,
exports, plots, write-ups, the demo's index), which then gets the mode a plain ``open()`` would
give it under the process's umask (``0644`` under umask 022). Captures, and anything redaction
has not passed, stay private."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from forensics.errors import ConfigurationError, OutputError, reason
from forensics.escaping import capped, terminal


def user_path(path: str | os.PathLike[str]) -> Path:
    """A path as its user gave it (``-o``, ``--html``, an API argument): ``~`` and ``~user``
    expanded as a shell would (a path in quotes, from Python or from a script reaches us as it
    is), nothing else changed. Every output path a command or the API takes goes through this
    first, so ``~`` means the same to all of them.

    Raises ConfigurationError: a ``~user`` with no home directory here (or ``~`` with no
    ``HOME`` and no entry for this user), naming the path."""
    try:
        return Path(path).expanduser()
    except RuntimeError:  # Path.expanduser's "Could not determine home directory."
        user = capped(os.fspath(path).split(os.sep, 1)[0], 80)
        raise ConfigurationError(f"'{capped(os.fspath(path), 200)}': no home directory for "
                                 f"{user!r} here; give the path without '~', or a user of "
                                 "this machine") from None


def write_atomically(target: str | os.PathLike[str], write: Callable[[Path], object],
                     shared: bool = False) -> Path:
    """Call ``write(tmp)`` on a new file beside ``target`` (same suffix, so a format chosen by
    suffix is kept), then rename it over ``target``; return ``target``. ``shared``: the file
    is for others to read, so it honours the umask (:func:`shared_mode`); else ``0600``.

    Raises:
        OutputError: the file cannot be written (no space, a size limit, permissions); the
            message names ``target``, which is left as it was.
    """
    path = Path(target)
    folder = real_folder(path.parent)
    tmp = ""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".tmp{path.suffix}",
                                   dir=folder)
        os.close(fd)
        write(Path(tmp))
        if shared:
            os.chmod(tmp, shared_mode())
        os.replace(tmp, folder / path.name)
        tmp = ""
    except OSError as exc:
        raise OutputError(f"cannot write '{terminal(path)}': {exc.strerror or reason(exc)}; "
                          f"check the folder, its permissions and free space") from None
    finally:
        if tmp:
            os.unlink(tmp)
    return path


def write_text_atomically(target: str | os.PathLike[str], text: str,
                          shared: bool = False) -> Path:
    """Write ``text`` (UTF-8) to ``target`` atomically (:func:`write_atomically`)."""
    return write_atomically(target, lambda tmp: tmp.write_text(text, encoding="utf-8"),
                            shared=shared)


def shared_mode() -> int:
    """The mode ``open()`` gives a new file under the process's umask (``0o666 & ~umask``)."""
    mask = os.umask(0o077)  # read it (there is no other portable way), then put it back
    os.umask(mask)
    return 0o666 & ~mask


#: the links one path may go through, as Linux's path walk allows (``ELOOP`` past them)
MAX_LINKS = 40


def real_folder(path: str | os.PathLike[str]) -> Path:
    """``path`` (a folder an output goes into, or the output folder itself) with every link
    on its way followed and every ``..`` taken after it, as the kernel walks it; the part
    from the first component that does not exist yet is kept as named (it is made as folders).

    A link in a sticky folder that every user may write (``/tmp``) is followed only when it
    is this user's or the folder owner's, as Linux's ``fs.protected_symlinks`` rule does: one
    of another user's was planted there, and would send the output where its owner chose.

    Raises:
        OutputError: such a link is on the way, naming it, its owner and the fix.
    """
    named = user_path(path)
    pending = list(reversed((named if named.is_absolute() else Path(os.getcwd(), named)).parts))
    real, links = Path(pending.pop()), 0
    while pending:
        part = pending.pop()
        if part == "..":
            real = real.parent
            continue
        step = real / part
        try:
            info = os.lstat(step)
        except OSError:  # not there yet (it is made as a folder) or not searchable
            return Path(step, *reversed(pending))
        if not stat.S_ISLNK(info.st_mode):
            real = step
            continue
        links += 1
        if links > MAX_LINKS:  # the write fails on it with ELOOP, naming it
            return Path(step, *reversed(pending))
        _refuse_planted(step, info, path)
        target = Path(os.readlink(step))
        real = Path(target.anchor) if target.is_absolute() else real
        pending += reversed(target.parts[1:] if target.is_absolute() else target.parts)
    return real


def _refuse_planted(link: Path, info: os.stat_result, named: str | os.PathLike[str]) -> None:
    """Raise OutputError when ``link`` (its ``lstat`` is ``info``) lies in a sticky folder
    every user may write and is neither this user's nor that folder's owner's."""
    holder = os.stat(link.parent)
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
                           option: str = "-o") -> None:
    """Raise ConfigurationError when the output ``path`` (every link and ``..`` on its way
    followed) is one of ``captures`` (paths, or opened captures with a ``path``; records in
    memory have none) or lies inside one: a command never writes into a capture it reads.
    Every command that reads a capture and writes an output the user names checks it first."""
    folders = {os.path.realpath(where) for where in map(capture_folder, captures) if where}
    written = Path(os.path.realpath(user_path(path)))
    for where in (written, *written.parents):
        if str(where) in folders:
            what = "the capture" if where == written else "inside the capture"
            raise ConfigurationError(
                f"{option} '{terminal(os.fspath(path))}' is {what} '{terminal(where)}', which "
                "this command reads: what is written there changes that capture; write it "
                "outside the capture's folder")


def capture_folder(capture: object) -> str | os.PathLike[str] | None:
    """The folder of ``capture``: a path itself, or an opened capture's ``path`` (or None)."""
    where = capture if isinstance(capture, (str, os.PathLike)) else getattr(capture, "path", None)
    return where if isinstance(where, (str, os.PathLike)) else None
