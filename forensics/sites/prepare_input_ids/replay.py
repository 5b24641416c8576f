"""The columnar replay of ``prepare_input_ids``: every record's device buffer written at once
(:class:`Run`), drafts scattered in windows, and the checks of what each variant read and wrote,
for the judge (:func:`run_batch`) and for one outcome (:func:`outcome_checks`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from forensics.outcome import STATUSES, Outcome
from forensics.records import Record
from forensics.sites._common import (
    MISATTRIBUTED,
    RowValues,
    RunColumns,
)
from forensics.sites.core import (
    VOCABULARY,
    BatchRun,
    CheckList,
    Checks,
    Column,
    every,
    in_range_extremes,
    owner,
    rows_of_slots,
    runs_from,
    starts_of,
    within,
)
from forensics.sites.prepare_input_ids.model import (
    device_field,
    record_accesses,
    record_rows,
    torch_run,
)
from forensics.sites.prepare_input_ids.plans import (
    Batch,
    Plans,
    draft_extremes,
    plans,
    small_values,
)
from forensics.sites.prepare_input_ids.records import (
    DRAFTS,
    DRAFTS_FLAT,
    OUTPUT_TENSOR,
    SAMPLED,
    total_tokens,
)


def run_record(record: Record, guard: bool) -> Outcome:
    """The Outcome of one record (``guard``: patched, common rows at or past the sampled rows
    skipped like new rows): outputs ``input_ids_device`` (the whole device buffer after the
    call); accesses of ``prev_sampled_token_ids`` (the fast path's broadcast included) and of
    ``draft_token_ids``. The run of a batch of one, its buffer kept whole."""
    b = Batch.of([record])
    run = Run.of(b, plans(b, guard), whole=True)
    return run.outcome(0) if run.plain[0] else torch_run(record, run.plans.one(b, 0))


#: dtypes the numpy path handles exactly as torch does (others go through torch)
_PLAIN = (np.dtype(np.int32), np.dtype(np.int64))


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
    plans: Plans
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
    def of(cls, b: Batch, p: Plans, whole: bool = False, skip: np.ndarray | None = None
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
        draft_range = draft_extremes(b, p)
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
        if small_values(p.prev, b.spec, p.nd):
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
        if not small_values(p.prev, b.spec, width, p.nd):
            return True
        most = p.per_record(np.maximum, p.nd, -1)  # a record's most drafts in one row
        return bool((drafting & (((b.spec != width) & (most > 0)) | (most > width))).any())

    def outcome(self, r: int) -> Outcome:
        """The Outcome of plain record ``r``."""
        record = self.batch.cols.record(r)
        device = record[device_field(record)]
        start = int(self.d_off[r])
        buffer = self.device[start:start + int(self.d_len[r])].astype(device.dtype)
        return Outcome("ok", "", {"input_ids_device": buffer},
                       record_accesses(record, self.plans.one(self.batch, r)))


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


def _start_buffers(b: Batch, p: Plans, plain: np.ndarray, whole: bool
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
        outcome = torch_run(record, run.plans.one(b, r))
        status[r] = STATUSES.index(outcome.status)
        if outcome.message:
            messages[r] = outcome.message
        parts.append(outcome_checks(record, outcome).renumbered(np.array([r])))
    return BatchRun(status, messages, Checks.concat(parts), RowValues(b.cols, "req_ids"),
                    outcome=_outcomes(b, patched))


def _outcomes(b: Batch, patched: bool) -> Callable[[int], Outcome]:
    """Each record's Outcome on demand (:func:`run_record`: its device buffer whole; a closure over
    the columns, not the batch: the batch keeps its runs)."""
    cols = b.cols
    return lambda i: run_record(cols.record(i), patched)


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
        rows = record_rows(record, element)
        parts.append(Checks.of(OUTPUT_TENSOR, 0, rows, element, ids, 0,
                               record["vocab_size"]).naming(None, VOCABULARY))
    return Checks.concat(parts)


def _draft_naming(checks: Checks, rows: Column) -> Checks:
    """Draft reads named by what they come from: index ``prev_positions[row] *
    prev_num_spec_tokens + j`` into ``draft_token_ids``, computed from ``prev_positions[row]``
    (``rows``: each entry's row)."""
    return checks.naming("prev_positions", DRAFTS_FLAT, rows, held=False)
