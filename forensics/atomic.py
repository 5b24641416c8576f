"""Atomic outputs: every file we write is built beside its target and renamed into place, so a
full disk or a crash leaves the old file or the new one, never a truncated one."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from forensics.errors import OutputError


def write_atomically(target: str | os.PathLike[str], write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp)`` on a new file beside ``target`` (same suffix, so a format chosen by
    suffix is kept), then rename it over ``target``; return ``target``.

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
        os.replace(tmp, path)
        tmp = ""
    except OSError as exc:
        raise OutputError(f"cannot write '{path}': {exc.strerror or exc}; check the folder, its "
                          f"permissions and free space") from None
    finally:
        if tmp:
            os.unlink(tmp)
    return path


def write_text_atomically(target: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``target`` atomically (:func:`write_atomically`)."""
    return write_atomically(target, lambda tmp: tmp.write_text(text, encoding="utf-8"))
