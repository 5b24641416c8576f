"""``Capture.to_frame(site)``: one pandas row per record, built column-wise from the batches;
``Capture.to_arrow(site)``: the same as a pyarrow Table (for Polars, DuckDB and Parquet).

Tensor and list fields come twice: ``<field>_len`` (the first dimension or the list length) and
``<field>`` (the values: nested Python lists for tensors, lists of strings or ints for lists, a
``{request: row}`` dict for ``prev_req_id_to_index``, a map in Arrow). A record's own column
named like a ``<field>_len`` is ``extra.NAME``; in Arrow, a column whose records hold values of
several kinds is one column per kind (``bar.int``, ``bar.str``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from forensics.errors import CaptureFormatError
from forensics.records import EXTRA_PREFIX
from forensics.sites import get_site
from forensics.store import arrow_numpy as an
from forensics.store.arrow_codec import SHAPE_SUFFIX
from forensics.validate import SUMMARY_COMMON, field_specs

if TYPE_CHECKING:
    import pandas as pd

    from forensics.store.batch import BatchView
    from forensics.store.segment import Segment


def frame_columns(site: str) -> list[str]:
    """The fixed columns of ``to_frame(site)``: step, rank, summary, then per declared field
    its value (ints) or ``<field>_len`` (tensors and lists), then the summary columns."""
    columns = ["step", "rank", "summary"]
    for name, spec in field_specs(site).items():
        columns += [name] if spec.kind == "int" else [f"{name}_len", name]
    for name in (*SUMMARY_COMMON, get_site(site).summary_bound):
        if name not in columns:
            columns.append(name)
    return columns


def site_frame(site: str, segments: list[Segment]) -> pd.DataFrame:
    """Build the frame of ``site`` from its segments (rows sorted by step, then rank).

    Raises UnknownSiteError or CaptureFormatError (a corrupt batch).
    """
    import pandas as pd

    columns = frame_columns(site)
    chunks: dict[str, list[np.ndarray]] = {}
    filled: dict[str, int] = {}  # the rows each column's chunks hold (summed once per batch
    total = 0                    # of chunks, that was quadratic in the batches)
    for seg in segments:
        for i in range(len(seg.rows)):
            view = seg.batch(i)
            for name, values in _batch_columns(view).items():
                if name not in chunks:
                    columns += [] if name in columns else [name]
                    chunks[name], filled[name] = [_missing(total)], total
                chunks[name].append(values)
                filled[name] += len(values)
            total += len(view)
            for name, rows in filled.items():
                if rows < total:
                    chunks[name].append(_missing(total - rows))
                    filled[name] = total
    data = {name: _to_series(chunks[name], total) if name in chunks
            else pd.array([pd.NA] * total, dtype="Int64") for name in columns}
    frame = pd.DataFrame(data, columns=columns)
    frame = frame.sort_values(["step", "rank"], kind="stable").reset_index(drop=True)
    frame["summary"] = frame["summary"].astype(bool)
    return frame


def _length_names(view: BatchView) -> frozenset[str]:
    """The ``<field>_len`` columns of ours in ``view``'s frame: of the site's declared fields
    that are no int, and of the view's list and tensor columns."""
    declared = {f"{name}_len" for name, spec in field_specs(view.site).items()
                if spec.kind != "int"}
    return frozenset(declared | {f"{name}_len" for name, (kind, _) in view.columns.items()
                                 if kind not in ("int", "str")})


def _batch_columns(view: BatchView) -> dict[str, np.ndarray]:
    """The frame columns of one batch; a record's int or text column named like one of our
    ``<field>_len`` columns is ``extra.NAME`` (it took the place of the lengths, or they of
    its values)."""
    out: dict[str, np.ndarray] = {
        "step": view.steps,
        "rank": an.values(view.column("rank")),
        "summary": np.asarray(view.summary, dtype=object),
    }
    lengths = _length_names(view)
    for name, (kind, _dtype) in view.columns.items():
        column = view.column(name)
        own = EXTRA_PREFIX + name if name in lengths else name
        if kind == "int":
            out[own] = _nullable(column.to_pylist())
        elif kind == "str":
            out[own] = np.asarray(column.to_pylist(), dtype=object)
        elif kind == "tensor":
            out[f"{name}_len"] = _first_dim(view.column(name + SHAPE_SUFFIX))
        else:
            out[f"{name}_len"] = _lengths(column)
    out.update(_value_columns(view, [name for name, (kind, _) in view.columns.items()
                                     if kind not in ("int", "str")]))
    return out


def _value_columns(view: BatchView, names: list[str]) -> dict[str, np.ndarray]:
    """The values of the tensor and list fields ``names``, one object per record (None where
    a record lacks the field); tensors as nested lists."""
    if not names:
        return {}
    records = view.records()
    out = {name: np.empty(len(records), dtype=object) for name in names}
    for i, record in enumerate(records):
        for name in names:
            value: Any = record.fields.get(name)
            out[name][i] = value.tolist() if isinstance(value, np.ndarray) else value
    return out


def _lengths(column: pa.Array) -> np.ndarray:
    lengths = np.diff(an.list_offsets(column)).astype(object)
    lengths[~an.valid_mask(column)] = None
    return lengths


def _first_dim(shapes: pa.Array) -> np.ndarray:
    lists = shapes.to_pylist()
    return _nullable([s[0] if s else None for s in lists])


def _nullable(values: list[Any]) -> np.ndarray:
    return np.asarray(values, dtype=object)


def _missing(count: int) -> np.ndarray:
    return np.full(count, None, dtype=object)


def _to_series(chunks: list[np.ndarray], total: int) -> Any:
    import pandas as pd

    values = np.concatenate(chunks) if chunks else np.zeros(0, dtype=object)
    if all(v is None or isinstance(v, (int, np.integer, bool, np.bool_)) for v in values):
        if all(isinstance(v, (bool, np.bool_)) for v in values if v is not None) and len(values):
            return values
        return pd.array([None if v is None else int(v) for v in values], dtype="Int64")
    return values


def site_table(frame: pd.DataFrame, site: str | None = None, where: str = "the frame"
               ) -> pa.Table:
    """``frame`` (a :func:`site_frame`) as a pyarrow Table: nullable int64 columns, list
    columns for values, a string -> int64 map for request-to-row dicts. With ``site``, each
    declared field is typed from the site's schema (:func:`field_types`), so a field that no
    record holds is a null column of its own type, not of int64. A column of values of
    several kinds (a summary extra an int in one record, text in another) is one column per
    kind (:func:`split_by_kind`).

    Raises CaptureFormatError naming ``where`` and the column when a tensor holds a value past
    int64 (a ``uint64`` tensor's; Arrow's int64 lists cannot hold it)."""
    types = field_types(site) if site is not None else {}
    arrays: dict[str, pa.Array] = {}
    for name in frame.columns:
        try:
            arrays.update(split_by_kind(name, frame[name], types.get(name)))
        except OverflowError:
            raise CaptureFormatError(
                f"{where}: column {name!r} holds an integer past int64 (a uint64 tensor's), "
                "which the table's int64 columns cannot hold; read it with to_frame, or "
                "capture that field as a signed integer tensor") from None
    return pa.table(arrays)


def split_by_kind(name: str, series: pd.Series, kind: pa.DataType | None = None
                  ) -> dict[str, pa.Array]:
    """``{name: column}``, or, when the values of an undeclared column are of several kinds
    (Arrow holds one type a column), ``{NAME.KIND: column}`` per kind (:func:`kind_of`, as
    ``open_many`` splits a column whose type differs across captures), each null elsewhere."""
    try:
        return {name: _arrow_column(series, kind)}
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        if kind is not None:
            raise
    import pandas as pd

    values = series.tolist()
    kinds = ["" if missing(v) else "index_map" if isinstance(v, dict)
             else kind_of(pa.array([v]).type) for v in values]
    return {f"{name}.{k}": _arrow_column(pd.Series(
        [v if each == k else None for v, each in zip(values, kinds, strict=True)], dtype=object))
        for k in sorted(set(kinds) - {""})}


def kind_of(kind: pa.DataType) -> str:
    """A column type's kind for a column name: ``int``, ``str``, ``tensor`` (a list of
    integers), ``str_list``, ``ragged``, ``index_map``, or the type's own name."""
    if pa.types.is_integer(kind):
        return "int"
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "str"
    if pa.types.is_map(kind):
        return "index_map"
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        item = kind.value_type
        return ("tensor" if pa.types.is_integer(item) else "str_list" if pa.types.is_string(item)
                else "ragged" if pa.types.is_list(item) else "list")
    return "".join(ch if ch.isalnum() else "_" for ch in str(kind))


#: the Arrow type of each field kind of a site's schema (tensors: one list level per dimension)
KIND_TYPES: dict[str, pa.DataType] = {
    "int": pa.int64(),
    "str": pa.string(),
    "str_list": pa.list_(pa.string()),
    "opt_str_list": pa.list_(pa.string()),
    "ragged": pa.list_(pa.list_(pa.int64())),
    "index_map": pa.map_(pa.string(), pa.int64()),
}


def field_types(site: str) -> dict[str, pa.DataType]:
    """The Arrow type of every column :func:`frame_columns` declares for ``site``: from the
    kind (and tensor rank) of each field of the site's schema; step, rank, lengths and summary
    columns are int64, ``summary`` bool."""
    types: dict[str, pa.DataType] = {name: pa.int64() for name in frame_columns(site)}
    types["summary"] = pa.bool_()
    for name, spec in field_specs(site).items():
        if spec.kind == "tensor":
            nested: pa.DataType = pa.int64()
            for _ in range(max(spec.ndim, 1)):
                nested = pa.list_(nested)
            types[name] = nested
        elif spec.kind in KIND_TYPES:
            types[name] = KIND_TYPES[spec.kind]
    return types


def missing(value: Any) -> bool:
    """Whether a frame cell holds no value: None, ``pd.NA``, or the float NaN a text column
    (pandas' ``str`` dtype) holds where a record lacks the field (no capture value is a float)."""
    import pandas as pd

    return value is None or value is pd.NA or (isinstance(value, float) and value != value)


def _arrow_column(series: pd.Series, kind: pa.DataType | None = None) -> pa.Array:
    values = [None if missing(v) else v for v in series.tolist()]
    if (kind is not None and pa.types.is_map(kind)) or any(isinstance(v, dict) for v in values):
        return pa.array([None if v is None else list(v.items()) for v in values],
                        type=kind or pa.map_(pa.string(), pa.int64()))
    if kind is not None:
        return pa.array(values, type=kind)
    if str(series.dtype) == "Int64":
        return pa.array(values, type=pa.int64())
    return pa.array(values)
