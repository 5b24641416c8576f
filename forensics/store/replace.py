"""Putting a newly built capture in place of an old one so that a SIGKILL at any moment leaves a
capture that opens, the old or the new, whole.

:func:`install` moves a finished capture (built beside the target, ``.NAME.tmp-PID``) into
place: with no old capture, one rename; otherwise it writes a journal (``.NAME.replacing``,
beside it), renames the old capture aside (``.NAME.old-PID``), renames the new one into place,
removes the old one, then the journal. :func:`recover`, called by every reader and writer of
that path first, finishes or rolls back a replacement whose process died: the journal's
presence says that the new capture was complete.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import tempfile
from pathlib import Path

from forensics.digits import ascii_int
from forensics.errors import ForensicsError
from forensics.escaping import terminal
from forensics.modes import owner_only
from forensics.store.fs import fsync_dir, make_folders, set_mode


def tmp_path(out: Path, pid: int | None = None) -> Path:
    """Where the new capture for ``out`` is built by process ``pid`` (default: this one)."""
    return out.with_name(f".{out.name}.tmp-{os.getpid() if pid is None else pid}")


def clear_build(tmp: Path) -> None:
    """Remove what is at ``tmp`` (this process's build path) as what it is: a directory of
    this user's with what it holds, anything else (a planted link, a file) by its own name,
    never what a link names."""
    if _own_dir(tmp):
        shutil.rmtree(tmp)
    elif os.path.lexists(tmp):
        os.unlink(tmp)


def new_build(tmp: Path) -> None:
    """Create the build folder ``tmp`` afresh (:func:`clear_build`, its parents if missing,
    then an exclusive ``mkdir``): a link planted there after it was cleared fails the
    ``mkdir``, so nothing is ever written through one."""
    clear_build(tmp)
    make_folders(tmp.parent, None)  # the output's folder, as writers make it
    os.mkdir(tmp, 0o700)  # a capture is private (README: "Who can read what we write")
    set_mode(tmp, 0o700)  # whatever the umask (0500 under 0277: no file could be made in it)


def _aside(out: Path, pid: int) -> Path:
    return out.with_name(f".{out.name}.old-{pid}")


def _journal(out: Path) -> Path:
    return out.with_name(f".{out.name}.replacing")


def install(tmp: Path, out: Path) -> None:
    """Move the finished capture ``tmp`` to ``out``, replacing the capture there if any.

    Raises OSError from the file system (then ``out`` is the old capture, or the new one).
    """
    if not os.path.lexists(out):
        os.rename(tmp, out)
        fsync_dir(out.parent, out)
        return
    pid = os.getpid()
    journal = _journal(out)
    fd, name = tempfile.mkstemp(prefix=f"{journal.name}.{pid}.", dir=out.parent)
    with os.fdopen(owner_only(fd), "w") as handle:
        json.dump({"pid": pid, "host": socket.gethostname()}, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(name, journal)
    fsync_dir(out.parent, out)
    aside = _aside(out, pid)
    os.rename(out, aside)
    os.rename(tmp, out)
    fsync_dir(out.parent, out)
    shutil.rmtree(aside)
    os.unlink(journal)
    fsync_dir(out.parent, out)


def recover(out: Path, clean: bool = False, shown: Path | None = None) -> None:
    """Finish or roll back an interrupted replacement of ``out`` begun on this host; with
    ``clean`` (writers), also remove the unfinished builds that processes of this host left
    when they died. Does nothing when no replacement was interrupted or when the file system
    refuses (a read-only copy): the reader then sees what is there. ``shown``: how a warning
    names ``out`` (default: as it is)."""
    try:
        if os.path.lexists(_journal(out)):
            _resume(out)
        if clean:
            _clean_builds(out, out if shown is None else shown)
    except (OSError, ForensicsError):
        return
    except (ValueError, RecursionError, TypeError) as exc:
        import warnings

        named = out if shown is None else shown
        warnings.warn(f"forensics: ignored the replacement journal '{terminal(_journal(named))}'"
                      f": not one of ours ({type(exc).__name__}); remove it if no forensics "
                      f"command is writing '{terminal(named)}'", stacklevel=2)


def _clean_builds(out: Path, shown: Path) -> None:
    """Remove the unfinished builds of ``out`` that dead processes of this host left beside it;
    warn, in one line naming it as ``shown``, when its folder cannot be listed (``0300``, made
    under umask ``0477``): their names hold pids, so none can be found without listing it."""
    parent = out.parent
    try:
        entries = os.listdir(parent) if parent.is_dir() else []
    except PermissionError as exc:
        import warnings

        warnings.warn(f"forensics: not looked for: unfinished builds dead processes may have "
                      f"left beside '{terminal(shown)}' ('.{terminal(shown.name)}.tmp-PID'): "
                      f"its folder '{terminal(shown.parent)}' cannot be listed "
                      f"({exc.strerror or type(exc).__name__}); make it readable to you "
                      "(chmod u+r) and write again to remove them, or remove them by name",
                      stacklevel=3)
        return
    for entry in entries:
        pid = _builder(out, entry)
        if pid is not None and not _alive(pid):
            path = parent / entry
            if _own_dir(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink()  # a file or a link itself, never what a link names


def _resume(out: Path) -> None:
    from forensics.store.guarded import read_bytes

    journal = _journal(out)
    try:
        entry = json.loads(read_bytes(journal, "replacement journal"))
        pid = _pid(str(entry.get("pid")))
        host = entry.get("host")
    except (ValueError, AttributeError, RecursionError, TypeError) as exc:
        raise ValueError(f"not a journal: {type(exc).__name__}") from None
    if pid is None or host != socket.gethostname() or not _owned(journal):
        return  # not our journal, another host's process (whose pids we cannot see), or
        # planted by another user
    if pid != os.getpid() and _alive(pid):
        return  # that replacement is still running
    tmp, aside = tmp_path(out, pid), _aside(out, pid)
    if not os.path.lexists(out):
        source = next((path for path in (tmp, aside) if _own_dir(path)), None)
        if source is None:
            return  # neither a build nor an old capture of ours: nothing is adopted
        os.rename(source, out)  # roll forward, else back
    for leftover in (tmp, aside):
        if _own_dir(leftover):
            shutil.rmtree(leftover)
    os.unlink(journal)


def _owned(path: Path) -> bool:
    """Whether ``path`` itself (never what a link names) is this user's."""
    try:
        return os.lstat(path).st_uid == os.geteuid()
    except OSError:
        return False


def _own_dir(path: Path) -> bool:
    """Whether ``path`` itself is a directory of this user's: a link, even to a directory,
    is not (``lstat``: a planted ``.NAME.tmp-PID`` link is never renamed into place, nor
    followed to remove what it names)."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()


def _builder(out: Path, entry: str) -> int | None:
    """The process that left ``entry`` (an unfinished build or journal of ``out``), or None."""
    build, journal = f".{out.name}.tmp-", f"{_journal(out).name}."
    if entry.startswith(build):
        return _pid(entry[len(build):])
    if entry.startswith(journal):
        return _pid(entry[len(journal):].split(".")[0])
    return None


def _pid(text: str) -> int | None:
    return ascii_int(text, 9)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
