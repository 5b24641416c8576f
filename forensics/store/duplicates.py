"""Two segments of one process holding the same batches (a copied file): found from their batch
tables, then digests, then bytes (:func:`find_duplicate`). Two processes may write the same
batches (the same steps of the same records): their segments are no copy."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from forensics.store.segment import Segment


def find_duplicate(segments: list[Segment]) -> tuple[Segment, Segment] | None:
    """Two segments of one site, rank and process holding the same batches (a copied file),
    or None. Two processes' segments are never copies of each other: each one's header names
    its process, which its file name must name (a file copied under another's name is refused
    as it is opened).

    Candidates are found from the batch tables alone (sizes, rows, steps); only segments whose
    tables equal another's are read, each once, to a digest of its batches, and only equal
    digests are compared byte by byte: linear in the capture however many tables agree, and a
    capture without copies costs no reads.
    """
    first_of: dict[tuple[object, ...], Segment] = {}
    by_content: dict[tuple[object, ...], Segment] = {}
    for seg in segments:
        if not len(seg._table):
            continue
        key = _table_key(seg)
        first = first_of.setdefault(key, seg)
        if first is seg:
            continue
        if (key, None) not in by_content:  # the first of these tables, read once
            by_content[(key, None)] = first
            by_content.setdefault((key, _digest(first)), first)
        other = by_content.setdefault((key, _digest(seg)), seg)
        if other is not seg and _same_batches(seg, other):
            return other, seg
    return None


def _table_key(seg: Segment) -> tuple[object, ...]:
    """What two copies of one segment share without reading a batch: site, rank, process,
    batch sizes, rows and steps."""
    table = seg._table
    return (seg.site, seg.rank, seg.process, table["length"].tobytes(), table["rows"].tobytes(),
            table["step_min"].tobytes(), table["step_max"].tobytes())


def _digest(seg: Segment) -> bytes:
    """A BLAKE2b digest of ``seg``'s batches (the bytes :func:`_same_batches` compares)."""
    digest = hashlib.blake2b(digest_size=32)
    seg.check_whole()
    for i in range(len(seg._table)):  # each checked by its header before it is read
        digest.update(seg.batch_bytes(i))
    return digest.digest()


def _same_batches(a: Segment, b: Segment) -> bool:
    a.check_whole()
    b.check_whole()
    for i in range(len(a._table)):
        if not np.array_equal(np.frombuffer(a.batch_bytes(i), np.uint8),
                              np.frombuffer(b.batch_bytes(i), np.uint8)):
            return False
    return True
