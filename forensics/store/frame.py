"""``Capture.to_frame(site)``: one pandas row per record, built column-wise from the batches."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

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
        columns.append(name if spec.kind == "int" else f"{name}_len")
    for name in (*SUMMARY_COMMON, get_site(site).SUMMARY_BOUND):
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
    total = 0
    for seg in segments:
        for i in range(len(seg.rows)):
            view = seg.batch(i)
            for name, values in _batch_columns(view).items():
                if name not in chunks:
                    columns += [] if name in columns else [name]
                    chunks[name] = [_missing(total, values)]
                chunks[name].append(values)
            total += len(view)
            for name in chunks:
                filled = sum(len(c) for c in chunks[name])
                if filled < total:
                    chunks[name].append(_missing(total - filled, chunks[name][-1]))
    data = {name: _to_series(chunks[name], total) if name in chunks
            else pd.array([pd.NA] * total, dtype="Int64") for name in columns}
    frame = pd.DataFrame(data, columns=columns)
    frame = frame.sort_values(["step", "rank"], kind="stable").reset_index(drop=True)
    frame["summary"] = frame["summary"].astype(bool)
    return frame


def _batch_columns(view: BatchView) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {
        "step": view.steps,
        "rank": an.values(view.column("rank")),
        "summary": np.asarray(view.summary, dtype=object),
    }
    for name, (kind, _dtype) in view.columns.items():
        column = view.column(name)
        if kind == "int":
            out[name] = _nullable(column.to_pylist())
        elif kind == "str":
            out[name] = np.asarray(column.to_pylist(), dtype=object)
        elif kind == "tensor":
            out[f"{name}_len"] = _first_dim(view.column(name + SHAPE_SUFFIX))
        else:
            out[f"{name}_len"] = _lengths(column)
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


def _missing(count: int, like: np.ndarray) -> np.ndarray:
    return np.full(count, None, dtype=object)


def _to_series(chunks: list[np.ndarray], total: int) -> Any:
    import pandas as pd

    values = np.concatenate(chunks) if chunks else np.zeros(0, dtype=object)
    if all(v is None or isinstance(v, (int, np.integer, bool, np.bool_)) for v in values):
        if all(isinstance(v, (bool, np.bool_)) for v in values if v is not None) and len(values):
            return values
        return pd.array([None if v is None else int(v) for v in values], dtype="Int64")
    return values
