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

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

OUT_OF_BOUNDS, MISATTRIBUTED = "out_of_bounds", "misattributed"
KINDS = (OUT_OF_BOUNDS, MISATTRIBUTED)
_NO_BOUND = np.iinfo(np.int64).min  # ``lower``/``upper`` of an entry without bounds
Range = tuple[str, int, int, int, int]


def _i64(values: Any) -> np.ndarray:
    return np.asarray(values, dtype=np.int64).reshape(-1)


@dataclass
class Checks:
    """Checked values of a batch as columns (equal lengths; ``row``/``element`` -1 when
    unknown). Entries of one group (one observation: a record's checked tensor) are adjacent;
    ``group`` numbers them in order. ``kind`` indexes :data:`KINDS`: ``out_of_bounds`` entries
    are findings only when outside ``[lower, upper)``, ``misattributed`` ones always are and
    carry no range."""

    record: np.ndarray
    row: np.ndarray
    element: np.ndarray
    tensor: list[str]
    tensor_code: np.ndarray
    kind: np.ndarray
    value: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    group: np.ndarray

    @classmethod
    def empty(cls) -> Checks:
        """No entry."""
        zero = np.zeros(0, dtype=np.int64)
        return cls(zero, zero, zero, [], zero, np.zeros(0, np.int8), zero, zero, zero, zero)

    @classmethod
    def of(cls, tensor: str, record: Any, row: Any, element: Any, value: Any, lower: Any,
           upper: Any, kind: str = OUT_OF_BOUNDS) -> Checks:
        """Entries of one tensor, grouped per record (``record`` must be non-decreasing);
        scalars broadcast. ``row``/``element`` None: unknown; ``lower`` None: no range (a
        ``misattributed`` entry only)."""
        value = _i64(value)
        n = len(value)
        record = np.broadcast_to(_i64(record), (n,)) if np.ndim(record) == 0 else _i64(record)

        def col(x: Any, fill: int = -1) -> np.ndarray:
            return np.full(n, fill, np.int64) if x is None else np.broadcast_to(
                _i64(x) if np.ndim(x) else np.int64(x), (n,)).astype(np.int64)

        no_bound = kind != OUT_OF_BOUNDS and lower is None

        starts = np.flatnonzero(np.diff(record, prepend=-1)) if n else np.zeros(0, np.int64)
        group = np.zeros(n, dtype=np.int64)
        group[starts[1:]] = 1
        return cls(col(record), col(row), col(element), [tensor], np.zeros(n, np.int64),
                   np.full(n, KINDS.index(kind), np.int8), value,
                   col(None, _NO_BOUND) if no_bound else col(lower),
                   col(None, _NO_BOUND) if no_bound else col(upper), np.cumsum(group))

    @staticmethod
    def concat(parts: Sequence[Checks | CheckList]) -> CheckList:
        """The entries of ``parts`` as one list (each record's groups in the order of
        ``parts``); nothing is copied."""
        flat: list[Checks] = []
        for part in parts:
            flat += part.parts if isinstance(part, CheckList) else [part]
        return CheckList([p for p in flat if len(p.value)])

    def bad(self) -> np.ndarray:
        """Positions of the entries that are findings."""
        outside = (self.value < self.lower) | (self.value >= self.upper)
        return np.flatnonzero((self.kind != 0) | outside)

    def findings(self, req_ids: Sequence[Sequence[str] | None] | None = None
                 ) -> dict[int, list[dict[str, Any]]]:
        """Finding dicts per record (only records with some), in entry order. ``req_ids``:
        the request ids of each record's rows (None where unknown)."""
        found: dict[int, list[dict[str, Any]]] = {}
        names = self.tensor
        columns = (self.record, self.row, self.element, self.tensor_code, self.kind,
                   self.value, self.lower, self.upper)
        for rec, row, element, code, kind, value, lower, upper in zip(
                *(c[self.bad()].tolist() for c in columns), strict=True):
            ids = None if req_ids is None else req_ids[rec]
            no_bound = lower == _NO_BOUND
            found.setdefault(rec, []).append({
                "row": None if row < 0 else row, "element": None if element < 0 else element,
                "tensor": names[code], "kind": KINDS[kind], "value": value,
                "lower": None if no_bound else lower, "upper": None if no_bound else upper,
                "req_id": None if ids is None or row < 0 or row >= len(ids) else ids[row]})
        return found

    def ranges(self) -> tuple[np.ndarray, list[str], np.ndarray]:
        """The checked ranges: per group with bounds, its record, tensor and
        ``(min, max, lower, upper)`` (int64, one row per group)."""
        mask = self.kind == 0
        value, group = self.value[mask], self.group[mask]
        if not len(value):
            return np.zeros(0, np.int64), [], np.zeros((0, 4), np.int64)
        starts = np.flatnonzero(np.diff(group, prepend=-1))
        first = np.flatnonzero(mask)[starts]
        numbers = np.stack([np.minimum.reduceat(value, starts),
                            np.maximum.reduceat(value, starts),
                            self.lower[first], self.upper[first]], axis=1)
        tensors = [self.tensor[c] for c in self.tensor_code[first].tolist()]
        return self.record[first], tensors, numbers


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

    def ranges(self) -> tuple[np.ndarray, list[str], np.ndarray]:
        """The checked ranges of every part, ordered by record (parts in order within one)."""
        got = [part.ranges() for part in self.parts]
        if not got:
            return np.zeros(0, np.int64), [], np.zeros((0, 4), np.int64)
        rec = np.concatenate([g[0] for g in got])
        order = np.argsort(rec, kind="stable")
        tensors = [t for g in got for t in g[1]]
        return rec[order], [tensors[i] for i in order.tolist()], np.concatenate(
            [g[2] for g in got])[order]

    def renumbered(self, positions: np.ndarray) -> CheckList:
        """The same checks with record ``i`` renamed ``positions[i]``."""
        return CheckList([replace(p, record=positions[p.record]) for p in self.parts])


def _code(names: list[str], name: str) -> int:
    if name not in names:
        names.append(name)
    return names.index(name)


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
    checked value (:class:`Checks`) and each record's request ids (None where unknown)."""

    status: np.ndarray
    messages: dict[int, str]
    checks: CheckList
    req_ids: list[Sequence[str] | None]
