"""Site ``post_update``: Model Runner V2's ``post_update`` (after sampling).

``vllm.v1.worker.gpu.input_batch.post_update`` (vLLM 0.32/0.33) runs one Triton program per
batch row ``i`` with no bounds check. With ``slot = idx_mapping[i]`` (a negative slot skips the
row) and ``n = num_sampled[i]``:

- drafts (when given, non-last pipeline ranks): ``draft_tokens_out[slot, :s] =
  draft_tokens[i, :s]``;
- when ``n > 0``: ``last_sampled_tokens[slot] = sampled_tokens[i, n - 1]`` and
  ``total_len[slot] += n``;
- for ``j < n``: ``sampled_tokens[i, j]`` is stored at ``all_token_ids[slot, total_len + j]``
  and used as an index into ``output_bin_counts[slot, id]`` (when the sampler keeps counts):
  an id outside ``[0, vocab)`` lands in another slot's row, or past the buffer;
- ``num_computed_tokens[slot] += query_len - num_rejected[i]`` (``query_len`` 0 without
  ``query_start_loc``).

``all_token_ids`` and ``output_bin_counts`` are too large to record: a record carries their
widths (``all_token_ids_width``, ``bin_counts_width``; 0 rows of counts when there are none)
and the models check the indices into them. A read or write outside an allocation is
``index_error`` (on a GPU an illegal memory access); one inside it is silent, and visible only
as the models' access.

The patched model checks each sampled id against the vocabulary before it is stored or used as
an index (the rule of vLLM PR #46533 and PR #50939, which reject negative draft ids, applied to
the ids this kernel stores): the count of sampled ids stops at the first id outside
``[0, vocab_size)``, so such an id is neither counted, stored nor remembered as the next input.

numpy only (``import forensics.sites`` stays light).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from forensics.budget import MAX_ALLOC_ENV, require_alloc
from forensics.outcome import INDEX_ERROR, OK, Access, Outcome
from forensics.records import COUNT, FieldSpec, Record
from forensics.screening import as_int64
from forensics.sites._common import (
    BatchColumns,
    RunColumns,
    Violation,
    first_violation,
    require,
    require_len,
    require_unique,
    run_each,
    screen_unique,
    stored,
)
from forensics.sites._fields import REQ_IDS, VOCAB_SIZE
from forensics.sites.core import VOCABULARY, BatchRun, CheckList, Checks, row_of

NAME = "post_update"
FIELDS = (
    FieldSpec("idx_mapping", "tensor", doc="[n] batch row -> request slot; < 0 skips"),
    FieldSpec("num_computed_tokens", "tensor", doc="[m] per slot"),
    FieldSpec("last_sampled_tokens", "tensor", token_ids=True, doc="[m] per slot"),
    FieldSpec("sampled_tokens", "tensor", ndim=2, token_ids=True, doc="[n, s + 1] per row"),
    FieldSpec("num_sampled", "tensor", doc="[n]"),
    FieldSpec("num_rejected", "tensor", doc="[n]"),
    FieldSpec("total_len", "tensor", doc="[m] per slot"),
    FieldSpec("all_token_ids_width", "int", doc="columns of all_token_ids (max_model_len)",
              limits=COUNT),
    FieldSpec("bin_counts_rows", "int", doc="rows of output_bin_counts (0: no counts kept)",
              limits=COUNT),
    FieldSpec("bin_counts_width", "int", doc="columns of output_bin_counts (the vocabulary)",
              limits=COUNT),
    VOCAB_SIZE,
    FieldSpec("query_start_loc", "tensor", required=False, doc="[n + 1]"),
    FieldSpec("draft_tokens", "tensor", ndim=2, required=False, token_ids=True,
              doc="[n, s] drafts received"),
    FieldSpec("draft_tokens_out", "tensor", ndim=2, required=False, token_ids=True,
              doc="[m, s] per slot"),
    REQ_IDS,
)
OUTPUT_FIELDS = ("num_computed_tokens", "last_sampled_tokens", "total_len", "draft_tokens_out")
SUMMARY_BOUND = "vocab_size"
SUMMARY_TENSOR = "sampled_tokens"
_ROWS = ("sampled_tokens", "num_sampled", "num_rejected", "req_ids")
_SLOTS = ("num_computed_tokens", "last_sampled_tokens", "total_len")


def check_record(record: Record, where: str) -> None:
    """Cross-field checks: per-row fields with one entry per row, per-slot buffers of one
    length, drafts given with their destination (sizes: the schema's ``limits``).

    Raises:
        CaptureFormatError: naming the field and what was expected.
    """
    n = len(record["idx_mapping"])
    for name in _ROWS:
        require_len(record, name, n, where, "one per entry of 'idx_mapping'")
    require_len(record, "query_start_loc", n + 1, where, "one more than 'idx_mapping' has")
    m = len(record["num_computed_tokens"])
    for name in _SLOTS:
        require_len(record, name, m, where, "one per slot, as 'num_computed_tokens'")
    require_unique(record, "req_ids", where)
    require(("draft_tokens" in record) == ("draft_tokens_out" in record), where,
            "draft_tokens_out", "must be given exactly when 'draft_tokens' is")


def check_batch(cols: BatchColumns) -> np.ndarray:
    """:func:`check_record` on a whole batch at once: the records it may reject."""
    n, m = cols.length("idx_mapping"), cols.length("num_computed_tokens")
    bad = np.zeros(cols.rows, dtype=bool)
    for name in _ROWS:
        bad |= cols.present(name) & (cols.length(name) != n)
    bad |= cols.present("query_start_loc") & (cols.length("query_start_loc") != n + 1)
    for name in _SLOTS:
        bad |= cols.length(name) != m
    bad |= cols.present("draft_tokens") != cols.present("draft_tokens_out")
    return bad | screen_unique(cols, "req_ids")


@dataclass
class _Row:
    """What the kernel does on one batch row, as indices: the slot, the sampled ids it reads
    (``ids``, at the row's columns ``at``: each of its own row, then the reads past it folded,
    see :func:`_folded`; ``reads`` of them in all), the ``all_token_ids`` columns it writes,
    and the computed-token change."""

    row: int
    slot: int
    ids: list[int] = field(default_factory=list)
    at: list[int] = field(default_factory=list)
    columns: list[int] = field(default_factory=list)
    delta: int = 0
    reads: int = 0


#: the ids of one block of :class:`_Flat`'s table (a stretch's ends within a block are scanned)
BLOCK = 64


class _Flat:
    """The flat ``sampled_tokens`` with what a row's reads need in constant time: the next id
    outside the vocabulary (:func:`_count`) and the least and greatest id of a stretch
    (:func:`_folded`: a sparse table over blocks of :data:`BLOCK` ids, built on first use,
    its ends within a block scanned)."""

    def __init__(self, flat: np.ndarray, vocab: int, where: str) -> None:
        """Index ``flat`` (int64, of the record ``where`` names) against ``[0, vocab)``."""
        self.flat, self.where = flat, where
        bad = np.flatnonzero((flat < 0) | (flat >= vocab))
        self.next_bad = np.full(len(flat) + 1, len(flat), np.int64)
        at = np.searchsorted(bad, np.arange(len(flat)))
        self.next_bad[:-1] = np.append(bad, len(flat))[at]
        self._tables: list[tuple[np.ndarray, np.ndarray]] | None = None

    def extremes(self, a: int, b: int) -> tuple[int, int]:
        """The positions of the least and of the greatest id of ``flat[a:b]`` (``a < b``)."""
        first, last = -(-a // BLOCK), b // BLOCK  # the whole blocks of the stretch
        if last - first < 1:
            return self._scan(a, b)
        if self._tables is None:
            self._tables = self._build()
        k = (last - first).bit_length() - 1
        low, high = self._tables[k]
        found = [int(low[first]), int(low[last - (1 << k)]), int(high[first]),
                 int(high[last - (1 << k)])]
        for lo, hi in (self._scan(a, first * BLOCK), self._scan(last * BLOCK, b)):
            found += [lo, hi] if lo >= 0 else []
        return (min(found, key=lambda q: (self.flat[q], q)),
                max(found, key=lambda q: (self.flat[q], -q)))

    def _scan(self, a: int, b: int) -> tuple[int, int]:
        """:meth:`extremes` of a stretch of at most two blocks, scanned ((-1, -1): empty)."""
        if a >= b:
            return -1, -1
        part = self.flat[a:b]
        return a + int(np.argmin(part)), a + int(np.argmax(part))

    def _build(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per power of two ``2**k``, the position of the least and of the greatest id of each
        run of ``2**k`` whole blocks (16 bytes per block and power, held to the budget).

        Raises:
            AllocationBudgetError: the table past the budget, in one line.
        """
        blocks = len(self.flat) // BLOCK
        require_alloc(16 * blocks * max(blocks.bit_length(), 1), self.where, "sampled_tokens",
                      len(self.flat), f"fix the record's num_sampled, or raise {MAX_ALLOC_ENV}")
        whole = self.flat[:blocks * BLOCK].reshape(blocks, BLOCK)
        start = np.arange(blocks, dtype=np.int64) * BLOCK
        tables = [(start + whole.argmin(axis=1), start + whole.argmax(axis=1))]
        step = 1
        while 2 * step <= blocks:
            low, high = tables[-1]
            a, b = low[:-step], low[step:]
            c, d = high[:-step], high[step:]
            tables.append((np.where(self.flat[b] < self.flat[a], b, a),
                           np.where(self.flat[d] > self.flat[c], d, c)))
            step *= 2
        return tables


def _count(record: Record, i: int, patched: bool, flat: _Flat) -> int:
    """The sampled ids row ``i`` stores (``patched``: up to the first id outside the
    vocabulary, among the ids the kernel reads: ``sampled_tokens`` read flat from the row's
    start, as the kernel does; a read past the buffer is counted, for :func:`_wild`)."""
    n = int(record["num_sampled"][i])
    if not patched or n <= 0:
        return n
    start = min(i * np.asarray(record["sampled_tokens"]).shape[1], len(flat.flat))
    bad = int(flat.next_bad[start]) - start
    if bad < n and start + bad < len(flat.flat):
        return bad
    stored = len(flat.flat) - start
    return n if stored >= n else stored + 1


def _folded(flat: _Flat, start: int, own: int, reads: int) -> list[int]:
    """The columns a row's reads past its own row (``own`` ids) are planned at, in order: the
    first and the last, and those of the least and the greatest id among them (what any check
    of those reads finds, the first and last column of ``all_token_ids``, any id outside a
    range, is found at one of those), in place of each read: rows each claiming 2**30 ids
    read the buffer over and over, quadratic in the rows."""
    if reads <= own:
        return []
    picked = {own, reads - 1}
    end = min(start + reads, len(flat.flat))
    if start + own < end:
        picked.update(p - start for p in flat.extremes(start + own, end))
    return sorted(picked)


def _reads(n: int, start: int, stored: int) -> int:
    """The sampled ids a row's loop reads from ``start`` of the flat ``sampled_tokens``, capped
    by what is stored, never by the claimed count ``n`` (``num_sampled``, which may say 2**31):
    the stored ids past ``start`` and the first read past the buffer (the wild read
    :func:`_wild` reports), at most."""
    return min(max(n, 0), max(stored - start, 0) + 1)


#: the bytes a replay holds per sampled id a row reads (its plan entry, its accesses and the
#: findings of both variants when it is out of bounds): 7.5 KB measured on a record of 180,000
#: reads, 1.45 GB
READ_BYTES = 8192


def _require_reads(record: Record, flat: int, width: int) -> None:
    """Hold the reads the rows plan (each row's :func:`_reads` of its own row, and at most 4
    for its reads past it, :func:`_folded`; counted vectorised, before any is planned) to the
    allocation budget.

    Raises:
        AllocationBudgetError: the reads past the budget, in one line.
    """
    idx = np.asarray(record["idx_mapping"], dtype=np.int64)
    n = np.asarray(record["num_sampled"], dtype=np.int64)[:len(idx)]
    start = np.arange(len(n), dtype=np.int64) * width
    reads = np.minimum(np.maximum(n, 0), np.maximum(flat - start, 0) + 1)
    planned = np.minimum(reads, width) + np.minimum(np.maximum(reads - width, 0), 4)
    total = int(planned[idx[:len(n)] >= 0].sum())
    require_alloc(READ_BYTES * total, f"a {NAME} record at step {record.step} rank "
                                      f"{record.rank}", "reads", total,
                  f"fix the record's num_sampled (a row reads that many ids of sampled_tokens "
                  f"from its start, on into the next rows'), or raise {MAX_ALLOC_ENV} if the "
                  f"engine really sampled that many")


def _rows(record: Record, patched: bool) -> list[_Row]:
    """Every row the kernel runs (slot >= 0): its reads and writes as indices. Rows run in
    batch order and a row sees the ``total_len`` an earlier row of the same slot left (two
    rows of one slot race on a GPU; the interpreter runs them in this order)."""
    idx = np.asarray(record["idx_mapping"], dtype=np.int64)
    total = np.array(record["total_len"], dtype=np.int64)
    width_of_total = np.asarray(record["total_len"]).dtype
    as_int64(np.asarray(record["num_sampled"]), "num_sampled")  # refuses a count past int64
    qsl = record.get("query_start_loc")
    flat = as_int64(np.asarray(record["sampled_tokens"]).reshape(-1), "sampled_tokens")
    width = np.asarray(record["sampled_tokens"]).shape[1]
    _require_reads(record, len(flat), width)
    ids = _Flat(flat, int(record["vocab_size"]),
                f"a {NAME} record at step {record.step} rank {record.rank}")
    out: list[_Row] = []
    for i, slot in enumerate(idx.tolist()):
        if slot < 0:
            continue
        row = _Row(i, slot)
        n = _count(record, i, patched, ids)
        base = int(total[slot]) if slot < len(total) else 0
        row.reads = _reads(n, i * width, len(flat))
        own = min(row.reads, width)
        for j in [*range(own), *_folded(ids, i * width, own, row.reads)]:
            offset = i * width + j
            row.ids.append(int(flat[offset]) if offset < len(flat) else -(2**62))
            row.at.append(j)
            row.columns.append(base + j)
        if n > 0 and slot < len(total):
            total[slot] = stored(int(total[slot]) + n, width_of_total)  # wraps as on the GPU
        query_len = 0 if qsl is None else int(qsl[i + 1]) - int(qsl[i])
        row.delta = query_len - int(record["num_rejected"][i])
        out.append(row)
    return out


def _accesses(record: Record, rows: list[_Row]) -> list[Access]:
    """Every index the kernel uses, named by what holds it: the slot ``idx_mapping[i]`` into
    each per-slot buffer, the sampled column (computed from ``num_sampled``) into a row of
    ``sampled_tokens``, the ``all_token_ids`` column (computed from ``total_len``) and the id
    ``sampled_tokens[i][j]`` into a row of ``output_bin_counts``."""
    r = np.array([x.row for x in rows], dtype=np.int64)
    slots = np.array([x.slot for x in rows], dtype=np.int64)
    found = [Access(name, r, r, slots, 0, len(record[name]), "idx_mapping")
             for name in _SLOTS]
    if "draft_tokens_out" in record:
        found.append(Access("draft_tokens_out", r, r, slots, 0,
                            np.asarray(record["draft_tokens_out"]).shape[0], "idx_mapping"))
    per = np.array([len(x.ids) for x in rows], dtype=np.int64)
    tok_rows = np.repeat(r, per)
    col = np.array([j for x in rows for j in x.at], dtype=np.int64)
    width = np.asarray(record["sampled_tokens"]).shape[1]
    found.append(Access("sampled_tokens", tok_rows, col, col, 0, width, "num_sampled", tok_rows,
                        held=False, indexed=row_of("sampled_tokens")))
    columns = np.array([c for x in rows for c in x.columns], dtype=np.int64)
    found.append(Access("all_token_ids", tok_rows, col, columns, 0,
                        int(record["all_token_ids_width"]), "total_len", np.repeat(slots, per),
                        held=False, indexed=row_of("all_token_ids")))
    if int(record["bin_counts_rows"]) > 0:
        ids = np.array([t for x in rows for t in x.ids], dtype=np.int64)
        in_row = bool(np.all(col < width))  # else some ids were read from the next row
        found.append(Access("output_bin_counts", tok_rows, col, ids, 0,
                            int(record["bin_counts_width"]),
                            "sampled_tokens[{row}]" if in_row else "", held=in_row,
                            indexed=row_of("output_bin_counts")))
    return found


def _wild(record: Record, rows: list[_Row]) -> str | None:
    """The first read or write outside its allocation, described, or None."""
    m, sampled = len(record["num_computed_tokens"]), np.asarray(record["sampled_tokens"])
    bins, width = int(record["bin_counts_rows"]), int(record["bin_counts_width"])
    drafts = np.asarray(record["draft_tokens_out"]).shape[0] if "draft_tokens" in record else m
    for x in rows:
        if x.slot >= m:
            return f"slot {x.slot} of buffers with {m} slots"
        if x.slot >= drafts:
            return f"draft_tokens_out slot {x.slot} of {drafts}"
        if x.reads and x.row * sampled.shape[1] + x.reads > sampled.size:
            return f"sampled_tokens row {x.row} column {x.reads - 1}"
        length = int(record["all_token_ids_width"]) * m
        for c in x.columns:
            if not 0 <= x.slot * int(record["all_token_ids_width"]) + c < length:
                return f"all_token_ids[{x.slot}, {c}]"
        for t in x.ids if bins > 0 else ():
            if not 0 <= x.slot * width + t < bins * width:
                return f"output_bin_counts[{x.slot}, {t}]"
    return None


def _run(record: Record, patched: bool) -> Outcome:
    """The kernel on one record (``patched``: sampled ids checked against the vocabulary)."""
    rows = _rows(record, patched)
    accesses = _accesses(record, rows)
    wild = _wild(record, rows)
    if wild is not None:
        return Outcome(INDEX_ERROR, f"IndexError: illegal memory access: {wild} is outside "
                                    f"its buffer", {}, accesses)
    outs = {name: np.array(record[name], copy=True) for name in _SLOTS}
    drafts = record.get("draft_tokens")
    if drafts is not None:
        outs["draft_tokens_out"] = np.array(record["draft_tokens_out"], copy=True)
    for x in rows:
        if drafts is not None:
            outs["draft_tokens_out"][x.slot] = np.asarray(drafts)[x.row]
        if x.ids:
            _add(outs["last_sampled_tokens"], x.slot, x.ids[-1], replace=True)
            _add(outs["total_len"], x.slot, x.reads)
        _add(outs["num_computed_tokens"], x.slot, x.delta)
    return Outcome(OK, "", outs, accesses)


def _add(buffer: np.ndarray, slot: int, value: int, replace: bool = False) -> None:
    """``buffer[slot] += value`` (``= value`` with ``replace``) in the buffer's own width,
    wrapping as the kernel's int32 arithmetic does (:func:`stored`)."""
    buffer[slot] = stored(value if replace else int(buffer[slot]) + int(value), buffer.dtype)


def run_batch(cols: RunColumns, patched: bool) -> BatchRun:
    """The kernel's model over a batch, record by record (:func:`_run`)."""
    return run_each(cols, _run, patched, outcome_checks)


def outcome_checks(record: Record, outcome: Outcome) -> CheckList:
    """The checks of any variant's outcome on one record: the indices a model used (its
    accesses), then the ids it stored for the next step: ``out.last_sampled_tokens`` (element
    the slot) and ``out.draft_tokens_out`` (element the flat position), against
    ``[0, vocab_size)``, on the rows that stored one."""
    parts = [Checks.of_access(a) for a in outcome.accesses or ()]
    vocab = int(record["vocab_size"])
    idx = np.asarray(record["idx_mapping"], dtype=np.int64)
    last = outcome.outputs.get("last_sampled_tokens")
    if last is not None:
        last = np.asarray(last).reshape(-1)
        stored = np.flatnonzero((idx >= 0) & (idx < len(last))
                                & (np.asarray(record["num_sampled"]) > 0))
        parts.append(Checks.of("out.last_sampled_tokens", 0, stored, idx[stored],
                               last[idx[stored]], 0, vocab).naming(None, VOCABULARY))
    out = outcome.outputs.get("draft_tokens_out")
    if out is not None and "draft_tokens" in record:
        out = np.asarray(out)
        rows = np.flatnonzero((idx >= 0) & (idx < out.shape[0]))
        s = out.shape[1]
        rows_rep = np.repeat(rows, s)
        element = (idx[rows_rep] * s + np.tile(np.arange(s), len(rows))).astype(np.int64)
        parts.append(Checks.of("out.draft_tokens_out", 0, rows_rep, element,
                               out.reshape(-1)[element], 0, vocab)
                     .naming("out.draft_tokens_out.flatten()", VOCABULARY))  # a flat position
    return Checks.concat(parts)


def _bases(slots: np.ndarray, counts: np.ndarray, total: np.ndarray) -> np.ndarray:
    """:func:`_rows`' first ``all_token_ids`` column of each row (``slots`` >= 0, in batch
    order): the slot's ``total_len`` plus the ids earlier rows of that slot stored (0 for a
    slot outside ``total_len``, which no row changes)."""
    if not len(slots):
        return np.zeros(0, np.int64)
    inside = slots < len(total)
    add = np.where(inside & (counts > 0), counts, 0)
    order = np.argsort(slots, kind="stable")
    ran = np.cumsum(add[order]) - add[order]
    ordered = slots[order]
    starts = np.concatenate(([True], ordered[1:] != ordered[:-1]))
    earlier = np.empty_like(ran)
    earlier[order] = ran - ran[starts][np.cumsum(starts) - 1]
    base = total[np.where(inside, slots, 0)] if len(total) else np.zeros(len(slots), np.int64)
    return np.where(inside, base + earlier, 0)


def guard(fields: Mapping[str, Any]) -> Violation | None:
    """The probe's per-call check (``Site.guard``) on one call's host values (the record's
    fields): what :func:`violation_of <forensics.probe.v2_hooks.violation_of>` finds in the
    upstream model's run, vectorised: the first index the kernel uses out of range (in the
    order of :func:`_accesses`), else, when the kernel stays inside its buffers, the first
    id stored for the next step outside ``[0, vocab_size)`` (``out.last_sampled_tokens``,
    then ``out.draft_tokens_out``), else None."""
    idx = np.asarray(fields["idx_mapping"], dtype=np.int64)
    sampled = np.asarray(fields["sampled_tokens"])
    width = sampled.shape[1]
    r = np.flatnonzero(idx >= 0)
    slots = idx[r]
    counts = np.asarray(fields["num_sampled"], dtype=np.int64)[r]
    per = np.maximum(counts, 0)
    tok_rows = np.repeat(r, per)
    col = np.arange(len(tok_rows), dtype=np.int64) - np.repeat(np.cumsum(per) - per, per)
    parts = [(name, r, slots, len(fields[name])) for name in _SLOTS]
    if "draft_tokens_out" in fields:
        parts.append(("draft_tokens_out", r, slots,
                      np.asarray(fields["draft_tokens_out"]).shape[0]))
    parts.append(("sampled_tokens", tok_rows, col, width))
    found = first_violation(NAME, parts)
    if found is not None:
        return found
    total = np.asarray(fields["total_len"], dtype=np.int64)
    columns = np.repeat(_bases(slots, counts, total), per) + col
    found = first_violation(NAME, [("all_token_ids", tok_rows, columns,
                                    int(fields["all_token_ids_width"]))])
    ids = sampled.reshape(-1)[tok_rows * width + col].astype(np.int64)
    bins = int(fields["bin_counts_rows"])
    if found is None and bins > 0:
        found = first_violation(NAME, [("output_bin_counts", tok_rows, ids,
                                        int(fields["bin_counts_width"]))])
    if found is not None or (bins > 0 and bool(np.any(np.repeat(slots, per) >= bins))):
        return found  # a count outside output_bin_counts' rows: the model's run stops there
    return _stored(fields, idx, r, counts, sampled)


def _stored(fields: Mapping[str, Any], idx: np.ndarray, r: np.ndarray, counts: np.ndarray,
            sampled: np.ndarray) -> Violation | None:
    """:func:`outcome_checks`' ``out.*`` checks of the upstream run of a call whose kernel
    stays inside its buffers: the first id stored for the next step outside the vocabulary."""
    vocab = int(fields["vocab_size"])
    last = np.array(fields["last_sampled_tokens"], dtype=np.int64).reshape(-1)
    wrote = r[counts > 0]
    last[idx[wrote]] = sampled[wrote, np.asarray(fields["num_sampled"])[wrote] - 1]
    stored = np.flatnonzero((idx >= 0) & (idx < len(last))
                            & (np.asarray(fields["num_sampled"]) > 0))
    found = first_violation(NAME, [("out.last_sampled_tokens", stored, last[idx[stored]], vocab)])
    if found is not None or "draft_tokens" not in fields:
        return found
    out = np.array(fields["draft_tokens_out"])
    out[idx[r]] = np.asarray(fields["draft_tokens"])[r]
    s = out.shape[1]
    rows = np.repeat(r, s)
    element = idx[rows] * s + np.arange(len(rows)) % max(s, 1)
    return first_violation(NAME, [("out.draft_tokens_out", rows, out.reshape(-1)[element], vocab)])


from forensics.sites.base import (  # noqa: E402  (the SITE declaration closes the module)
    READ_MODIFY_WRITE,
    WRITE,
    Site,
)

#: ``forensics repro``: the vLLM function a standalone test calls with one record ``r`` (in
#: Triton's interpreter, in its own process), and the test body that calls it: run twice, on
#: ``last_sampled_tokens`` and ``all_token_ids`` of 0s and of 1s, the cells equal after both are
#: the ids the kernel stored (checked against the vocabulary); every buffer has a spare row past
#: its end (``output_bin_counts`` one before it too), and a count or an id written there fails.
#: A ``post_update`` that takes ``vocab_size`` (a fix) gets the record's, as its caller would.
REPRO = ('vllm.v1.worker.gpu.input_batch.post_update',
         '''    import inspect

    kernels = interpreted_kernels()
    slots, rows = len(r["num_computed_tokens"]), r["bin_counts_rows"]
    vocab = {}
    if "vocab_size" in inspect.signature(kernels.post_update).parameters:
        vocab["vocab_size"] = r["vocab_size"]
    drafts = ()
    if "draft_tokens" in r:
        drafts = (r["draft_tokens"].clone(), r["draft_tokens_out"].clone())
    runs = []
    for fill in (0, 1):
        last, last_view = spare([slots, 1], fill, r["last_sampled_tokens"].dtype, 1)
        ids, ids_view = spare([slots, r["all_token_ids_width"]], fill, torch.int32, 1,
                              "len(num_computed_tokens) x all_token_ids_width")
        counts = zeros([rows + 2, r["bin_counts_width"]], torch.int32,
                       "bin_counts_rows x bin_counts_width")
        kernels.post_update(
            r["idx_mapping"].clone(), r["num_computed_tokens"].clone(), last_view,
            counts[1:rows + 1] if rows > 0 else None, r["sampled_tokens"].clone(),
            r["num_sampled"].clone(), r["num_rejected"].clone(),
            r["query_start_loc"].clone() if "query_start_loc" in r else None, ids_view,
            r["total_len"].clone(), *drafts, **vocab)
        outside = int(counts[0].sum() + counts[rows + 1].sum()) if rows > 0 else 0
        if outside:
            raise IndexError(f"the call counted {outside} sampled id(s) outside the "
                             f"{rows} rows of output_bin_counts")
        runs.append((last.reshape(-1), ids))
    (last, ids), (last_1, ids_1) = runs
    written_past(last, last_1, slots, "last_sampled_tokens")
    written_past(ids, ids_1, slots, "all_token_ids")
    return [("last_sampled_tokens", written_cells(last, last_1, 0, slots), ()),
            ("all_token_ids", written_cells(ids, ids_1, 0, slots), ())]
''')

#: this module's site: its schema and operations (the registry holds it)
SITE: Site[RunColumns] = Site(
    name=NAME, fields=FIELDS, output_fields=OUTPUT_FIELDS, summary_bound=SUMMARY_BOUND,
    summary_tensor=SUMMARY_TENSOR, run_batch=run_batch,
    checks=outcome_checks, check_record=check_record, check_batch=check_batch, guard=guard,
    hook="vllm.v1.worker.gpu.model_runner:post_update", repro=REPRO,
    kernel="forensics.variants.triton_worker:run_post_update",
    writes=(("num_computed_tokens", READ_MODIFY_WRITE), ("total_len", READ_MODIFY_WRITE),
            ("output_bin_counts", READ_MODIFY_WRITE), ("last_sampled_tokens", WRITE),
            ("draft_tokens_out", WRITE), ("all_token_ids", WRITE)))
