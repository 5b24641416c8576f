"""``forensics.open_many(paths)``: one ``pyarrow.dataset`` per site over every capture's segments.

Each segment's record batches are the store's own (memory-mapped, validated before use), with
``capture``, ``host`` and ``pid`` columns added beside the ``rank`` they hold: the data is read in
place, not copied. Batches of one site may differ (a field some records lack, an integer width):
the site's schema is their union, a missing column reads as null, and only a column narrower than
the union's type is widened (a copy of that column alone).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from forensics.errors import ConfigurationError

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.dataset as ds

#: columns added to every batch, beside the store's ``step``, ``rank`` and ``summary``
ADDED_COLUMNS = ("capture", "host", "pid")
ON_ERROR = ("raise", "skip")


def open_many(paths: Iterable[str | os.PathLike[str]], on_error: str = "raise"
              ) -> dict[str, ds.Dataset]:
    """``{site: dataset}`` over the captures under ``paths`` (captures, folders holding them,
    globs), sites in pipeline order.

    ``on_error``: ``"raise"`` (default) or ``"skip"`` (leave out a capture that cannot be read).
    Raises:
        ConfigurationError: a path names no capture, or ``on_error`` is not a choice.
        CaptureFormatError, UnsafeInputError: a capture cannot be read (``on_error="raise"``).
    """
    from forensics.fleet.paths import find_captures
    from forensics.sites import SITES

    if on_error not in ON_ERROR:
        raise ConfigurationError(f"open_many: on_error={on_error!r}; choose one of {ON_ERROR}")
    batches: dict[str, list[pa.RecordBatch]] = {}
    for path in find_captures(paths):
        try:
            found = capture_batches(path)
        except Exception:
            if on_error == "raise":
                raise
            continue
        for site, site_batches in found.items():
            batches.setdefault(site, []).extend(site_batches)
    return {site: site_dataset(batches[site]) for site in SITES if site in batches}


def capture_batches(path: str | os.PathLike[str]) -> dict[str, list[pa.RecordBatch]]:
    """Every record batch of the capture at ``path`` per site, with the added columns.

    Raises CaptureFormatError or UnsafeInputError when the capture cannot be read.
    """
    from forensics.store.reader import load

    capture = load(path)
    process = capture.manifest.get("process")
    process = process if isinstance(process, dict) else {}
    host = process.get("host") if isinstance(process.get("host"), str) else None
    pid = process.get("pid") if isinstance(process.get("pid"), int) else None
    out: dict[str, list[pa.RecordBatch]] = {}
    for view in capture.batches():
        out.setdefault(view.site, []).append(
            _with_origin(view.batch, os.path.abspath(capture.path), host, pid))
    return out


def _with_origin(batch: pa.RecordBatch, capture: str, host: str | None, pid: int | None
                 ) -> pa.RecordBatch:
    """``batch`` without field metadata, with constant ``capture``, ``host`` and ``pid``."""
    import pyarrow as pa

    n = batch.num_rows
    arrays = [*batch.columns, pa.array([capture] * n, pa.string()),
              pa.array([host] * n, pa.string()), pa.array([pid] * n, pa.int64())]
    fields = [pa.field(f.name, f.type) for f in batch.schema]
    fields += [pa.field("capture", pa.string()), pa.field("host", pa.string()),
               pa.field("pid", pa.int64())]
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def site_dataset(batches: list[pa.RecordBatch]) -> ds.Dataset:
    """One dataset over ``batches`` of one site: their union schema, each batch in place but
    for columns it must widen to that schema."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    schema = pa.unify_schemas([b.schema for b in batches], promote_options="permissive")
    groups: dict[pa.Schema, list[pa.RecordBatch]] = {}
    for batch in batches:
        widened = _widened(batch, schema)
        groups.setdefault(widened.schema, []).append(widened)
    children = [ds.dataset(group, schema=group[0].schema) for group in groups.values()]
    return ds.dataset(children, schema=schema)


def _widened(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` with each column whose type differs from ``schema``'s cast to it."""
    import pyarrow as pa

    if all(f.type == schema.field(f.name).type for f in batch.schema):
        return batch
    arrays = [col if f.type == schema.field(f.name).type else col.cast(schema.field(f.name).type)
              for f, col in zip(batch.schema, batch.columns, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(
        [schema.field(f.name) for f in batch.schema]))
