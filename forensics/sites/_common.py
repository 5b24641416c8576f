"""Helpers shared by the site modules: the previous batch, finding dicts, consistency checks.

numpy only (``import forensics.sites`` stays light). A *finding dict* is what a site's
``judge`` returns: ``row, element, tensor, kind, value, lower, upper, req_id``;
:mod:`forensics.judge.findings` adds the variant, the record's coordinates, ``origin`` and
``resolved``.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from forensics.errors import CaptureFormatError
from forensics.outcome import STATUSES, Access, Outcome
from forensics.records import Record
from forensics.screening import ScreenUnsure, as_exact, as_int64
from forensics.sites.core import MISATTRIBUTED as MISATTRIBUTED  # re-exported to the sites
from forensics.sites.core import OUT_OF_BOUNDS as OUT_OF_BOUNDS
from forensics.sites.core import (
    BatchRun,
    CheckList,
    Checks,
    index_keys,
    owner,
    ragged_parts,
    starts_of,
    value_class,
    within,
)

_TORCH_BOUNDS = re.compile(r"index (-?\d+) is out of bounds for dimension \d+ with size (\d+)")


def finding(kind: str, tensor: str | None, value: Any, lower: Any = None, upper: Any = None,
            row: Any = None, element: Any = None, req_id: str | None = None,
            indexed: str | None = None) -> dict[str, Any]:
    """One finding dict with plain Python values (None where unknown): ``tensor[element]``
    holds ``value`` when both are known; ``indexed`` is what it indexes."""
    value, lower, upper = _opt_int(value), _opt_int(lower), _opt_int(upper)
    vclass = value_class(value, lower, upper, indexed) if kind == OUT_OF_BOUNDS else None
    return {"row": _opt_int(row), "element": _opt_int(element), "tensor": tensor, "kind": kind,
            "value": value, "lower": lower, "upper": upper, "req_id": req_id,
            **index_keys(tensor, _opt_int(element), indexed, True, vclass)}


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def req_of_row(req_ids: Sequence[str] | None, row: int | None) -> str | None:
    """The request id of batch ``row``, or None when unknown."""
    if req_ids is None or row is None or not 0 <= row < len(req_ids):
        return None
    return req_ids[row]


def index_error_finding(outcome: Outcome, tensor: str | None = None) -> dict[str, Any]:
    """The one finding of a real-code ``index_error``: value/upper parsed from the message."""
    match = _TORCH_BOUNDS.search(outcome.message or "")
    if match is None:
        return finding(OUT_OF_BOUNDS, tensor, None)
    return finding(OUT_OF_BOUNDS, tensor, int(match.group(1)), 0, int(match.group(2)))


def stored(value: int, dtype: np.dtype[Any]) -> Any:
    """``value`` as a kernel's store into a buffer of ``dtype`` leaves it: wrapped to the
    buffer's width, as on the GPU (a record's huge id or count never raises OverflowError)."""
    return np.array([int(value) % (1 << 64)], dtype=np.uint64).astype(dtype)[0]


def rows_of_slots(cu_num_tokens: np.ndarray | None, slots: np.ndarray) -> np.ndarray | None:
    """Batch row of each token slot given inclusive cumulative counts; -1 past the last row."""
    if cu_num_tokens is None:
        return None
    cu = np.asarray(cu_num_tokens, dtype=np.int64)
    rows = np.searchsorted(cu, np.asarray(slots, dtype=np.int64), side="right")
    return np.where(rows < len(cu), rows, -1)


def prev_index_map(record: Record) -> dict[str, int] | None:
    """``prev_req_id_to_index`` as vLLM holds it, built from ``prev_req_ids`` when needed."""
    mapping = record.get("prev_req_id_to_index")
    if mapping is not None:
        return dict(mapping)
    prev_ids = record.get("prev_req_ids")
    if prev_ids is None:
        return None
    return {req: i for i, req in enumerate(prev_ids) if req is not None}


def prev_holders(record: Record) -> dict[int, str]:
    """Previous row -> the request that held it (rows of unknown holder are absent)."""
    prev_ids = record.get("prev_req_ids")
    if prev_ids is not None:
        return {i: req for i, req in enumerate(prev_ids) if req is not None}
    mapping = record.get("prev_req_id_to_index") or {}
    return {index: req for req, index in mapping.items()}


def require(cond: bool, where: str, name: str, message: str) -> None:
    """Raise CaptureFormatError naming ``where`` and the field unless ``cond`` holds."""
    if not cond:
        raise CaptureFormatError(f"{where}: field {name!r} {message}; fix the producer or "
                                 f"the dump")


def require_len(record: Record, name: str, n: int, where: str, what: str) -> None:
    """Require the optional or required field ``name`` (if present) to have length ``n``."""
    value = record.get(name)
    if value is not None and len(value) != n:  # the message is only built for a failure
        require(False, where, name, f"must have {n} entries ({what}), got {len(value)}")


def require_rows(record: Record, names: Sequence[str], where: str) -> int:
    """Require each field of ``names`` (if present) to hold one entry per ``prev_positions`` row
    and ``req_ids`` (if present) to be unique; return the row count."""
    n = len(record["prev_positions"])
    for name in names:
        require_len(record, name, n, where, "one per entry of 'prev_positions'")
    require_unique(record, "req_ids", where)
    return n


def require_unique(record: Record, name: str, where: str) -> None:
    """Require the list field ``name`` (if present) to hold no duplicate."""
    value = record.get(name)
    if value is None:
        return
    present = [v for v in value if v is not None]
    if len(set(present)) == len(present):
        return
    dupes = sorted(v for v, n in Counter(present).items() if n > 1)
    require(not dupes, where, name, f"must not repeat a request id, got {dupes[:3]}")


class BatchColumns(Protocol):
    """The columns of ``rows`` decoded records of one batch, as a site's ``check_batch`` reads
    them (see :func:`forensics.validate.screen_batch`). Per-row arrays have ``rows`` entries;
    absent fields read as 0 / empty."""

    rows: int

    def present(self, name: str) -> np.ndarray:
        """True where the record carries field ``name``."""

    def length(self, name: str) -> np.ndarray:
        """``len()`` of each record's ``name`` (tensors: the first dimension), int64."""

    def ndim(self, name: str) -> np.ndarray:
        """Dimensions of each record's tensor ``name``, int64."""

    def ints(self, name: str) -> np.ndarray:
        """The int field ``name`` of each record, int64."""

    def flat(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Tensor ``name``: all records' values end to end (int64) and each record's count.
        Raises ScreenUnsure when the values do not fit int64."""

    def inner_lengths(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Ragged ``name``: the length of every inner list end to end and each record's count
        of lists."""

    def values(self, name: str) -> list[Any]:
        """The decoded value of each record (None where absent)."""


@runtime_checkable
class RunColumns(BatchColumns, Protocol):
    """:class:`BatchColumns` of validated full records, with what a site's
    ``prepare_columns`` reads beside them: the replay's input (the store's batches, or
    :class:`RecordColumns` over Records). Every site rule reads records through this."""

    def flat(self, name: str, widen: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Tensor ``name``: all records' values end to end and each record's count (int64).
        The values are int64 when ``widen``; otherwise at their captured width where that is
        exact (:func:`forensics.screening.as_exact`: no copy; compare and gather with them,
        widen before arithmetic that can overflow it). Raises ScreenUnsure when the values do
        not fit int64."""

    def dtype(self, name: str) -> np.dtype[Any] | None:
        """The dtype of tensor ``name`` when every record that carries it shares one (None
        when none carries it or they differ)."""

    def shape(self, name: str, dim: int) -> np.ndarray:
        """Dimension ``dim`` of each record's tensor ``name`` (0 where absent), int64."""

    def ragged(self, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Ragged ``name``: all inner lists' values end to end (int64), every inner list's
        length and each record's count of lists."""

    def str_codes(self, names: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """String lists ``names``: per name, the items of every record end to end as int64
        codes (equal strings get equal codes across ``names``; a None item -1) and each
        record's count of items."""

    def record(self, i: int) -> Record:
        """Record ``i`` itself (for the per-record paths: fallbacks and the records API)."""


class RecordColumns:
    """:class:`RunColumns` over a sequence of validated full Records of one site: a single
    record is a batch of one."""

    def __init__(self, records: Sequence[Record]) -> None:
        self.records = records
        self.rows = len(records)

    def _each(self, name: str) -> list[Any]:
        return [r.fields.get(name) for r in self.records]

    def present(self, name: str) -> np.ndarray:
        return np.fromiter((name in r.fields for r in self.records), dtype=bool,
                           count=self.rows)

    def length(self, name: str) -> np.ndarray:
        return np.fromiter((0 if v is None or (type(v) is np.ndarray and not v.ndim) else len(v)
                            for v in self._each(name)), dtype=np.int64, count=self.rows)

    def ndim(self, name: str) -> np.ndarray:
        return np.fromiter((0 if v is None else np.ndim(v) for v in self._each(name)),
                           dtype=np.int64, count=self.rows)

    def ints(self, name: str) -> np.ndarray:
        try:
            return np.fromiter((0 if v is None else v for v in self._each(name)),
                               dtype=np.int64, count=self.rows)
        except OverflowError:  # records not validated yet (the probe's screen)
            raise ScreenUnsure(f"{name!r} holds values past int64") from None

    def flat(self, name: str, widen: bool = True) -> tuple[np.ndarray, np.ndarray]:
        arrays = [np.asarray(v).reshape(-1) for v in self._each(name) if v is not None]
        counts = np.fromiter((0 if v is None else np.size(v) for v in self._each(name)),
                             dtype=np.int64, count=self.rows)
        if not arrays:
            return np.zeros(0, dtype=np.int64), counts
        if len({a.dtype for a in arrays}) > 1:  # no float promotion of mixed widths
            arrays = [a.astype(np.int64) for a in arrays]
        values = np.concatenate(arrays)
        return (as_int64(values, name) if widen else as_exact(values, name)), counts

    def inner_lengths(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        lists = [v or () for v in self._each(name)]
        counts = np.fromiter(map(len, lists), dtype=np.int64, count=self.rows)
        inner = np.fromiter(map(len, itertools.chain.from_iterable(lists)), dtype=np.int64,
                            count=int(counts.sum()))
        return inner, counts

    def values(self, name: str) -> list[Any]:
        return self._each(name)

    def dtype(self, name: str) -> np.dtype[Any] | None:
        dtypes = {np.asarray(v).dtype for v in self._each(name) if v is not None}
        return dtypes.pop() if len(dtypes) == 1 else None

    def shape(self, name: str, dim: int) -> np.ndarray:
        return np.fromiter((np.shape(v)[dim] if v is not None and np.ndim(v) > dim else 0
                            for v in self._each(name)), dtype=np.int64, count=self.rows)

    def ragged(self, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        lists = [v or [] for v in self._each(name)]
        values, lengths = ragged_parts([row for rows in lists for row in rows])
        counts = np.fromiter(map(len, lists), dtype=np.int64, count=self.rows)
        return values, lengths, counts

    def str_codes(self, names: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        codes: dict[str, int] = {}
        out = []
        for name in names:
            lists = [v or [] for v in self._each(name)]
            items = [-1 if q is None else codes.setdefault(q, len(codes))
                     for rows in lists for q in rows]
            out.append((np.array(items, dtype=np.int64),
                        np.fromiter(map(len, lists), dtype=np.int64, count=self.rows)))
        return out

    def record(self, i: int) -> Record:
        return self.records[i]


class RowValues(Sequence[Any]):
    """Field ``name`` of each record of ``cols``, decoded (all at once) only when some record's
    is asked for (the request ids a finding names)."""

    def __init__(self, cols: RunColumns, name: str) -> None:
        self._cols, self._name = cols, name
        self._values: list[Any] | None = None

    def __len__(self) -> int:
        return self._cols.rows

    def __getitem__(self, i: Any) -> Any:
        if self._values is None:
            self._values = self._cols.values(self._name)
        return self._values[i]


def prev_rows(cols: RunColumns) -> tuple[np.ndarray, np.ndarray]:
    """Per current row (``req_ids`` end to end): the previous row of its request as
    :func:`prev_index_map` gives it, and whether it is known (-1 and False otherwise)."""
    (req, nreq), (prev, nprev) = cols.str_codes(("req_ids", "prev_req_ids"))
    matrix = _padded(prev, nprev)
    if matrix is not None:
        result, known = _found_in_rows(req, nreq, prev, nprev, matrix)
    else:
        result, known = _found_by_keys(req, nreq, prev, nprev)
    for r in np.flatnonzero(cols.present("prev_req_id_to_index")).tolist():
        record, begin = cols.record(r), int(starts_of(nreq)[r])
        got = [record["prev_req_id_to_index"].get(q) for q in record["req_ids"]]
        result[begin:begin + len(got)] = [-1 if g is None else g for g in got]
        known[begin:begin + len(got)] = [g is not None for g in got]
    return result.astype(np.int64, copy=False), known


def _found_in_rows(req: np.ndarray, nreq: np.ndarray, prev: np.ndarray, nprev: np.ndarray,
                   matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`prev_rows`'s lookup when each record's previous codes are a line of
    ``matrix``: a current request found at its own row of the previous batch (most are) is
    known there unless that batch repeats some id; the others are compared with their
    record's whole line, the last match winning."""
    at = np.arange(len(req), dtype=np.int64) - np.repeat(starts_of(nreq), nreq)
    rec = owner(nreq)
    inside = at < nprev[rec]
    same = inside & (req >= 0)
    if len(prev):
        same &= prev[np.where(inside, starts_of(nprev)[rec] + at, 0)] == req
    ordered = np.sort(matrix, axis=1)
    repeated = (ordered[:, 1:] == ordered[:, :-1]).any(axis=1)  # a None twice counts too
    result = np.where(same, at, -1)
    rest = np.flatnonzero((req >= 0) & (~same | repeated[rec]))
    if len(rest) and matrix.shape[1]:
        hits = matrix[rec[rest]] == req[rest, None]
        last = matrix.shape[1] - 1 - np.argmax(hits[:, ::-1], axis=1)
        result[rest] = np.where(hits.any(axis=1), last, -1)
    return result, result >= 0


def _found_by_keys(req: np.ndarray, nreq: np.ndarray, prev: np.ndarray, nprev: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`prev_rows`'s lookup by (record, code) keys: a table, or a sort and a search."""
    rec, prec = owner(nreq), owner(nprev)
    span = int(max(req.max(initial=0), prev.max(initial=0))) + 2
    ok = prev >= 0
    key, pos = prec[ok] * span + prev[ok], within(nprev)[ok]
    wanted = rec * span + req
    if len(nreq) * span <= _LOOKUP_TABLE:
        return _looked_up(key, pos, wanted, req >= 0, len(nreq) * span)
    return _searched(key, pos, wanted, req >= 0)


def _padded(codes: np.ndarray, counts: np.ndarray) -> np.ndarray | None:
    """Each record's run of ``codes`` (codes >= -1) as a line of one matrix, padded with
    distinct values below -1 (int32 when the codes fit); None when a few long runs would
    make that matrix large."""
    width = int(counts.max(initial=0))
    if len(counts) * width > 4 * len(codes) + 4096:
        return None
    small = codes.astype(np.int32 if width and codes.max() < 2**31 else np.int64)
    if len(counts) and (counts == width).all():
        return small.reshape(len(counts), width)
    matrix = np.tile(-2 - np.arange(width, dtype=small.dtype), (len(counts), 1))
    matrix[np.arange(width) < counts[:, None]] = small  # line by line, in order
    return matrix


#: the most (record, request) keys :func:`prev_rows` looks up in a table (int64 each)
_LOOKUP_TABLE = 1 << 21


def _looked_up(key: np.ndarray, pos: np.ndarray, wanted: np.ndarray, asked: np.ndarray,
               size: int) -> tuple[np.ndarray, np.ndarray]:
    """Per ``wanted`` key (where ``asked``): the ``pos`` of the last row with that ``key``
    (``pos`` rises within a key's rows), and whether there is one; keys below ``size``. One
    table of ``size`` entries instead of a sort."""
    table = np.full(size, -1, dtype=np.int64)
    np.maximum.at(table, key, pos)  # the last of a repeat wins
    found = table[np.where(asked, wanted, 0)]
    known = asked & (found >= 0)
    return np.where(known, found, -1), known


def _searched(key: np.ndarray, pos: np.ndarray, wanted: np.ndarray, asked: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_looked_up` by a sort of the keys and a binary search (any key range)."""
    order = np.argsort(key, kind="stable")  # rows stay in order: the last of a repeat wins
    key, pos = key[order], pos[order]
    if not len(key):  # no previous request of any record
        key, pos = np.full(1, -1, dtype=np.int64), np.full(1, -1, dtype=np.int64)
    at = np.maximum(np.searchsorted(key, wanted, side="right") - 1, 0)
    known = asked & (key[at] == wanted)
    return np.where(known, pos[at], -1), known


def other_holder(cols: RunColumns, pp: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per row of ``pp`` (``prev_positions`` end to end, ``counts`` per record): whether its
    previous row was held by another request (:func:`prev_holders`; False where the request
    ids or the previous batch are unknown)."""
    (req, _), (prev, nprev) = cols.str_codes(("req_ids", "prev_req_ids"))
    rec = owner(counts)
    has_req, has_prev = cols.present("req_ids"), cols.present("prev_req_ids")
    req_row = np.full(len(pp), -1, dtype=np.int64)
    req_row[has_req[rec]] = req
    inside = (has_req & has_prev)[rec] & (pp >= 0) & (pp < nprev[rec])
    holder = np.where(inside, prev[np.where(inside, starts_of(nprev)[rec] + pp, 0)]
                      if len(prev) else -1, -1)
    flags = inside & (holder >= 0) & (holder != req_row)
    mapped = has_req & ~has_prev & cols.present("prev_req_id_to_index")
    for r in np.flatnonzero(mapped).tolist():
        record, begin = cols.record(r), int(starts_of(counts)[r])
        holders = prev_holders(record)
        flags[begin:begin + int(counts[r])] = [
            holders.get(p, q) != q for p, q in zip(pp[begin:begin + int(counts[r])].tolist(),
                                                   record["req_ids"], strict=True)]
    return flags


def rows_with_any(mask: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per record: whether any of its values (``counts[r]`` of them, end to end) is in
    ``mask``."""
    owner = np.repeat(np.arange(len(counts)), counts)
    return np.bincount(owner[mask], minlength=len(counts)) > 0


def row_steps(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``np.diff(v, prepend=0)`` of each record's run of ``values``, end to end."""
    steps = np.diff(values, prepend=0)
    firsts = (np.cumsum(counts) - counts)[counts > 0]
    steps[firsts] = values[firsts]
    return steps


def row_last(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The last of each record's run of ``values`` (0 for an empty run)."""
    ends = np.cumsum(counts)
    return np.where(counts > 0, values[np.maximum(ends - 1, 0)] if len(values) else 0, 0)


def aligned(cols: BatchColumns, names: Sequence[str]) -> tuple[np.ndarray, ...]:
    """The flat values of tensors ``names`` and their per-record counts, which must agree
    row by row for elementwise checks (ScreenUnsure otherwise: the rows are checked one by
    one, where the length checks name the field)."""
    parts = [cols.flat(name) for name in names]
    counts = parts[0][1]
    if any(not np.array_equal(c, counts) for _, c in parts[1:]):
        raise ScreenUnsure(f"{list(names)} differ in length")
    return (*(v for v, _ in parts), counts)


def screen_rows(cols: BatchColumns, names: Sequence[str]) -> np.ndarray:
    """Columnar :func:`require_rows`: records whose ``names`` (if present) do not hold one entry
    per ``prev_positions`` row, or whose ``req_ids`` repeat one."""
    n = cols.length("prev_positions")
    bad = screen_unique(cols, "req_ids")
    for name in names:
        bad |= cols.present(name) & (cols.length(name) != n)
    return bad


def screen_unique(cols: BatchColumns, name: str) -> np.ndarray:
    """Records whose list field ``name`` may repeat an item (None items count as items here:
    a superset of what :func:`require_unique` rejects)."""
    if isinstance(cols, RunColumns):  # codes: no string decoded
        ((codes, counts),) = cols.str_codes((name,))
        return repeats(codes, counts)
    return np.fromiter((v is not None and len(set(v)) != len(v) for v in cols.values(name)),
                       dtype=bool, count=cols.rows)


def repeats(codes: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per record: whether its run of ``codes`` (``counts[r]`` of them, end to end; codes
    >= -1) holds some code twice. Each record's codes are sorted in a row of one matrix
    (shorter runs padded with distinct values below -1) and compared with their
    neighbours; a sort of (record, code) keys when that matrix would be large."""
    matrix = _padded(codes, counts)
    if matrix is None:  # a few long runs: a sort of (record, code) keys
        span = int(codes.max(initial=0)) + 2
        keys = np.sort(owner(counts) * span + codes + 1)
        repeated = keys[1:][keys[1:] == keys[:-1]] // span
        return np.bincount(repeated, minlength=len(counts)) > 0
    ordered = np.sort(matrix, axis=1)
    return (ordered[:, 1:] == ordered[:, :-1]).any(axis=1)


#: a model on one record: ``(record, patched) -> Outcome``
OneRecord = Callable[[Record, bool], Outcome]
#: a site's checks of one record's outcome
OutcomeChecks = Callable[[Record, Outcome], "Checks | CheckList"]


def run_each(cols: RunColumns, model: OneRecord, patched: bool, checks: OutcomeChecks,
             rows: Sequence[int] | None = None, run: BatchRun | None = None) -> BatchRun:
    """The run of a model written per record (``model``) over the records ``rows`` of
    ``cols`` (None: all), one by one, each outcome's checks made by ``checks``: a run of
    ``cols`` with each record's Outcome kept (``BatchRun.outcome``). Given ``run`` (of every
    record of ``cols``), the records ``rows`` are added to it, their statuses, messages and
    checks replacing its own."""
    rows = range(cols.rows) if rows is None else rows
    if run is None:
        run = BatchRun(np.zeros(cols.rows, dtype=np.int8), {}, Checks.concat([]),
                       RowValues(cols, "req_ids"))
    outcomes: dict[int, Outcome] = {}
    parts: list[Checks | CheckList] = [run.checks]
    for i in rows:
        record = cols.record(i)
        outcomes[i] = outcome = model(record, patched)
        run.status[i] = STATUSES.index(outcome.status)
        if outcome.message:
            run.messages[i] = outcome.message
        parts.append(checks(record, outcome).renumbered(np.array([i])))
    run.checks = Checks.concat(parts)
    if run.outcome is None and len(outcomes) == cols.rows:
        run.outcome = outcomes.__getitem__
    return run


def failed(exc: BaseException, accesses: list[Access] | None = None) -> Outcome:
    """The outcome of a call that raised ``exc``: ``index_error`` for an IndexError, else
    ``error``; the message is ``"<ExceptionType>: <text>"``."""
    status = "index_error" if isinstance(exc, IndexError) else "error"
    return Outcome(status, f"{type(exc).__name__}: {exc}", {}, accesses)


@dataclass(frozen=True)
class Violation:
    """One index outside ``[lower, upper)`` of ``tensor`` at batch ``row`` of ``site``."""

    site: str
    row: int | None
    tensor: str
    value: int
    lower: int
    upper: int

    @property
    def used(self) -> bool:
        """True when the call uses the value as an index (a gather, a read, the embedding's
        input): guard mode raises before the call. False for an id the call only writes or
        passes on (tensor ``out.*``, the ``async_output`` sentinel): guard mode records it,
        flushes, warns and lets the call run; the sink raises if the id is then used."""
        return not self.tensor.startswith("out.")


def placeholder_start(output: Sequence[int]) -> int:
    """Position of the first of the trailing ``-1`` placeholders of one output list (its
    length when it does not end in ``-1``), in plain Python for a probe hook and a guard: the
    one-list form of ``async_output``'s columnar ``trailing_start`` (held to it by
    ``tests/sites/test_async_output.py``)."""
    end = len(output)
    while end > 0 and output[end - 1] == -1:
        end -= 1
    return end


def first_outside(values: np.ndarray, lower: int, upper: int) -> int | None:
    """Position of the first of ``values`` outside ``[lower, upper)``, or None."""
    bad = np.flatnonzero((values < lower) | (values >= upper))
    return int(bad[0]) if bad.size else None


def first_violation(site: str, parts: Iterable[tuple[str, np.ndarray, np.ndarray, int]]
                    ) -> Violation | None:
    """The first entry outside ``[0, upper)`` of the first part holding one, as ``site``'s
    Violation (``parts``: ``(tensor, rows, values, upper)`` in the order a model's checks
    have them: a guard's form of the first finding of those checks)."""
    for tensor, rows, values, upper in parts:
        values = np.asarray(values)
        if not values.size or (values.min() >= 0 and values.max() < upper):
            continue  # two reductions: cheaper than finding none
        at = first_outside(values, 0, upper)
        if at is not None:
            return Violation(site, int(rows[at]), tensor, int(values[at]), 0, int(upper))
    return None
