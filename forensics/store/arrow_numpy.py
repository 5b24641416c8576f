"""Arrow arrays <-> numpy through raw buffers.

pyarrow's ``pa.array`` and ``Array.to_numpy`` import pandas on first use (seconds, and unwanted
in a live vLLM worker), so the store builds and reads its arrays from buffers directly.
Reading assumes an array that passed ``validate(full=True)`` (its buffers are large enough).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa


def bitmap(mask: np.ndarray) -> pa.Buffer:
    """An Arrow bitmap (LSB first) of the boolean ``mask``."""
    return pa.py_buffer(np.packbits(mask.astype(bool), bitorder="little"))


def primitive(values: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """An integer (or bool) Arrow array of ``values``; ``valid`` False marks nulls."""
    values = np.ascontiguousarray(values)
    if values.dtype == np.bool_:
        data, typ = bitmap(values), pa.bool_()
    else:
        values = values if values.dtype.isnative else values.astype(values.dtype.newbyteorder("="))
        data, typ = pa.py_buffer(values), pa.from_numpy_dtype(values.dtype)
    return pa.Array.from_buffers(typ, len(values), [_validity(valid), data])


def strings(items: Sequence[str | None]) -> pa.Array:
    """A UTF-8 string array (None: null). Raises UnicodeEncodeError on a lone surrogate."""
    texts = [s if s is not None else "" for s in items]
    joined = "".join(texts)
    data = joined.encode("utf-8")
    if len(data) == len(joined):  # ASCII (request ids): one encode for the whole column
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    else:
        encoded = [s.encode("utf-8") for s in texts]
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] > np.iinfo(np.int32).max:
        raise OverflowError("more than 2**31 bytes of strings in one batch")
    valid = np.array([s is not None for s in items], dtype=bool)
    return pa.Array.from_buffers(pa.string(), len(texts),
                                 [_validity(valid), pa.py_buffer(offsets.astype(np.int32)),
                                  pa.py_buffer(data)])


def coded_strings(words: Sequence[str | None], codes: np.ndarray) -> pa.Array:
    """The array ``strings([words[c] for c in codes])``, built without a Python object per item:
    each word is encoded once, then the items' bytes are gathered with a few numpy calls (for
    many items drawn from few words, such as request ids). Raises UnicodeEncodeError on a lone
    surrogate, OverflowError past 2**31 bytes."""
    encoded = [w.encode("utf-8") if w is not None else b"" for w in words]
    sizes = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    width = max(int(sizes.max(initial=0)), 1)
    table = np.zeros((len(encoded), width), dtype=np.uint8)  # one padded row per word
    rows = np.repeat(np.arange(len(encoded)), sizes)
    starts = np.repeat(np.cumsum(sizes) - sizes, sizes)
    table[rows, np.arange(len(rows)) - starts] = np.frombuffer(b"".join(encoded), np.uint8)
    lengths = sizes[codes]
    offsets = np.zeros(len(codes) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] > np.iinfo(np.int32).max:
        raise OverflowError("more than 2**31 bytes of strings in one batch")
    if len(codes) and lengths.min() == lengths.max():  # items all of one length
        data = np.take(table[:, :int(lengths[0])], codes, axis=0).reshape(-1)
    else:
        data = np.take(table, codes, axis=0)[np.arange(width) < lengths[:, None]]
    valid = np.fromiter((w is not None for w in words), dtype=bool, count=len(words))[codes]
    return pa.Array.from_buffers(pa.string(), len(codes),
                                 [_validity(valid), pa.py_buffer(offsets.astype(np.int32)),
                                  pa.py_buffer(data)])


def lists(lengths: np.ndarray, child: pa.Array, valid: np.ndarray | None = None,
          typ: pa.DataType | None = None) -> pa.Array:
    """A list (or map, when ``typ`` is a map type) array with ``lengths`` items per row."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] > np.iinfo(np.int32).max:
        raise OverflowError("more than 2**31 list items in one batch")
    typ = typ if typ is not None else pa.list_(child.type)
    return pa.Array.from_buffers(typ, len(lengths),
                                 [_validity(valid), pa.py_buffer(offsets.astype(np.int32))],
                                 children=[child])


def _validity(valid: np.ndarray | None) -> pa.Buffer | None:
    return None if valid is None or valid.all() else bitmap(valid)


# --------------------------------------------------------------------------- reading


def values(array: pa.Array) -> np.ndarray:
    """The values of a validated primitive integer array as a zero-copy numpy view."""
    dtype = np.dtype(str(array.type))
    data = array.buffers()[1]
    if data is None or len(array) == 0:
        return np.zeros(0, dtype=dtype)
    return np.frombuffer(data, dtype=dtype, count=len(array), offset=array.offset * dtype.itemsize)


def bools(array: pa.Array) -> np.ndarray:
    """The values of a validated boolean array."""
    return _bits(array.buffers()[1], array.offset, len(array))


def valid_mask(array: pa.Array) -> np.ndarray:
    """True where ``array`` is not null."""
    if array.null_count == 0:
        return np.ones(len(array), dtype=bool)
    return _bits(array.buffers()[0], array.offset, len(array))


def list_offsets(array: pa.Array) -> np.ndarray:
    """The offsets of a list or map array (length ``len(array) + 1``)."""
    return values(array.offsets)


def string_parts(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The offsets (``len(array) + 1``, int32) and the bytes (uint8) of a validated string
    array: item ``i`` is ``data[offsets[i]:offsets[i + 1]]``."""
    offsets_buffer, data_buffer = array.buffers()[1:3]
    if offsets_buffer is None:  # no item
        return np.zeros(1, dtype=np.int32), np.zeros(0, dtype=np.uint8)
    offsets = np.frombuffer(offsets_buffer, dtype=np.int32, count=len(array) + 1,
                            offset=4 * array.offset)
    data = np.zeros(0, dtype=np.uint8) if data_buffer is None else np.frombuffer(
        data_buffer, dtype=np.uint8)
    return offsets, data


def ascii_string_lists(array: pa.Array) -> bool:
    """Whether a ``list<string>`` array that passed the structural ``validate()`` also passes
    ``validate(full=True)``, shown by a few numpy passes: list offsets rising within the
    strings, string offsets rising within the bytes, and bytes all ASCII (valid UTF-8 however
    they are cut). False: not shown (non-ASCII bytes, say): ask Arrow's full validation."""
    if not pa.types.is_list(array.type) or not pa.types.is_string(array.type.value_type):
        return False
    items = array.values
    offsets, data = string_parts(items)
    return (_rising_within(list_offsets(array), len(items))
            and _rising_within(offsets, len(data))
            and bool(data[offsets[0]:offsets[-1]].max(initial=0) < 0x80))


def _rising_within(offsets: np.ndarray, size: int) -> bool:
    """Whether ``offsets`` never fall and stay within ``0..size``."""
    return bool(offsets[0] >= 0 and offsets[-1] <= size and (np.diff(offsets) >= 0).all())


def _bits(buffer: pa.Buffer | None, offset: int, length: int) -> np.ndarray:
    if buffer is None or length == 0:
        return np.zeros(length, dtype=bool)
    bits = np.unpackbits(np.frombuffer(buffer, dtype=np.uint8), bitorder="little")
    return bits[offset:offset + length].astype(bool)


def str_lists(column: pa.Array, start: int, stop: int) -> list[list[str | None] | None]:
    """Rows ``start:stop`` of a validated ``list<string>`` array (None: a null row or item).

    The strings are dictionary-encoded first: each distinct string becomes one Python object,
    shared by every row that holds it (request ids repeat from step to step)."""
    offsets = list_offsets(column)[start:stop + 1]
    items = column.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    encoded = items.dictionary_encode()
    words = np.empty(len(encoded.dictionary) + 1, dtype=object)  # the last: None, for nulls
    words[:-1] = encoded.dictionary.to_pylist()
    codes = values(encoded.indices)
    if encoded.indices.null_count:
        codes = np.where(valid_mask(encoded.indices), codes, len(words) - 1)
    return _rows(words[codes].tolist(), column, offsets, start, stop)


def int_lists(column: pa.Array, start: int, stop: int) -> list[list[list[int]] | None]:
    """Rows ``start:stop`` of a validated ``list<list<int64>>`` array without null lists
    inside rows (None: a null row)."""
    offsets = list_offsets(column)[start:stop + 1]
    inner = column.values
    inner_offsets = list_offsets(inner)[offsets[0]:offsets[-1] + 1]
    flat = values(inner.values)[inner_offsets[0]:inner_offsets[-1]]
    return _rows(_cut(flat, inner_offsets - inner_offsets[0]), column, offsets, start, stop)


def _cut(flat: np.ndarray, cuts: np.ndarray) -> list[list[int]]:
    """``flat`` cut at ``cuts`` (``cuts[0] == 0``) into lists of Python ints: the lists of each
    length come out of one 2-D ``tolist`` (C speed); a Python slice per list only when the
    lengths are many."""
    lengths = np.diff(cuts)
    if not len(lengths) or lengths.min() == lengths.max():
        width = int(lengths[0]) if len(lengths) else 0
        return flat.reshape(len(lengths), width).tolist()  # type: ignore[no-any-return]
    kinds = np.flatnonzero(np.bincount(lengths)) if lengths.max() <= 1 << 16 else lengths
    if len(kinds) > 8:
        ints, bounds = flat.tolist(), cuts.tolist()
        return [ints[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    out = np.empty(len(lengths), dtype=object)
    for size in kinds.tolist():
        rows = np.flatnonzero(lengths == size)
        block = flat[cuts[rows][:, None] + np.arange(size)].tolist()
        out[rows] = np.fromiter(block, dtype=object, count=len(block))
    return out.tolist()  # type: ignore[no-any-return]


def _rows(items: list[Any], column: pa.Array, offsets: np.ndarray, start: int,
          stop: int) -> list[Any]:
    """``items`` (the children of rows ``start:stop``) cut into one list per row."""
    cuts = (offsets - offsets[0]).tolist()
    rows: list[Any] = [items[a:b] for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    if column.null_count:
        for i in np.flatnonzero(~valid_mask(column)[start:stop]).tolist():
            rows[i] = None
    return rows
