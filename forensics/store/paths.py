"""File names inside a capture directory, and the checks that keep every path inside it."""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from forensics.atomic import user_path
from forensics.errors import CaptureFormatError, UnsafeInputError, reason
from forensics.escaping import terminal
from forensics.schema import SITE_NAME

MANIFEST = "manifest.json"
EXPECTED = "expected.json"
SEGMENT_SUFFIX = ".arrows"
INDEX_SUFFIX = ".idx"
PROCESS_PATTERN = r"[A-Za-z0-9_-]{1,64}"
SEGMENT_RE = re.compile(
    r"(?P<site>" + SITE_NAME + r")\.r(?P<rank>[0-9]{1,6})\.(?P<process>"
    + PROCESS_PATTERN + r")\.(?P<seq>[0-9]{1,9})" + re.escape(SEGMENT_SUFFIX)
)
EVENTS_RE = re.compile(r"events-(?P<process>" + PROCESS_PATTERN + r")\.jsonl")
#: the process name of the writer of a capture written again (``shrink``, ``redact``,
#: ``import``): its one events file holds every process's events, each naming its process
WRITTEN_AGAIN = "w0"


@dataclass(frozen=True)
class SegmentName:
    """The parts of a segment file name: ``<site>.r<rank>.<process>.<seq>.arrows``."""

    site: str
    rank: int
    process: str
    seq: int

    @property
    def filename(self) -> str:
        """The file name of this segment."""
        return f"{self.site}.r{self.rank}.{self.process}.{self.seq:04d}{SEGMENT_SUFFIX}"


def parse_segment_name(name: str) -> SegmentName | None:
    """Return the parts of a segment file name, or None when ``name`` is not a segment."""
    match = SEGMENT_RE.fullmatch(name)
    if match is None:
        return None
    return SegmentName(match["site"], int(match["rank"]), match["process"], int(match["seq"]))


def check_process_name(process: str) -> str:
    """Return ``process`` when it is a safe file-name part; raise ConfigurationError otherwise."""
    from forensics.errors import ConfigurationError

    if not isinstance(process, str) or not re.fullmatch(PROCESS_PATTERN, process):
        raise ConfigurationError(
            f"process name {process!r} is not allowed; use 1-64 characters from A-Z a-z 0-9 _ -"
        )
    return process


def inside(root: Path, relative: str) -> Path:
    """Return ``root/relative`` after checking that it stays inside ``root``.

    Raises:
        UnsafeInputError: an absolute path, a ``..`` that leaves ``root``, or a symlink whose
            target lies outside ``root``.
    """
    if not isinstance(relative, str) or not relative or "\x00" in relative:
        raise UnsafeInputError(f"path entry {relative!r} in '{terminal(root)}' is not a relative "
                               "path")
    if os.path.isabs(relative) or relative.startswith(("/", "\\")):
        raise UnsafeInputError(f"path entry {relative!r} in '{terminal(root)}' is absolute; "
                               "entries must stay inside the capture directory")
    candidate = root / relative
    check_within(root, candidate)
    return candidate


def check_within(root: Path, path: Path) -> None:
    """Raise UnsafeInputError when ``path`` (symlinks resolved) lies outside ``root``.

    An entry of ``root`` itself that is no link is inside it wherever ``root`` resolves to: one
    ``lstat`` instead of two resolutions of every component (a capture of thousands of
    segments checks each of its files)."""
    if Path(path).parent == Path(root) and Path(path).name not in ("", ".", "..") \
            and not os.path.islink(path):
        return
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if real != real_root and not real.startswith(real_root.rstrip(os.sep) + os.sep):
        raise UnsafeInputError(
            f"'{terminal(path)}' resolves to '{terminal(real)}', outside the capture directory "
            f"'{terminal(real_root)}'; remove the link or copy the file into the capture"
        )


def named(path: str | os.PathLike[str], what: str = "capture") -> Path:
    """``path`` with a last component: ``.``, ``..`` and ``dir/.`` resolved to the folder they
    name.

    Raises:
        OutputError: ``path`` is the root folder, which has no name to build beside.
    """
    from forensics.errors import OutputError

    root = user_path(path)
    if root.name in ("", ".", "..") or str(path).rstrip("/").endswith(("/.", "/..")):
        root = root.resolve()
    if not root.name:
        raise OutputError(f"{what} '{terminal(path)}' is the root folder; give a NAME.capture path "
                          f"inside a folder")
    return root


def capture_dir(path: str | os.PathLike[str]) -> Path:
    """Return ``path`` as a capture directory; raise CaptureFormatError when it is not one.

    One ``stat`` and one ``open`` of the folder itself, never of anything in it: a FIFO, a
    device, a plain file or a loop of links is named as what it is, never opened (a FIFO's
    open would wait for a writer); a folder this user cannot read is said to be one."""
    root = user_path(path)  # "" (the working directory) and NUL refused, one line
    what = _not_a_folder(root)
    if what is not None:
        raise CaptureFormatError(f"capture '{terminal(root)}' {what}; give a NAME.capture "
                                 "directory (forensics import or the probe creates one)")
    return root


#: what a path that is no folder is, by its file type (``stat.S_IFMT``)
_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device",
          stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket", stat.S_IFREG: "a file"}


def _not_a_folder(root: Path) -> str | None:
    """Why ``root`` cannot be read as a folder (its links followed), or None when it can."""
    try:
        mode = os.stat(root).st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a loop of symbolic links, not a capture folder"
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return "does not exist"
        return f"cannot be reached ({exc.strerror or reason(exc)})"
    if not stat.S_ISDIR(mode):
        kind = _KINDS.get(stat.S_IFMT(mode), "something other than a folder")
        return f"is {kind}, not a capture folder"
    try:
        os.close(os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
    except OSError as exc:
        return f"is a folder this user cannot read ({exc.strerror or reason(exc)})"
    if not os.access(root, os.R_OK | os.X_OK):
        return "is a folder this user cannot read (permission denied)"
    return None


#: the files cut short a sentence names (the rest counted), and what it says of them
NAMED_CUT = 3
CUT_SHORT = "a batch or line cut short as its writer stopped while writing it"


def cut_text(files: Sequence[str]) -> str:
    """``the end of segment 'a.arrows', a batch or line cut short as its writer stopped while
    writing it``: the files of a capture whose last batch or line was cut short (a capture's
    ``truncated``), at most :data:`NAMED_CUT` named; ``""`` when there are none."""
    from forensics.escaping import quoted

    if not files:
        return ""
    named = [f"{'events file' if EVENTS_RE.fullmatch(str(name)) else 'segment'} {quoted(name)}"
             for name in files[:NAMED_CUT]]
    more = f" and {len(files) - NAMED_CUT} more file(s)" if len(files) > NAMED_CUT else ""
    return f"the end of {', '.join(named)}{more}, {CUT_SHORT}"


#: the suffix of a capture folder's name
CAPTURE_SUFFIX = ".capture"


def is_capture(path: Path) -> bool:
    """Whether ``path`` is a capture directory (named ``*.capture`` or holding a manifest);
    False for a path the system cannot look at (too long, no permission)."""
    try:
        return path.is_dir() and (path.name.endswith(CAPTURE_SUFFIX)
                                  or (path / MANIFEST).exists())
    except OSError:
        return False


def refuse_in_capture_folder(path: str | os.PathLike[str], option: str) -> None:
    """Raise ConfigurationError when the output ``path`` (every link and ``..`` followed) lies
    in a capture folder (:func:`is_capture`), as every command's ``-o`` refuses the capture it
    reads (:func:`~forensics.atomic.refuse_inside_captures`); ``option``: how the caller named
    ``path``."""
    from forensics.atomic import refuse_inside_captures

    written = Path(os.path.realpath(user_path(path)))
    refuse_inside_captures(path, [p for p in written.parents if is_capture(p)], option,
                           reads=False)
