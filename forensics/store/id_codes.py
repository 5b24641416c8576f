"""Request-id lists of a run of rows as integer codes: equal strings get equal codes.

The replay's rules compare request ids through ``RunColumns.str_codes``. One Arrow dictionary
encoding codes the run's id lists. A list column that repeats another column's previous row
(:data:`FOLLOWS`: a record's ``prev_req_ids`` are the previous step's ``req_ids``) takes the
codes of the row it repeats wherever it is that row byte for byte: whole runs of rows are
compared at once (their offsets and bytes, a few numpy calls), and only the rows that differ
are encoded. Codes stay exact: equality is decided by bytes or by the encoding, never a hash.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from forensics.store import arrow_numpy as an

#: a list column -> the column whose previous row it usually repeats (speed only: any row
#: that is not such a repeat is encoded like the others)
FOLLOWS = {"prev_req_ids": "req_ids"}
#: the most runs of rows compared when looking for a follower's repeated rows
_COMPARISONS = 64


@dataclass(frozen=True)
class StrLists:
    """A validated ``list<string>`` column as numpy views of its buffers (made once per
    batch; every run of its rows reads it)."""

    items: pa.Array                # the strings of every row end to end (the list's child)
    offsets: np.ndarray            # per row, where its items start in ``items`` (rows + 1)
    present: np.ndarray            # per row, not null
    bounds: np.ndarray             # per item, where its bytes start in ``data`` (items + 1)
    data: np.ndarray               # the strings' bytes
    item_valid: np.ndarray | None  # per item, not null (None: no null item)

    @classmethod
    def of(cls, column: pa.Array) -> StrLists:
        """The views of ``column`` (a validated ``list<string>`` array)."""
        items = column.values
        bounds, data = an.string_parts(items)
        return cls(items, an.list_offsets(column), an.valid_mask(column), bounds, data,
                   an.valid_mask(items) if items.null_count else None)

    def slice(self, lo: int, hi: int) -> pa.Array:
        """The items of rows ``lo:hi``."""
        first = int(self.offsets[lo])
        return self.items.slice(first, int(self.offsets[hi]) - first)


def str_codes(columns: Mapping[str, StrLists], start: int, stop: int
              ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Rows ``start:stop`` of every column of ``columns`` as codes: per column, the items of
    its present rows end to end as int64 codes (equal strings, equal codes, across the
    columns; a null item -1) and each row's count of items (0 for a null row)."""
    following = {name: FOLLOWS[name] for name in columns if FOLLOWS.get(name) in columns}
    order = sorted(columns, key=lambda name: name in following)  # bases first
    runs: dict[str, list[tuple[bool, int, int]]] = {}
    for name in order:
        if name in following:
            runs[name] = _repeated_runs(columns[name], columns[following[name]], start, stop)
        else:  # a followed column from the row that its follower's first row repeats
            first = max(start - 1, 0) if name in following.values() else start
            runs[name] = [(False, first, stop)]
    coded = iter(_encoded([columns[name].slice(lo, hi) for name in order
                           for same, lo, hi in runs[name] if not same]))
    codes: dict[str, np.ndarray] = {}
    for name in order:
        base = following.get(name)
        codes[name] = _assembled(columns[name], runs[name], coded,
                                 None if base is None else columns[base],
                                 None if base is None else (runs[base][0][1], codes[base]))
    return {name: _present_only(columns[name], codes[name], runs[name][0][1], start, stop)
            for name in columns}


def _repeated_runs(follower: StrLists, base: StrLists, start: int, stop: int
                   ) -> list[tuple[bool, int, int]]:
    """Rows ``start:stop`` of ``follower`` cut into runs ``(same, lo, hi)``: ``same`` where
    the run's items are byte for byte those of ``base``'s rows before. A run that differs is
    halved until its differing rows stand alone, within :data:`_COMPARISONS` comparisons."""
    runs: list[tuple[bool, int, int]] = [] if start else [(False, 0, min(1, stop))]
    pending, budget = [(max(start, 1), stop)], _COMPARISONS
    while pending:
        lo, hi = pending.pop()
        if lo >= hi:
            continue
        same = budget > 0 and _same_rows(follower, base, lo, hi)
        budget -= 1
        if same or hi - lo == 1 or budget <= 0:
            runs.append((same, lo, hi))
        else:
            middle = (lo + hi) // 2
            pending += [(middle, hi), (lo, middle)]  # popped in row order
    return sorted(runs, key=lambda run: run[1]) if runs else [(False, start, stop)]


def _same_rows(follower: StrLists, base: StrLists, lo: int, hi: int) -> bool:
    """Whether the items of rows ``lo:hi`` of ``follower`` are those of rows ``lo - 1:hi - 1``
    of ``base`` byte for byte: as many items, of the same lengths and bytes, none null (the
    codes are copied item by item; a null row's items, should its offsets span some, are
    dropped afterwards)."""
    first_f, first_b = int(follower.offsets[lo]), int(base.offsets[lo - 1])
    count = int(follower.offsets[hi]) - first_f
    if count != int(base.offsets[hi - 1]) - first_b:
        return False
    if not (_all_valid(follower, first_f, count) and _all_valid(base, first_b, count)):
        return False
    bytes_f = follower.bounds[first_f:first_f + count + 1]
    bytes_b = base.bounds[first_b:first_b + count + 1]
    if not np.array_equal(bytes_f - bytes_f[0], bytes_b - bytes_b[0]):
        return False
    return np.array_equal(follower.data[bytes_f[0]:bytes_f[-1]],
                          base.data[bytes_b[0]:bytes_b[-1]])


def _all_valid(lists: StrLists, first: int, count: int) -> bool:
    """Whether items ``first:first + count`` of ``lists`` are all non-null."""
    return lists.item_valid is None or bool(lists.item_valid[first:first + count].all())


def _encoded(pieces: list[pa.Array]) -> list[np.ndarray]:
    """Each piece's strings as codes of one dictionary encoding (a null item -1)."""
    if not pieces:
        return []
    joined = pieces[0] if len(pieces) == 1 else pa.concat_arrays(pieces)
    encoded = joined.dictionary_encode()
    codes = an.values(encoded.indices).astype(np.int64)
    if encoded.indices.null_count:
        codes = np.where(an.valid_mask(encoded.indices), codes, -1)
    cuts = np.cumsum([len(piece) for piece in pieces])[:-1]
    return list(np.split(codes, cuts))


def _assembled(lists: StrLists, runs: list[tuple[bool, int, int]], coded: Iterator[np.ndarray],
               base: StrLists | None, base_codes: tuple[int, np.ndarray] | None) -> np.ndarray:
    """The codes of the items of ``runs`` (rows in order, from row ``runs[0][1]``): the next
    piece of ``coded`` for a run that was encoded; for a repeated run, the codes of the rows
    it repeats in ``base_codes`` (the base's first coded row and its codes from there)."""
    if len(runs) == 1 and not runs[0][0]:
        return next(coded)
    origin = int(lists.offsets[runs[0][1]])
    out = np.empty(int(lists.offsets[runs[-1][2]]) - origin, dtype=np.int64)
    for same, lo, hi in runs:
        at, end = int(lists.offsets[lo]) - origin, int(lists.offsets[hi]) - origin
        if not same:
            out[at:end] = next(coded)
            continue
        assert base is not None and base_codes is not None  # a repeated run has its base
        first, codes = base_codes
        copied = int(base.offsets[lo - 1] - base.offsets[first])
        out[at:end] = codes[copied:copied + end - at]
    return out


def _present_only(lists: StrLists, codes: np.ndarray, first: int, start: int, stop: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``codes`` (the items of rows ``first:stop``) cut to rows ``start:stop``, less the items
    that a null row's offsets may span, and each row's count (0 for a null row)."""
    codes = codes[int(lists.offsets[start] - lists.offsets[first]):]
    counts = np.diff(lists.offsets[start:stop + 1]).astype(np.int64)
    present = lists.present[start:stop]
    if not present.all():
        codes = codes[np.repeat(present, counts)]
        counts = counts * present
    return codes, counts
