"""A validated record batch of one segment, decoded row by row into zero-copy records."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from forensics.collector import collector_paused
from forensics.errors import CaptureFormatError, reason
from forensics.records import Record
from forensics.screening import as_exact, as_int64
from forensics.store import arrow_numpy as an
from forensics.store import id_codes
from forensics.store.arrow_codec import SHAPE_SUFFIX, ColumnSig
from forensics.validate import field_specs, most_items, screen_batch, validate_record

_ABSENT = object()


class BatchView:
    """One record batch after the structural ``validate()`` and the store's own checks.

    Each column gets the full ``validate(full=True)`` when first read (:meth:`column`), so a
    reader pays only for the columns it uses. Tensors come out as read-only numpy views of the
    batch's buffers (the segment's memory map).
    """

    def __init__(self, batch: pa.RecordBatch, columns: dict[str, ColumnSig], site: str,
                 rank: int, where: str) -> None:
        self.batch = batch
        self.columns = columns
        self.site = site
        self.where = where
        self._arrays: dict[str, pa.Array] = {}
        self.steps = self._base(batch, rank)
        self.summary = an.bools(self.column("summary"))
        self._tensors: dict[str, tuple[np.ndarray, ...]] = {}
        self._ints: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._valid: dict[str, np.ndarray] = {}
        self._bulk_checked: bool | None = None
        self._str_lists: dict[str, id_codes.StrLists] | None = None

    def column(self, name: str) -> pa.Array:
        """The column ``name``, fully validated on first use (then kept: looking a column up
        by name costs more than most reads of it; a ``list<string>`` column of ASCII strings
        by :func:`~forensics.store.arrow_numpy.ascii_string_lists`, which checks what Arrow's
        full validation checks, in less time). Raises CaptureFormatError."""
        column = self._arrays.get(name)
        if column is None:
            column = self.batch.column(name)
            try:
                if not an.ascii_string_lists(column):  # request ids: shown by numpy
                    column.validate(full=True)
            except pa.ArrowException as exc:
                raise CaptureFormatError(f"{self.where}: column {name!r} is malformed: "
                                         f"{reason(exc)}") from None
            self._arrays[name] = column
        return column

    def _base(self, batch: pa.RecordBatch, rank: int) -> np.ndarray:
        for name in ("step", "rank", "summary"):
            if self.column(name).null_count:
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

    def records(self, start: int = 0, stop: int | None = None) -> list[Record]:
        """Decode rows ``start`` to ``stop`` (default: all) at once, column by column.

        Returns the same records as :meth:`record` row by row (fresh objects each call), and
        raises the same errors: a batch the bulk path cannot vouch for (summary rows, a column
        whose kind is not its field's, null items inside lists) is decoded row by row. The
        schema and site checks run columnar over the rows (``screen_batch``); only the records
        that screen flags go through ``validate_record``, which names the record and field.
        """
        stop = len(self) if stop is None else min(stop, len(self))
        if not self._bulk_ok():
            return [self.record(row) for row in range(start, stop)]
        with collector_paused():
            return self._bulk_records(start, stop)

    def _bulk_records(self, start: int, stop: int) -> list[Record]:
        decoded = {name: self._bulk(name, kind, start, stop)
                   for name, (kind, _dtype) in self.columns.items()}
        flagged = screen_batch(self.site, _Decoded(self, start, stop, decoded)).tolist()
        names = list(decoded)
        complete = all(self._valid_mask(name)[start:stop].all() for name in names)
        rows = zip(*decoded.values(), strict=True) if names else itertools.repeat((), stop - start)
        out = []
        for row, step, values, check in zip(range(start, stop), self.steps[start:stop].tolist(),
                                            rows, flagged, strict=True):
            fields = dict(zip(names, values, strict=True)) if complete else {
                name: value for name, value in zip(names, values, strict=True)
                if value is not _ABSENT}
            record = Record(self.site, step, self.rank, fields, False)
            if check:
                validate_record(record, f"{self.where}, row {row}", typed=True)
            out.append(record)
        return out

    def screened(self, start: int = 0, stop: int | None = None) -> _Decoded | None:
        """Rows ``start`` to ``stop`` (default: all) as columns for a columnar reader (the
        replay), validated as :meth:`records` validates them but without decoding a record:
        the rows the columnar screen flags are decoded and checked, raising the same errors.
        None when the batch cannot be read in bulk (read its records instead)."""
        stop = len(self) if stop is None else min(stop, len(self))
        if not self._bulk_ok():
            return None
        for name, (kind, _dtype) in self.columns.items():  # as records() counts them
            self._count_items(name, kind, start, stop)
        cols = _Decoded(self, start, stop)
        for row in np.flatnonzero(screen_batch(self.site, cols)).tolist():
            self._bulk_records(start + row, start + row + 1)  # raises, naming row and field
        return cols

    def _bulk_ok(self) -> bool:
        if self._bulk_checked is None:
            self._bulk_checked = _bulk_decodable(self)
        return self._bulk_checked

    def _bulk(self, name: str, kind: str, start: int, stop: int) -> list[Any]:
        if kind == "tensor":
            return self._bulk_tensor(name, start, stop)
        if kind == "int":
            values, valid = self._int(name)
            return [v if ok else _ABSENT for v, ok in
                    zip(values[start:stop].tolist(), valid[start:stop].tolist(), strict=True)]
        self._count_items(name, kind, start, stop)
        if kind in ("str_list", "opt_str_list"):
            items: list[Any] = an.str_lists(self.column(name), start, stop)
        elif kind == "ragged":
            items = an.int_lists(self.column(name), start, stop)
        else:
            items = self.column(name).slice(start, stop - start).to_pylist()
        if kind == "index_map":
            return [_ABSENT if v is None else _index_map(v, f"{self.where}, row {start + i}",
                                                         name) for i, v in enumerate(items)]
        return [_ABSENT if v is None else v for v in items]

    def _bulk_tensor(self, name: str, start: int, stop: int) -> list[Any]:
        """Tensors of rows ``start:stop``: shapes checked in one numpy pass per column."""
        self._tensor_parts(name)
        flat, offsets, valid, shape_flat, shape_offsets, shape_valid = self._tensors[name]
        rows = np.arange(start, stop)
        ndims = np.diff(shape_offsets[start:stop + 1])
        present = valid[start:stop]
        if not present.any():
            return [_ABSENT] * (stop - start)
        ndim = int(ndims[present][0])
        if (not shape_valid[start:stop][present].all() or ndim < 1
                or (ndims[present] != ndim).any()):
            return [self._tensor(name, int(row), f"{self.where}, row {int(row)}")
                    if valid[row] else _ABSENT for row in rows]
        index = np.minimum(shape_offsets[start:stop][:, None] + np.arange(ndim),
                           len(shape_flat) - 1)  # absent rows: any in-range item, ignored
        shapes = shape_flat[index]
        sizes = np.diff(offsets[start:stop + 1])
        # a product past 2**62 (exact in float64's range) is no stored size: its int64
        # product may have wrapped to one (2**32 x 2**32 wraps to 0)
        bad = present & ((shapes.prod(axis=1) != sizes) | (shapes < 0).any(axis=1)
                         | (shapes.astype(np.float64).prod(axis=1) >= 2.0**62))
        if bad.any():
            row = int(rows[np.flatnonzero(bad)[0]])
            self._tensor(name, row, f"{self.where}, row {row}")  # raises, naming the row
        starts, ends = offsets[start:stop].tolist(), offsets[start + 1:stop + 1].tolist()
        if ndim == 1 and present.all():  # a slice already has the shape: no reshape
            return [flat[a:b] for a, b in zip(starts, ends, strict=True)]
        return [flat[a:b].reshape(shape) if ok else _ABSENT
                for a, b, shape, ok in zip(starts, ends, map(tuple, shapes.tolist()),
                                           present.tolist(), strict=True)]

    def _value(self, name: str, kind: str, row: int, where: str) -> Any:
        if kind == "tensor":
            return self._tensor(name, row, where)
        if kind == "int":
            values, valid = self._int(name)
            return int(values[row]) if valid[row] else _ABSENT
        if not self._valid_mask(name)[row]:
            return _ABSENT
        self._count_items(name, kind, row, row + 1)
        value = self.column(name)[row].as_py()
        if kind == "index_map":
            return _index_map(value, where, name)
        return value

    def _count_items(self, name: str, kind: str, start: int, stop: int) -> None:
        """Refuse a row of ``start:stop`` whose list column ``name`` holds more items than
        :func:`~forensics.validate.most_items` allows its ``kind``, counted from the column's
        offsets before any is built (two million empty lists, 8 MB here, were 130 MB of
        Python).

        Raises CaptureFormatError naming the row, the field, the count and the cap."""
        held = most_items(kind)
        if held is None or stop <= start:
            return
        most, what = held
        counts = np.diff(an.list_offsets(self.column(name))[start:stop + 1])
        over = np.flatnonzero(counts > most)
        if len(over):
            row = start + int(over[0])
            raise CaptureFormatError(
                f"{self.where}, row {row} (site {self.site!r}): field {name!r} holds "
                f"{int(counts[over[0]])} {what}, past the {most} one record holds (one per "
                "request of a batch), counted before they are read; fix the producer or the "
                "capture")

    def _valid_mask(self, name: str) -> np.ndarray:
        """True where column ``name`` is not null (the record carries the field)."""
        if name not in self._valid:
            self._valid[name] = an.valid_mask(self.column(name))
        return self._valid[name]

    def _int(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        if name not in self._ints:
            column = self.column(name)
            self._ints[name] = (an.values(column), an.valid_mask(column))
        return self._ints[name]

    def _tensor_parts(self, name: str, where: str | None = None) -> None:
        if name not in self._tensors:
            where = where or self.where
            self._tensors[name] = (*_list_parts(self.column(name), where, name),
                                   *_list_parts(self.column(name + SHAPE_SUFFIX), where,
                                                name + SHAPE_SUFFIX))

    def str_lists(self) -> dict[str, id_codes.StrLists]:
        """Every string-list column as :class:`~forensics.store.id_codes.StrLists` (made
        once: every run of rows reads them)."""
        if self._str_lists is None:
            self._str_lists = {name: id_codes.StrLists.of(self.column(name))
                               for name, (kind, _) in self.columns.items()
                               if kind in ("str_list", "opt_str_list")}
        return self._str_lists

    def first_dims(self, name: str, start: int, stop: int) -> np.ndarray:
        """The first dimension of tensor ``name`` in rows ``start:stop`` (0 where absent or
        without dimensions), int64."""
        self._tensor_parts(name)
        valid, shape_flat, shape_offsets = self._tensors[name][2:5]
        if not len(shape_flat):
            return np.zeros(stop - start, dtype=np.int64)
        shape_offsets = shape_offsets[start:stop + 1]
        heads = shape_flat[np.minimum(shape_offsets[:-1], len(shape_flat) - 1)]
        return np.where((np.diff(shape_offsets) > 0) & valid[start:stop], heads, 0)

    def _tensor(self, name: str, row: int, where: str) -> Any:
        self._tensor_parts(name, where)
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




class _Decoded:
    """Rows ``start:stop`` of a batch as columns: the ``BatchColumns`` that
    :func:`forensics.validate.screen_batch` reads and the ``RunColumns`` that a site's
    ``prepare_columns`` reads (absent fields read as 0 / empty). Columns come from the
    batch's buffers; Python values only from ``decoded`` (or, without it, one column at a
    time when :meth:`values` asks)."""

    def __init__(self, view: BatchView, start: int, stop: int,
                 decoded: dict[str, list[Any]] | None = None) -> None:
        self.view, self.start, self.stop = view, start, stop
        self.rows = stop - start
        self.decoded = {} if decoded is None else decoded
        self._codes: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._flat: dict[tuple[str, bool], tuple[np.ndarray, np.ndarray]] = {}

    def _kind(self, name: str) -> str | None:
        return self.view.columns[name][0] if name in self.view.columns else None

    def present(self, name: str) -> np.ndarray:
        if self._kind(name) is None:
            return np.zeros(self.rows, dtype=bool)
        return self.view._valid_mask(name)[self.start:self.stop]

    def length(self, name: str) -> np.ndarray:
        kind = self._kind(name)
        if kind is None:
            return np.zeros(self.rows, dtype=np.int64)
        if kind != "tensor":
            counts = np.diff(an.list_offsets(self.view.column(name))[self.start:self.stop + 1])
            return counts.astype(np.int64) * self.present(name)
        return self.view.first_dims(name, self.start, self.stop)

    def ndim(self, name: str) -> np.ndarray:
        self.view._tensor_parts(name)
        shape_offsets = self.view._tensors[name][4]
        return np.diff(shape_offsets[self.start:self.stop + 1]).astype(np.int64)

    def ints(self, name: str) -> np.ndarray:
        if self._kind(name) is None:
            return np.zeros(self.rows, dtype=np.int64)
        values, valid = self.view._int(name)
        return np.where(valid[self.start:self.stop], values[self.start:self.stop], 0)

    def flat(self, name: str, widen: bool = True) -> tuple[np.ndarray, np.ndarray]:
        key = name, widen
        if key not in self._flat:  # the screen and the models read the same tensors
            values, counts = self._flat_values(name)
            values = as_int64(values, name) if widen else as_exact(values, name)
            values.flags.writeable = counts.flags.writeable = False  # shared by its readers
            self._flat[key] = values, counts
        return self._flat[key]

    def _flat_values(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Tensor ``name``'s values of the rows at their captured width, and their counts."""
        if self._kind(name) is None:
            return np.zeros(0, dtype=np.int64), np.zeros(self.rows, dtype=np.int64)
        self.view._tensor_parts(name)
        flat, offsets = self.view._tensors[name][:2]
        offsets = offsets[self.start:self.stop + 1]
        return flat[offsets[0]:offsets[-1]], np.diff(offsets).astype(np.int64)

    def inner_lengths(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        if self._kind(name) is None:
            return np.zeros(0, dtype=np.int64), np.zeros(self.rows, dtype=np.int64)
        column = self.view.column(name)
        offsets = an.list_offsets(column)[self.start:self.stop + 1]
        inner = an.list_offsets(column.values)[offsets[0]:offsets[-1] + 1]
        return np.diff(inner).astype(np.int64), np.diff(offsets).astype(np.int64)

    def values(self, name: str) -> list[Any]:
        if name not in self.decoded:
            kind = self._kind(name)
            if kind is None:
                return [None] * self.rows
            self.decoded[name] = self.view._bulk(name, kind, self.start, self.stop)
        return [None if v is _ABSENT else v for v in self.decoded[name]]

    def dtype(self, name: str) -> np.dtype[Any] | None:
        if self._kind(name) != "tensor" or not self.present(name).any():
            return None
        return np.dtype(self.view.columns[name][1])

    def shape(self, name: str, dim: int) -> np.ndarray:
        if self._kind(name) is None:
            return np.zeros(self.rows, dtype=np.int64)
        self.view._tensor_parts(name)
        shape_flat, shape_offsets = self.view._tensors[name][3:5]
        begin = shape_offsets[self.start:self.stop]
        has = (np.diff(shape_offsets[self.start:self.stop + 1]) > dim) & self.present(name)
        if not len(shape_flat):
            return np.zeros(self.rows, dtype=np.int64)
        dims = shape_flat[np.minimum(begin + dim, len(shape_flat) - 1)]
        return np.where(has, dims, 0).astype(np.int64)

    def ragged(self, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        lengths, counts = self.inner_lengths(name)
        if self._kind(name) is None:
            return np.zeros(0, dtype=np.int64), lengths, counts
        column = self.view.column(name)
        offsets = an.list_offsets(column)[self.start:self.stop + 1]
        inner = an.list_offsets(column.values)
        flat = an.values(column.values.values)[inner[offsets[0]]:inner[offsets[-1]]]
        return flat.astype(np.int64, copy=False), lengths, counts

    def str_codes(self, names: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        if not self._codes:  # every string list of the batch coded together, once
            self._codes = id_codes.str_codes(self.view.str_lists(), self.start, self.stop)
        absent = (np.zeros(0, dtype=np.int64), np.zeros(self.rows, dtype=np.int64))
        return [self._codes.get(name, absent) for name in names]

    def record(self, i: int) -> Record:
        return self.view.records(self.start + i, self.start + i + 1)[0]


def _index_map(value: list[tuple[str, int]], where: str, name: str) -> dict[str, int]:
    keys = [k for k, _ in value]
    if len(set(keys)) != len(keys):
        raise CaptureFormatError(f"{where}: field {name!r} repeats a key")
    return dict(value)


def _bulk_decodable(view: BatchView) -> bool:
    """True when every value of ``view`` decodes to its field's kind without per-row checks:
    no summary rows, each column of its field's kind, no null items inside lists or maps."""
    if view.summary.any():
        return False
    specs = field_specs(view.site)
    for name, (kind, _dtype) in view.columns.items():
        spec = specs.get(name)
        if spec is None or spec.kind != kind:
            return False
        if kind in ("str_list", "ragged", "index_map") and _inner_nulls(view.column(name)):
            return False
    return True


def _inner_nulls(column: pa.Array) -> bool:
    if isinstance(column, pa.MapArray):
        return bool(column.keys.null_count or column.items.null_count)
    child = column.values
    if child.null_count:
        return True
    return isinstance(child, pa.ListArray) and bool(child.values.null_count)


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
