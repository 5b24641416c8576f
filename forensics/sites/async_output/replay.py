"""The columnar replay of ``async_output``: a batch of records as columns (:class:`Batch`), which
rows each model reads and how many ids it writes to each (:func:`run`), and the checks of what
it read and wrote, for the judge (:func:`run_batch`) and for one outcome
(:func:`outcome_checks`)."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from forensics.outcome import INDEX_ERROR, OK, STATUSES, Access, Outcome
from forensics.records import Record
from forensics.sites._common import (
    RecordColumns,
    RowValues,
    RunColumns,
    prev_rows,
)
from forensics.sites.async_output.lines import (
    LOWEST_BIT,
    first_true,
    first_within,
    line_bits,
    line_prefixes,
    only_minus_outside,
    outside_vocab,
    sampled_count,
    sampled_lines,
    trailing_start,
)
from forensics.sites.async_output.records import SAMPLED
from forensics.sites.core import (
    KINDS,
    OUT_OF_BOUNDS,
    VOCABULARY,
    BatchRun,
    CheckList,
    Checks,
    Column,
    owner,
    ragged_parts,
    runs_from,
    select_runs,
    split_lists,
    starts_of,
    within,
)

_LIST_ERROR = "IndexError: list index out of range"


@dataclass
class Batch:
    """Records of this site laid end to end: one entry per current row of some record.

    ``rec`` is each row's record (``first_row`` per record: its first row);
    ``values``/``lengths`` are the known ids of each row (full list or tail), ``hidden`` the
    length of its hidden prefix; ``prev`` the row's previous row (``known`` where the request
    was in the previous batch); ``sampled`` every record's ``sampled_token_ids_cpu`` end to end
    (``s_start``, ``s_rows``, ``s_width`` per record)."""

    cols: RunColumns
    tails: np.ndarray
    rec: np.ndarray
    first_row: np.ndarray
    values: np.ndarray
    lengths: np.ndarray
    hidden: np.ndarray
    prev: np.ndarray
    known: np.ndarray
    vocab: np.ndarray
    sampled: np.ndarray
    s_start: np.ndarray
    s_rows: np.ndarray
    s_width: np.ndarray
    #: what both models share (:func:`_select`), each model's counts (:func:`run`) and the
    #: runs made (:func:`run_batch`)
    selected: Selected | None = None
    counted: dict[bool, np.ndarray] = field(default_factory=dict)
    runs: list[Made] = field(default_factory=list)

    @classmethod
    def of(cls, records: Sequence[Record]) -> Batch:
        """The columns of ``records`` (all of this site, validated)."""
        return cls.of_columns(RecordColumns(records))

    @classmethod
    def of_columns(cls, cols: RunColumns) -> Batch:
        """The batch of the records of ``cols`` (all of this site, validated)."""
        tails = ~cols.present("output_token_ids")
        values, lengths = _lists(cols)
        nrows = cols.length("req_ids")
        rec = owner(nrows)
        prev, known = prev_rows(cols)
        sampled, sizes = cols.flat("sampled_token_ids_cpu", widen=False)
        return cls(cols, tails, rec, starts_of(nrows), values,
                   lengths, _hidden(cols, tails, rec, lengths), prev, known,
                   cols.ints("vocab_size"), sampled, starts_of(sizes),
                   cols.shape("sampled_token_ids_cpu", 0), cols.shape("sampled_token_ids_cpu", 1))

    @functools.cached_property
    def matrix(self) -> np.ndarray | None:
        """Every record's ``sampled_token_ids_cpu`` as the lines of one matrix (a view of
        ``sampled``) when all the records with sampled rows share one width ``k >= 1``; else
        None."""
        widths = self.s_width[self.s_rows > 0]
        if not len(widths) or widths.min() != widths.max() or widths[0] < 1:
            return None
        return self.sampled.reshape(-1, int(widths[0]))

    @functools.cached_property
    def local(self) -> np.ndarray:
        """Each row's position in its record (its ``row``)."""
        return np.arange(len(self.rec), dtype=np.int64) - self.first_row[self.rec]

    @functools.cached_property
    def minus_bits(self) -> np.ndarray | None:
        """Per line of :attr:`matrix`: where it holds ``-1``, as the bits of one byte
        (:func:`line_bits`; None past 8 columns)."""
        assert self.matrix is not None
        return line_bits(self.matrix == -1)


class Made(NamedTuple):
    """A run :func:`run_batch` made: its ``counts`` per written row (:attr:`Run.count`), the
    ids it took end to end (``taken``, :meth:`Run.taken`) and its :class:`BatchRun`."""

    counts: np.ndarray
    taken: np.ndarray
    run: BatchRun


def _hidden(cols: RunColumns, tails: np.ndarray, rec: np.ndarray, lengths: np.ndarray
            ) -> np.ndarray:
    """Each current row's hidden prefix: its full length ``output_len`` less its known ids
    for rows given as tails, else 0 (``rec``: each row's record)."""
    if not tails.any():
        return np.zeros(len(rec), dtype=np.int64)
    given, counts = cols.flat("output_len", widen=False)
    if tails.all():  # every row's length, in row order
        return given.astype(np.int64, copy=False) - lengths
    full_len = np.zeros(len(rec), dtype=np.int64)
    full_len[tails[rec]] = select_runs(given, counts, np.flatnonzero(tails))[0]
    return np.where(tails[rec], full_len - lengths, 0)


def _lists(cols: RunColumns) -> tuple[np.ndarray, np.ndarray]:
    """Each current row's known ids (its full list, or its tail), end to end: values and
    lengths (a record gives full lists or tails, never both)."""
    full_values, full_lengths, full_counts = cols.ragged("output_token_ids")
    tail_values, tail_lengths, tail_counts = cols.ragged("output_tail")
    if not tail_counts.any():
        return full_values, full_lengths
    if not full_counts.any():
        return tail_values, tail_lengths
    order = np.argsort(np.concatenate([owner(full_counts), owner(tail_counts)]), kind="stable")
    lengths = np.concatenate([full_lengths, tail_lengths])[order]
    starts = np.concatenate([starts_of(full_lengths),
                             len(full_values) + starts_of(tail_lengths)])[order]
    values = np.concatenate([full_values, tail_values])
    return values[runs_from(starts, lengths)], lengths


@dataclass
class Selected:
    """What both models share on a :class:`Batch` (:func:`_select`): the status per record
    (index into STATUSES), the rows read from ``sampled_token_ids_cpu`` (``acc_rows``, batch
    rows) and, per row written ``sel`` (records that did not fail), its first trailing
    placeholder ``start``, the flat position ``base`` of its sampled row in ``sampled``
    (the batch's), that row's ids ``k``, its record's ``vocab`` and its ``placeholders``;
    ``groups``: rows sharing a sampled row (:func:`_groups`). ``lines``: each written row's
    line of :attr:`Batch.matrix` (None when the batch has no such matrix). Where a written
    row's ids go: its record ``rec``, its ``row`` in the record and the position ``element``
    of its first placeholder in the full output list. ``accesses``: the rows read, as checks
    (both models read the same). It holds no reference to the batch (the batch holds it)."""

    sampled: np.ndarray
    sel: np.ndarray
    status: np.ndarray
    acc_rows: np.ndarray
    start: np.ndarray
    base: np.ndarray
    k: np.ndarray
    vocab: np.ndarray
    placeholders: np.ndarray
    groups: tuple[np.ndarray, ...] | None
    lines: np.ndarray | None
    rec: np.ndarray
    row: np.ndarray
    element: np.ndarray
    accesses: Checks

    @functools.cached_property
    def ids(self) -> np.ndarray:
        """The sampled row of each written row (:func:`sampled_lines`)."""
        return sampled_lines(self.sampled, self.base, self.k)


@dataclass
class Run:
    """One model's run over a :class:`Batch`: what both models share (``selected``, see
    :class:`Selected`) and the ids taken by each written row ``count`` (-1: row left as it
    is) from its sampled row."""

    batch: Batch
    selected: Selected
    count: np.ndarray

    @property
    def status(self) -> np.ndarray:
        """The status per record (index into STATUSES)."""
        return self.selected.status

    def accesses(self) -> Checks:
        """The accesses as checks (tensor ``sampled_token_ids_cpu``; both models share them)."""
        return self.selected.accesses

    @functools.cached_property
    def taken_counts(self) -> np.ndarray:
        """How many ids each written row takes from its sampled row (0 for a row left as
        it is)."""
        return np.minimum(np.maximum(self.count, 0), self.selected.k)

    def taken(self) -> np.ndarray:
        """The ids the written rows take, end to end (:meth:`taken_counts` of each)."""
        s, matrix = self.selected, self.batch.matrix
        if s.lines is not None and matrix is not None and matrix.shape[1] <= 8:
            return line_prefixes(matrix, s.lines, self.taken_counts)
        return self.batch.sampled[runs_from(s.base, self.taken_counts)]

    def writes(self, taken: np.ndarray | None = None) -> CheckList:
        """The ids written, as checks against ``[0, vocab_size)``: the first ``count`` ids of
        each row's sampled row at the row's trailing placeholders, except the ``-1`` ids (a
        placeholder written over a placeholder changes nothing). Equal to :func:`written` of
        the run's outputs, without building them. ``taken``: :meth:`taken`, when known."""
        s = self.selected
        count = self.taken_counts
        taken = self.taken() if taken is None else taken
        if not (taken == -1).any():  # each row writes all the ids it takes
            return _row_write_checks(self.batch.tails, s, count, taken)
        line, column = np.nonzero((np.arange(s.ids.shape[1]) < count[:, None]) & (s.ids != -1))
        return _write_checks(self.batch, s.sel[line], s.start[line] + column,
                             s.ids[line, column])

    def checks(self) -> CheckList:
        """Every checked value: the accesses, then the ids written by ``ok`` records."""
        return Checks.concat([self.accesses(), self.writes()])

    def after(self) -> tuple[np.ndarray, np.ndarray]:
        """The rows after the call, end to end (meaningful for ``ok`` records)."""
        b, s = self.batch, self.selected
        return _rebuild(b.values, b.lengths, s.sel, s.start, self.count, s.base, b.sampled)

    def outcome(self, i: int, after: tuple[np.ndarray, np.ndarray] | None = None) -> Outcome:
        """The Outcome of record ``i`` (the records API; ``after``: :meth:`after`, computed
        when not given)."""
        b = self.batch
        rows = np.flatnonzero(b.rec == i)
        acc_rows = self.selected.acc_rows
        mine = acc_rows[b.rec[acc_rows] == i]
        access = Access(SAMPLED, b.local[mine], b.local[mine], b.prev[mine], 0,
                        int(b.s_rows[i]), "", held=False, stale=True)
        if self.status[i] != 0:
            return Outcome(STATUSES[self.status[i]], _LIST_ERROR, {}, [access])
        values, lengths = self.after() if after is None else after
        begin = starts_of(lengths)
        lists = split_lists(values[begin[rows[0]]:begin[rows[-1]] + lengths[rows[-1]]]
                            if len(rows) else values[:0], lengths[rows])
        if not b.tails[i]:
            return Outcome(OK, "", {"output_token_ids": lists}, [access])
        dtype = np.asarray(b.cols.record(i)["output_len"]).dtype
        return Outcome(OK, "", {"output_tail": lists, "output_len": (
            b.hidden[rows] + lengths[rows]).astype(dtype)}, [access])

    def outcomes(self) -> list[Outcome]:
        """The Outcome of every record."""
        after = self.after()
        return [self.outcome(i, after) for i in range(self.batch.cols.rows)]


def run(batch: Batch, patched: bool) -> Run:
    """vLLM 0.33.0's loop (``patched``: the vocabulary guard) over every record of ``batch`` at
    once. Rows are selected as vLLM selects them (in the previous batch, non-empty, last id
    ``-1``); a record with a previous row past ``sampled_token_ids_cpu`` fails with vLLM's
    IndexError (a negative one wraps, as a Python list index does). What both models share
    is computed once per batch (:func:`_select`), and the guard's counts are upstream's
    where it stops no line early (:func:`_guard_stops_nothing`)."""
    if batch.selected is None:
        batch.selected = _select(batch)
    if patched and _guard_stops_nothing(batch, batch.selected):
        patched = False
    if patched not in batch.counted:
        batch.counted[patched] = _counts(batch, batch.selected, patched)
    return Run(batch, batch.selected, batch.counted[patched])


def _guard_stops_nothing(b: Batch, s: Selected) -> bool:
    """Whether the vocabulary guard leaves every count of ``b`` as upstream's, seen on the
    lines of the sampled matrix (False where that is not known cheaply): every id lies in
    ``[-1, vocab)``, so the guard stops at the first ``-1`` only, and no line holds a ``-1``
    without ending in one (where upstream takes every id)."""
    if s.groups is not None or s.lines is None or b.matrix is None:
        return False
    if not only_minus_outside(b.matrix, b.vocab) or b.minus_bits is None:
        return False
    k = b.matrix.shape[1]
    byte = np.arange(256)
    early = (byte != 0) & ((byte >> (k - 1)) & 1 == 0)  # holds a -1, its last id is not -1
    return not early[b.minus_bits].any()


def _select(b: Batch) -> Selected:
    """The rows both models write and how (see :func:`run` and :class:`Selected`)."""
    lens = b.lengths
    start = trailing_start(b.values, lens)
    sel = np.flatnonzero(b.known & (start < lens))  # non-empty, its last id -1
    srec, prev = b.rec[sel], b.prev[sel]
    p = b.s_rows[srec]
    wraps = len(prev) and prev.min() < 0  # a negative previous row counts from the end
    past = (prev >= p) | (prev < -p) if wraps else prev >= p
    failed = np.zeros(b.cols.rows, dtype=bool)
    if past.any():
        failed[srec[past]] = True
    acc_rows, row = sel, sel - b.first_row[srec]
    accesses = _access_checks(srec, row, prev, b.s_rows)
    if failed.any():
        keep = ~failed[srec]
        sel, srec, prev, p, row = sel[keep], srec[keep], prev[keep], p[keep], row[keep]
    eff = prev + np.where(prev < 0, p, 0) if wraps else prev
    if b.matrix is None:
        k, lines = b.s_width[srec], None
        base = b.s_start[srec] + eff * k
    else:  # one width: a row's sampled row is a line of the matrix
        width = b.matrix.shape[1]
        lines = (b.s_start // width)[srec] + eff
        k, base = np.broadcast_to(np.int64(width), lines.shape), lines * width
    status = np.where(failed, STATUSES.index(INDEX_ERROR), 0).astype(np.int8)
    start = start[sel]
    return Selected(b.sampled, sel, status, acc_rows, start, base, k, b.vocab[srec],
                    lens[sel] - start, _shared_rows(b, srec, eff, sel, lines), lines, srec,
                    row, start + b.hidden[sel], accesses)


def _shared_rows(b: Batch, srec: np.ndarray, eff: np.ndarray, sel: np.ndarray,
                 lines: np.ndarray | None) -> tuple[np.ndarray, ...] | None:
    """:func:`_groups` of the written rows ``sel`` (records ``srec``, previous rows ``eff``,
    sampled lines ``lines`` or None). None without a look when no record gives its previous
    batch as a map: a list gives each request the row of its last entry, and a record's
    requests are distinct, so are their rows."""
    if not b.cols.present("prev_req_id_to_index").any():
        return None
    key = srec * (int(b.s_rows.max(initial=0)) + 1) + eff if lines is None else lines
    return _groups(srec, eff, sel, key)


def _access_checks(rec: np.ndarray, row: np.ndarray, prev: np.ndarray, rows: np.ndarray
                   ) -> Checks:
    """The previous rows ``prev`` read (batch rows of records ``rec``, at ``row`` of their
    record) as checks against ``[0, rows)`` (``rows`` per record: its sampled rows, read
    only where the judge needs a bound)."""
    return Checks(SAMPLED, KINDS.index(OUT_OF_BOUNDS), rec, row, row, prev,
                  np.broadcast_to(np.int64(0), prev.shape), lambda at: rows[rec[at]],
                  index_tensor="", indexed=SAMPLED, held=False, stale=True)


def _groups(srec: np.ndarray, eff: np.ndarray, rows: np.ndarray, key: np.ndarray
            ) -> tuple[np.ndarray, ...] | None:
    """Rows sharing a previous row of one record, in row order: the sort order, each sorted
    row's group and its rank within the group. None when no two rows share one (``key``:
    one non-negative number per (record, previous row))."""
    if not len(key) or np.bincount(key).max() < 2:
        return None
    order = np.lexsort((rows, eff, srec))
    key_rec, key_prev = srec[order], eff[order]
    new = np.ones(len(order), dtype=bool)
    new[1:] = (key_rec[1:] != key_rec[:-1]) | (key_prev[1:] != key_prev[:-1])
    group = np.cumsum(new) - 1
    first = np.flatnonzero(new)
    return order, group, np.arange(len(order)) - first[group]


def _counts(b: Batch, s: Selected, patched: bool) -> np.ndarray:
    """Ids written to each selected row (-1: the row is left as it is). vLLM shortens the
    sampled row in place, so a row sharing it with an earlier row sees at most the ids that
    row took: one pass per rank within the rows sharing a previous row. When none shares
    and the sampled rows form a matrix, each line's count is computed once on the matrix
    as it lies and taken per row (:func:`_line_counts`, no row gathered)."""
    if s.groups is None and s.lines is not None:
        count = _line_counts(b, patched)[s.lines]
        return np.minimum(count, s.placeholders)
    return _gathered_counts(s.ids, s.k, s.vocab, s.placeholders, s.groups, patched)


def _line_counts(b: Batch, patched: bool) -> np.ndarray:
    """Ids counted in each line of :attr:`Batch.matrix` (``k`` ids, ``k >= 1``): patched, up
    to its first id outside ``[0, vocab_size)``; upstream, all of them when the last is not
    ``-1``, else up to the first ``-1`` (:func:`_taken` on the lines as they lie)."""
    matrix = b.matrix
    assert matrix is not None
    k = matrix.shape[1]
    if patched and not only_minus_outside(matrix, b.vocab):
        return first_true(outside_vocab(matrix, b.vocab, b.s_rows))
    # upstream, or a guard that stops only at -1: both read where each line holds -1
    bits = b.minus_bits
    if bits is None:  # more than 8 columns
        first = first_true(matrix == -1)
        return first if patched else sampled_count(k, first, matrix[:, -1] == -1)
    first = np.minimum(LOWEST_BIT, k)  # per byte of bits: the first -1 (k: none)
    if patched:
        return first[bits]
    ends_in_minus = (np.arange(256) >> (k - 1)) & 1 == 1
    return sampled_count(k, first, ends_in_minus)[bits]


def _gathered_counts(ids: np.ndarray, k: np.ndarray, vocab: np.ndarray,
                     placeholders: np.ndarray, groups: tuple[np.ndarray, ...] | None,
                     patched: bool) -> np.ndarray:
    """:func:`_counts` on the sampled rows gathered per selected row (``ids``,
    :func:`sampled_lines`): one pass per rank within the rows sharing a previous row (one
    pass when none shares)."""
    if patched:
        stop = first_within((ids < 0) | (ids >= vocab[:, None]), k)
    else:
        stop = first_within(ids == -1, k)
    if groups is None:
        return _taken(ids, k, stop, placeholders, patched)
    order, group, rank = groups
    left = k[order][np.r_[0, np.flatnonzero(np.diff(group)) + 1]] if len(order) else k[:0]
    written = np.full(len(k), -1, dtype=np.int64)
    for r in range(int(rank.max()) + 1 if len(rank) else 0):
        pos, g = order[rank == r], group[rank == r]
        written[pos] = _taken(ids[pos], left[g], stop[pos], placeholders[pos], patched)
        left[g] = np.where(written[pos] >= 0, written[pos], left[g])
    return written


def _taken(ids: np.ndarray, size: np.ndarray, stop: np.ndarray, placeholders: np.ndarray,
           patched: bool) -> np.ndarray:
    """Ids written to rows whose sampled rows ``ids`` hold ``size`` ids (-1 where none):
    patched, up to the first id outside the vocabulary (``stop``); upstream, all of them when
    the last is not ``-1``, else up to the first ``-1`` (``stop``); at most ``placeholders``."""
    if patched:
        count = np.minimum(stop, size)
    else:
        last_id = ids[np.arange(len(size)), np.maximum(size - 1, 0)] if ids.shape[1] else size
        count = sampled_count(size, stop, last_id == -1)
    return np.where(size > 0, np.minimum(count, placeholders), -1)


def _rebuild(values: np.ndarray, lengths: np.ndarray, sel: np.ndarray, start: np.ndarray,
             count: np.ndarray, base: np.ndarray, sampled: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """The rows after the call: each written row keeps its ids before ``start`` and takes
    ``count`` sampled ids from ``base``."""
    wrote = count >= 0
    keep, add = lengths.copy(), np.zeros(len(lengths), dtype=np.int64)
    keep[sel[wrote]] = start[wrote]
    add[sel[wrote]] = count[wrote]
    new_len = keep + add
    out = np.empty(int(new_len.sum()), dtype=np.int64)
    out_start = starts_of(new_len)
    kept = within(keep)
    out[np.repeat(out_start, keep) + kept] = values[np.repeat(starts_of(lengths), keep) + kept]
    src = np.zeros(len(lengths), dtype=np.int64)
    src[sel[wrote]] = base[wrote]
    taken = within(add)
    out[np.repeat(out_start + keep, add) + taken] = sampled[np.repeat(src, add) + taken]
    return out, new_len


def written(batch: Batch, values: np.ndarray, lengths: np.ndarray, ok: np.ndarray
            ) -> CheckList:
    """The ids a call wrote, as checks against ``[0, vocab_size)``: in each row that differs
    from the row before the call (rows ``values``/``lengths`` after it, records where ``ok``),
    every id from the first trailing placeholder of the row before on, or only the positions
    that changed when some placeholders were kept. ``element`` is the position in the full
    output list; the tensor ``out.output_tail`` for tails, else ``out.output_token_ids``."""
    b = batch
    lo, ln = b.lengths, lengths
    bs, as_ = starts_of(lo), starts_of(ln)
    common = np.minimum(lo, ln)
    r, w = owner(common), within(common)
    differs = b.values[bs[r] + w] != values[as_[r] + w]
    changed = ((lo != ln) | (np.bincount(r[differs], minlength=len(lo)) > 0)) & ok[b.rec]
    start = trailing_start(b.values, lo)  # lo where a row does not end in -1
    tail_len = np.where(changed, np.maximum(ln - start, 0), 0)
    tr = owner(tail_len)
    j = start[tr] + within(tail_len)
    v = values[as_[tr] + j]
    has_minus = np.bincount(tr[v == -1], minlength=len(lo)) > 0
    inside = j < lo[tr]
    old = np.where(inside, b.values[np.where(inside, bs[tr] + j, 0)] if len(b.values) else 0, 0)
    keep = ~has_minus[tr] | ~inside | (v != old)
    return _write_checks(b, tr[keep], j[keep], v[keep])


def _write_checks(b: Batch, row: np.ndarray, position: np.ndarray, value: np.ndarray
                  ) -> CheckList:
    """Ids written at ``position`` of batch rows ``row`` as checks against
    ``[0, vocab_size)``: ``element`` the position in the full output list, tensor
    ``out.output_tail`` for tails, else ``out.output_token_ids``."""
    rec = b.rec[row]
    parts = []
    for tensor, mask in _tensor_masks(b.tails, rec):
        if mask is None:
            r, at, v, rc = row, position, value, rec
        else:
            r, at, v, rc = row[mask], position[mask], value[mask], rec[mask]
        parts.append(_written_naming(
            Checks.of(tensor, rc, b.local[r], at + b.hidden[r], v, 0, b.vocab[rc]), at))
    return Checks.concat(parts)


def _written_naming(checks: Checks, tail_at: Column) -> Checks:
    """Written ids named by the list holding them: ``out.output_tail[row]`` at ``tail_at``
    (the position in the tail), or ``out.output_token_ids[row]`` at ``element``."""
    tails = checks.tensor == "out.output_tail"
    return checks.naming(checks.tensor + "[{row}]", VOCABULARY, tail_at if tails else None)


def _tensor_masks(tails: np.ndarray, rec: np.ndarray
                  ) -> Iterator[tuple[str, np.ndarray | None]]:
    """The tensors ids are written to, each with the mask of the entries of records ``rec``
    writing there (None when every entry does): ``out.output_tail`` for records that keep
    tails (``tails`` per record), else ``out.output_token_ids``; a tensor no entry writes to
    is left out."""
    if not len(rec):
        return
    if tails.all() or not tails.any():  # one tensor for every record
        yield ("out.output_tail" if tails.all() else "out.output_token_ids"), None
        return
    mine = tails[rec]
    for tensor, mask in (("out.output_token_ids", ~mine), ("out.output_tail", mine)):
        if mask.any():
            yield tensor, None if mask.all() else mask


def _row_write_checks(tails: np.ndarray, s: Selected, count: np.ndarray, value: np.ndarray
                      ) -> CheckList:
    """:func:`_write_checks` of ids written in runs: ``count`` ids at the first placeholder
    of each written row of ``s`` (``value`` end to end), laid out per row
    (:meth:`Checks.of_row_runs`; ``tails`` per record)."""
    parts = []
    for tensor, mask in _tensor_masks(tails, s.rec):
        if mask is None:
            rc, n, v, row, at, vocab = s.rec, count, value, s.row, s.element, s.vocab
        else:
            rc, n, row, at, vocab = s.rec[mask], count[mask], s.row[mask], s.element[mask], \
                s.vocab[mask]
            v = value[np.repeat(mask, count)]
        start = s.start if mask is None else s.start[mask]
        tail_at = Checks.of_row_runs(tensor, rc, n, v, row, start, vocab).element
        parts.append(_written_naming(Checks.of_row_runs(tensor, rc, n, v, row, at, vocab),
                                     tail_at))
    return Checks.concat(parts)


def outcome_checks(record: Record, outcome: Outcome) -> CheckList:
    """The checks of any variant's outcome on one record: its accesses (models only: previous
    rows against ``sampled_token_ids_cpu``), then the ids it wrote (``ok`` outcomes: from the
    first trailing placeholder on, against ``[0, vocab_size)``; ``element`` is the position in
    the request's full output list)."""
    batch = Batch.of([record])
    parts: list[Checks | CheckList] = [Checks.of_access(a) for a in outcome.accesses or ()]
    after = outcome.outputs.get("output_tail" if batch.tails[0] else "output_token_ids")
    if outcome.status == OK and after is not None:
        rows = list(after)[: len(batch.lengths)]
        values, lengths = ragged_parts(rows)
        if len(rows) < len(batch.lengths):  # rows the call did not return are unchanged
            rest = slice(int(batch.lengths[: len(rows)].sum()), None)
            values = np.concatenate([values, batch.values[rest]])
            lengths = np.concatenate([lengths, batch.lengths[len(rows):]])
        parts.append(written(batch, values, lengths, np.ones(1, dtype=bool)))
    return Checks.concat(parts)


def prepare_columns(cols: RunColumns) -> Batch:
    """The columns :func:`run_batch` runs (built once for every model variant)."""
    return Batch.of_columns(cols)


def run_batch(batch: Batch, patched: bool) -> BatchRun:
    """The columnar run of a prepared batch as the judge reads it (no Outcome built). Where a
    model writes the same ids as a run made before (the vocabulary guard stops no count),
    that run is the answer, computed once; otherwise the run shares the accesses of the
    runs before, and takes its written ids from one that wrote more ids in every row
    (:func:`_taken_ids`)."""
    result = run(batch, patched)
    for made in batch.runs:
        if made.counts is result.count or np.array_equal(made.counts, result.count):
            return made.run
    taken = _taken_ids(result, batch.runs)
    messages = {int(i): _LIST_ERROR for i in np.flatnonzero(result.status)}
    req_ids = batch.runs[0].run.req_ids if batch.runs else RowValues(batch.cols, "req_ids")
    done = BatchRun(result.status, messages, Checks.concat([result.accesses(),
                                                            result.writes(taken)]), req_ids,
                    outcome=functools.partial(_outcome, batch.cols, patched))
    batch.runs.append(Made(result.count, taken, done))
    return done


def _outcome(cols: RunColumns, patched: bool, i: int) -> Outcome:
    """The Outcome of record ``i`` of ``cols``: the run of a batch of that one record (a
    closure over the columns, not the batch: the batch keeps its runs)."""
    return run(Batch.of([cols.record(i)]), patched).outcome(0)


def _taken_ids(result: Run, made: list[Made]) -> np.ndarray:
    """:meth:`Run.taken` of ``result``: an earlier run's ids cut to ``result``'s counts where
    that run took at least as many ids in every row (the guard only stops a count early),
    else gathered from the sampled rows."""
    count = result.taken_counts
    for earlier in made:
        before = np.minimum(np.maximum(earlier.counts, 0), result.selected.k)
        if (count <= before).all():
            return _cut_runs(earlier.taken, before, count)
    return result.taken()


def _cut_runs(values: np.ndarray, lengths: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """``values`` laid out in runs of ``lengths``, each run cut to its first ``kept``
    (``kept <= lengths``)."""
    cut = np.flatnonzero(kept < lengths)
    if not len(cut):
        return values
    dropped = runs_from(starts_of(lengths)[cut] + kept[cut], lengths[cut] - kept[cut])
    return np.delete(values, dropped)
