"""Site ``prepare_input_ids``: the async branch of ``GPUModelRunner._prepare_input_ids``.

vLLM 0.33.0 skips rows with ``prev_position < 0``; the others are the common rows. When some rows
are not common (``num_common < total - drafts of the common rows``) the CPU staging is copied to
the device buffer first. The **fast path** (every common row has ``prev_position ==
cu_num_tokens[row] - 1`` and the largest is ``num_common - 1``) copies
``prev_sampled_token_ids[:num_common, 0]`` as one slice: a one-row source is silently broadcast.
The **slow path** scatters ``prev_sampled_token_ids[prev_position, 0]`` to slot
``cu_num_tokens[row] - 1 - num_draft_tokens[row]``, then (only when drafts were captured) draft
``j`` from ``draft_token_ids.flatten()[prev_position * prev_num_spec_tokens + j]``.
The patched model also skips common rows at or past ``prev_sampled_token_ids.shape[0]``.

The total number of scheduled tokens is ``cu_num_tokens[-1]`` (0 without rows).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from forensics.outcome import STATUSES, Access, Outcome
from forensics.records import FieldSpec, Record
from forensics.sites._common import (
    MISATTRIBUTED,
    BatchColumns,
    RecordColumns,
    RowValues,
    RunColumns,
    Violation,
    aligned,
    failed,
    require,
    require_rows,
    row_last,
    row_steps,
    rows_with_any,
    screen_rows,
)
from forensics.sites.core import (
    VOCABULARY,
    BatchRun,
    CheckList,
    Checks,
    Column,
    every,
    group_starts,
    in_range_extremes,
    owner,
    rows_of_slots,
    runs_from,
    starts_of,
    within,
)
from forensics.sites.scan_counts import IndexCount, ScanColumns, per_value, run_max, run_starts

NAME = "prepare_input_ids"
FIELDS = (
    FieldSpec("prev_positions", "tensor", rank_shared=True, doc="[n]"),
    FieldSpec("prev_sampled_token_ids", "tensor", ndim=2, rank_shared=True, doc="[p, 1] int32",
              token_ids=True),
    FieldSpec("input_ids", "tensor", rank_shared=True, doc="[t] CPU-staged ids", token_ids=True),
    FieldSpec("input_ids_device", "tensor", required=False, doc="[t] device buffer before",
              token_ids=True),
    FieldSpec("cu_num_tokens", "tensor", doc="[n] inclusive cumulative scheduled tokens"),
    FieldSpec("num_draft_tokens", "tensor", doc="[n]"),
    FieldSpec("prev_num_spec_tokens", "int"),
    FieldSpec("draft_token_ids", "tensor", ndim=2, required=False, doc="[p', s]",
              token_ids=True),
    FieldSpec("vocab_size", "int", token_bound=True),
    FieldSpec("req_ids", "str_list", required=False),
)
OUTPUT_FIELDS = ("input_ids_device",)
SUMMARY_BOUND = "vocab_size"
SUMMARY_TENSOR = "out.input_ids_device"
OUTPUT_TENSOR = "out.input_ids_device"
SAMPLED, DRAFTS = "prev_sampled_token_ids", "draft_token_ids"
#: what a draft index indexes: ``draft_token_ids.flatten()[prev_positions[r] * spec + j]``
DRAFTS_FLAT = "draft_token_ids.flatten()"
#: dtypes the numpy path handles exactly as torch does (others go through torch)
_PLAIN = (np.dtype(np.int32), np.dtype(np.int64))

#: fields with one entry per current row
_ROWS = ("cu_num_tokens", "num_draft_tokens", "req_ids")

def total_tokens(record: Record) -> int:
    """Total scheduled tokens of the step: ``cu_num_tokens[-1]``, or 0 without rows."""
    cu = record["cu_num_tokens"]
    return int(cu[-1]) if len(cu) else 0


def check_record(record: Record, where: str) -> None:
    """Cross-field checks: one entry per row, each row scheduling its token and its drafts,
    buffers holding every scheduled token.

    Raises:
        CaptureFormatError: naming the field and what was expected.
    """
    require_rows(record, _ROWS, where)
    drafts = np.asarray(record["num_draft_tokens"], dtype=np.int64)
    cu = np.asarray(record["cu_num_tokens"], dtype=np.int64)
    counts = np.diff(cu, prepend=0)
    require(bool((drafts >= 0).all()), where, "num_draft_tokens", "must be >= 0")
    require(bool((counts >= 1 + drafts).all()), where, "cu_num_tokens",
            "must give each row at least 1 + num_draft_tokens[row] tokens")
    total = total_tokens(record)
    for name in ("input_ids", "input_ids_device"):
        if name in record:
            require(len(record[name]) >= total, where, name,
                    f"must hold the {total} scheduled tokens (cu_num_tokens[-1])")
    require(record["prev_num_spec_tokens"] >= 0, where, "prev_num_spec_tokens", "must be >= 0")
    require(record["vocab_size"] > 0, where, "vocab_size", "must be > 0")


def check_batch(cols: BatchColumns) -> np.ndarray:
    """:func:`check_record` on a whole batch at once: the records it may reject."""
    bad = screen_rows(cols, _ROWS)
    cu, drafts, counts = aligned(cols, ("cu_num_tokens", "num_draft_tokens"))
    bad |= rows_with_any((drafts < 0) | (row_steps(cu, counts) < 1 + drafts), counts)
    total = row_last(cu, counts)
    for name in ("input_ids", "input_ids_device"):
        bad |= cols.present(name) & (cols.length(name) < total)
    return bad | (cols.ints("prev_num_spec_tokens") < 0) | (cols.ints("vocab_size") <= 0)


@dataclass
class _Plan:
    """What the loop over rows of ``_prepare_input_ids`` computes."""

    common: np.ndarray        # common rows, in row order
    prev: np.ndarray          # their previous positions
    sample_slots: np.ndarray  # slot of each common row's sampled token
    spec_slots: np.ndarray    # slots of their drafts
    spec_rows: np.ndarray     # row of each draft slot
    draft_index: np.ndarray   # flat index into draft_token_ids of each draft
    fast: bool                # the one-slice fast path applies
    copy_cpu: bool            # the CPU staging is copied to the device first


@dataclass
class Batch:
    """Records of this site laid end to end: per row (``rec``, ``local``) its previous
    position, cumulative token count and drafts; per record its sampled rows ``p`` (flat
    ``sampled`` of width ``width`` from ``s_off``), ``spec`` (prev_num_spec_tokens),
    ``total`` tokens and ``vocab``."""

    cols: RunColumns
    rec: np.ndarray
    local: np.ndarray
    nrows: np.ndarray
    pp: np.ndarray
    cu: np.ndarray
    drafts: np.ndarray
    p: np.ndarray
    width: np.ndarray
    sampled: np.ndarray
    s_off: np.ndarray
    spec: np.ndarray
    total: np.ndarray
    vocab: np.ndarray
    #: the runs made of this batch, by what they cover and guard (see :func:`run_batch`)
    runs: dict[tuple[str, bool], BatchRun] = field(default_factory=dict)
    #: the records that run apart, decoded once for both models (see :func:`run_batch`)
    apart: Batch | None = None

    @functools.cached_property
    def changed(self) -> np.ndarray:
        """Per record: whether the guard changes its outcome (not :func:`inert`)."""
        return ~inert(self)

    @classmethod
    def of(cls, records: Sequence[Record]) -> Batch:
        """The columns of ``records`` (all of this site, validated)."""
        return cls.of_columns(RecordColumns(records))

    @classmethod
    def of_columns(cls, cols: RunColumns) -> Batch:
        """The batch of the records of ``cols`` (all of this site, validated)."""
        pp, nrows = cols.flat("prev_positions")
        cu, _ = cols.flat("cu_num_tokens")
        drafts, _ = cols.flat("num_draft_tokens")
        sampled, sizes = cols.flat(SAMPLED, widen=False)
        rec = owner(nrows)
        return cls(cols, rec, within(nrows), nrows, pp, cu,
                   drafts, cols.shape(SAMPLED, 0), cols.shape(SAMPLED, 1), sampled,
                   starts_of(sizes), cols.ints("prev_num_spec_tokens"), row_last(cu, nrows),
                   cols.ints("vocab_size"))


@dataclass
class _Plans:
    """:class:`_Plan` of every record of a :class:`Batch` at once (rows are batch rows): per
    common row, its record, previous position, sampled token's slot, drafts ``nd`` and first
    draft index ``draft_first``; per record, the path and counts. The per-draft columns
    (``spec_*``, ``draft_index``) are computed when first read: the numpy run reads drafts
    per row."""

    common: np.ndarray
    crec: np.ndarray
    prev: np.ndarray
    sample_slots: np.ndarray
    num_common: np.ndarray
    fast: np.ndarray
    copy_cpu: np.ndarray
    nd: np.ndarray            # drafts of each common row
    draft_first: np.ndarray   # index in draft_token_ids of each common row's first draft
    spec_count: np.ndarray    # drafts of each record's common rows
    heads: np.ndarray         # each record's first common row (records with some)
    holding: np.ndarray       # the records with common rows

    def per_record(self, reduce: np.ufunc, values: np.ndarray, fill: int) -> np.ndarray:
        """``reduce`` over each record's run of common-row ``values`` (``fill`` for a record
        without common rows), int64."""
        return _reduce_runs(reduce, values, self.heads, self.holding, len(self.num_common),
                            fill)

    def of_rows(self, per_record: np.ndarray, rows: np.ndarray | slice) -> np.ndarray:
        """``per_record[crec[rows]]``: the value of each chosen common row's record (every
        row: one repeat, the common rows being in record order)."""
        if isinstance(rows, slice):
            return np.repeat(per_record, self.num_common)
        return per_record[self.crec[rows]]

    @functools.cached_property
    def spec_rows(self) -> np.ndarray:
        """The row of each draft."""
        return np.repeat(self.common, self.nd)

    @functools.cached_property
    def spec_rec(self) -> np.ndarray:
        """The record of each draft."""
        return np.repeat(self.crec, self.nd)

    @functools.cached_property
    def spec_slots(self) -> np.ndarray:
        """The slot of each draft (after its row's sampled token)."""
        return runs_from(self.sample_slots + 1, self.nd)

    @functools.cached_property
    def draft_index(self) -> np.ndarray:
        """The index in ``draft_token_ids`` read by each draft."""
        return runs_from(self.draft_first, self.nd)

    def one(self, b: Batch, r: int) -> _Plan:
        """The plan of record ``r``, its rows local."""
        c, d = self.crec == r, self.spec_rec == r
        return _Plan(b.local[self.common[c]], self.prev[c], self.sample_slots[c],
                     self.spec_slots[d], b.local[self.spec_rows[d]], self.draft_index[d],
                     bool(self.fast[r]), bool(self.copy_cpu[r]))


def one_slice(num_common: Any, mismatch: Any, largest: Any) -> Any:
    """vLLM's fast path (the one rule; arrays or scalars): a record copies one slice when it
    has common rows, no common row's previous position differs from its last slot
    (``cu - 1``: ``mismatch`` false) and the largest such slot is ``num_common - 1``."""
    return (num_common > 0) & ~np.asarray(mismatch) & (largest == num_common - 1)


def plans(b: Batch, guard: bool) -> _Plans:
    """The common rows, slots and paths the call takes on every record (``guard``: patched):
    rows with ``prev_position >= 0`` (patched: also below the sampled rows) are common; each
    takes its sampled token at ``cu - 1 - drafts`` and its drafts after it, draft ``j`` from
    ``prev_position * prev_num_spec_tokens + j``; the fast path when every common row has
    ``prev_position == cu - 1`` and the largest is ``num_common - 1``; the CPU staging is
    copied first when ``num_common < total - drafts of the common rows``."""
    n = b.cols.rows
    keep = b.pp >= 0
    if guard:
        keep &= b.pp < b.p[b.rec]
    common = np.flatnonzero(keep)
    crec, prev = b.rec[common], b.pp[common]
    flat, nd = b.cu[common] - 1, b.drafts[common]
    heads = group_starts(crec, len(crec))
    holding = crec[heads]
    num_common = np.zeros(n, dtype=np.int64)
    num_common[holding] = np.diff(heads, append=len(crec))
    mismatch = _reduce_runs(np.logical_or, prev != flat, heads, holding, n, 0)
    largest = _reduce_runs(np.maximum, flat, heads, holding, n, -1)
    fast = one_slice(num_common, mismatch != 0, largest)
    spec_count = _reduce_runs(np.add, nd, heads, holding, n, 0)
    copy_cpu = num_common < b.total - spec_count
    return _Plans(common, crec, prev, flat - nd, num_common, fast, copy_cpu, nd,
                  prev * np.repeat(b.spec, num_common), spec_count, heads, holding)


def _reduce_runs(reduce: np.ufunc, values: np.ndarray, heads: np.ndarray, holding: np.ndarray,
                 n: int, fill: int) -> np.ndarray:
    """Per record of ``n``: ``reduce`` over its run of ``values`` (runs starting at
    ``heads``, of the records ``holding``; ``fill`` for the others), int64."""
    out = np.full(n, fill, dtype=np.int64)
    if len(heads):
        out[holding] = reduce.reduceat(values, heads)
    return out


def _small(*arrays: np.ndarray) -> bool:
    """Whether every value of ``arrays`` lies in ``(-2**31, 2**31)``: products of two and
    sums of a few such values cannot wrap in int64."""
    return all(not len(a) or (int(a.min()) > -2**31 and int(a.max()) < 2**31) for a in arrays)


def _draft_extremes(b: Batch, p: _Plans) -> tuple[np.ndarray, np.ndarray]:
    """Per record: the smallest and largest draft index read (``prev * spec + j``, ``j <
    nd``; -1 when none): each drafting row's first and last draft when nothing can wrap, else
    every draft's."""
    n = b.cols.rows
    if not _small(p.prev, b.spec, p.nd):
        return _record_extremes(p.spec_rec, p.draft_index, n)
    drafting = every(p.nd > 0)
    first = p.draft_first[drafting]
    last = first + p.nd[drafting] - 1
    if isinstance(drafting, slice):  # every common row drafts: the plan's runs of rows
        return p.per_record(np.minimum, first, -1), p.per_record(np.maximum, last, -1)
    return _record_extremes(p.crec[drafting], first, n, last)


def _record_extremes(rec: np.ndarray, values: np.ndarray, n: int,
                     highs: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per record of ``n``: the smallest of its ``values`` and the largest of its ``highs``
    (default ``values``), -1 for a record without any (``rec`` non-decreasing: the record
    of each value)."""
    low, high = np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    if len(rec):
        starts = group_starts(rec, len(rec))
        low[rec[starts]] = np.minimum.reduceat(values, starts)
        high[rec[starts]] = np.maximum(np.maximum.reduceat(
            values if highs is None else highs, starts), -1)
    return low, high


def plan(record: Record, guard: bool) -> _Plan:
    """The common rows, slots and paths the call takes on ``record`` (``guard``: patched):
    :func:`plans` of a batch of one."""
    b = Batch.of([record])
    return plans(b, guard).one(b, 0)


def inert(b: Batch) -> np.ndarray:
    """Per record of ``b``: whether ``patched`` gives exactly ``upstream``'s outcome. When no
    previous position is at or past the sampled rows, the guard skips no row and both take
    the same plan: each record's largest previous position is below its sampled rows."""
    return run_max(b.pp, b.nrows) < b.p


def _run(record: Record, guard: bool) -> Outcome:
    """The Outcome of one record (``guard``: patched, common rows at or past the sampled rows
    skipped like new rows): outputs ``input_ids_device`` (the whole device buffer after the
    call); accesses of ``prev_sampled_token_ids`` (the fast path's broadcast included) and of
    ``draft_token_ids``. The run of a batch of one, its buffer kept whole."""
    b = Batch.of([record])
    run = Run.of(b, plans(b, guard), whole=True)
    return run.outcome(0) if run.plain[0] else _run_torch(record, run.plans.one(b, 0))


def _device_name(record: Record) -> str:
    return "input_ids_device" if "input_ids_device" in record else "input_ids"


def _plain(cols: RunColumns, uses_drafts: np.ndarray) -> np.ndarray:
    """The records numpy runs exactly as torch does (plain int32/int64 arrays of one width,
    a sampled column to read; drafts written into an int32 buffer)."""
    sampled, inputs = cols.dtype(SAMPLED), cols.dtype("input_ids")
    device, drafts = cols.dtype("input_ids_device"), cols.dtype(DRAFTS)
    has_device = cols.present("input_ids_device")
    same = sampled in _PLAIN and sampled == inputs
    device_ok = np.where(has_device, device in _PLAIN and device == sampled, True)
    int32 = np.where(has_device, device == np.int32, inputs == np.int32)
    return (same & device_ok & (cols.shape(SAMPLED, 1) >= 1)
            & (~uses_drafts | ((drafts in _PLAIN) & int32)))


@dataclass
class Run:
    """The call on every record of a :class:`Batch` that numpy runs exactly (``plain``: no
    read past a tensor, plain dtypes; the others go through torch one by one): each plain
    record's device buffer after the call (``device`` from ``d_off``, ``d_len`` ids)."""

    batch: Batch
    plans: _Plans
    plain: np.ndarray
    has_drafts: np.ndarray
    drafts: np.ndarray
    dr_off: np.ndarray
    dr_size: np.ndarray
    dr_width: np.ndarray
    device: np.ndarray
    d_off: np.ndarray
    d_len: np.ndarray
    #: per record, the smallest and largest sampled row and draft index read (-1: none)
    prev_range: tuple[np.ndarray, np.ndarray]
    draft_range: tuple[np.ndarray, np.ndarray]

    @classmethod
    def of(cls, b: Batch, p: _Plans, whole: bool = False, skip: np.ndarray | None = None
           ) -> Run:
        """Run the plain records of ``b`` under plans ``p`` (``whole``: keep each device
        buffer whole, for :meth:`outcome`; else only its ``total`` scheduled ids, which is all
        the call writes and all the judge reads; ``skip``: records left out, as if not
        plain)."""
        has = b.cols.present(DRAFTS)
        plain = _plain(b.cols, has & (p.spec_count > 0))
        if skip is not None:
            plain &= ~skip
        dr_flat, dr_size = b.cols.flat(DRAFTS, widen=False)
        dr_width = b.cols.shape(DRAFTS, 1)
        slow = ~p.fast & (p.num_common > 0)
        prev_range = (p.per_record(np.minimum, p.prev, -1),
                      p.per_record(np.maximum, p.prev, -1))
        draft_range = _draft_extremes(b, p)
        plain &= ~slow | ((prev_range[1] < b.p) & (~has | (draft_range[1] < dr_size)))
        nc = np.minimum(b.p, p.num_common)
        plain &= ~p.fast | (nc == 1) | (nc == p.num_common)
        run = cls(b, p, plain, has, dr_flat, starts_of(dr_size), dr_size, dr_width,
                  *_start_buffers(b, p, plain, whole), prev_range, draft_range)
        run._write()
        return run

    def _write(self) -> None:
        """The call's writes into the plain records' buffers: the fast path's slice (one
        sampled row is broadcast, as torch does), else each common row's sampled token and
        drafts (cast to int32, as vLLM does)."""
        b, p = self.batch, self.plans
        fast = self.plain & p.fast
        count = np.where(fast, p.num_common, 0)
        rec, i = owner(count), within(count)
        row = np.where(b.p[rec] >= p.num_common[rec], i, 0)
        self.device[self.d_off[rec] + i] = b.sampled[b.s_off[rec] + row * b.width[rec]]
        slow = self._rows_of(self.plain & ~p.fast)
        read = p.prev[slow]
        if (b.width != 1).any():
            read = read * p.of_rows(b.width, slow)
        self.device[p.of_rows(self.d_off, slow) + p.sample_slots[slow]] = b.sampled[
            p.of_rows(b.s_off, slow) + read]
        rows = self._rows_of(self.plain & ~p.fast & self.has_drafts)  # drafting rows
        scatter_drafts(self.device, p.of_rows(self.d_off, rows) + p.sample_slots[rows] + 1,
                       self.drafts, p.of_rows(self.dr_off, rows) + p.draft_first[rows],
                       p.nd[rows], wraps=b.cols.dtype(DRAFTS) != np.int32)

    def _rows_of(self, records: np.ndarray) -> np.ndarray | slice:
        """The common rows of the chosen ``records`` (every row: a slice)."""
        return slice(None) if records.all() else records[self.plans.crec]

    def checks(self) -> CheckList:
        """The plain records' checks: sampled rows read (the fast path: its slice), draft
        positions read, drafts read from another request's row, and every id of
        ``input_ids[:total]`` after the call against the vocabulary (a run made without
        ``whole``: ``device`` holds just those)."""
        b, p = self.batch, self.plans
        count = np.where(self.plain & p.fast, p.num_common, 0)
        slow = self.plain & ~p.fast
        drafting = slow & self.has_drafts
        rows = functools.partial(rows_of_slots, b.cu, b.nrows)  # no cycle through the batch
        return Checks.concat([
            Checks.of_runs(SAMPLED, count, within(count), 0, b.p, rows).naming(
                "", SAMPLED, held=False),
            self._sampled_reads(slow),
            self._draft_reads(drafting),
            self._misattributed(drafting),
            Checks.of_runs(OUTPUT_TENSOR, self.d_len, self.device, 0, b.vocab, rows).naming(
                None, VOCABULARY)])

    def _sampled_reads(self, slow: np.ndarray) -> Checks:
        """The sampled rows read by the records ``slow`` (each common row's previous
        position): all inside ``[0, rows)`` (a plain record reads no row past the sampled
        rows, and common rows have ``prev >= 0``), so each record's range is its smallest and
        largest."""
        b, p = self.batch, self.plans
        low, high = self.prev_range
        recs = np.flatnonzero(slow & (p.num_common > 0))
        return in_range_extremes(SAMPLED, recs, low[recs], high[recs], b.p[recs])

    def _draft_reads(self, drafting: np.ndarray) -> Checks:
        """The draft indices read by the records ``drafting``, against the size of
        ``draft_token_ids``. Where no index can wrap they all lie inside it (a plain record
        reads no draft past the tensor; ``prev``, ``spec`` and ``j`` are >= 0): each record's
        range is its smallest and largest; else every read, laid out per row."""
        b, p = self.batch, self.plans
        if _small(p.prev, b.spec, p.nd):
            low, high = self.draft_range
            recs = np.flatnonzero(drafting & (p.spec_count > 0))
            return in_range_extremes(DRAFTS, recs, low[recs], high[recs], self.dr_size[recs])
        rows = every(drafting[p.crec])
        crec, nd = p.crec[rows], p.nd[rows]
        index = p.draft_index if isinstance(rows, slice) else runs_from(p.draft_first[rows], nd)
        reads = Checks.of_row_runs(DRAFTS, crec, nd, index, b.local[p.common[rows]],
                                   p.sample_slots[rows] + 1, self.dr_size[crec])
        return _draft_naming(reads, reads.row)

    def _misattributed(self, drafting: np.ndarray) -> Checks:
        """The drafts of the records ``drafting`` read from another request's draft row."""
        if not self._misattribution_possible(drafting):
            return Checks.empty()
        b, p = self.batch, self.plans
        spec = every(drafting[p.spec_rec])
        srec, index = p.spec_rec[spec], p.draft_index[spec]
        spec_rows = b.local[p.spec_rows[spec]]
        width = np.maximum(self.dr_width, 1)[srec]
        row_start = b.pp[p.spec_rows[spec]] * width  # the draft row of the drafted request
        wrong = (index < self.dr_size[srec]) & ((index < row_start) | (index >= row_start + width))
        return _draft_naming(Checks.of(DRAFTS, srec[wrong], spec_rows[wrong],
                                       p.spec_slots[spec][wrong], index[wrong], 0,
                                       self.dr_size[srec[wrong]], MISATTRIBUTED),
                             spec_rows[wrong])

    def _misattribution_possible(self, drafting: np.ndarray) -> bool:
        """Whether some draft of the records ``drafting`` may be read from another request's
        row. Draft ``j`` of a row is read at ``prev * spec + j`` and its request's draft row
        starts at ``prev * width``: when ``spec == width``, the row drafts at most ``width``
        and nothing can wrap, every read lies in its own row (decided per record, from the
        most drafts of one of its rows)."""
        b, p = self.batch, self.plans
        width = np.maximum(self.dr_width, 1)
        if not _small(p.prev, b.spec, width, p.nd):
            return True
        most = p.per_record(np.maximum, p.nd, -1)  # a record's most drafts in one row
        return bool((drafting & (((b.spec != width) & (most > 0)) | (most > width))).any())

    def outcome(self, r: int) -> Outcome:
        """The Outcome of plain record ``r``."""
        record = self.batch.cols.record(r)
        device = record[_device_name(record)]
        start = int(self.d_off[r])
        buffer = self.device[start:start + int(self.d_len[r])].astype(device.dtype)
        return Outcome("ok", "", {"input_ids_device": buffer},
                       _accesses(record, self.plans.one(self.batch, r)))


#: most drafts per row that :func:`scatter_drafts` writes a draft position at a time
DRAFT_COLUMNS = 16


def scatter_drafts(device: np.ndarray, slot: np.ndarray, drafts: np.ndarray,
                   index: np.ndarray, count: np.ndarray, wraps: bool = True,
                   columns: int = DRAFT_COLUMNS) -> None:
    """``device[slot[i] + j] = drafts[index[i] + j]`` for ``j < count[i]``, each draft cast to
    int32 as vLLM casts it (``wraps``: False when every draft fits in int32, no cast needed).
    Up to ``columns`` drafts per row: drafts of the buffer's dtype (no cast), indices >= 0 and
    contiguous arrays by :func:`_scatter_windows`, else one gather and one scatter per draft
    position over the rows drafting that many (no index built per draft); more by runs."""
    most = int(count.max(initial=0))
    if most > columns:
        ids = drafts[runs_from(index, count)]
        device[runs_from(slot, count)] = ids.astype(np.int32) if wraps else ids
        return
    if (most and not wraps and drafts.dtype == device.dtype and index.min() >= 0
            and device.flags.c_contiguous and drafts.flags.c_contiguous):
        _scatter_windows(device, slot, drafts, index, count)
        return
    for j in range(most):
        live = every(count > j)
        ids = drafts[index[live] + j]
        device[slot[live] + j] = ids.astype(np.int32) if wraps else ids


def _scatter_windows(device: np.ndarray, slot: np.ndarray, drafts: np.ndarray,
                     index: np.ndarray, count: np.ndarray) -> None:
    """:func:`scatter_drafts` without a cast (same dtypes, ``index >= 0``): the rows that
    draft ``d`` ids at a time, each row's ``d`` drafts moved as one item of ``d``-wide
    windows of both arrays (one gather and one scatter per count)."""
    for d in np.flatnonzero(np.bincount(count)).tolist():
        if d:
            rows = every(count == d)
            _windows(device, d)[slot[rows]] = _windows(drafts, d)[index[rows]]


def _windows(values: np.ndarray, d: int) -> np.ndarray:
    """Every run of ``d`` neighbouring values of contiguous 1-D ``values`` as one item (a view
    of the same memory: writing an item writes those ``d`` values)."""
    return np.ndarray((len(values) - d + 1,), np.dtype((np.void, values.itemsize * d)),
                      values, 0, values.strides)


def _record_rows(record: Record, slots: np.ndarray) -> np.ndarray:
    """Batch row of each token slot of one record (-1 past its last row)."""
    cu = np.asarray(record["cu_num_tokens"], dtype=np.int64)
    return rows_of_slots(cu, np.array([len(cu)]), np.zeros(len(slots), np.int64),
                         np.asarray(slots, dtype=np.int64))


def _start_buffers(b: Batch, p: _Plans, plain: np.ndarray, whole: bool
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each plain record's device buffer before the writes (the CPU staging where the plan
    copies it; ``whole``: the whole buffer, else its first ``total`` ids), end to end (in
    :func:`_buffer_dtype`); offsets and lengths."""
    inputs, n_inputs = b.cols.flat("input_ids", widen=False)
    device, n_device = b.cols.flat("input_ids_device", widen=False)
    has_device = b.cols.present("input_ids_device")
    size = np.where(has_device, n_device, n_inputs) if whole else b.total
    size = np.where(plain, size, 0)
    dtype = _buffer_dtype(b.cols)
    if not has_device.any() and np.array_equal(size, n_inputs):  # the staging, whole
        return inputs.astype(dtype), starts_of(size), size
    rec, i = owner(size), within(size)
    staged = p.copy_cpu[rec] & (i < b.total[rec]) | ~has_device[rec]
    at_inputs = np.where(staged, starts_of(n_inputs)[rec] + i, 0)
    at_device = np.where(staged, 0, starts_of(n_device)[rec] + i)
    flat = np.where(staged, inputs[at_inputs] if len(inputs) else 0,
                    device[at_device] if len(device) else 0)
    return flat.astype(dtype), starts_of(size), size


def _buffer_dtype(cols: RunColumns) -> np.dtype[Any]:
    """The dtype of the plain records' device buffers: their sampled ids' (every plain record
    shares it with its buffers, see :func:`_plain`); int64 when no record is plain."""
    sampled = cols.dtype(SAMPLED)
    return sampled if sampled in _PLAIN else np.dtype(np.int64)


def prepare_columns(cols: RunColumns) -> Batch:
    """The columns :func:`run_batch` runs (built once for every model variant)."""
    return Batch.of_columns(cols)


#: most records of a batch whose guard skips a row that run apart from the others (each
#: decoded, about 1 ms, and run once per model); past it, each model runs the whole batch
APART_AT_MOST = 4


def run_batch(b: Batch, patched: bool) -> BatchRun:
    """The columnar run of a prepared batch as the judge reads it: the plain records in numpy
    at once, the others one by one through torch. Where the guard skips no row of a record
    (:func:`inert`), ``patched``'s outcome is ``upstream``'s: the records of the batch that
    are inert run once for both models, the others (at most :data:`APART_AT_MOST`) apart,
    as a batch of their own per model; ``patched``'s run then inherits the inert records from
    ``upstream``'s (``BatchRun.base``: the judge judges them once)."""
    changed = b.changed
    count = int(changed.sum())
    if not count:
        return _cached(b, ("whole", False), lambda: _run_batch(b, False))
    if count > APART_AT_MOST or count == len(changed):
        return _cached(b, ("whole", patched), lambda: _run_batch(b, patched))
    shared = _cached(b, ("inert", False), lambda: _run_batch(b, False, skip=changed))
    return _cached(b, ("apart", patched), lambda: _with_apart(b, shared, changed, patched))


def _cached(b: Batch, key: tuple[str, bool], make: Callable[[], BatchRun]) -> BatchRun:
    """The run ``key`` of ``b``, made once."""
    if key not in b.runs:
        b.runs[key] = make()
    return b.runs[key]


def _with_apart(b: Batch, shared: BatchRun, apart: np.ndarray, patched: bool) -> BatchRun:
    """The run ``shared`` (every record but ``apart``) completed by the records ``apart``,
    decoded and run as a batch of their own (``patched``: with the guard)."""
    at = np.flatnonzero(apart)
    if b.apart is None:
        b.apart = Batch.of([b.cols.record(i) for i in at.tolist()])
    own = _run_batch(b.apart, patched)
    status = shared.status.copy()
    status[at] = own.status
    messages = {int(at[r]): message for r, message in own.messages.items()}
    if patched:  # the inert records are upstream's: the judge reads them from its run once
        upstream = _cached(b, ("apart", False), lambda: _with_apart(b, shared, apart, False))
        return BatchRun(status, messages, own.checks.renumbered(at), shared.req_ids,
                        base=upstream, inherited=~apart, outcome=_outcomes(b, patched))
    return BatchRun(status, {**shared.messages, **messages},
                    Checks.concat([shared.checks, own.checks.renumbered(at)]), shared.req_ids,
                    outcome=_outcomes(b, patched))


def _run_batch(b: Batch, patched: bool, skip: np.ndarray | None = None) -> BatchRun:
    """Both forms of the run of ``b`` (``skip``: records left out, status 0 and no check)."""
    run = Run.of(b, plans(b, patched), skip=skip)
    status = np.zeros(b.cols.rows, dtype=np.int8)
    messages: dict[int, str] = {}
    parts: list[CheckList] = [run.checks()]
    torch_path = ~run.plain if skip is None else ~run.plain & ~skip
    for r in np.flatnonzero(torch_path).tolist():
        record = b.cols.record(r)
        outcome = _run_torch(record, run.plans.one(b, r))
        status[r] = STATUSES.index(outcome.status)
        if outcome.message:
            messages[r] = outcome.message
        parts.append(outcome_checks(record, outcome).renumbered(np.array([r])))
    return BatchRun(status, messages, Checks.concat(parts), RowValues(b.cols, "req_ids"),
                    outcome=_outcomes(b, patched))


def _outcomes(b: Batch, patched: bool) -> Callable[[int], Outcome]:
    """Each record's Outcome on demand (:func:`_run`: its device buffer whole; a closure over
    the columns, not the batch: the batch keeps its runs)."""
    cols = b.cols
    return lambda i: _run(cols.record(i), patched)


def _run_torch(record: Record, p: _Plan) -> Outcome:
    import torch

    cpu = record.tensor("input_ids")
    device = record.tensor("input_ids_device" if "input_ids_device" in record
                           else "input_ids").clone()
    sampled = record.tensor("prev_sampled_token_ids")
    total = total_tokens(record)
    accesses = _accesses(record, p)
    try:
        if p.copy_cpu:
            device[:total].copy_(cpu[:total])
        if len(p.common) == 0:
            pass
        elif p.fast:
            device[: len(p.common)].copy_(sampled[: len(p.common), 0])
        else:
            _scatter(record, p, device, sampled, torch)
    except Exception as exc:  # noqa: BLE001  (the outcome records any failure of the call)
        return failed(exc, accesses)
    return Outcome("ok", "", {"input_ids_device": device.numpy()}, accesses)


def _scatter(record: Record, p: _Plan, device: Any, sampled: Any, torch: Any) -> None:
    index = torch.from_numpy(p.sample_slots)
    device.scatter_(0, index, sampled[torch.from_numpy(p.prev), 0])
    if "draft_token_ids" not in record or len(p.spec_slots) == 0:
        return
    drafts = record.tensor("draft_token_ids").to(dtype=torch.int32)
    device.scatter_(0, torch.from_numpy(p.spec_slots),
                    drafts.flatten()[torch.from_numpy(p.draft_index)])


def _accesses(record: Record, p: _Plan) -> list[Access]:
    rows_sampled = record["prev_sampled_token_ids"].shape[0]
    if len(p.common) == 0:
        return []
    if p.fast:
        slots = np.arange(len(p.common), dtype=np.int64)
        rows = _record_rows(record, slots)
        # the fast path's slice: no captured tensor holds the positions it reads
        return [Access(SAMPLED, rows, slots, slots, 0, rows_sampled, held=False)]
    found = [Access(SAMPLED, p.common, p.sample_slots, p.prev, 0, rows_sampled,
                    "prev_positions", p.common, stale=True)]
    if "draft_token_ids" in record and len(p.spec_slots):
        found.append(Access(DRAFTS, p.spec_rows, p.spec_slots, p.draft_index, 0,
                            int(np.asarray(record["draft_token_ids"]).size), "prev_positions",
                            p.spec_rows, held=False, indexed=DRAFTS_FLAT))
    return found


def outcome_checks(record: Record, outcome: Outcome) -> CheckList:
    """The checks of any variant's outcome on one record: its accesses (models only), drafts
    read from another request's row, and every id of the resulting ``input_ids[:total]``."""
    accesses = list(outcome.accesses or ())
    parts: list[Checks | CheckList] = [Checks.of_access(a) for a in accesses]
    if "draft_token_ids" in record:
        width = max(record["draft_token_ids"].shape[1], 1)
        pp = np.asarray(record["prev_positions"], dtype=np.int64)
        for a in accesses:
            if a.tensor == DRAFTS and a.rows is not None:
                values = np.asarray(a.values, dtype=np.int64)
                rows = np.asarray(a.rows, dtype=np.int64)
                wrong = (values >= a.lower) & (values < a.upper) & (values // width != pp[rows])
                parts.append(_draft_naming(
                    Checks.of(DRAFTS, 0, rows[wrong], np.asarray(a.elements)[wrong],
                              values[wrong], a.lower, a.upper, MISATTRIBUTED), rows[wrong]))
    produced = outcome.outputs.get("input_ids_device") if outcome.status == "ok" else None
    if produced is not None:
        ids = np.asarray(produced)[: total_tokens(record)]
        element = np.arange(len(ids), dtype=np.int64)
        rows = _record_rows(record, element)
        parts.append(Checks.of(OUTPUT_TENSOR, 0, rows, element, ids, 0,
                               record["vocab_size"]).naming(None, VOCABULARY))
    return Checks.concat(parts)


def _draft_naming(checks: Checks, rows: Column) -> Checks:
    """Draft reads named by what they come from: index ``prev_positions[row] *
    prev_num_spec_tokens + j`` into ``draft_token_ids``, computed from ``prev_positions[row]``
    (``rows``: each entry's row)."""
    return checks.naming("prev_positions", DRAFTS_FLAT, rows, held=False)


def scan_indices(cols: ScanColumns) -> list[IndexCount]:
    """The captured index checks (see :mod:`forensics.sites.scan_counts`): the previous
    positions of the common rows (``>= 0``) read ``prev_sampled_token_ids``, valid in
    ``[0, rows)``; on the slow path, row by row, the drafts ``prev_position *
    prev_num_spec_tokens + j`` (``j < num_draft_tokens[row]``), valid in
    ``[0, draft_token_ids.size)``."""
    pp, n, _ = cols.tensor("prev_positions")
    sampled_rows = cols.first_dim(SAMPLED)
    common = np.greater_equal(pp, 0, out=cols.bools("common", len(pp)))
    top = run_max(pp, n)
    bad = 0
    if (top >= sampled_rows).any():  # else no row reads past the sampled rows
        bad = int(np.count_nonzero(common & (pp >= per_value(sampled_rows, n))))
    counts = [IndexCount(SAMPLED, int(np.count_nonzero(common)), bad)]
    if cols.has(DRAFTS):
        counts.append(_scan_drafts(cols, pp, n, top, common))
    return counts


def _scan_drafts(cols: ScanColumns, pp: np.ndarray, n: np.ndarray, top: np.ndarray,
                 common: np.ndarray) -> IndexCount:
    """Draft reads of the slow path: ``pp * k + j`` for ``j < num_draft_tokens[row]``."""
    _, draft_size, present = cols.tensor(DRAFTS)
    cu = cols.tensor("cu_num_tokens")[0]
    nd = cols.tensor("num_draft_tokens")[0]
    k = cols.ints("prev_num_spec_tokens")
    flat = np.subtract(cu, 1, dtype=np.int64, out=cols.int64s("flat", len(cu)))
    slow = _scan_slow_path(pp, flat, common, n, top, cols.bools("mismatch", len(pp)))
    records = slow & present
    read = common if records.all() else common & np.repeat(records, n)  # rows read
    checked = int(nd.sum(dtype=np.int64)) - int(nd[~read].sum(dtype=np.int64))
    if not len(nd) or (nd.min() >= 0 and not (records & (_reach(top, k, nd) > draft_size)).any()):
        return IndexCount(DRAFTS, checked, 0)  # no read past the size: nothing to count
    return IndexCount(DRAFTS, checked, _drafts_past(pp, n, k, nd, draft_size, read))


def _reach(top: np.ndarray, k: np.ndarray, nd: np.ndarray) -> np.ndarray:
    """Per record, a bound on one past its last draft read (``pp * k + nd`` of a read row,
    whose ``pp`` lies in ``[0, top]``): from each record's largest position and the largest
    count, no pass over the rows. Values too large to multiply exactly give no bound."""
    limit = 1 << 31
    if top.max(initial=0) >= limit or not -limit < k.min(initial=0) <= k.max(initial=0) < limit:
        return np.full(len(top), np.iinfo(np.int64).max, dtype=np.int64)
    return np.maximum(np.maximum(top, 0).astype(np.int64) * k, 0) + int(nd.max())


def _drafts_past(pp: np.ndarray, n: np.ndarray, k: np.ndarray, nd: np.ndarray,
                 draft_size: np.ndarray, read: np.ndarray) -> int:
    """Count of the draft reads of the rows ``read`` (``pp * k + j``, ``j < nd``) outside
    ``[0, draft_size)``."""
    # reads j < nd at pp * k + j (>= 0 on common rows): ``ends`` is one past the last read
    ends = np.multiply(pp, per_value(k, n), dtype=np.int64)
    np.add(ends, nd, out=ends)
    reads = nd.astype(np.int64)
    over = ends - per_value(draft_size, n)
    hit = np.flatnonzero(read & ((over > 0) | (reads < 0)))
    wanted, past = reads[hit], over[hit]
    return int(np.clip(wanted - np.maximum(wanted - past, 0), 0, wanted).sum())


def _scan_slow_path(pp: np.ndarray, flat: np.ndarray, common: np.ndarray, n: np.ndarray,
                    top: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """Per record: True when the call scatters row by row (not the one-slice fast path: every
    common row has ``pp == flat`` and the largest common ``flat`` is ``num_common - 1``).
    ``top``: each record's largest ``pp``, which is its largest common ``flat`` whenever every
    common row has ``pp == flat`` (rows that are not common have ``pp < 0``). One reduction
    per record over its run of rows (``reduceat``), no per-row indexing. ``scratch``: a
    boolean buffer like ``pp``."""
    filled, starts = run_starts(n)
    num_common = np.zeros(len(n), dtype=np.int64)
    mismatch = np.zeros(len(n), dtype=bool)
    if len(starts):
        num_common[filled] = np.add.reduceat(common, starts, dtype=np.int64)
        wrong = np.logical_and(np.not_equal(pp, flat, out=scratch), common, out=scratch)
        mismatch[filled] = np.logical_or.reduceat(wrong, starts)
    return ~one_slice(num_common, mismatch, top)


def guard(prev_positions: np.ndarray, cu_num_tokens: np.ndarray,
                            num_draft_tokens: np.ndarray, prev_rows: int,
                            prev_num_spec_tokens: int, draft_numel: int | None) -> Violation | None:
    """The probe's per-call check (``Site.guard``): common rows read
    ``prev_sampled_token_ids[prev_position]`` and, on the scatter path,
    ``draft_token_ids.flatten()[prev_position * prev_num_spec_tokens + j]``."""
    prev_positions = np.asarray(prev_positions)
    common = np.flatnonzero(prev_positions >= 0)
    for row in common:
        if prev_positions[row] >= prev_rows:
            return Violation(NAME, int(row), "prev_sampled_token_ids",
                             int(prev_positions[row]), 0, int(prev_rows))
    if draft_numel is None or _fast_path(prev_positions, cu_num_tokens, common):
        return None
    for row in common:
        start = int(prev_positions[row]) * int(prev_num_spec_tokens)
        for j in range(int(num_draft_tokens[row])):
            if start + j >= draft_numel:
                return Violation(NAME, int(row), "draft_token_ids",
                                 start + j, 0, int(draft_numel))
    return None


def _fast_path(prev_positions: np.ndarray, cu_num_tokens: np.ndarray, common: np.ndarray) -> bool:
    if common.size == 0:
        return True  # nothing is gathered
    last = np.asarray(cu_num_tokens)[common] - 1
    return bool(one_slice(common.size, not np.all(prev_positions[common] == last), last.max()))


from forensics.sites.base import Site  # noqa: E402  (the SITE declaration closes the module)

#: this module's site: its schema and operations (the registry holds it)
#: ``forensics repro``: the vLLM function a standalone test calls with one record ``r``,
#: and the test body that calls it (``{lower}``/``{upper}``: the first finding's bound)
REPRO = ('vllm.v1.worker.gpu_model_runner.GPUModelRunner._prepare_input_ids',
         '''    from vllm.v1.worker import gpu_model_runner

    if hasattr(gpu_model_runner, "PIN_MEMORY"):
        gpu_model_runner.PIN_MEMORY = False  # CPU: no pinned memory

    class Buffer:
        """Stand-in for CpuGpuBuffer: .cpu, .gpu, .np and copy_to_gpu."""

        def __init__(self, cpu, gpu):
            self.cpu, self.gpu, self.np = cpu, gpu, cpu.numpy()

        def copy_to_gpu(self, n=None):
            cpu, gpu = (self.cpu, self.gpu) if n is None else (self.cpu[:n], self.gpu[:n])
            return gpu.copy_(cpu, non_blocking=True)

    req_ids = r.get("req_ids") or [f"r{i}" for i in range(len(r["prev_positions"]))]
    cu_num_tokens = r["cu_num_tokens"].numpy().copy()
    total = int(cu_num_tokens[-1]) if len(cu_num_tokens) else 0
    staged = r["input_ids"].clone()
    device = r["input_ids_device"].clone() if "input_ids_device" in r else staged.clone()
    drafts = zip(req_ids, r["num_draft_tokens"].tolist())
    spec = {rid: [-1] * int(k) for rid, k in drafts if k > 0}
    runner = NS(_pp_recv_work=None, enable_prompt_embeds=False,
                prev_positions=NS(np=r["prev_positions"].numpy().copy()),
                input_batch=NS(prev_sampled_token_ids=r["prev_sampled_token_ids"].clone(),
                               req_ids=req_ids),
                input_ids=Buffer(staged, device), prev_num_spec_tokens=r["prev_num_spec_tokens"],
                _draft_token_ids=r.get("draft_token_ids"), device=torch.device("cpu"))
    gpu_model_runner.GPUModelRunner._prepare_input_ids(
        runner, NS(scheduled_spec_decode_tokens=spec), len(req_ids), total, cu_num_tokens)
    return [("input_ids", runner.input_ids.gpu[:total].tolist(), ())]
''')


SITE = Site(name=NAME, fields=FIELDS, output_fields=OUTPUT_FIELDS, summary_bound=SUMMARY_BOUND,
            summary_tensor=SUMMARY_TENSOR,
            adapter="forensics.variants.vllm_adapters:run_prepare_input_ids",
            hook="vllm.v1.worker.gpu_model_runner:GPUModelRunner._prepare_input_ids",
            repro=REPRO,
            feeds_sink=(f"{OUTPUT_FIELDS[0]}_after", SUMMARY_BOUND),
            checks=outcome_checks, scan_indices=scan_indices, guard=guard,
            check_record=check_record, check_batch=check_batch, prepare_columns=prepare_columns,
            run_batch=run_batch)
