"""The ``.idx`` sidecar of a segment: one fixed-size entry per flushed record batch.

It lets a reader count records and step ranges without touching the batches (a million records
open in milliseconds). It is only a cache of what the segment holds: entries are checked against
the segment (contiguity, file size) and against each batch when it is loaded.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from forensics.errors import CaptureFormatError
from forensics.escaping import terminal
from forensics.modes import owner_only
from forensics.store.fs import append_whole, write_all
from forensics.store.guarded import read_bytes

MAGIC = b"FXIDX001"
ENTRY = np.dtype([("offset", "<i8"), ("length", "<i8"), ("rows", "<i8"),
                  ("step_min", "<i8"), ("step_max", "<i8")])
MIN_BATCH_BYTES = 16


class IndexWriter:
    """Appends entries to a new ``.idx`` file (created exclusively); each append is fsynced."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = owner_only(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND,
                                      0o600))
        try:
            write_all(self._fd, MAGIC)
        except BaseException:  # a full disk: no descriptor left open
            self.close()
            raise

    def append(self, offset: int, length: int, rows: int, step_min: int, step_max: int) -> None:
        """Record one batch at ``offset`` of ``length`` bytes; fsync (a whole entry or none:
        :func:`~forensics.store.fs.append_whole`)."""
        entry = np.array([(offset, length, rows, step_min, step_max)], dtype=ENTRY)
        append_whole(self._fd, entry.tobytes())

    def close(self) -> None:
        """Close the file (once: closing again does nothing)."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)


def read_index(path: Path, root: Path | None = None,
               segment_size: int | None = None) -> np.ndarray | None:
    """Return the entries of the index at ``path`` (a partial last entry is dropped), or None
    when it does not exist or was cut short while being created.

    Read through the guarded reader: ``root`` is the capture it must stay inside; with
    ``segment_size``, an index with more entries than a segment of that size can hold (each
    batch takes at least 16 bytes) is refused before it is read.
    Raises CaptureFormatError on a bad magic number, an oversized or unreadable file;
    UnsafeInputError on a file that is not regular or a link out of ``root``.
    """
    limit = None
    if segment_size is not None:
        limit = len(MAGIC) + ENTRY.itemsize * (segment_size // MIN_BATCH_BYTES + 2)
    try:
        data = read_bytes(path, "segment index", root, limit)
    except FileNotFoundError:
        return None
    if len(data) < len(MAGIC):
        return None  # cut short while being created
    if data[: len(MAGIC)] != MAGIC:
        raise CaptureFormatError(f"segment index '{terminal(path)}' has no {MAGIC!r} header; "
                                 "delete it and the reader will scan the segment instead")
    body = data[len(MAGIC):]
    count = len(body) // ENTRY.itemsize
    return np.frombuffer(body, dtype=ENTRY, count=count).copy()
