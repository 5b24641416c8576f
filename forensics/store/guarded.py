"""The one guarded way to read a file of a capture or a foreign dump.

Every reader, importer and command opens its input here: only regular files (a FIFO, device or
socket is refused at ``open``, which never blocks), links only when they resolve inside the
capture, a size cap per kind of file, and reads in bounded pieces. A file that grows past its
cap while being read is refused too.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from forensics.errors import CaptureFormatError, UnsafeInputError
from forensics.escaping import terminal
from forensics.store.paths import check_within

MIB = 1 << 20
#: the largest file of each kind that is read (bytes)
LIMITS: dict[str, int] = {
    "manifest": 16 * MIB,
    "expected verdicts": 16 * MIB,
    "events file": 64 * MIB,
    "segment index": 256 * MIB,
    "segment": 1 << 46,  # memory-mapped, never read whole
    "replacement journal": 64 * 1024,
    "log": 1 << 30,
    "torch file": 1 << 30,
    "safetensors file": (512 + 17) * MIB,  # MAX_DECODED of tensors and a header (16 MiB + 13 KiB)
    "npz archive": 1 << 30,
    "diff file": 64 * MIB,
    "catalogue": 16 * MIB,  # a known-issue catalogue given to forensics.known.load_catalogue
}
#: the most bytes one source may decode or decompress to, in total and per member or tensor
MAX_DECODED = 512 * MIB
MAX_MEMBER = 256 * MIB
CHUNK = 1 * MIB
_TEXT = re.compile(rb"[^\n]+")


def open_guarded(path: Path, kind: str, root: Path | None = None) -> int:
    """Open ``path`` for reading and return the descriptor, after the guards.

    ``root``: the capture directory ``path`` must stay inside (links resolved); None for a
    source the user named. Raises UnsafeInputError for a link leaving ``root`` or a file that
    is not regular (FIFO, device, socket, directory), CaptureFormatError for a file over the
    cap of ``kind`` (:data:`LIMITS`), FileNotFoundError when it does not exist.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    if root is not None:
        # a file that is no link when checked is opened as no link: one swapped for a link
        # after the check (by another user of a shared folder) is refused, never followed
        flags |= 0 if os.path.islink(path) else getattr(os, "O_NOFOLLOW", 0)
        check_within(root, path)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeInputError(f"{kind} '{terminal(path)}' became a link after it was checked; "
                                   "refused, not followed. Is someone changing the capture?") \
                from None
        raise CaptureFormatError(f"{kind} '{terminal(path)}' cannot be opened: "
                                 f"{exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeInputError(f"{kind} '{terminal(path)}' is not a regular file (a FIFO, "
                                   "device, socket or directory); refused. Replace it with the "
                                   "file")
        check_size(path, kind, info.st_size)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_file(path: Path, kind: str, root: Path | None = None) -> BinaryIO:
    """:func:`open_guarded` as a binary file object (for libraries that read a file)."""
    return os.fdopen(open_guarded(path, kind, root), "rb")


def check_size(path: Path, kind: str, size: int) -> None:
    """Raise CaptureFormatError when ``size`` exceeds the cap of ``kind``."""
    limit = LIMITS.get(kind, 1 << 30)
    if size > limit:
        raise CaptureFormatError(f"{kind} '{terminal(path)}' is {size} bytes; at most {limit} "
                                 "are read. Is it the right file?")


def stored_size(fd: int) -> tuple[int, int]:
    """The size of the open regular file ``fd`` and the bytes it stores: the size itself for a
    file without holes (one ``SEEK_HOLE``), else what its allocated blocks hold (a sparse
    file's holes read as zeros but store nothing: no evidence of content)."""
    info = os.fstat(fd)
    try:
        first_hole = os.lseek(fd, 0, getattr(os, "SEEK_HOLE", 4))
    except OSError:  # a file system that cannot tell: no hole
        first_hole = info.st_size
    if first_hole >= info.st_size:
        return info.st_size, info.st_size
    return info.st_size, min(info.st_size, info.st_blocks * 512)


def data_extents(fd: int, size: int) -> list[tuple[int, int]]:
    """The ``(start, end)`` byte ranges of the open file ``fd`` that hold stored data (between
    its holes), found with ``SEEK_DATA``/``SEEK_HOLE``: one range per stored extent, so as many
    steps as the file stores blocks at most. The whole file where holes cannot be told."""
    seek_data, seek_hole = getattr(os, "SEEK_DATA", 3), getattr(os, "SEEK_HOLE", 4)
    extents: list[tuple[int, int]] = []
    pos = 0
    try:
        while pos < size:
            start = os.lseek(fd, pos, seek_data)
            pos = os.lseek(fd, start, seek_hole)
            extents.append((start, min(pos, size)))
    except OSError as exc:
        if exc.errno != 6:  # ENXIO: no data after pos
            return [(0, size)]
    return extents


def read_bytes(path: Path, kind: str, root: Path | None = None,
               limit: int | None = None) -> bytes:
    """The whole of ``path`` through the guards, read in pieces of :data:`CHUNK`.

    ``limit``: a tighter cap than the kind's. Raises as :func:`open_guarded`, and
    CaptureFormatError when the file holds more than its cap.
    """
    cap = min(LIMITS.get(kind, 1 << 30), limit if limit is not None else 1 << 62)
    fd = open_guarded(path, kind, root)
    try:
        if os.fstat(fd).st_size > cap:
            raise CaptureFormatError(f"{kind} '{terminal(path)}' is larger than the {cap} bytes "
                                     "it may hold; delete or replace it")
        parts: list[bytes] = []
        total = 0
        while True:
            piece = os.read(fd, min(CHUNK, cap + 1 - total))
            if not piece:
                return b"".join(parts)
            parts.append(piece)
            total += len(piece)
            if total > cap:
                raise CaptureFormatError(f"{kind} '{terminal(path)}' grew past {cap} bytes while "
                                         "read")
    except OSError as exc:
        raise CaptureFormatError(f"{kind} '{terminal(path)}' cannot be read: "
                                 f"{exc.strerror}") from None
    finally:
        os.close(fd)


def read_prefix(path: Path, kind: str, size: int, root: Path | None = None) -> bytes:
    """The first ``size`` bytes of ``path`` (fewer when it is shorter) through the guards: what
    a format's head claims is checked before the rest is read. Raises as :func:`read_bytes`."""
    fd = open_guarded(path, kind, root)
    try:
        parts: list[bytes] = []
        while size > 0 and (piece := os.read(fd, min(CHUNK, size))):
            parts.append(piece)
            size -= len(piece)
        return b"".join(parts)
    except OSError as exc:
        raise CaptureFormatError(f"{kind} '{terminal(path)}' cannot be read: "
                                 f"{exc.strerror}") from None
    finally:
        os.close(fd)


def iter_lines(path: Path, kind: str, root: Path | None = None,
               max_line: int = 1 << 16,
               cr_ends: bool = False) -> Iterator[tuple[int, bytes, bool, bool]]:
    """Yield ``(number, line, complete, cut)`` for each non-empty line of ``path`` (numbered
    from 1, newline removed), read in bounded pieces: a line longer than ``max_line`` is cut to
    its first ``max_line`` bytes (the rest is skipped without being held) and ``cut`` says so
    (a cut line is never to be read as if whole); ``complete`` is False for a last line
    without newline. ``cr_ends``: a lone carriage return ends a line
    too, and CR LF is one end (a text log; a log of CR-only ends would otherwise be one line,
    cut). Raises as :func:`open_guarded`, and CaptureFormatError once more bytes than the
    kind's cap are read (a file whose size says less than it holds: a ``/proc`` or FUSE file,
    one that grows)."""
    fd = open_guarded(path, kind, root)
    try:
        label = f"{kind} '{terminal(path)}'"
        yield from _lines(_pieces(fd, cr_ends, label, LIMITS.get(kind, 1 << 30)),
                          max_line)
    except OSError as exc:
        raise CaptureFormatError(f"{kind} '{terminal(path)}' cannot be read: "
                                 f"{exc.strerror}") from None
    finally:
        os.close(fd)


def _pieces(fd: int, cr_ends: bool, what: str, cap: int) -> Iterator[bytes]:
    """The non-empty pieces of at most :data:`CHUNK` bytes (and one more) of ``fd``; with
    ``cr_ends``, each line end (LF, CR LF or a lone CR) as one LF (a CR ending a piece is
    held for the next, which may begin with its LF). Raises CaptureFormatError naming
    ``what`` past ``cap`` bytes read."""
    held = b""
    read = 0
    while piece := os.read(fd, CHUNK):
        read += len(piece)
        if read > cap:
            raise CaptureFormatError(f"{what} grew past {cap} bytes while read (its size said "
                                     "less: a /proc or FUSE file, or one still written); copy "
                                     "the file and read the copy")
        if cr_ends:
            piece = held + piece
            held = b"\r" if piece.endswith(b"\r") else b""
            piece = piece[:len(piece) - len(held)].replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if piece:
            yield piece
    if held:
        yield b"\n"


def _lines(pieces: Iterator[bytes], max_line: int) -> Iterator[tuple[int, bytes, bool, bool]]:
    pending = b""  # the first max_line bytes of the line that the last piece left open
    partial = False  # bytes of an unfinished line have been read
    cut = False  # the unfinished line is longer than max_line
    number = 0  # lines completed so far
    for piece in pieces:
        first = piece.find(b"\n")
        if first >= 0:
            line = pending + piece[:first][:max_line - len(pending)]
            number += 1
            if line:
                yield number, line, True, cut or len(pending) + first > max_line
            last = piece.rfind(b"\n")
            cursor = first + 1
            for match in _TEXT.finditer(piece, cursor, last):  # blank lines cost no object
                number += piece.count(b"\n", cursor, match.start()) + 1
                end = min(match.end(), match.start() + max_line)
                yield number, piece[match.start():end], True, end < match.end()
                cursor = match.end() + 1
            number += piece.count(b"\n", cursor, last + 1)
            pending, partial, cut, rest = b"", False, False, piece[last + 1:]
        else:
            rest = piece
        cut = cut or len(pending) + len(rest) > max_line
        pending += rest[:max(0, max_line - len(pending))]
        partial = partial or bool(rest)
    if partial:
        yield number + 1, pending, False, cut
