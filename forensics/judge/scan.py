"""``scan(capture) -> ScanResult``: bounds-check every index column of a capture, columnar.

The scan reads each record batch's integer buffers straight from the segment's memory map and
hands them, a run of records at a time, to the batch's site: each site declares the indices
whose bounds the capture alone decides as its ``scan_indices`` (a
:class:`~forensics.sites.base.Site` operation; the rules are in the site modules,
:mod:`forensics.sites.scan_counts` holds what they share). No record is materialised and
nothing is replayed, except for a site without ``scan_indices`` (a plugin site, say): its
records are decoded and its ``upstream`` model's checks counted (:meth:`Site.counted`).

Entries with ``replay=True`` count exactly what the ``upstream`` replay reports as
``out_of_bounds`` findings on that site and tensor (the accesses of the model and the sink's
ids); a site marks a screen with no replay counterpart ``replay=False``. Summary records are
left out (they carry no arrays). numpy and pyarrow only.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from forensics.sites import get_site
from forensics.sites.scan_counts import IndexCount

if TYPE_CHECKING:
    import pandas as pd

    from forensics.store.batch import BatchView
    from forensics.store.reader import Capture

SCAN_COLUMNS = ("site", "tensor", "checked", "out_of_range", "replay")
#: values of a batch's widest tensor scanned per pass (see ``_chunks``)
CHUNK_VALUES = 1 << 19


@dataclass
class ScanEntry:
    """Counts of one (site, tensor): indices checked and indices outside their range."""

    site: str
    tensor: str
    checked: int = 0
    out_of_range: int = 0
    replay: bool = True  # the count equals the upstream replay's out_of_bounds findings


@dataclass
class ScanResult:
    """What :func:`scan` found: one :class:`ScanEntry` per (site, tensor), in scan order;
    ``records`` counts the records scanned, ``summary_records`` those left out (a log's or a
    dump's least and greatest values, no index column: :func:`forensics.replay` judges them)."""

    capture: str
    records: int = 0
    summary_records: int = 0
    seconds: float = 0.0
    entries: dict[tuple[str, str], ScanEntry] = field(default_factory=dict)

    @property
    def checked(self) -> int:
        """Indices checked, all entries together."""
        return sum(e.checked for e in self.entries.values())

    @property
    def out_of_range(self) -> int:
        """Indices outside their range, all entries together."""
        return sum(e.out_of_range for e in self.entries.values())

    def count(self, site: str, tensor: str) -> int:
        """Out-of-range indices of ``(site, tensor)`` (0 when not scanned)."""
        entry = self.entries.get((site, tensor))
        return 0 if entry is None else entry.out_of_range

    def to_frame(self) -> pd.DataFrame:
        """The entries as a DataFrame (columns :data:`SCAN_COLUMNS`)."""
        import pandas as pd

        rows = [(e.site, e.tensor, e.checked, e.out_of_range, e.replay)
                for e in self.entries.values()]
        return pd.DataFrame(rows, columns=list(SCAN_COLUMNS))

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready summary: capture, records (scanned, and summary ones left out),
        seconds, totals and the entries."""
        return {"capture": self.capture, "records": self.records,
                "summary_records": self.summary_records, "seconds": self.seconds,
                "checked": self.checked, "out_of_range": self.out_of_range,
                "entries": [vars(e).copy() for e in self.entries.values()]}

    def add(self, site: str, count: IndexCount) -> None:
        """Add the counts of one tensor of ``site`` over a run of records."""
        entry = self.entries.setdefault((site, count.tensor),
                                        ScanEntry(site, count.tensor, replay=count.replay))
        entry.checked += int(count.checked)
        entry.out_of_range += int(count.out_of_range)


def scan(capture: Capture | str | os.PathLike[str]) -> ScanResult:
    """Bounds-check every index column of ``capture`` (a Capture or a capture path).

    Returns:
        A :class:`ScanResult` with per (site, tensor) counts of checked and out-of-range indices
        and the records scanned; summary records are counted apart, not scanned.
    Raises:
        CaptureFormatError: a missing or corrupt capture or batch.
    """
    if isinstance(capture, (str, os.PathLike)):
        from forensics.store.reader import load

        capture = load(capture)
    start = time.perf_counter()
    result = ScanResult(str(capture.path))
    scratch = _Scratch()
    for view in capture.batches():
        rows = ~view.summary
        result.records += int(rows.sum())
        result.summary_records += len(rows) - int(rows.sum())
        site = get_site(view.site)
        scan_indices = site.scan_indices
        if scan_indices is None:  # no columnar screen: the upstream model's checks, counted
            for count in site.counted([r for r in view.records() if not r.summary]):
                result.add(view.site, count)
            continue
        for lo, hi in _chunks(view):
            if rows[lo:hi].any():
                for count in scan_indices(_Columns(view, rows[lo:hi], lo, hi, scratch)):
                    result.add(view.site, count)
    result.seconds = time.perf_counter() - start
    return result


def _chunks(view: BatchView) -> Iterator[tuple[int, int]]:
    """Runs of records of ``view`` holding about :data:`CHUNK_VALUES` values of its widest
    tensor: the scan's temporaries stay small and in cache whatever the batch size."""
    widest = max((len(view.batch.column(name).values) for name, (kind, _) in
                  view.columns.items() if kind == "tensor"), default=0)
    step = max(1, CHUNK_VALUES * len(view) // max(widest, 1))
    for lo in range(0, len(view), step):
        yield lo, min(lo + step, len(view))


class _Scratch:
    """Buffers reused by every run of one scan for its largest temporaries: a fresh array per
    pass would have the allocator map (and the kernel fault in) new pages each run."""

    def __init__(self) -> None:
        self._buffers: dict[tuple[str, type], np.ndarray] = {}

    def array(self, slot: str, n: int, dtype: type) -> np.ndarray:
        """A writable array of ``n`` items of ``dtype``, the same memory for ``slot`` each
        call."""
        buffer = self._buffers.get((slot, dtype))
        if buffer is None or len(buffer) < n:
            buffer = self._buffers[slot, dtype] = np.empty(n, dtype=dtype)
        return buffer[:n]


class _Columns:
    """Flat integer columns of the records ``lo:hi`` of one batch, restricted to its
    non-summary rows (``rows``, one per record of the run): the
    :class:`~forensics.sites.scan_counts.ScanColumns` a site's ``scan_indices`` reads."""

    def __init__(self, view: BatchView, rows: np.ndarray, lo: int, hi: int,
                 scratch: _Scratch) -> None:
        self.view, self.rows, self.all = view, rows, bool(rows.all())
        self.lo, self.hi, self.scratch = lo, hi, scratch

    def has(self, name: str) -> bool:
        """Whether the batch has a column ``name``."""
        return name in self.view.columns

    def tensor(self, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Flat values (captured width), each row's element count and presence (False: the
        record does not carry the tensor)."""
        self.view._tensor_parts(name)
        flat, offsets, valid = self.view._tensors[name][:3]
        offsets, valid = offsets[self.lo:self.hi + 1], valid[self.lo:self.hi]
        sizes = np.diff(offsets) * valid
        flat = flat[offsets[0]:offsets[-1]]
        if not self.all:
            flat = flat[np.repeat(self.rows, np.diff(offsets))]
            sizes, valid = sizes[self.rows], valid[self.rows]
        return flat, sizes, valid

    def first_dim(self, name: str) -> np.ndarray:
        """Each row's first dimension of tensor ``name`` (0 where absent)."""
        first = self.view.first_dims(name, self.lo, self.hi)
        return first if self.all else first[self.rows]

    def ints(self, name: str) -> np.ndarray:
        """The int field ``name`` of each row."""
        values = self.view._int(name)[0][self.lo:self.hi]
        return values[self.rows] if not self.all else values

    def bools(self, slot: str, n: int) -> np.ndarray:
        """A boolean scratch array of ``n`` items (see :class:`_Scratch`)."""
        return self.scratch.array(slot, n, bool)

    def int64s(self, slot: str, n: int) -> np.ndarray:
        """An int64 scratch array of ``n`` items (see :class:`_Scratch`)."""
        return self.scratch.array(slot, n, np.int64)
