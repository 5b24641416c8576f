"""Atomic outputs: every file we write is built beside its target and renamed into place, so a
full disk or a crash leaves the old file or the new one, never a truncated one.

A file is private (``0600``) unless its writer says it is for sharing (``shared=True``: reports,
exports, plots, write-ups, the demo's index), which then gets the mode a plain ``open()`` would
give it under the process's umask (``0644`` under umask 022). Captures, and anything redaction
has not passed, stay private."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
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
    tmp = ""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".tmp{path.suffix}",
                                   dir=path.parent)
        os.close(fd)
        write(Path(tmp))
        if shared:
            os.chmod(tmp, shared_mode())
        os.replace(tmp, path)
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
