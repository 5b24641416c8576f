"""The columnar core of the sites: index checks of a whole batch of records held as columns.

A site's run over a batch (one or many records of one site) produces, beside its outputs, every
index it used and every id it wrote or passed on as one :class:`Checks` table: one entry per
checked value with its ``record`` (position in the batch), ``row``, ``element``, ``tensor``,
``kind``, ``value`` and valid range ``[lower, upper)``, plus how the values are grouped (one
group per record and checked tensor). The judge reads findings (the entries out of range, and
the ``misattributed`` entries) and checked ranges (min/max per group) from it: no per-record
Python, no ``ContextVar``. A single record is a batch of one.

numpy only (``import forensics.sites`` stays light).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import numpy as np

from forensics.budget import require_findings
from forensics.outcome import Access, Outcome
from forensics.screening import as_exact

OUT_OF_BOUNDS, MISATTRIBUTED = "out_of_bounds", "misattributed"
KINDS = (OUT_OF_BOUNDS, MISATTRIBUTED)
#: what an id indexes (``indexed`` of a checked id): its bound is the vocabulary's size or the
#: embedding's rows, and a value equal to it is the ``vocab_size`` rejection sentinel
VOCABULARY, EMBEDDING_ROWS = "vocabulary", "embedding rows"
#: the ``indexed`` of a column index into a 2-D tensor: ``"a row of draft_tokens"`` (the bound
#: is the row's length)
ROW_OF = "a row of "


def row_of(tensor: str) -> str:
    """The ``indexed`` of a column index into one row of ``tensor`` (:data:`ROW_OF`)."""
    return ROW_OF + tensor

#: value classes of an out-of-bounds value (see :func:`value_class`)
VALUE_CLASSES = ("placeholder", "vocab_size", "negative", "past_end", "stale_row")
_NO_BOUND = np.iinfo(np.int64).min  # ``lower``/``upper`` of an entry without bounds
Range = tuple[str, int, int, int, int]
V = TypeVar("V")


def _i64(values: Any) -> np.ndarray:
    return np.asarray(values, dtype=np.int64).reshape(-1)


def _checked_values(values: Any, tensor: str) -> np.ndarray:
    """The checked values as given when their integer width is exact (int32 stays int32: the
    checks only compare them and take their min/max), else int64
    (:func:`forensics.screening.as_exact`)."""
    return as_exact(np.asarray(values).reshape(-1), tensor)


#: a column of :class:`Checks`: one value per entry (an array, maybe a broadcast view), or a
#: function giving the values of the entries at some positions (computed only when read)
Column = np.ndarray | Callable[[np.ndarray], np.ndarray]


def take(column: Column, at: np.ndarray) -> np.ndarray:
    """The values of ``column`` at entry positions ``at``."""
    return column(at) if callable(column) else column[at]


def _taken(column: Column, at: np.ndarray) -> Column:
    """``column`` of the entries at ``at`` only (a function stays one: read where needed)."""
    if callable(column):
        return lambda positions: column(at[positions])
    return column[at]


@dataclass
class Checks:
    """Checked values of one ``tensor`` and ``kind`` (an index into :data:`KINDS`) in a batch:
    ``value`` per entry, the other columns (:data:`Column`) read only where needed (a finding,
    a group's first entry). ``row``/``element`` are -1 when unknown. The entries of one record
    are adjacent (``record`` non-decreasing) and form one group (one observation); ``lower``
    and ``upper`` are the same within a group. ``out_of_bounds`` entries are findings only
    when outside ``[lower, upper)``; ``misattributed`` ones always are and carry no range.
    ``starts``: each group's first entry, when the maker knows them."""

    tensor: str
    kind: int
    record: Column
    row: Column
    element: Column
    value: np.ndarray
    lower: Column
    upper: Column
    starts: np.ndarray | None = None
    _groups: tuple[np.ndarray, np.ndarray] | None = field(default=None, init=False,
                                                          repr=False, compare=False)
    #: the tensor holding each checked value (None: ``tensor``); ``{row}`` in it is replaced
    #: by the entry's row (a per-row list: ``out.output_tail[{row}]``)
    index_tensor: str | None = None
    #: where ``index_tensor`` holds each value (None: ``element``)
    index_at: Column | None = None
    #: what the values index: a tensor, :data:`VOCABULARY` or :data:`EMBEDDING_ROWS` (None:
    #: unknown)
    indexed: str | None = None
    #: whether ``index_tensor[index_at]`` holds the value itself (False: the index used is
    #: computed from it, e.g. ``prev_positions[r] * prev_num_spec_tokens + j``)
    held: bool = True
    #: whether a value past the end names a previous row that is gone (a stale row)
    stale: bool = False

    @classmethod
    def empty(cls) -> Checks:
        """No entry."""
        zero = np.zeros(0, dtype=np.int64)
        return cls("", 0, zero, zero, zero, zero, zero, zero)

    @classmethod
    def of(cls, tensor: str, record: Any, row: Any, element: Any, value: Any, lower: Any,
           upper: Any, kind: str = OUT_OF_BOUNDS) -> Checks:
        """Entries of one tensor, grouped per record (``record`` must be non-decreasing);
        scalars broadcast. ``row``/``element`` None: unknown; ``lower`` None: no range (a
        ``misattributed`` entry only). ``value`` keeps an exact integer width."""
        value = _checked_values(value, tensor)
        n = len(value)

        def col(x: Any, fill: int = -1) -> np.ndarray:
            if x is None:
                x = fill
            if np.ndim(x) == 0:
                return np.broadcast_to(np.int64(x), (n,))
            return _i64(x)

        no_bound = kind != OUT_OF_BOUNDS and lower is None
        return cls(tensor, KINDS.index(kind), col(record), col(row), col(element), value,
                   col(None, _NO_BOUND) if no_bound else col(lower),
                   col(None, _NO_BOUND) if no_bound else col(upper))

    @classmethod
    def of_runs(cls, tensor: str, counts: np.ndarray, value: np.ndarray, lower: Any,
                upper: Any, row: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None
                ) -> Checks:
        """Entries of one tensor laid end to end in runs of ``counts`` (one run per record):
        ``element`` is the position within the run; ``lower``/``upper`` are per record
        (scalars broadcast); ``row(record, element)`` gives the rows of some entries (None:
        unknown). Nothing is computed per entry beyond ``value`` (kept at an exact integer
        width: no copy of a captured int32 tensor)."""
        counts = np.asarray(counts, dtype=np.int64)
        begin = starts_of(counts)
        ends = np.cumsum(counts)
        per = [np.broadcast_to(np.int64(x), counts.shape) if np.ndim(x) == 0 else _i64(x)
               for x in (lower, upper)]

        def record(at: np.ndarray) -> np.ndarray:
            return np.searchsorted(ends, at, side="right")

        def element(at: np.ndarray) -> np.ndarray:
            return at - begin[record(at)]

        def rows(at: np.ndarray) -> np.ndarray:
            if row is None:
                return np.full(len(at), -1, dtype=np.int64)
            return row(record(at), element(at))

        return cls(tensor, 0, record, rows, element, _checked_values(value, tensor),
                   lambda at: per[0][record(at)], lambda at: per[1][record(at)],
                   begin[counts > 0])

    @classmethod
    def of_row_runs(cls, tensor: str, run_record: np.ndarray, counts: np.ndarray,
                    value: np.ndarray, run_row: np.ndarray, run_element: np.ndarray,
                    run_upper: np.ndarray) -> Checks:
        """Entries laid end to end in runs of ``counts`` (one run per row: several runs per
        record, ``run_record`` non-decreasing), against ``[0, run_upper)``: entry ``j`` of
        run ``i`` is ``value`` at row ``run_row[i]``, element ``run_element[i] + j``. Only
        ``value`` is per entry; the other columns are read per run where needed (the runs'
        offsets too: the groups' first entries come from each record's total count)."""
        counts = np.asarray(counts, dtype=np.int64)
        ends = functools.cache(lambda: np.cumsum(counts))

        def run(at: np.ndarray) -> np.ndarray:
            return np.searchsorted(ends(), at, side="right")

        def element(at: np.ndarray) -> np.ndarray:
            i = run(at)
            return run_element[i] + (at - (ends()[i] - counts[i]))

        return cls(tensor, 0, lambda at: run_record[run(at)], lambda at: run_row[run(at)],
                   element, _checked_values(value, tensor),
                   lambda at: np.zeros(len(at), dtype=np.int64),
                   lambda at: run_upper[run(at)], _run_group_starts(run_record, counts))

    @staticmethod
    def concat(parts: Sequence[Checks | CheckList]) -> CheckList:
        """The entries of ``parts`` as one list (each record's groups in the order of
        ``parts``); nothing is copied."""
        flat: list[Checks] = []
        for part in parts:
            flat += part.parts if isinstance(part, CheckList) else [part]
        return CheckList([p for p in flat if len(p.value)])

    @classmethod
    def of_access(cls, access: Access) -> Checks:
        """The entries of one model access (:class:`~forensics.outcome.Access`), named as the
        access names them."""
        checks = cls.of(access.tensor, 0, access.rows, access.elements, access.values,
                        access.lower, access.upper)
        at = None if access.index_at is None else _i64(access.index_at)
        return checks.naming(access.index_tensor, access.indexed or access.tensor, at,
                             access.held, access.stale)

    def naming(self, index_tensor: str | None, indexed: str | None, index_at: Column | None = None,
               held: bool = True, stale: bool = False) -> Checks:
        """The same entries, in the same groups, saying what holds each value
        (``index_tensor[index_at]``, ``held``: the value itself) and what it indexes
        (``indexed``; ``stale``: a previous row)."""
        other = replace(self, index_tensor=index_tensor, index_at=index_at, indexed=indexed,
                        held=held, stale=stale)
        other._groups = self._groups
        return other

    def bad(self) -> np.ndarray:
        """Positions of the entries that are findings."""
        if self.kind != 0:
            return np.arange(len(self.value))
        starts, table = self._minmax()
        outside = (table[:, 0] < table[:, 2]) | (table[:, 1] >= table[:, 3])
        if not outside.any():
            return np.zeros(0, dtype=np.int64)
        sizes = (np.append(starts[1:], len(self.value)) - starts)[outside]
        at = runs_from(starts[outside], sizes)  # the entries of those groups
        value = self.value[at]
        return at[(value < take(self.lower, at)) | (value >= take(self.upper, at))]

    def bad_records(self) -> np.ndarray:
        """The record of each finding entry."""
        return take(self.record, self.bad())

    def _minmax(self) -> tuple[np.ndarray, np.ndarray]:
        """Each group's first entry and its ``(min, max, lower, upper)`` (int64, one row per
        group, computed once)."""
        if self._groups is None:
            starts = self.starts
            if starts is None:
                starts = group_starts(self.record, len(self.value))
            table = np.empty((len(starts), 4), dtype=np.int64)
            if len(starts):
                table[:, 0] = np.minimum.reduceat(self.value, starts)  # no out=: a narrow
                table[:, 1] = np.maximum.reduceat(self.value, starts)  # value would be cast
                table[:, 2] = take(self.lower, starts)
                table[:, 3] = take(self.upper, starts)
            self._groups = (starts, table)
        return self._groups

    def findings(self, req_ids: Sequence[Sequence[str] | None] | None = None
                 ) -> dict[int, list[dict[str, Any]]]:
        """Finding dicts per record (only records with some), in entry order. ``req_ids``:
        the request ids of each record's rows (None where unknown)."""
        found: dict[int, list[dict[str, Any]]] = {}
        bad = self.bad()
        if not len(bad):
            return found
        require_findings(len(bad))  # before a dict is made of each
        columns = (self.record, self.row, self.element, self.value, self.lower, self.upper,
                   self.element if self.index_at is None else self.index_at)
        for rec, row, element, value, lower, upper, at in zip(
                *(take(c, bad).tolist() for c in columns), strict=True):
            ids = None if req_ids is None else req_ids[rec]
            no_bound = lower == _NO_BOUND
            found.setdefault(rec, []).append({
                "row": None if row < 0 else row, "element": None if element < 0 else element,
                "tensor": self.tensor, "kind": KINDS[self.kind], "value": value,
                "lower": None if no_bound else lower, "upper": None if no_bound else upper,
                "req_id": None if ids is None or row < 0 or row >= len(ids) else ids[row],
                **self._index_keys(row, at, value, None if no_bound else lower,
                                   None if no_bound else upper)})
        return found

    def _index_keys(self, row: int, at: int, value: int, lower: int | None,
                    upper: int | None) -> dict[str, Any]:
        """What holds one finding's value and what it indexes (:func:`index_keys`)."""
        tensor: str | None = self.tensor if self.index_tensor is None else self.index_tensor
        if not tensor:  # no captured tensor holds the value
            tensor = None
        elif "{row}" in tensor:
            tensor = tensor.replace("{row}", str(row)) if row >= 0 else None
        return index_keys(tensor, None if at < 0 else at, self.indexed,
                          self.held and tensor is not None and at >= 0,
                          value_class(value, lower, upper, self.indexed, self.stale)
                          if self.kind == 0 else None)

    def range_table(self) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray]:
        """The checked ranges: per group with bounds, its record, its tensor as a position
        ``which`` in a list of ``tensors`` and ``(min, max, lower, upper)`` (int64, one row per
        group): ``(record, tensors, which, numbers)`` (no string per group)."""
        if self.kind != 0 or not len(self.value):
            return _NO_RANGES
        starts, table = self._minmax()
        return take(self.record, starts), [self.tensor], np.zeros(len(starts), np.intp), table

    def restricted(self, keep: np.ndarray) -> Checks:
        """The entries of the records ``r`` where ``keep[r]`` (a bool per record of the
        batch), in the same groups (their ranges computed again when read)."""
        record = take(self.record, np.arange(len(self.value)))
        at = np.flatnonzero(keep[record]) if len(record) else np.zeros(0, np.int64)
        if len(at) == len(self.value):
            return self
        return replace(self, record=_taken(self.record, at), row=_taken(self.row, at),
                       element=_taken(self.element, at), value=self.value[at],
                       lower=_taken(self.lower, at), upper=_taken(self.upper, at), starts=None,
                       index_at=None if self.index_at is None else _taken(self.index_at, at))

    def sharing(self, tensor: str, upper: Column) -> Checks:
        """The same entries, in the same groups, checked as ``tensor`` against ``[lower,
        upper)``: the groups and their ranges are computed once for both."""
        indexed = tensor if self.indexed == self.tensor else self.indexed
        other = replace(self, tensor=tensor, upper=upper, indexed=indexed)
        starts, table = self._minmax()
        table = table.copy()
        table[:, 3] = take(upper, starts)
        other._groups = (starts, table)
        return other

    def renumbered(self, positions: np.ndarray,
                   _gathered: dict[int, np.ndarray] | None = None) -> Checks:
        """The same checks with record ``i`` renamed ``positions[i]`` (distinct positions:
        the groups, and their ranges once computed, stay those of these checks). Positions
        ``0, 1, ...`` rename nothing: these checks are the answer."""
        if is_identity(positions):
            return self
        record = self.record
        if callable(record):
            out = replace(self, record=lambda at: positions[record(at)])
        else:
            out = replace(self, record=_renamed(record, positions, _gathered))
        out._groups = self._groups
        return out


def index_keys(index_tensor: str | None, index_at: int | None, indexed: str | None,
               held: bool, value_class: str | None) -> dict[str, Any]:
    """The keys of a finding saying what holds its value and what it indexes:
    ``index_tensor``/``index_at`` (the tensor and element holding the value; ``held`` false:
    the index used is computed from it), ``indexed`` and ``value_class``."""
    return {"index_tensor": index_tensor, "index_at": index_at, "indexed": indexed,
            "held": bool(held and index_tensor is not None and index_at is not None),
            "value_class": value_class}


def value_class(value: int | None, lower: int | None, upper: int | None,
                indexed: str | None = None, stale: bool = False) -> str | None:
    """What kind of bad value ``value`` is against ``[lower, upper)``: ``placeholder`` (-1),
    ``negative``, ``vocab_size`` (an id equal to the vocabulary's or embedding's size: the
    rejection sentinel), ``stale_row`` (a previous row past the end, when ``stale``) or
    ``past_end``; None when in range or unknown."""
    if value is None or lower is None or upper is None:
        return None
    if value < lower:
        return "placeholder" if value == -1 and lower == 0 else "negative"
    if value < upper:
        return None
    if value == upper and indexed in (VOCABULARY, EMBEDDING_ROWS):
        return "vocab_size"
    return "stale_row" if stale else "past_end"


def _run_group_starts(run_record: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The first entry of each record's group, its entries laid end to end in runs of
    ``counts`` (``run_record`` non-decreasing, the record of each run): the offsets of the
    records' total counts (empty runs belong to no group)."""
    filled = every(counts > 0)
    counts, run_record = counts[filled], run_record[filled]
    first = group_starts(run_record, len(run_record))
    if not len(first):
        return first
    return starts_of(np.add.reduceat(counts, first))


def per_record(base: Mapping[int, V], own: Mapping[int, V], inherited: np.ndarray
               ) -> dict[int, V]:
    """Entries by record: ``base``'s for the records where ``inherited`` (a bool per record),
    ``own``'s for the others."""
    return {**{i: v for i, v in base.items() if inherited[i]},
            **{i: v for i, v in own.items() if not inherited[i]}}


def is_identity(positions: np.ndarray) -> bool:
    """Whether ``positions`` is ``0, 1, ..., len - 1`` (renaming by it changes nothing)."""
    n = len(positions)
    return not n or (positions[0] == 0 and positions[n - 1] == n - 1
                     and np.array_equal(positions, np.arange(n)))


def _renamed(record: np.ndarray, positions: np.ndarray,
             gathered: dict[int, np.ndarray] | None) -> np.ndarray:
    """``positions[record]``, gathered once per record column when ``gathered`` keeps the
    copies made (keyed by the column's identity, for checks of one batch)."""
    if gathered is None:
        return positions[record]
    key = id(record)
    if key not in gathered:
        gathered[key] = positions[record]
    return gathered[key]


def group_starts(record: Column, n: int) -> np.ndarray:
    """The first of each run of equal records among ``n`` entries (``record`` non-decreasing
    and never -1): one comparison of neighbours, no copy of an array column; or, when the
    records span few values for their entries, one binary search per value
    (:func:`_first_of_each`)."""
    if not n:
        return np.zeros(0, np.int64)
    record = record(np.arange(n)) if callable(record) else record
    first, last = int(record[0]), int(record[n - 1])
    if 0 <= first and (last - first + 1) * _SEARCH_RATIO <= n:
        return _first_of_each(record[:n], first, last)
    change = np.empty(n, dtype=bool)
    change[0] = first != -1
    np.not_equal(record[1:n], record[:n - 1], out=change[1:])
    return np.flatnonzero(change)


#: entries per record value from which :func:`group_starts` searches instead of comparing
_SEARCH_RATIO = 8


def _first_of_each(record: np.ndarray, first: int, last: int) -> np.ndarray:
    """The first entry of each distinct value of ``record`` (non-decreasing, from ``first``
    to ``last``): the first position of every value in that span, a value absent from
    ``record`` landing on the next present one's (kept once)."""
    at = np.searchsorted(record, np.arange(first, last + 1, dtype=record.dtype))
    keep = np.empty(len(at), dtype=bool)
    keep[0] = True
    np.not_equal(at[1:], at[:-1], out=keep[1:])
    return at[keep]


@dataclass
class CheckList:
    """Several :class:`Checks` of one batch read as one: each record's findings and ranges
    come part by part, in order."""

    parts: list[Checks]

    def findings(self, req_ids: Sequence[Sequence[str] | None] | None = None
                 ) -> dict[int, list[dict[str, Any]]]:
        """Finding dicts per record (only records with some), part by part."""
        found: dict[int, list[dict[str, Any]]] = {}
        for part in self.parts:
            for rec, items in part.findings(req_ids).items():
                found.setdefault(rec, []).extend(items)
        return found

    def range_table(self) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray]:
        """The checked ranges of every part as :meth:`Checks.range_table` gives them, ordered
        by record (parts in order within one); ``tensors``: the parts' distinct names."""
        got = [g for g in (part.range_table() for part in self.parts) if len(g[0])]
        if len(got) < 2:  # one part's ranges are in record order already
            return got[0] if got else _NO_RANGES
        tensors = list(dict.fromkeys(g[1][0] for g in got))
        rec = np.concatenate([g[0] for g in got])
        which = np.concatenate([np.full(len(g[0]), tensors.index(g[1][0]), np.intp)
                                for g in got])
        order = np.argsort(rec, kind="stable")
        return rec[order], tensors, which[order], np.concatenate([g[3] for g in got])[order]

    def restricted(self, keep: np.ndarray) -> CheckList:
        """The entries of the records ``r`` where ``keep[r]`` (see :meth:`Checks.restricted`)."""
        return Checks.concat([part.restricted(keep) for part in self.parts])

    def renumbered(self, positions: np.ndarray) -> CheckList:
        """The same checks with record ``i`` renamed ``positions[i]`` (parts sharing one
        record column, as :meth:`Checks.sharing` makes them, share its renamed copy)."""
        if is_identity(positions):
            return self
        gathered: dict[int, np.ndarray] = {}
        return CheckList([p.renumbered(positions, gathered) for p in self.parts])


_NO_RANGES: tuple[np.ndarray, list[str], np.ndarray, np.ndarray] = (
    np.zeros(0, np.int64), [], np.zeros(0, np.intp), np.zeros((0, 4), np.int64))


def ragged_parts(lists: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Lists of ints laid end to end: their values (int64) and lengths."""
    lengths = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    if not lengths.sum():
        return np.zeros(0, dtype=np.int64), lengths
    import itertools

    values = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int64,
                         count=int(lengths.sum()))
    return values, lengths


def starts_of(lengths: np.ndarray) -> np.ndarray:
    """Offset of each run given the run lengths."""
    return np.cumsum(lengths) - lengths


def owner(lengths: np.ndarray) -> np.ndarray:
    """The run of each value given the run lengths."""
    return np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)


def rows_of_slots(cu: np.ndarray, cu_counts: np.ndarray, rec: np.ndarray, slot: np.ndarray
                  ) -> np.ndarray:
    """Batch row of each token ``slot`` of record ``rec``, given every record's inclusive
    cumulative token counts ``cu`` end to end (``cu_counts`` per record, each run
    non-decreasing and >= 0); -1 past a record's last row."""
    if not cu_counts.sum():
        return np.full(len(rec), -1, dtype=np.int64)
    span = int(max(cu.max(initial=0), slot.max(initial=0))) + 2
    keyed = owner(cu_counts) * span + cu  # non-decreasing: records in order, each run sorted
    rows = np.searchsorted(keyed, rec * span + slot, side="right") - starts_of(cu_counts)[rec]
    return np.where(rows < cu_counts[rec], rows, -1)


def every(mask: np.ndarray) -> np.ndarray | slice:
    """``mask`` as an index: the whole-range slice when it selects everything (a view
    instead of a copy; most batches take one path)."""
    return slice(None) if mask.all() else mask


def within(lengths: np.ndarray) -> np.ndarray:
    """Position of each value within its run, given the run lengths (runs of one length:
    ``0...length-1`` repeated, no subtraction)."""
    if len(lengths) and lengths.min() == lengths.max() >= 0:
        return np.tile(np.arange(int(lengths[0]), dtype=np.int64), len(lengths))
    return np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(starts_of(lengths), lengths)


def runs_from(first: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``first[i] + j`` for ``j < lengths[i]``, run after run (``np.repeat(first, lengths) +
    within(lengths)`` in one repeat, or one broadcast sum when the runs are of one length;
    int64 arithmetic wraps alike either way)."""
    if len(lengths) and lengths.min() == lengths.max() >= 0:
        return (np.asarray(first, dtype=np.int64)[:, None]
                + np.arange(int(lengths[0]), dtype=np.int64)).reshape(-1)
    return (np.repeat(first - starts_of(lengths), lengths)
            + np.arange(int(lengths.sum()), dtype=np.int64))


def select_runs(values: np.ndarray, lengths: np.ndarray, runs: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """The runs ``runs`` (positions, in that order) of ``values`` laid end to end in runs of
    ``lengths``: their values and lengths."""
    chosen = lengths[runs]
    return values[runs_from(starts_of(lengths)[runs], chosen)], chosen


def split_lists(values: np.ndarray, lengths: np.ndarray) -> list[list[int]]:
    """:func:`ragged_parts` undone: the lists of Python ints."""
    flat = values.tolist()
    ends = np.cumsum(lengths).tolist()
    begins = (np.cumsum(lengths) - lengths).tolist()
    return [flat[a:b] for a, b in zip(begins, ends, strict=True)]


@dataclass
class BatchRun:
    """A model's run over a batch of one site's records, as the judge reads it: a status per
    record (index into ``forensics.outcome.STATUSES``), each failed record's message, every
    checked value (:class:`Checks`) and each record's request ids (None where unknown).

    A run may take some records' results from another run of the same batch: where
    ``inherited[i]`` (a bool per record), record ``i``'s status, message and checks are
    ``base``'s (e.g. the patched model's run where its guard changed nothing is upstream's),
    and this run's own ``status[i]``, ``messages`` and ``checks`` are not read for it, so the
    site need not compute them (``status`` still has one entry per record). The judge
    (``forensics.judge.findings.JudgedRun.of``) then judges ``base`` once for both runs; other
    readers take :meth:`whole`.

    ``outcome(i)``, where the site gives it, makes record ``i``'s Outcome on demand: its
    status and message as the run has them, its outputs and accesses (what the per-record
    form, ``Site.run``, returns; None: an Outcome of the status and message alone)."""

    status: np.ndarray
    messages: dict[int, str]
    checks: CheckList
    req_ids: Sequence[Sequence[str] | None]
    base: BatchRun | None = None
    inherited: np.ndarray | None = None
    outcome: Callable[[int], Outcome] | None = None

    def whole(self) -> BatchRun:
        """The same run with every record's results its own (``base`` resolved): the
        inherited records' status, messages and checks taken from ``base``."""
        if self.base is None:
            return self
        base, inherited = self.base.whole(), self.inherited_mask()
        status = np.where(inherited, base.status, self.status).astype(self.status.dtype)
        messages = per_record(base.messages, self.messages, inherited)
        checks = Checks.concat([base.checks.restricted(inherited),
                                self.checks.restricted(~inherited)])
        outcome = None
        if base.outcome is not None and self.outcome is not None:
            own, inherited_outcome = self.outcome, base.outcome
            outcome = lambda i: (inherited_outcome if inherited[i] else own)(i)  # noqa: E731
        return BatchRun(status, messages, checks, self.req_ids, outcome=outcome)

    def inherited_mask(self) -> np.ndarray:
        """``inherited`` as a bool per record (none when not given)."""
        if self.inherited is None:
            return np.zeros(len(self.status), dtype=bool)
        return np.asarray(self.inherited, dtype=bool)


def in_range_extremes(tensor: str, record: np.ndarray, low: np.ndarray, high: np.ndarray,
                      upper: np.ndarray) -> Checks:
    """Checks of values that all lie in ``[0, upper)``, given per group by its smallest
    ``low`` and largest ``high`` value (one group per ``record``, increasing): two entries per
    group, so the judge reads the checked ranges (min, max, 0, upper) and the (empty)
    findings that every value would give, without a pass over the values.

    Raises:
        ValueError: when some group leaves ``[0, upper)`` (its findings would be lost).
    """
    low, high, upper = _i64(low), _i64(high), _i64(upper)
    if len(low) and (int(low.min()) < 0 or bool((high >= upper).any()) or
                     bool((low > high).any())):
        raise ValueError(f"{tensor}: in_range_extremes given values outside [0, upper)")
    value = np.stack([low, high], axis=1).reshape(-1)
    n = len(value)
    unknown = np.broadcast_to(np.int64(-1), (n,))
    return Checks(tensor, 0, np.repeat(_i64(record), 2), unknown, unknown, value,
                  np.broadcast_to(np.int64(0), (n,)), np.repeat(upper, 2),
                  np.arange(0, n, 2, dtype=np.int64))
