"""The path each record of ``prepare_input_ids`` takes: a batch of records as columns
(:class:`Batch`), and per record (:class:`Plan`) or for every record at once (:class:`Plans`)
its common rows, whether it copies one slice or scatters, and the rows and drafts it reads."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from forensics.records import Record
from forensics.sites._common import (
    RecordColumns,
    RunColumns,
    row_last,
)
from forensics.sites.core import (
    BatchRun,
    every,
    group_starts,
    owner,
    runs_from,
    starts_of,
    within,
)
from forensics.sites.prepare_input_ids.records import SAMPLED
from forensics.sites.scan_counts import run_max


@dataclass
class Plan:
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
class Plans:
    """:class:`Plan` of every record of a :class:`Batch` at once (rows are batch rows): per
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

    def one(self, b: Batch, r: int) -> Plan:
        """The plan of record ``r``, its rows local."""
        c, d = self.crec == r, self.spec_rec == r
        return Plan(b.local[self.common[c]], self.prev[c], self.sample_slots[c],
                     self.spec_slots[d], b.local[self.spec_rows[d]], self.draft_index[d],
                     bool(self.fast[r]), bool(self.copy_cpu[r]))


def one_slice(num_common: Any, mismatch: Any, largest: Any) -> Any:
    """vLLM's fast path (the one rule; arrays or scalars): a record copies one slice when it
    has common rows, no common row's previous position differs from its last slot
    (``cu - 1``: ``mismatch`` false) and the largest such slot is ``num_common - 1``."""
    return (num_common > 0) & ~np.asarray(mismatch) & (largest == num_common - 1)


def plans(b: Batch, guard: bool) -> Plans:
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
    return Plans(common, crec, prev, flat - nd, num_common, fast, copy_cpu, nd,
                  prev * np.repeat(b.spec, num_common), spec_count, heads, holding)


def _reduce_runs(reduce: np.ufunc, values: np.ndarray, heads: np.ndarray, holding: np.ndarray,
                 n: int, fill: int) -> np.ndarray:
    """Per record of ``n``: ``reduce`` over its run of ``values`` (runs starting at
    ``heads``, of the records ``holding``; ``fill`` for the others), int64."""
    out = np.full(n, fill, dtype=np.int64)
    if len(heads):
        out[holding] = reduce.reduceat(values, heads)
    return out


def small_values(*arrays: np.ndarray) -> bool:
    """Whether every value of ``arrays`` lies in ``(-2**31, 2**31)``: products of two and
    sums of a few such values cannot wrap in int64."""
    return all(not len(a) or (int(a.min()) > -2**31 and int(a.max()) < 2**31) for a in arrays)


def draft_extremes(b: Batch, p: Plans) -> tuple[np.ndarray, np.ndarray]:
    """Per record: the smallest and largest draft index read (``prev * spec + j``, ``j <
    nd``; -1 when none): each drafting row's first and last draft when nothing can wrap, else
    every draft's."""
    n = b.cols.rows
    if not small_values(p.prev, b.spec, p.nd):
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


def plan(record: Record, guard: bool) -> Plan:
    """The common rows, slots and paths the call takes on ``record`` (``guard``: patched):
    :func:`plans` of a batch of one."""
    b = Batch.of([record])
    return plans(b, guard).one(b, 0)


def inert(b: Batch) -> np.ndarray:
    """Per record of ``b``: whether ``patched`` gives exactly ``upstream``'s outcome. When no
    previous position is at or past the sampled rows, the guard skips no row and both take
    the same plan: each record's largest previous position is below its sampled rows."""
    return run_max(b.pp, b.nrows) < b.p
