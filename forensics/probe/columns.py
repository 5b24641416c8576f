"""The probe's records written column-wise: one Arrow record batch per site and rank per flush.

Records whose every value came from the probe's joined copies (:class:`~forensics.probe.copy.
Joined`: integer arrays of the site's schema, nothing read from vLLM's Python objects) need no
per-record work: their fields are stacked into Arrow columns in a few numpy calls per field,
and the site's cross-field rules run once over the whole block
(:func:`forensics.validate.screen_batch`, the same rules the reader applies). Only a record the
screen flags is built as a :class:`~forensics.records.Record` and checked one by one
(``validate_record``, whose message names the field); a record that fails is dropped and
reported. The batches are those ``CaptureWriter.append(validated=True)`` then ``flush()`` would
write for the same records (tested byte for byte).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import chain, groupby
from typing import Any

import numpy as np
import pyarrow as pa

from forensics.probe.copy import Deferred, PendingRecord
from forensics.records import Record
from forensics.screening import as_int64
from forensics.sites._common import RecordColumns
from forensics.store import arrow_numpy as an
from forensics.store.arrow_codec import SHAPE_SUFFIX, ColumnSig, arrow_type, columns_of
from forensics.validate import screen_batch, site_field_specs, validate_record

#: called with a pending record that failed its checks and the error
Reject = Callable[[PendingRecord, Exception], None]


def columnar(pending: PendingRecord) -> bool:
    """True when every value of ``pending`` is in its joined copies, each joined as one
    buffer (no other field)."""
    return _columnar_key(_key(pending))


def _key(pending: PendingRecord) -> tuple[Any, ...] | None:
    """What records of one block share: each joined copy's field names and plan (None for a
    record with other fields)."""
    if pending.fields:
        return None
    return tuple([(names, joined.plan) for names, joined in pending.joined])


def _columnar_key(key: tuple[Any, ...] | None) -> bool:
    """True for the :func:`_key` of a :func:`columnar` record (a copy was joined as one
    buffer exactly when it has a plan: see :meth:`~forensics.probe.copy.Copier.join`)."""
    return key is not None and bool(key) and all(plan is not None for _, plan in key)


def runs(ready: Sequence[PendingRecord]) -> tuple[list[Block], list[PendingRecord]]:
    """The records written column-wise, as blocks (records of one site and rank with the same
    fields and dtypes, consecutive), and the others, in order. A site and rank with any
    record that is not :func:`columnar` or holds a tensor of several dimensions keeps all its
    records per record, so a segment keeps the order of the calls.

    The Python work per record is a few attribute reads: grouping, the checks and the
    splitting run once per block."""
    by_site: dict[tuple[str, int], list[PendingRecord]] = {}
    for pending in ready:
        by_site.setdefault((pending.site, pending.rank), []).append(pending)
    blocks: list[Block] = []
    others: list[PendingRecord] = []
    for (site, rank), pendings in by_site.items():
        keys = [_key(p) for p in pendings]
        try:
            if not all(map(_columnar_key, set(keys))):
                raise NotColumnar(site)
            blocks.extend(_blocks(site, rank, pendings, keys))
        except NotColumnar:
            others.extend(pendings)
    if len(by_site) > 1:
        others.sort(key=lambda p: p.seq)
    return blocks, others


def _blocks(site: str, rank: int, pendings: list[PendingRecord],
            keys: list[Any]) -> list[Block]:
    """Consecutive runs of ``pendings`` with the same ``keys`` (joined fields and dtypes), as
    blocks."""
    out, start = [], 0
    for _, same in groupby(keys):
        end = start + sum(1 for _ in same)
        out.append(Block(site, rank, pendings[start:end]))
        start = end
    return out


class NotColumnar(Exception):
    """Records that are written one by one (a tensor of several dimensions, another field)."""


class Block:
    """Records of one site and rank whose joined copies share names and dtypes, every tensor
    of one dimension: each field's values end to end and each record's count, taken from the
    joined buffers in a few numpy calls (no array per record).

    Raises NotColumnar when some tensor has several dimensions (or none)."""

    def __init__(self, site: str, rank: int, pendings: list[PendingRecord]) -> None:
        self.site, self.rank, self.pendings = site, rank, pendings
        self.rows = len(pendings)
        self.fields: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for j, (names, joined) in enumerate(pendings[0].joined):
            assert joined.plan is not None
            self._split(names, joined.plan, [p.joined[j][1] for p in pendings])

    def _split(self, names: tuple[str, ...], plan: Any, copies: list[Any]) -> None:
        flat = _joined_values(copies)
        sizes = _lengths(copies, self.rows, len(names), self.site)
        units = sizes * np.array(plan.ratios, dtype=np.int64)  # carrier items per value
        if bool((units == units[0]).all()):  # every record alike: one 2-D slice per field
            table = flat.reshape(self.rows, -1)
            ends = np.cumsum(units[0]).tolist()
            parts = [table[:, end - int(units[0, f]):end].reshape(-1)
                     for f, end in enumerate(ends)]
        else:  # one slice per record and field, joined: no index arrays
            bounds = [0, *np.cumsum(units.reshape(-1)).tolist()]
            width = len(names)
            parts = [np.concatenate([flat[bounds[i]:bounds[i + 1]]
                                     for i in range(f, self.rows * width, width)])
                     for f in range(width)]
        for f, name in enumerate(names):
            self.fields[name] = (parts[f].view(plan.dtypes[f]), sizes[:, f])

    def without(self, drop: list[int]) -> Block | None:
        """This block without its records at positions ``drop`` (None if none is left)."""
        keep = [p for i, p in enumerate(self.pendings) if i not in set(drop)]
        return Block(self.site, self.rank, keep) if keep else None

    # -- the BatchColumns that screen_batch reads (forensics.sites._common) ---------------
    def present(self, name: str) -> np.ndarray:
        return np.full(self.rows, name in self.fields, dtype=bool)

    def length(self, name: str) -> np.ndarray:
        return self.fields[name][1] if name in self.fields else _zeros(self.rows)

    def ndim(self, name: str) -> np.ndarray:
        return np.full(self.rows, int(name in self.fields), dtype=np.int64)

    def ints(self, name: str) -> np.ndarray:
        return _zeros(self.rows)  # a block holds tensors only

    def flat(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        if name not in self.fields:
            return _zeros(0), _zeros(self.rows)
        values, counts = self.fields[name]
        return as_int64(values, name), counts

    def inner_lengths(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        return _zeros(0), _zeros(self.rows)

    def values(self, name: str) -> list[Any]:
        if name not in self.fields:
            return [None] * self.rows
        values, counts = self.fields[name]
        return np.split(values, np.cumsum(counts)[:-1])


def _zeros(n: int) -> np.ndarray:
    return np.zeros(n, dtype=np.int64)


def _joined_values(copies: list[Any]) -> np.ndarray:
    """The joined buffers of ``copies`` (:class:`~forensics.probe.copy.Joined`) end to end:
    one ``np.concatenate`` of the writer process's numpy buffers, else one ``torch.cat``,
    which works without the interpreter lock."""
    datas = [c.data for c in copies]
    if type(datas[0]) is np.ndarray:
        return np.concatenate(datas)
    import torch

    if Deferred in set(map(type, datas)):
        datas = [d.buffer if type(d) is Deferred else d for d in datas]
    return torch.cat(datas).detach().numpy()


def _lengths(copies: list[Any], rows: int, width: int, site: str) -> np.ndarray:
    """Each record's tensor lengths, ``rows`` by ``width`` (NotColumnar unless every tensor
    is known to be one-dimensional: ``Joined.flat``)."""
    if not all([c.flat for c in copies]):
        raise NotColumnar(site)
    shapes = chain.from_iterable(chain.from_iterable([c.shapes for c in copies]))
    return np.fromiter(shapes, np.int64, rows * width).reshape(rows, width)


def screened(block: Block, reject: Reject) -> Block | None:
    """``block`` without the records failing their checks: the columnar screen first, then
    ``validate_record`` on the records it flags (those that fail go to ``reject``); None when
    none is left."""
    specs = site_field_specs(block.site)
    if any(name not in specs or specs[name].kind != "tensor" for name in block.fields):
        flagged = np.ones(block.rows, dtype=bool)  # a field the schema lacks: checked singly
    else:
        flagged = screen_batch(block.site, block)
    drop = []
    for i in np.flatnonzero(flagged).tolist():
        pending = block.pendings[i]
        try:
            validate_record(pending.to_record(), f"probe record of step {pending.step}",
                            typed=True)
        except Exception as exc:
            reject(pending, exc)
            drop.append(i)
    return block.without(drop) if drop else block


def write_run(writer: Any, block: Block) -> None:
    """Write ``block`` (checked: see :func:`screened`) as one record batch of ``writer``.

    Raises what ``writer.write_columns`` raises: CaptureFormatError when the segment's
    schema cannot take the columns, OSError from the disk."""
    columns, arrays = encode_block(block)
    writer.write_columns(block.site, block.rank, columns, arrays)


def encode_block(block: Block) -> tuple[dict[str, ColumnSig], dict[str, pa.Array]]:
    """The column signature and Arrow columns of ``block``, as ``encode_batch`` encodes the
    same records (one-dimensional tensors: each shape is the value count)."""
    columns = columns_of(block.site, {name: values for name, (values, _) in
                                      block.fields.items()})
    count = block.rows
    arrays: dict[str, pa.Array] = {
        "step": an.primitive(np.fromiter((p.step for p in block.pendings), np.int64, count)),
        "rank": an.primitive(np.full(count, block.rank, dtype=np.int64)),
        "summary": an.primitive(np.zeros(count, dtype=bool)),
    }
    ones = np.ones(count, dtype=np.int64)
    for name, (_, dtype) in columns.items():
        values, sizes = block.fields[name]
        arrays[name] = an.lists(sizes, an.primitive(values), None, arrow_type("tensor", dtype))
        arrays[name + SHAPE_SUFFIX] = an.lists(ones, an.primitive(sizes), None,
                                               pa.list_(pa.int64()))
    return columns, arrays


def unflagged(records: Sequence[tuple[Record, Any]]) -> set[int]:
    """Positions in ``records`` ((record, value signature) pairs of trusted records) that the
    columnar screen of their site passes, screened per site and signature: each passes
    ``validate_record(typed=True)``; the others need it run per record."""
    groups: dict[tuple[str, Any], list[int]] = {}
    for i, (record, signature) in enumerate(records):
        groups.setdefault((record.site, signature), []).append(i)
    passed: set[int] = set()
    for (site, _), positions in groups.items():
        flagged = screen_batch(site, RecordColumns([records[i][0] for i in positions]))
        passed.update(i for i, bad in zip(positions, flagged.tolist(), strict=True) if not bad)
    return passed
