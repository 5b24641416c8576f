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
from dataclasses import dataclass
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
        scalars broadcast. ``row``/``element`` None: unknown."""
        value = _i64(value)
        n = len(value)
        record = np.broadcast_to(_i64(record), (n,)) if np.ndim(record) == 0 else _i64(record)

        def col(x: Any, fill: int = -1) -> np.ndarray:
            return np.full(n, fill, np.int64) if x is None else np.broadcast_to(
                _i64(x) if np.ndim(x) else np.int64(x), (n,)).astype(np.int64)

        starts = np.flatnonzero(np.diff(record, prepend=-1)) if n else np.zeros(0, np.int64)
        group = np.zeros(n, dtype=np.int64)
        group[starts[1:]] = 1
        no_bound = kind != OUT_OF_BOUNDS
        return cls(col(record), col(row), col(element), [tensor], np.zeros(n, np.int64),
                   np.full(n, KINDS.index(kind), np.int8), value,
                   col(None, _NO_BOUND) if no_bound else col(lower),
                   col(None, _NO_BOUND) if no_bound else col(upper), np.cumsum(group))

    @classmethod
    def concat(cls, parts: Sequence[Checks]) -> Checks:
        """One table of ``parts`` (entries regrouped by record, keeping each record's groups in
        the order of ``parts``)."""
        parts = [p for p in parts if len(p.value)]
        if not parts:
            return cls.empty()
        names: list[str] = []
        codes, groups = [], []
        next_group = 0
        for part in parts:
            remap = np.array([_code(names, name) for name in part.tensor], dtype=np.int64)
            codes.append(remap[part.tensor_code])
            groups.append(part.group + next_group)
            next_group += int(part.group[-1]) + 1
        cols = {f: np.concatenate([getattr(p, f) for p in parts])
                for f in ("record", "row", "element", "kind", "value", "lower", "upper")}
        order = np.argsort(cols["record"], kind="stable")
        group = np.concatenate(groups)[order]
        renum = np.cumsum(np.diff(group, prepend=group[0] - 1) != 0) - 1
        return cls(**{f: c[order] for f, c in cols.items()}, tensor=names,
                   tensor_code=np.concatenate(codes)[order], group=renum)

    def select(self, keep: np.ndarray) -> Checks:
        """The entries of the records where ``keep`` (a mask over the batch) holds."""
        mask = keep[self.record] if len(self.record) else np.zeros(0, dtype=bool)
        group = self.group[mask]
        renum = (np.cumsum(np.diff(group, prepend=group[0] - 1) != 0) - 1) if len(group) \
            else group
        return Checks(self.record[mask], self.row[mask], self.element[mask], self.tensor,
                      self.tensor_code[mask], self.kind[mask], self.value[mask],
                      self.lower[mask], self.upper[mask], renum)

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
        ranged = self.select_bounded()
        if not len(ranged.value):
            return np.zeros(0, np.int64), [], np.zeros((0, 4), np.int64)
        starts = np.flatnonzero(np.diff(ranged.group, prepend=-1))
        numbers = np.stack([np.minimum.reduceat(ranged.value, starts),
                            np.maximum.reduceat(ranged.value, starts),
                            ranged.lower[starts], ranged.upper[starts]], axis=1)
        tensors = [ranged.tensor[c] for c in ranged.tensor_code[starts].tolist()]
        return ranged.record[starts], tensors, numbers

    def select_bounded(self) -> Checks:
        """The ``out_of_bounds`` entries only (those with a range)."""
        mask = self.kind == 0
        if mask.all():
            return self
        return Checks(self.record[mask], self.row[mask], self.element[mask], self.tensor,
                      self.tensor_code[mask], self.kind[mask], self.value[mask],
                      self.lower[mask], self.upper[mask], self.group[mask])


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
    checks: Checks
    req_ids: list[Sequence[str] | None]
