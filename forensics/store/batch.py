"""A validated record batch of one segment, decoded row by row into zero-copy records."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from forensics.errors import CaptureFormatError
from forensics.records import Record
from forensics.store import arrow_numpy as an
from forensics.store.arrow_codec import SHAPE_SUFFIX, ColumnSig
from forensics.validate import validate_record

_ABSENT = object()


class BatchView:
    """One record batch after ``validate(full=True)`` and the store's own checks.

    Tensors come out as read-only numpy views of the batch's buffers (the segment's memory map).
    """

    def __init__(self, batch: pa.RecordBatch, columns: dict[str, ColumnSig], site: str,
                 rank: int, where: str) -> None:
        self.batch = batch
        self.columns = columns
        self.site = site
        self.where = where
        self.steps = self._base(batch, rank)
        self.summary = an.bools(batch.column("summary"))
        self._tensors: dict[str, tuple[np.ndarray, ...]] = {}
        self._ints: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._valid: dict[str, np.ndarray] = {}

    def _base(self, batch: pa.RecordBatch, rank: int) -> np.ndarray:
        for name in ("step", "rank", "summary"):
            if batch.column(name).null_count:
                raise CaptureFormatError(f"{self.where}: column {name!r} has nulls")
        steps = an.values(batch.column("step"))
        if len(steps) and steps.min() < 0:
            raise CaptureFormatError(f"{self.where}: negative step {int(steps.min())}")
        ranks = an.values(batch.column("rank"))
        self.rank = rank
        if len(ranks) and not (ranks == rank).all():
            raise CaptureFormatError(f"{self.where}: rank column differs from the segment's "
                                     f"rank {rank}")
        return steps

    def __len__(self) -> int:
        return self.batch.num_rows

    def record(self, row: int) -> Record:
        """Decode row ``row`` and validate it against its site's schema.

        Raises CaptureFormatError (or UnknownSiteError) when the row is malformed.
        """
        fields: dict[str, Any] = {}
        where = f"{self.where}, row {row}"
        for name, (kind, _dtype) in self.columns.items():
            value = self._value(name, kind, row, where)
            if value is not _ABSENT:
                fields[name] = value
        record = Record(self.site, int(self.steps[row]), self.rank, fields,
                        bool(self.summary[row]))
        return validate_record(record, where)

    def _value(self, name: str, kind: str, row: int, where: str) -> Any:
        if kind == "tensor":
            return self._tensor(name, row, where)
        if kind == "int":
            values, valid = self._int(name)
            return int(values[row]) if valid[row] else _ABSENT
        column = self.batch.column(name)
        if name not in self._valid:
            self._valid[name] = an.valid_mask(column)
        if not self._valid[name][row]:
            return _ABSENT
        value = column[row].as_py()
        if kind == "index_map":
            keys = [k for k, _ in value]
            if len(set(keys)) != len(keys):
                raise CaptureFormatError(f"{where}: field {name!r} repeats a key")
            return dict(value)
        return value

    def _int(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        if name not in self._ints:
            column = self.batch.column(name)
            self._ints[name] = (an.values(column), an.valid_mask(column))
        return self._ints[name]

    def _tensor(self, name: str, row: int, where: str) -> Any:
        if name not in self._tensors:
            self._tensors[name] = (*_list_parts(self.batch.column(name), where, name),
                                   *_list_parts(self.batch.column(name + SHAPE_SUFFIX), where,
                                                name + SHAPE_SUFFIX))
        flat, offsets, valid, shape_flat, shape_offsets, shape_valid = self._tensors[name]
        if not valid[row]:
            return _ABSENT
        if not shape_valid[row]:
            raise CaptureFormatError(f"{where}: tensor {name!r} has values but no shape")
        shape = tuple(int(s) for s in shape_flat[shape_offsets[row]:shape_offsets[row + 1]])
        start, stop = int(offsets[row]), int(offsets[row + 1])
        count = 1
        for size in shape:
            count *= size
        if not shape or min(shape) < 0 or count != stop - start:
            raise CaptureFormatError(f"{where}: tensor {name!r} has {stop - start} values but "
                                     f"shape {shape}")
        return flat[start:stop].reshape(shape)


def _list_parts(column: pa.Array, where: str, name: str) -> tuple[np.ndarray, ...]:
    values = column.values
    if values.null_count:
        raise CaptureFormatError(f"{where}: column {name!r} has null elements inside a tensor")
    flat = an.values(values)
    offsets = an.list_offsets(column)
    valid = an.valid_mask(column)
    if len(offsets) != len(column) + 1 or (len(offsets) and (
            offsets[0] < 0 or offsets[-1] > len(flat) or (np.diff(offsets) < 0).any())):
        raise CaptureFormatError(f"{where}: column {name!r} has inconsistent list offsets")
    return flat, offsets, valid
