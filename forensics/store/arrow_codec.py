"""Records <-> Arrow record batches: one column per field, typed by its kind.

==================== ================================================================
field kind           Arrow columns
==================== ================================================================
tensor               ``<name>``: list<intN> (flattened, width as captured);
                     ``<name>.shape``: list<int64>
int                  int64
str (summary extra)  string
str_list             list<string>
opt_str_list         list<string> (null items: discarded rows)
index_map            map<string, int64>
ragged               list<list<int64>>
==================== ================================================================

Every record batch also has ``step`` (int64), ``rank`` (int64) and ``summary`` (bool).
A field a record does not carry is null. Each field's Arrow metadata names its kind and dtype,
so the reader never guesses.
"""

from __future__ import annotations

import json
import re
from itertools import chain
from typing import Any

import numpy as np
import pyarrow as pa

from forensics.errors import CaptureFormatError
from forensics.escaping import python_string
from forensics.records import INT64_MAX, INT64_MIN, Record, check_value
from forensics.store import arrow_numpy as an
from forensics.store.ipc_header import repeated_metadata_key
from forensics.store.json_in import DuplicateKeyError, strict_json
from forensics.validate import field_specs, remember_signature, value_signature

ColumnSig = tuple[str, str]  # (kind, numpy dtype name for tensors else "")

BASE_COLUMNS = ("step", "rank", "summary")
SHAPE_SUFFIX = ".shape"
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
KINDS = ("tensor", "int", "str", "str_list", "opt_str_list", "index_map", "ragged")
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
SCHEMA_KEY = b"forensics"


def arrow_type(kind: str, dtype: str = "") -> pa.DataType:
    """The Arrow type of a column of ``kind`` (``dtype``: the tensor's numpy dtype name)."""
    if kind == "tensor":
        return pa.list_(pa.from_numpy_dtype(np.dtype(dtype)))
    return {
        "int": pa.int64(),
        "str": pa.string(),
        "str_list": pa.list_(pa.string()),
        "opt_str_list": pa.list_(pa.string()),
        "index_map": pa.map_(pa.string(), pa.int64()),
        "ragged": pa.list_(pa.list_(pa.int64())),
    }[kind]


# --------------------------------------------------------------------------- writing side


def record_columns(record: Record, where: str) -> dict[str, ColumnSig]:
    """Return the column signature of a validated ``record``, normalising summary extras.

    Raises:
        CaptureFormatError: a field name that is not an identifier, a value of no storable
            kind, or an integer outside int64.
    """
    specs = field_specs(record.site)
    columns: dict[str, ColumnSig] = {}
    for name, value in record.fields.items():
        if not isinstance(name, str) or not NAME_RE.fullmatch(name) or name in BASE_COLUMNS:
            raise CaptureFormatError(f"{where}: field name {name!r} is not storable; use an "
                                     "identifier other than step, rank, summary")
        spec = specs.get(name)
        if spec is not None:
            value = check_value(spec, value, where)
            kind = spec.kind
        else:
            kind, value = _infer(value, name, where)
        record.fields[name] = value
        _check_range(kind, value, name, where)
        _check_text(kind, value, name, where)
        columns[name] = (kind, _dtype_name(value.dtype) if kind == "tensor" else "")
    return columns


_TRUSTED_COLUMNS: dict[tuple[Any, ...], dict[str, ColumnSig]] = {}


def trusted_columns(record: Record) -> dict[str, ColumnSig]:
    """The column signature of a full record built to its site's schema by trusted code
    (no checks: see ``CaptureWriter.append(validated=True)``). Records of one value signature
    share one (read-only) dict."""
    signature = value_signature(record)
    columns = _TRUSTED_COLUMNS.get(signature)
    if columns is None:
        columns = columns_of(record.site, record.fields)
        remember_signature(_TRUSTED_COLUMNS, signature, columns)
    return columns


def columns_of(site: str, fields: dict[str, Any]) -> dict[str, ColumnSig]:
    """The column signature of a full record's ``fields`` built to ``site``'s schema by trusted
    code: each field's kind from the schema, a tensor's dtype from its value (no other value
    is read)."""
    specs = _specs(site)
    columns: dict[str, ColumnSig] = {}
    for name, value in fields.items():
        kind = specs[name].kind
        columns[name] = (kind, _dtype_name(value.dtype) if kind == "tensor" else "")
    return columns


_DTYPE_NAMES: dict[np.dtype[Any], str] = {}


def _dtype_name(dtype: np.dtype[Any]) -> str:
    """``dtype``'s name in native byte order (cached: ``dtype.name`` is slow)."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = dtype.newbyteorder("=").name
    return name


def _specs(site: str) -> dict[str, Any]:
    from forensics.validate import site_field_specs

    return site_field_specs(site)


def _infer(value: Any, name: str, where: str) -> tuple[str, Any]:
    if isinstance(value, np.ndarray) and value.dtype.kind in "iu":
        return "tensor", value
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return "int", int(value)
    if isinstance(value, str):
        return "str", value
    if isinstance(value, dict):
        return "index_map", check_value(_spec(name, "index_map"), value, where)
    if isinstance(value, (list, tuple)):
        items = list(value)
        if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in items):
            if any(not INT64_MIN <= int(v) <= INT64_MAX for v in items):
                raise CaptureFormatError(f"{where}: field {name!r} holds an integer outside "
                                         "int64")
            return "tensor", np.asarray([int(v) for v in items], dtype=np.int64)
        if all(isinstance(v, str) for v in items):
            return "str_list", items
        if all(isinstance(v, str) or v is None for v in items):
            return "opt_str_list", items
        return "ragged", check_value(_spec(name, "ragged"), items, where)
    raise CaptureFormatError(f"{where}: field {name!r} has a value of type "
                             f"{type(value).__name__}; summary extras must be ints, strings, "
                             "integer arrays or lists")


def _spec(name: str, kind: str) -> Any:
    from forensics.records import FieldSpec

    return FieldSpec(name, kind)


def _check_range(kind: str, value: Any, name: str, where: str) -> None:
    if kind == "int":
        numbers: list[int] = [value]
    elif kind == "index_map":
        numbers = list(value.values())
    elif kind == "ragged":
        numbers = [min(row) for row in value if row] + [max(row) for row in value if row]
    else:
        return
    if any(not INT64_MIN <= n <= INT64_MAX for n in numbers):
        raise CaptureFormatError(f"{where}: field {name!r} holds an integer outside int64")


def check_texts(record: Record, where: str) -> Record:
    """Return the validated ``record`` when every string of its fields is valid Unicode, as the
    store needs (an importer checks its records so, naming its source, before any is written).

    Raises CaptureFormatError naming ``where`` and the field."""
    specs = field_specs(record.site)
    for name, value in record.fields.items():
        spec = specs.get(name)
        kind = spec.kind if spec is not None else "str" if isinstance(value, str) else ""
        _check_text(kind, value, name, where)
    return record


def _check_text(kind: str, value: Any, name: str, where: str) -> None:
    if kind == "str":
        texts = [value]
    elif kind in ("str_list", "opt_str_list"):
        texts = [v for v in value if v is not None]
    elif kind == "index_map":
        texts = list(value)
    else:
        return
    try:
        for text in texts:
            text.encode("utf-8")
    except UnicodeEncodeError:
        raise CaptureFormatError(f"{where}: field {name!r} holds a string that is not valid "
                                 "Unicode (a lone surrogate); write it as UTF-8 text (the "
                                 "producer's decoding kept an undecodable byte)") from None


def merge_columns(a: dict[str, ColumnSig], b: dict[str, ColumnSig]) -> dict[str, ColumnSig] | None:
    """The union of two column signatures, or None when a column has two different types."""
    merged = dict(a)
    for name, sig in b.items():
        if merged.setdefault(name, sig) != sig:
            return None
    return merged


def build_schema(site: str, rank: int, process: str, columns: dict[str, ColumnSig]) -> pa.Schema:
    """The Arrow schema of a segment holding records with ``columns``."""
    order = {name: i for i, name in enumerate(field_specs(site))}
    fields = [pa.field("step", pa.int64(), nullable=False),
              pa.field("rank", pa.int64(), nullable=False),
              pa.field("summary", pa.bool_(), nullable=False)]
    for name in sorted(columns, key=lambda n: (order.get(n, len(order)), n)):
        kind, dtype = columns[name]
        meta = {"kind": kind, "dtype": dtype}
        fields.append(pa.field(name, arrow_type(kind, dtype), metadata=meta))
        if kind == "tensor":
            fields.append(pa.field(name + SHAPE_SUFFIX, pa.list_(pa.int64()),
                                   metadata={"kind": "shape", "dtype": ""}))
    info = {"format": 1, "site": site, "rank": rank, "process": process}
    return pa.schema(fields, metadata={SCHEMA_KEY: json.dumps(info).encode()})


def encode_batch(records: list[Record], schema: pa.Schema) -> pa.RecordBatch:
    """Encode ``records`` (validated, of one site and rank) as one batch of ``schema``.

    Raises CaptureFormatError when the values of one batch exceed 2**31 list items.
    """
    columns = schema_columns(schema)
    arrays: dict[str, pa.Array] = {
        "step": an.primitive(np.array([r.step for r in records], dtype=np.int64)),
        "rank": an.primitive(np.array([r.rank for r in records], dtype=np.int64)),
        "summary": an.primitive(np.array([bool(r.summary) for r in records], dtype=bool)),
    }
    for name, (kind, dtype) in columns.items():
        arrays.update(encode_field(name, kind, dtype, [r.fields.get(name) for r in records]))
    return pa.RecordBatch.from_arrays([arrays[f.name] for f in schema], schema=schema)


def encode_field(name: str, kind: str, dtype: str, values: list[Any]) -> dict[str, pa.Array]:
    """The Arrow column(s) of field ``name`` holding ``values`` (one per record, None where a
    record lacks it): ``{name: ...}``, plus ``{name + ".shape": ...}`` for a tensor.

    Raises CaptureFormatError when the values exceed 2**31 list items.
    """
    try:
        if kind == "tensor":
            data, shape = encode_tensor(values, dtype)
            return {name: data, name + SHAPE_SUFFIX: shape}
        return {name: _encode_other(kind, values)}
    except OverflowError:
        raise CaptureFormatError(f"field {name!r}: one batch holds more than 2**31 values; "
                                 "flush more often") from None


def encode_tensor(values: list[Any], dtype: str) -> tuple[pa.Array, pa.Array]:
    """The values and shape columns of one tensor field, built with a few numpy calls (no
    Python work per element; a handful of C-level passes over the records)."""
    arrays = [v if type(v) is np.ndarray else np.asarray(v) for v in values if v is not None]
    if len(arrays) == len(values):
        present = None
    else:
        present = np.fromiter((v is not None for v in values), dtype=bool, count=len(values))
    # axis=None flattens every array; astype gives the column's dtype in native byte order
    data = np.concatenate(arrays, axis=None).astype(dtype, copy=False) if arrays \
        else np.zeros(0, dtype)
    shapes = [a.shape for a in arrays]
    ndims = np.fromiter(map(len, shapes), dtype=np.int64, count=len(shapes))
    if bool((ndims == 1).all()):  # every array 1-D: its size is its shape
        sizes = shape_data = np.fromiter(map(len, arrays), dtype=np.int64, count=len(arrays))
    else:
        shape_data = np.fromiter(chain.from_iterable(shapes), dtype=np.int64,
                                 count=int(ndims.sum()))
        sizes = np.fromiter((a.size for a in arrays), dtype=np.int64, count=len(arrays))
    return (an.lists(_spread(sizes, present), an.primitive(data), present,
                     arrow_type("tensor", dtype)),
            an.lists(_spread(ndims, present), an.primitive(shape_data), present,
                     pa.list_(pa.int64())))


def encode_stacked_tensor(arrays: list[np.ndarray], dtype: str) -> tuple[pa.Array, pa.Array]:
    """As :func:`encode_tensor` for a field present in every record whose arrays share their
    dtype (``dtype``), rank and every dimension but the first (as a simulator's are): joined in
    one ``concatenate``, sized by one pass over the arrays (byte-identical columns).

    Raises ValueError when the ranks or trailing dimensions differ, or the dtype is not
    ``dtype``."""
    data = np.concatenate(arrays)
    if data.dtype != np.dtype(dtype):
        raise ValueError(f"stacked tensor of dtype {data.dtype}; expected {dtype}")
    rows = np.fromiter(map(len, arrays), dtype=np.int64, count=len(arrays))
    trailing = data.shape[1:]
    if trailing:
        width = int(np.prod(trailing))
        sizes = rows * width
        shape_data = np.empty((len(arrays), data.ndim), dtype=np.int64)
        shape_data[:, 0], shape_data[:, 1:] = rows, trailing
    else:
        sizes = shape_data = rows
    ndims = np.full(len(arrays), data.ndim, dtype=np.int64)
    return (an.lists(sizes, an.primitive(data.reshape(-1)), None, arrow_type("tensor", dtype)),
            an.lists(ndims, an.primitive(shape_data.reshape(-1)), None, pa.list_(pa.int64())))


def _spread(counts: np.ndarray, present: np.ndarray | None) -> np.ndarray:
    """``counts`` of the present rows (``present`` None: all rows), 0 for the absent ones."""
    if present is None:
        return counts
    out = np.zeros(len(present), dtype=np.int64)
    out[present] = counts
    return out


def _encode_other(kind: str, values: list[Any]) -> pa.Array:
    present = np.array([v is not None for v in values], dtype=bool)
    if kind == "int":
        return an.primitive(np.array([0 if v is None else v for v in values], np.int64), present)
    if kind == "str":
        return an.strings(values)
    rows = [v if v is not None else ([] if kind != "index_map" else {}) for v in values]
    lengths = np.array([len(v) for v in rows], dtype=np.int64)
    if kind in ("str_list", "opt_str_list"):
        child = an.strings([s for row in rows for s in row])
    elif kind == "ragged":
        inner = [inner for row in rows for inner in row]
        child = an.lists(np.array([len(i) for i in inner], dtype=np.int64),
                         an.primitive(np.array([x for i in inner for x in i], dtype=np.int64)))
    else:  # index_map
        keys = an.strings([k for row in rows for k in row])
        items = an.primitive(np.array([x for row in rows for x in row.values()], np.int64))
        child = pa.StructArray.from_arrays([keys, items], names=["key", "value"])
    return an.lists(lengths, child, present, arrow_type(kind))


# --------------------------------------------------------------------------- reading side


def refuse_repeated_key(header: bytes, where: str) -> None:
    """Refuse a schema whose metadata (its own or a column's) names a key twice: pyarrow keeps
    one of the values, another reader may take the other (as a JSON object's repeated key).
    Raises CaptureFormatError naming ``where``, the column and the key."""
    repeated = repeated_metadata_key(header)
    if repeated is None:
        return
    column, key = repeated
    owner = "" if column is None else \
        f" of column {python_string(column.decode('utf-8', 'surrogateescape'))}"
    raise CaptureFormatError(
        f"{where}: the schema metadata{owner} names key "
        f"{python_string(key.decode('utf-8', 'surrogateescape'))} twice (one reader takes the "
        "first value, another the last); the file is not one forensics wrote: replace or "
        "delete it")


def schema_info(schema: pa.Schema, where: str) -> dict[str, Any]:
    """The ``forensics`` metadata of a segment schema (site, rank, process).

    Raises CaptureFormatError when it is missing or malformed.
    """
    raw = (schema.metadata or {}).get(SCHEMA_KEY)
    try:
        info = strict_json(raw.decode("utf-8")) if raw is not None else None
    except DuplicateKeyError as exc:
        raise CaptureFormatError(f"{where}: schema metadata 'forensics': {exc}; the file is "
                                 "not one forensics wrote: replace or delete it") from None
    except (ValueError, RecursionError):
        info = None
    if not isinstance(info, dict) or info.get("format") != 1:
        raise CaptureFormatError(f"{where}: schema has no valid 'forensics' metadata "
                                 "(format 1 expected); the file is not a forensics segment")
    return info


def schema_columns(schema: pa.Schema, where: str = "segment") -> dict[str, ColumnSig]:
    """Parse and check the field columns of a segment schema.

    Raises CaptureFormatError on a missing base column, an unknown kind or dtype, or a column
    whose Arrow type is not the one its kind needs.
    """
    expected_base = {"step": pa.int64(), "rank": pa.int64(), "summary": pa.bool_()}
    names = schema.names
    if len(set(names)) != len(names):
        raise CaptureFormatError(f"{where}: duplicate column names in the schema")
    for name, typ in expected_base.items():
        if name not in names or schema.field(name).type != typ:
            raise CaptureFormatError(f"{where}: column {name!r} must be {typ}")
    columns: dict[str, ColumnSig] = {}
    for field in schema:
        if field.name in expected_base:
            continue
        meta = field.metadata or {}
        kind = meta.get(b"kind", b"").decode("utf-8", "replace")
        dtype = meta.get(b"dtype", b"").decode("utf-8", "replace")
        if kind == "shape":
            base = field.name[: -len(SHAPE_SUFFIX)]
            if not field.name.endswith(SHAPE_SUFFIX) or base not in names \
                    or field.type != pa.list_(pa.int64()):
                raise CaptureFormatError(f"{where}: stray shape column {field.name!r}")
            continue
        _check_column(field, kind, dtype, where)
        if kind == "tensor" and field.name + SHAPE_SUFFIX not in names:
            raise CaptureFormatError(f"{where}: tensor column {field.name!r} has no shape column")
        columns[field.name] = (kind, dtype)
    return columns


def _check_column(field: pa.Field, kind: str, dtype: str, where: str) -> None:
    if kind not in KINDS or not NAME_RE.fullmatch(field.name):
        raise CaptureFormatError(f"{where}: column {field.name!r} has unknown kind {kind!r}; "
                                 f"expected one of {list(KINDS)}")
    if kind == "tensor" and dtype not in INT_DTYPES:
        raise CaptureFormatError(f"{where}: tensor column {field.name!r} has dtype {dtype!r}; "
                                 f"expected one of {list(INT_DTYPES)}")
    if field.type != arrow_type(kind, dtype):
        raise CaptureFormatError(f"{where}: column {field.name!r} ({kind}) has Arrow type "
                                 f"{field.type}; expected {arrow_type(kind, dtype)}")
