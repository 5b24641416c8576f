"""``.safetensors`` dumps, one record per file, parsed here without extra dependencies.

Tensors are the site's tensor fields; ``__metadata__`` (string to string) carries ``site``,
``step``, optional ``rank``/``summary``, and every other field as JSON (ints, lists of str,
``prev_req_id_to_index``, ragged lists of lists). A header that claims more bytes than the file
holds is refused before anything is allocated, and so is a key given twice (in one JSON
object, or as both a tensor and a ``__metadata__`` key).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from forensics.digits import plain_int
from forensics.errors import CaptureFormatError, reason
from forensics.escaping import terminal
from forensics.importers import Imported
from forensics.importers.common import (
    MAX_CONTAINERS,  # noqa: F401  (its cap, named here as before)
    MAX_JSON,
    check_containers,
    check_disjoint,
    check_keys,
    nothing_to_import,
    record_from_dict,
    show,
    where_of,
)
from forensics.store.guarded import MAX_DECODED, MAX_MEMBER, read_bytes, read_prefix
from forensics.store.json_in import DuplicateKeyError, strict_json
from forensics.validate import check_field_count, max_fields

#: the most tensors one record's file holds (the largest site has 19 fields with its outputs)
MAX_TENSORS = 64
#: the header bytes one tensor's entry needs (its name, dtype, shape and offsets)
TENSOR_ENTRY = 200
#: the longest header read: the tensors' entries and one JSON text's worth of ``__metadata__``
#: (every other field); checked from its 8-byte length, before the rest is read
MAX_HEADER = MAX_TENSORS * TENSOR_ENTRY + MAX_JSON
MAX_DIM = 1 << 40
#: the JSON items (keys and values) one field of a record may take in the header: a tensor's
#: name and entry, its 3 keys, dtype, shape of up to 8 dims and data_offsets' 2 (a
#: ``__metadata__`` key takes 2)
HEADER_ITEMS = 20
#: a JSON string after what precedes it: matched once from where the last ended, never retried
_NEXT_STRING = re.compile(rb'[^"]*+("(?:[^"\\]++|\\.)*+")', re.DOTALL)
DTYPES = {"I8": "<i1", "I16": "<i2", "I32": "<i4", "I64": "<i8", "U8": "<u1", "U16": "<u2",
          "U32": "<u4", "U64": "<u8", "F16": "<f2", "F32": "<f4", "F64": "<f8", "BOOL": "?"}


def read(path: Path) -> Imported:
    """Read the one record of a ``.safetensors`` file.

    Raises CaptureFormatError: a malformed header, a tensor outside the data, an unsupported
    dtype, metadata that is not JSON, or a record that fails its site's schema.
    """
    _check_header_length(read_prefix(path, "safetensors file", 8), path)
    data = read_bytes(path, "safetensors file")
    header, start = _header(data, path)
    raw: dict[str, Any] = {}
    meta = header.pop("__metadata__", {}) or {}
    if not isinstance(meta, dict):
        raise CaptureFormatError(f"'{terminal(path)}': __metadata__ must be an object of strings")
    if not meta and not header:
        raise nothing_to_import(path, "no tensor and no metadata")
    check_field_count(len(meta) + len(header), f"'{terminal(path)}'")
    check_disjoint(meta, header, path, "tensor")
    for key, text in meta.items():
        raw[key] = _meta_value(key, text, path)
    spans: list[tuple[int, int, str]] = []
    for name, info in header.items():
        raw[name] = _tensor(memoryview(data)[start:], name, info, path, spans)
    _check_spans(spans, path)
    return Imported(records=[record_from_dict(raw, where_of(path.name, 0))])


def _check_header_length(head: bytes, path: Path) -> int:
    """The header length the file's first 8 bytes claim, when within :data:`MAX_HEADER`.

    Raises CaptureFormatError naming the file, the field (header length) and the fix."""
    if len(head) < 8:
        raise CaptureFormatError(f"'{terminal(path)}' is too short for a safetensors header")
    size = int.from_bytes(head[:8], "little")
    if size > MAX_HEADER:
        raise CaptureFormatError(f"'{terminal(path)}': header claims {size} bytes (its header "
                                 f"length), past the {MAX_HEADER} one record needs "
                                 f"({MAX_TENSORS} tensors and {MAX_JSON} of __metadata__); save "
                                 "long lists as tensors, one record per file")
    return size


def _header(data: bytes, path: Path) -> tuple[dict[str, Any], int]:
    size = _check_header_length(data[:8], path)
    if size > len(data) - 8:
        raise CaptureFormatError(f"'{terminal(path)}': header claims {size} bytes but the file "
                                 f"holds {len(data) - 8}; the file is truncated or not safetensors")
    text = data[8:8 + size]
    check_containers(text, f"'{terminal(path)}': header")
    _check_items(text, path)
    try:
        header = strict_json(text.decode("utf-8"))
    except DuplicateKeyError as exc:
        raise CaptureFormatError(f"'{terminal(path)}': header: {exc}; name each tensor and key "
                                 "once") from None
    except (ValueError, RecursionError) as exc:
        raise CaptureFormatError(f"'{terminal(path)}': header is not JSON "
                                 f"({reason(exc)})") from None
    if not isinstance(header, dict):
        raise CaptureFormatError(f"'{terminal(path)}': header must be a JSON object")
    if len(header) > MAX_TENSORS + 1:
        raise CaptureFormatError(f"'{terminal(path)}': header names {len(header)} tensors; one "
                                 f"record holds at most {MAX_TENSORS}; one record per file")
    return header, 8 + size


def _check_items(text: bytes, path: Path) -> None:
    """Refuse a header of more JSON items than one record's needs (:data:`HEADER_ITEMS` for
    each of its fields), counted before it is parsed: its strings, and its commas outside
    strings, one string at a time and no further than the limit (1.37 million
    ``__metadata__`` keys were 400 MB and 1.4 s of parsing before the field count refused them).

    Raises CaptureFormatError naming the file, the header, the count and the fix."""
    fields = max_fields()
    cap = HEADER_ITEMS * (fields + 1)
    strings = commas = pos = 0
    while strings <= cap and commas <= cap:
        found = _NEXT_STRING.match(text, pos)
        if found is None:  # no string left (or one never closed: the parse refuses it)
            end = text.find(b'"', pos)
            commas += text.count(b",", pos, len(text) if end < 0 else end)
            break
        strings, commas = strings + 1, commas + text.count(b",", pos, found.start(1))
        pos = found.end()
    if strings > cap or commas > cap:
        what = "strings" if strings > cap else "commas outside strings"
        raise CaptureFormatError(
            f"'{terminal(path)}': header holds more than {cap} JSON {what}, past what one "
            f"record's {fields} fields need ({HEADER_ITEMS} items each: __metadata__ keys, or "
            "tensors with their dtype, shape and data_offsets); write one record's fields, one "
            "record per file, long lists as tensors")


def _meta_value(key: str, text: Any, path: Path) -> Any:
    if not isinstance(text, str):
        raise CaptureFormatError(f"'{terminal(path)}': __metadata__[{show(key)}] must be a string")
    if key == "site":
        return text
    if len(text) > MAX_JSON:
        raise CaptureFormatError(f"'{terminal(path)}': __metadata__[{show(key)}] is a JSON text of "
                                 f"{len(text)} characters; at most {MAX_JSON}; save ids as "
                                 "tensors")
    check_containers(text, lambda: f"'{terminal(path)}': __metadata__[{show(key)}]")
    check_keys(text, lambda: f"'{terminal(path)}': __metadata__[{show(key)}]")
    try:
        return strict_json(text)
    except DuplicateKeyError as exc:
        raise CaptureFormatError(f"'{terminal(path)}': __metadata__[{show(key)}]: {exc}; give "
                                 "each key once") from None
    except (ValueError, RecursionError):
        raise CaptureFormatError(f"'{terminal(path)}': __metadata__[{show(key)}] = {text[:60]!r} "
                                 "is not JSON; write ints as 5, lists as [1, 2], strings as "
                                 "\"abc\"") from None


def _check_spans(spans: list[tuple[int, int, str]], path: Path) -> None:
    """Refuse tensors whose data overlap (a file that reads one buffer as two tensors), and
    tensors past the decoding limits (each and in all)."""
    if sum(end - begin for begin, end, _ in spans) > MAX_DECODED or any(
            end - begin > MAX_MEMBER for begin, end, _ in spans):
        raise CaptureFormatError(f"'{terminal(path)}': tensors hold more than {MAX_MEMBER} bytes "
                                 f"each or {MAX_DECODED} in all; split the dump")
    spans.sort()
    for (_, end, first), (begin, _, second) in zip(spans, spans[1:], strict=False):
        if begin < end:
            raise CaptureFormatError(f"'{terminal(path)}': tensors {show(first)} and "
                                     f"{show(second)} overlap in the data; each tensor needs its "
                                     "own bytes")


def _tensor(body: memoryview, name: str, info: Any, path: Path,
            spans: list[tuple[int, int, str]]) -> np.ndarray:
    where = f"'{terminal(path)}': tensor {show(name)}"
    if not isinstance(info, dict):
        raise CaptureFormatError(f"{where}: header entry must be an object")
    dtype_name, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(dtype_name, str) or dtype_name not in DTYPES:  # a list is unhashable
        raise CaptureFormatError(f"{where}: dtype {show(dtype_name)} is not supported; "
                                 f"expected one of {sorted(DTYPES)}")
    if not (isinstance(shape, list) and len(shape) <= 8
            and all(_count(s) and s <= MAX_DIM for s in shape)):
        raise CaptureFormatError(f"{where}: shape must be a list of at most 8 ints in "
                                 f"[0, {MAX_DIM}]")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_count(o) for o in offsets)):
        raise CaptureFormatError(f"{where}: data_offsets must be [begin, end]")
    dtype = np.dtype(DTYPES[dtype_name])
    span = 1  # the product of the non-zero sizes: numpy refuses shapes past intp
    for size in shape:
        span = min(span * max(size, 1), MAX_DIM + 1)
    if span > MAX_DIM:
        raise CaptureFormatError(f"{where}: shape {shape} spans more than {MAX_DIM} elements")
    count = 0 if 0 in shape else span
    begin, end = offsets
    if not begin <= end <= len(body) or end - begin != count * dtype.itemsize:
        raise CaptureFormatError(f"{where}: data_offsets {offsets} do not hold shape {shape} "
                                 f"of {dtype_name} within the {len(body)} data bytes")
    spans.append((begin, end, name))
    flat = np.frombuffer(body[begin:end], dtype=dtype)
    return flat.reshape(shape).astype(dtype.newbyteorder("="))


def _count(value: Any) -> bool:
    return plain_int(value) and value >= 0
