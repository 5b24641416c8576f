"""``forensics triage PATH...`` -> capture directories: a capture, a folder of them, a glob."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable
from pathlib import Path

from forensics.errors import ConfigurationError
from forensics.escaping import terminal
from forensics.store.paths import MANIFEST

CAPTURE_SUFFIX = ".capture"


def is_capture(path: Path) -> bool:
    """Whether ``path`` is a capture directory (named ``*.capture`` or holding a manifest);
    False for a path the system cannot look at (too long, no permission)."""
    try:
        return path.is_dir() and (path.name.endswith(CAPTURE_SUFFIX)
                                  or (path / MANIFEST).exists())
    except OSError:
        return False


def find_captures(patterns: Iterable[str | os.PathLike[str]],
                  unlisted: list[tuple[Path, OSError]] | None = None) -> list[Path]:
    """Every capture under ``patterns``, sorted and without repeats: a capture reached twice
    (through a link, or under a folder named twice) is listed once, by its direct name.

    A pattern is a capture directory, a folder whose ``*.capture`` children (one level, then
    their folders recursively) are captures, or a glob of either (a path that exists is
    taken as it is spelled, even one holding ``[``, ``*`` or ``?``).
    Each folder that could not be listed under a pattern that named captures all the same is
    added to ``unlisted``, with why (:func:`unlisted_note` says it).
    Raises ConfigurationError when a pattern names nothing (:class:`UnlistedError` where a
    folder on its way could not be listed).
    """
    found: dict[object, Path] = {}
    for pattern in patterns:
        text = os.fspath(pattern)
        # a path that exists is itself, never a glob: 'd[1].capture' named d1.capture
        matches = sorted(glob.glob(text)) if glob.has_magic(text) and not os.path.lexists(
            text) else [text]
        refused = _glob_unlisted(text) if not matches else []
        # an empty path names nothing (``Path("")`` is the working directory: an unset
        # variable's ``triage "$DIR"`` triaged it), nor does one holding NUL (no file's)
        hits = [c for m in matches for c in _captures_at(Path(m), refused)] \
            if text and "\x00" not in text else []
        if not hits:
            raise (UnlistedError if refused else ConfigurationError)(_nothing_at(text, refused))
        if unlisted is not None:
            unlisted += refused
        for hit in map(as_named, hits):
            key = folder_id(hit)
            if key not in found or (_through_link(found[key]) and not _through_link(hit)):
                found[key] = hit
    return sorted(found.values(), key=os.path.abspath)


def as_named(path: Path) -> Path:
    """``path`` spelled so that its absolute path names the folder it reaches: every reader
    names a capture by :func:`os.path.abspath`, which drops a ``..`` and the name before it as
    text, so ``x/link/../b.capture`` (``link`` a link elsewhere) was named ``x/b.capture``,
    another capture's name (its row took that one's, its report was that one's). Such a path
    is the real path of its folder, the capture's own name kept (a link itself too)."""
    if ".." not in path.parts or folder_id(Path(os.path.abspath(path))) == folder_id(path):
        return path
    if path.name in ("", ".", ".."):
        return Path(os.path.realpath(path))
    return Path(os.path.realpath(path.parent)) / path.name


#: the longest path the system opens, in bytes (its terminating NUL included)
PATH_MAX = 4096


def openable(path: str) -> str:
    """A row's ``path`` (absolute: :func:`os.path.abspath` of the path its task read) as this
    process can open it: relative to the working directory when the absolute text is past
    :data:`PATH_MAX` (a capture deep in a tree, reached from a folder near it; the stitch
    reopened it by its absolute path, failed, and said it "changed while the triage ran")."""
    if len(os.fsencode(path)) < PATH_MAX or not os.path.isabs(path):
        return path
    try:
        return os.path.relpath(path)
    except (OSError, ValueError):  # no working directory to start from
        return path


def spawnable_folder() -> None:
    """Refuse (ConfigurationError, one line) a working directory that a spawned process
    cannot start in: Python's ``multiprocessing`` hands each process the directory's absolute
    path to change into, which fails past :data:`PATH_MAX` (every process of a triage's pool
    died, and each row blamed a signal or the system)."""
    try:
        size = len(os.fsencode(os.getcwd()))
    except OSError as exc:
        raise ConfigurationError(f"the working directory cannot be read ({exc.strerror}), so "
                                 "the triage's processes cannot start in it; run forensics "
                                 "triage from a folder that exists") from None
    if size >= PATH_MAX:
        raise ConfigurationError(
            f"the working directory's path takes {size} bytes, past PATH_MAX ({PATH_MAX}): "
            "each of the triage's processes starts by changing into it by that path, which "
            "the system refuses; run forensics triage from a folder whose path is shorter "
            "(name the captures from there)")


def folder_id(path: Path) -> object:
    """What names one folder however it is reached (its device and inode: a link to it, or a
    folder named twice, is the same capture); its absolute path when it cannot be looked at."""
    try:
        info = os.stat(path)
    except OSError:
        return os.path.abspath(path)
    return (info.st_dev, info.st_ino)


def _through_link(path: Path) -> bool:
    """Whether ``path`` reaches its folder through a link (the direct name is the one kept)."""
    try:
        return os.path.realpath(path) != os.path.abspath(path)
    except (OSError, ValueError):
        return False


class UnlistedError(ConfigurationError):
    """A pattern named no capture, and a folder on its way could not be listed (the message
    names it, why, and the fix)."""


def _nothing_at(text: str, unlisted: list[tuple[Path, OSError]]) -> str:
    """The one line that says the pattern ``text`` names no capture: the first folder on
    its way that could not be listed and why, where one could not (it said "names no capture
    directory" of a folder holding captures that its owner may not read: ``0300``, made under
    umask ``0477``), and the fix."""
    if not unlisted:
        return (f"'{terminal(text)}' names no capture directory; give NAME.capture "
                "directories, folders holding them, or a glob")
    folder, exc = unlisted[0]
    return (f"'{terminal(text)}': the folder '{terminal(folder)}' cannot be listed "
            f"({exc.strerror or type(exc).__name__}), so the captures in it cannot be found; "
            "name them (FOLDER/NAME.capture), or make the folder readable to you (chmod u+r "
            "where it is yours)")


def unlisted_note(unlisted: list[tuple[Path, OSError]]) -> str | None:
    """One line naming the folders :func:`find_captures` could not list beside the captures
    it found, why, and the fix; None when there are none (their captures dropped out
    unsaid)."""
    if not unlisted:
        return None
    names = ", ".join(f"{terminal(str(folder))}: {exc.strerror or type(exc).__name__}"
                      for folder, exc in unlisted[:3])
    more = f" and {len(unlisted) - 3} more" if len(unlisted) > 3 else ""
    return (f"not read: {len(unlisted)} folder(s) that cannot be listed ({names}{more}): the "
            "captures in them cannot be found; name them (FOLDER/NAME.capture), or make the "
            "folders readable to you (chmod u+r where they are yours)")


def _glob_unlisted(text: str) -> list[tuple[Path, OSError]]:
    """The folder a glob matching nothing is listed in (its path before the first part that
    is a pattern), with why, when it cannot be listed: :func:`glob.glob` says nothing of it."""
    parts = Path(text).parts
    first = next((i for i, part in enumerate(parts) if glob.has_magic(part)), len(parts))
    unlisted: list[tuple[Path, OSError]] = []
    _entries(Path(*parts[:first]) if first else Path("."), unlisted)
    return unlisted


def _captures_at(path: Path, unlisted: list[tuple[Path, OSError]] | None = None) -> list[Path]:
    """``path`` itself when it is a capture, else the captures inside it (searched without
    recursion, so a folder nested thousands deep is walked as far as the system can open it,
    links not followed; a capture's own folders are not searched). An entry named
    ``*.capture`` that is no folder (a broken link, a file, a FIFO, a link to itself) is listed
    too: its reader refuses it, and its row or test says why, where it dropped out unsaid.
    Each folder that cannot be listed is added to ``unlisted``, with why."""
    if is_capture(path):
        return [path]
    found: list[Path] = []
    pending = [path]
    while pending:
        children = _entries(pending.pop(), unlisted)
        found += [child for child, _, folder in children if not folder or is_capture(child)]
        pending += [child for child, link, folder in reversed(children)
                    if folder and not link and not is_capture(child)]
    return sorted(found)


def nested_captures(captures: Iterable[Path]) -> list[Path]:
    """The capture folders inside ``captures``' own folders (at any depth, links not entered),
    sorted: :func:`find_captures` does not search a capture's folders, so none is read."""
    found: list[Path] = []
    for capture in captures:
        pending = [capture] if _is_real_folder(capture) else []
        while pending:
            for child, link, folder in _entries(pending.pop()):
                if folder and not link and is_capture(child):
                    found.append(child)
                elif folder and not link:
                    pending.append(child)
    return sorted(found)


def unread_note(captures: Iterable[Path]) -> str | None:
    """One line naming the capture folders inside others that were not read, and why; None
    when there are none (they dropped out unsaid). One that is among ``captures`` itself (named
    too) is read, and not named."""
    captures = list(captures)
    read = {folder_id(capture) for capture in captures}
    nested = [path for path in nested_captures(captures) if folder_id(path) not in read]
    if not nested:
        return None
    names = ", ".join(terminal(str(path)) for path in nested[:3])
    more = f" and {len(nested) - 3} more" if len(nested) > 3 else ""
    return (f"not read: {len(nested)} capture folder(s) inside another capture ({names}{more}):"
            " a capture's own folders are not searched; name them to read them")


def _is_real_folder(path: Path) -> bool:
    """Whether ``path`` is a folder reached by no link of its own."""
    try:
        return path.is_dir() and not path.is_symlink()
    except OSError:
        return False


def _entries(folder: Path, unlisted: list[tuple[Path, OSError]] | None = None,
             ) -> list[tuple[Path, bool, bool]]:
    """The folders directly in ``folder`` and its other entries named ``*.capture``, sorted,
    each with whether it is a link (as :func:`os.walk` lists them: a link is listed, never
    entered) and whether it is a folder; none when ``folder`` cannot be listed (a folder
    that is there, yet refused, is added to ``unlisted`` with why)."""
    try:
        with os.scandir(folder) as entries:
            return sorted((folder / e.name, e.is_symlink(), _is_folder(e)) for e in entries
                          if e.name.endswith(CAPTURE_SUFFIX) or _is_folder(e))
    except OSError as exc:
        if unlisted is not None and not isinstance(exc, (FileNotFoundError,
                                                         NotADirectoryError)):
            unlisted.append((folder, exc))
        return []


def _is_folder(entry: os.DirEntry[str]) -> bool:
    """Whether ``entry`` is a folder or a link to one (False when it cannot be told)."""
    try:
        return entry.is_dir()
    except OSError:
        return False
