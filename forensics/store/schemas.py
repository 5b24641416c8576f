"""The decoded schemas of one capture's segments, each distinct schema message decoded once and
all of them together within :data:`MAX_CAPTURE_SCHEMA_BYTES` (:class:`Schemas`)."""

from __future__ import annotations

import hashlib
from typing import Any

import pyarrow as pa

from forensics.errors import CaptureFormatError
from forensics.store.arrow_codec import ColumnSig, refuse_repeated_key, schema_columns, schema_info

#: the most bytes the distinct schema messages of one capture's segments take together
MAX_CAPTURE_SCHEMA_BYTES = 32 << 20


class Schemas:
    """The decoded schemas of one capture's segments: each distinct schema message is decoded
    once (a capture's segments of one site, rank and process share theirs), and the distinct
    ones take at most :data:`MAX_CAPTURE_SCHEMA_BYTES` together. A decoded schema takes several
    times its bytes (about 5.5x for one of thousands of columns) and is held while its capture
    is open, so a capture of many segments, each a schema under :data:`MAX_SCHEMA_BYTES` with
    other column names, is refused before its schemas outgrow the memory budget."""

    def __init__(self) -> None:
        self._known: dict[bytes, tuple[pa.Schema, dict[str, Any], dict[str, ColumnSig]]] = {}
        self._bytes = 0

    def decode(self, message: pa.ipc.Message, where: str
               ) -> tuple[pa.Schema, dict[str, Any], dict[str, ColumnSig]]:
        """The schema of ``message``, its ``forensics`` metadata and its field columns.
        Raises CaptureFormatError (naming ``where``) for a bad schema, or one that takes the
        capture's distinct schemas past :data:`MAX_CAPTURE_SCHEMA_BYTES`."""
        raw = message.metadata.to_pybytes()
        key = hashlib.blake2b(raw, digest_size=32).digest()
        known = self._known.get(key)
        if known is not None:
            return known
        if self._bytes + len(raw) > MAX_CAPTURE_SCHEMA_BYTES:
            raise CaptureFormatError(
                f"{where}: its schema takes the capture's distinct segment schemas past "
                f"{MAX_CAPTURE_SCHEMA_BYTES} bytes (each is decoded and held while the capture "
                "is open; the probe's take a few KiB each): rewrite the segments with fewer "
                "columns and metadata, or split the capture")
        refuse_repeated_key(raw, where)
        schema = pa.ipc.read_schema(message)
        known = (schema, schema_info(schema, where), schema_columns(schema, where))
        self._bytes += len(raw)
        self._known[key] = known
        return known
