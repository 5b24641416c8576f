"""Writers of tiny foreign dumps for the importer tests."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1] / "store"))

from store_helpers import valid_records  # noqa: E402

from forensics.records import Record  # noqa: E402

ST_DTYPES = {"int8": "I8", "int16": "I16", "int32": "I32", "int64": "I64", "uint8": "U8",
             "uint16": "U16", "uint32": "U32", "uint64": "U64", "float32": "F32"}

SM70_LOG = (Path(__file__).parents[1] / "data" / "sm70_engine.log").read_text()


def as_dict(record: Record) -> dict[str, Any]:
    """A record as the plain dict a foreign dump holds."""
    return {"site": record.site, "step": record.step, "rank": record.rank, **record.fields}


def save_safetensors(path: Path, tensors: dict[str, np.ndarray], meta: dict[str, str]) -> Path:
    """Write a .safetensors file (the documented layout, little-endian)."""
    header: dict[str, Any] = {"__metadata__": meta}
    blobs, offset = [], 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": ST_DTYPES[array.dtype.name], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    path.write_bytes(len(text).to_bytes(8, "little") + text + b"".join(blobs))
    return path


def record_to_safetensors(path: Path, record: Record) -> Path:
    """One record as .safetensors: arrays as tensors, everything else JSON in metadata."""
    tensors = {k: v for k, v in record.fields.items() if isinstance(v, np.ndarray)}
    meta = {k: json.dumps(v) for k, v in record.fields.items() if k not in tensors}
    meta.update(site=record.site, step=str(record.step), rank=str(record.rank))
    return save_safetensors(path, tensors, meta)


def record_to_npz(path: Path, record: Record) -> Path:
    """One record as .npz: arrays, 0-d scalars, 1-d str arrays, JSON strings for the rest."""
    arrays: dict[str, Any] = {"site": np.array(record.site), "step": np.array(record.step),
                              "rank": np.array(record.rank)}
    for name, value in record.fields.items():
        if isinstance(value, np.ndarray) or isinstance(value, int):
            arrays[name] = np.asarray(value)
        elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            arrays[name] = np.array(value)
        else:
            arrays[name] = np.array(json.dumps(value))
    np.savez(path, **arrays)
    return path


__all__ = ["SM70_LOG", "as_dict", "record_to_npz", "record_to_safetensors", "save_safetensors",
           "valid_records"]
