"""``scan(capture) -> ScanResult``: bounds-check every index column of a capture, columnar.

The scan reads each record batch's integer buffers straight from the segment's memory map and
compares whole columns with numpy (no record is materialised, nothing is replayed). It covers
the indices whose bounds the capture alone decides:

========================== ========================= ==========================================
site                       tensor                    valid range (per record)
========================== ========================= ==========================================
``batch_change``           each gathered tensor      ``prev_positions.clamp(min=0)`` in
                           (``valid_sampled_token_   ``[0, len(tensor))``, every row
                           count``, ...)
``prepare_input_ids``      ``prev_sampled_token_ids`` ``prev_positions`` of the common rows
                                                     (``>= 0``) in ``[0, rows)``
``prepare_input_ids``      ``draft_token_ids``       ``prev_position * prev_num_spec_tokens + j``
                                                     (``j < num_draft_tokens[row]``) in
                                                     ``[0, draft_token_ids.size)``, slow path
``embedding``              ``input_ids``             ``[0, num_embeddings)``
``async_output``           ``sampled_token_ids_cpu`` ids before each row's first ``-1`` in
                                                     ``[0, vocab_size)`` (a screen)
========================== ========================= ==========================================

Entries with ``replay=True`` count exactly what the ``upstream`` replay reports as
``out_of_bounds`` findings on that site and tensor (the accesses of the model and the sink's
ids). The ``async_output`` entry is a screen with no replay counterpart: an out-of-vocabulary
sampled id is a finding of the replay only when the call writes it. Summary records are left
out (they carry no arrays). numpy and pyarrow only.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

    from forensics.store.batch import BatchView
    from forensics.store.reader import Capture

SCAN_COLUMNS = ("site", "tensor", "checked", "out_of_range", "replay")
GATHERED = ("valid_sampled_token_count", "num_computed_tokens", "prev_num_draft_tokens")
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
    """What :func:`scan` found: one :class:`ScanEntry` per (site, tensor), in scan order."""

    capture: str
    records: int = 0
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
        """A JSON-ready summary: capture, records, seconds, totals and the entries."""
        return {"capture": self.capture, "records": self.records, "seconds": self.seconds,
                "checked": self.checked, "out_of_range": self.out_of_range,
                "entries": [vars(e).copy() for e in self.entries.values()]}

    def _add(self, site: str, tensor: str, checked: int, bad: int, replay: bool = True) -> None:
        entry = self.entries.setdefault((site, tensor), ScanEntry(site, tensor, replay=replay))
        entry.checked += int(checked)
        entry.out_of_range += int(bad)


def scan(capture: Capture | str | os.PathLike[str]) -> ScanResult:
    """Bounds-check every index column of ``capture`` (a Capture or a capture path).

    Returns:
        A :class:`ScanResult` with per (site, tensor) counts of checked and out-of-range indices.
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
        for lo, hi in _chunks(view):
            if rows[lo:hi].any():
                _SCANNERS[view.site](_Columns(view, rows[lo:hi], lo, hi, scratch), result)
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
    """Boolean buffers reused by every run of one scan for its largest temporaries: a fresh
    array per pass would have the allocator map (and the kernel fault in) new pages each run."""

    def __init__(self) -> None:
        self._buffers: dict[str, np.ndarray] = {}

    def bools(self, slot: str, n: int) -> np.ndarray:
        """A writable boolean array of ``n`` items, the same memory for ``slot`` each call."""
        buffer = self._buffers.get(slot)
        if buffer is None or len(buffer) < n:
            buffer = self._buffers[slot] = np.empty(n, dtype=bool)
        return buffer[:n]


class _Columns:
    """Flat integer columns of the records ``lo:hi`` of one batch, restricted to its
    non-summary rows (``rows``, one per record of the run)."""

    def __init__(self, view: BatchView, rows: np.ndarray, lo: int, hi: int,
                 scratch: _Scratch) -> None:
        self.view, self.rows, self.all = view, rows, bool(rows.all())
        self.lo, self.hi, self.scratch = lo, hi, scratch

    def has(self, name: str) -> bool:
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
        values = self.view._int(name)[0][self.lo:self.hi]
        return values[self.rows] if not self.all else values


def _outside(values: np.ndarray, bounds: np.ndarray, sizes: np.ndarray,
             out: np.ndarray | None = None) -> int:
    """Count of ``values`` outside ``[0, bound)``, each row's values against its row's bound
    (``out``: a boolean buffer like ``values`` for the comparison)."""
    if len(values) == 0:
        return 0
    if len(bounds) and bounds.min() == bounds.max():  # one bound: compare with a scalar
        return _count_outside(values, int(bounds[0]), out)
    per_value = np.repeat(bounds, sizes)
    return int(np.count_nonzero((values < 0) | (values >= per_value)))


def _count_outside(values: np.ndarray, high: int, out: np.ndarray | None = None) -> int:
    """Count of ``values`` outside ``[0, high)``. Signed values are compared as unsigned where
    that is exact (``0 <= high <= 2**(bits-1)``: a negative value wraps past ``high``): one
    comparison (into ``out`` when given) instead of two and an or."""
    if values.dtype.kind == "u":
        return int(np.count_nonzero(np.greater_equal(values, high, out=out)))
    if 0 <= high <= 1 << (8 * values.dtype.itemsize - 1):
        unsigned = values.view(np.dtype(f"u{values.dtype.itemsize}"))
        return int(np.count_nonzero(np.greater_equal(unsigned, high, out=out)))
    return int(np.count_nonzero((values < 0) | (values >= high)))


def _at_or_past(values: np.ndarray, bounds: np.ndarray, sizes: np.ndarray,
                out: np.ndarray | None = None) -> int:
    """Count of ``values`` at or past their row's bound (no lower check; ``out`` as in
    :func:`_outside`)."""
    if len(values) == 0:
        return 0
    if bounds.min() == bounds.max():
        return int(np.count_nonzero(np.greater_equal(values, bounds[0], out=out)))
    return int(np.count_nonzero(values >= np.repeat(bounds, sizes)))


def _embedding(cols: _Columns, result: ScanResult) -> None:
    ids, sizes, _ = cols.tensor("input_ids")
    result._add("embedding", "input_ids", len(ids),
                _outside(ids, cols.ints("num_embeddings"), sizes,
                         cols.scratch.bools("compare", len(ids))))


def _batch_change(cols: _Columns, result: ScanResult) -> None:
    pp, sizes, _ = cols.tensor("prev_positions")
    gather: np.ndarray | None = None
    for name in GATHERED:
        _, lengths, _ = cols.tensor(name)
        if len(lengths) and lengths.min() > 0:
            bad = _at_or_past(pp, lengths, sizes,  # clamp(min=0) lands inside: only >= len
                              cols.scratch.bools("compare", len(pp)))
        else:
            gather = np.maximum(pp, 0) if gather is None else gather
            bad = _outside(gather, lengths, sizes)
        result._add("batch_change", name, len(pp), bad)


def _prepare_input_ids(cols: _Columns, result: ScanResult) -> None:
    pp, n, _ = cols.tensor("prev_positions")
    sampled_rows = cols.first_dim("prev_sampled_token_ids")
    common = np.greater_equal(pp, 0, out=cols.scratch.bools("common", len(pp)))
    top = _run_max(pp, n)
    bad = 0
    if (top >= sampled_rows).any():  # else no row reads past the sampled rows
        bad = int(np.count_nonzero(common & (pp >= _per_value(sampled_rows, n))))
    result._add("prepare_input_ids", "prev_sampled_token_ids", int(np.count_nonzero(common)),
                bad)
    if cols.has("draft_token_ids"):
        _drafts(cols, pp, n, top, common, result)


def _per_value(bounds: np.ndarray, sizes: np.ndarray) -> np.ndarray | int:
    """Each row's bound repeated for its values; a plain int when every row has the same."""
    if len(bounds) and bounds.min() == bounds.max():
        return int(bounds[0])
    return np.repeat(bounds, sizes)


def _run_starts(n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Records with values (``n > 0``) and where each one's run of values starts."""
    filled = n > 0
    return filled, (np.cumsum(n) - n)[filled]


def _run_max(values: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The largest of each record's run of ``values`` (the dtype's minimum for none)."""
    out = np.full(len(n), np.iinfo(values.dtype).min, dtype=values.dtype)
    filled, starts = _run_starts(n)
    if len(starts):
        out[filled] = np.maximum.reduceat(values, starts)
    return out


def _drafts(cols: _Columns, pp: np.ndarray, n: np.ndarray, top: np.ndarray,
            common: np.ndarray, result: ScanResult) -> None:
    """Draft reads of the slow path: ``pp * k + j`` for ``j < num_draft_tokens[row]``."""
    _, draft_size, present = cols.tensor("draft_token_ids")
    cu = cols.tensor("cu_num_tokens")[0]
    nd = cols.tensor("num_draft_tokens")[0]
    k = cols.ints("prev_num_spec_tokens")
    slow = _slow_path(pp, np.subtract(cu, 1, dtype=np.int64), common, n, top)
    records = slow & present
    read = common if records.all() else common & np.repeat(records, n)  # rows read
    # reads j < nd at pp * k + j (>= 0 on common rows): ``ends`` is one past the last read
    ends = np.multiply(pp, _per_value(k, n), dtype=np.int64)
    np.add(ends, nd, out=ends)
    bad = 0
    if len(nd) and (nd.min() < 0 or (records & (_run_max(ends, n) > draft_size)).any()):
        # only rows reading past the size (or with negative nd) can have out-of-range reads
        reads = nd.astype(np.int64)
        over = ends - _per_value(draft_size, n)
        hit = np.flatnonzero(read & ((over > 0) | (reads < 0)))
        wanted, past = reads[hit], over[hit]
        bad = int(np.clip(wanted - np.maximum(wanted - past, 0), 0, wanted).sum())
    checked = int(np.sum(nd, where=read, dtype=np.int64))
    result._add("prepare_input_ids", "draft_token_ids", checked, bad)


def _slow_path(pp: np.ndarray, flat: np.ndarray, common: np.ndarray, n: np.ndarray,
               top: np.ndarray) -> np.ndarray:
    """Per record: True when the call scatters row by row (not the one-slice fast path: every
    common row has ``pp == flat`` and the largest common ``flat`` is ``num_common - 1``).
    ``top``: each record's largest ``pp``, which is its largest common ``flat`` whenever every
    common row has ``pp == flat`` (rows that are not common have ``pp < 0``). One reduction
    per record over its run of rows (``reduceat``), no per-row indexing."""
    filled, starts = _run_starts(n)
    num_common = np.zeros(len(n), dtype=np.int64)
    mismatch = np.zeros(len(n), dtype=bool)
    if len(starts):
        num_common[filled] = np.add.reduceat(common, starts, dtype=np.int64)
        mismatch[filled] = np.logical_or.reduceat(common & (pp != flat), starts)
    fast = (num_common > 0) & ~mismatch & (top == num_common - 1)
    return ~fast


def _async_output(cols: _Columns, result: ScanResult) -> None:
    flat, sizes, present = cols.tensor("sampled_token_ids_cpu")
    rows = cols.first_dim("sampled_token_ids_cpu")
    width = sizes // np.maximum(rows, 1)
    used = present & (rows > 0) & (width > 0)
    vocab = cols.ints("vocab_size")
    checked = bad = 0
    for k in _distinct(width[used]):  # one pass per row width (usually one)
        mine = used & (width == k)
        block = flat if mine.all() else flat[np.repeat(mine, sizes)]
        n, b = _sampled_outside(block.reshape(-1, k), vocab[mine], rows[mine], cols.scratch)
        checked += n
        bad += b
    result._add("async_output", "sampled_token_ids_cpu", checked, bad, replay=False)


def _distinct(values: np.ndarray) -> list[int]:
    """The distinct values, ascending (no sort when all are equal, the usual case)."""
    if len(values) and values.min() == values.max():
        return [int(values[0])]
    return sorted(set(values.tolist()))


def _sampled_outside(block: np.ndarray, vocab: np.ndarray, rows: np.ndarray,
                     scratch: _Scratch) -> tuple[int, int]:
    """Ids vLLM counts in the rows of ``block`` (each record's ``rows`` rows against its
    ``vocab``): how many, and how many lie outside ``[0, vocab)``."""
    minus = np.equal(block, -1, out=scratch.bools("minus", block.size).reshape(block.shape))
    if not _gaps(minus, scratch) and vocab.min() == vocab.max():
        # every row's -1s form a suffix (the padding): the counted ids are the others
        high, padding = int(vocab[0]), int(np.count_nonzero(minus))
        # outside [0, high) but -1 (when high >= 0, -1 is outside: count all, take the -1s)
        compare = scratch.bools("compare", block.size).reshape(block.shape)
        bad = _count_outside(block, high, compare) - padding if high >= 0 else \
            int(np.count_nonzero((block < -1) | (block >= high)))
        return block.size - padding, bad
    counted = _counted(block)
    ids = block[counted]
    bound = np.broadcast_to(np.repeat(vocab, rows)[:, None], block.shape)[counted]
    return len(ids), int(np.count_nonzero((ids < 0) | (ids >= bound)))


def _gaps(minus: np.ndarray, scratch: _Scratch) -> bool:
    """Whether a row of ``minus`` (rows x k, True at each -1) has a -1 followed by an id: one
    contiguous comparison of neighbours, the pairs that straddle two rows left out."""
    flat = minus.reshape(-1)
    rises = np.greater(flat[:-1], flat[1:], out=scratch.bools("rises", max(len(flat) - 1, 0)))
    rises[minus.shape[1] - 1::minus.shape[1]] = False  # last of a row, first of the next
    return bool(rises.any())


def _counted(block: np.ndarray) -> np.ndarray:
    """Mask of the ids vLLM counts in each row: all when the last is not -1, else those before
    the first -1."""
    minus = block == -1
    first = np.where(minus.any(axis=1), minus.argmax(axis=1), block.shape[1])
    first = np.where(block[:, -1] != -1, block.shape[1], first)
    return np.arange(block.shape[1]) < first[:, None]


_SCANNERS = {
    "batch_change": _batch_change,
    "prepare_input_ids": _prepare_input_ids,
    "async_output": _async_output,
    "embedding": _embedding,
}
