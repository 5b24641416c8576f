"""What an Arrow IPC message's header says before pyarrow decodes its body.

The header is a FlatBuffers ``Message`` (Arrow's ``format/Message.fbs``); this reads what
the store must know before the body is decoded: whether a record batch's body is
compressed (its ``RecordBatch`` table holds a ``compression`` field). pyarrow decompresses a
body as it decodes it, to whatever size the body's buffers claim, so a compressed batch of a
few KiB can take gigabytes; the probe writes uncompressed batches, and a segment's batch is
refused before it is decoded when it is not one of those (:func:`compression_of`). Nor is a
batch whose body buffers overlap (:func:`overlapping_buffer`): columns decoded from the same
bytes cost nothing until they are copied, then each costs the whole buffer again. Nor is a
schema whose metadata names a key twice (:func:`repeated_metadata_key`): pyarrow's dict of it
keeps one value and drops the other, which another reader may take.

Every read is bounds-checked: a header that is not a well-formed ``Message`` raises
``ValueError``, never reads outside ``header``.
"""

from __future__ import annotations

import struct

#: ``MessageHeader`` union: the types of a ``Schema`` and a ``RecordBatch`` header
SCHEMA, RECORD_BATCH = 1, 3
#: ``Schema`` fields: ``fields`` (a vector of ``Field`` tables) and ``custom_metadata`` (a
#: vector of ``KeyValue`` tables: ``key`` and ``value``, two strings)
_FIELDS, _SCHEMA_METADATA = 1, 2
#: ``Field`` fields: ``name``, ``children`` (a vector of ``Field``) and ``custom_metadata``
_NAME, _CHILDREN, _FIELD_METADATA = 0, 5, 6
_KEY = 0
#: ``Message`` fields (their vtable slots): ``header_type``, ``header``, ``bodyLength``
_HEADER_TYPE, _HEADER, _BODY_LENGTH = 1, 2, 3
#: ``RecordBatch`` fields: ``buffers`` (a vector of ``Buffer`` structs: offset and length,
#: two int64) and ``compression`` (a ``BodyCompression`` table)
_BUFFERS, _COMPRESSION = 2, 3
_BUFFER_STRUCT = 16
#: ``RecordBatch`` fields: ``length`` (its rows) and ``nodes`` (a vector of ``FieldNode``
#: structs: a column's length and null count, two int64, as ``Buffer``)
_LENGTH, _NODES = 0, 1
#: ``BodyCompression`` field ``codec`` (a byte) and its names
_CODEC = 0
CODECS = {0: "LZ4_FRAME", 1: "ZSTD"}


def body_length(header: bytes) -> int:
    """The length of the body that follows the ``Message`` whose header is ``header`` (its
    ``bodyLength``). Raises ValueError when ``header`` is not a well-formed ``Message``."""
    return _scalar(header, _uoffset(header, 0), _BODY_LENGTH, "<q")


def compression_of(header: bytes) -> str | None:
    """The codec that compresses the body of the record batch whose ``Message`` header is
    ``header`` (``"ZSTD"``, ``"LZ4_FRAME"``, or ``"codec N"`` for a code Arrow does not
    define); None when the body is not compressed or the message is no record batch.
    Raises ValueError when ``header`` is not a well-formed ``Message``."""
    batch = _record_batch(header)
    if batch is None:
        return None
    compression = _table_field(header, batch, _COMPRESSION)
    if compression is None:
        return None
    codec = _scalar(header, compression, _CODEC, "<b")
    return CODECS.get(codec, f"codec {codec}")


def overlapping_buffer(header: bytes) -> int | None:
    """The index of the first body buffer of a record batch's ``Message`` header that starts
    before the previous non-empty one ends (buffers aliasing one another: several columns, or
    a column and another's values, decoded from the same bytes), or None when each buffer
    follows the last, as Arrow's writers lay them out, or the message is no record batch.
    Linear in the buffers. Raises ValueError when ``header`` is not a well-formed ``Message``."""
    batch = _record_batch(header)
    vector = None if batch is None else _table_field(header, batch, _BUFFERS)
    if vector is None:
        return None
    end = 0
    for i in range(_read(header, "<I", vector)):
        at = vector + 4 + _BUFFER_STRUCT * i
        offset, length = _read(header, "<q", at), _read(header, "<q", at + 8)
        if length == 0:
            continue
        if offset < end:
            return i
        end = offset + length
    return None


def first_column(header: bytes) -> tuple[int, int, int, int, int] | None:
    """What a record batch's ``Message`` header says of the batch and its first column, read
    as a primitive column (buffer 0 its validity bitmap, buffer 1 its values): the batch's
    rows, the column's length and null count, and the offset and length of its values in the
    body; None when the message is no record batch. Raises ValueError when ``header`` is not
    a well-formed ``Message`` or the batch has no such column."""
    batch = _record_batch(header)
    if batch is None:
        return None
    nodes, buffers = _table_field(header, batch, _NODES), _table_field(header, batch, _BUFFERS)
    if nodes is None or buffers is None or not _read(header, "<I", nodes) \
            or _read(header, "<I", buffers) < 2:
        raise ValueError("a record batch without the nodes and buffers of a first column")
    values = buffers + 4 + _BUFFER_STRUCT
    return (_scalar(header, batch, _LENGTH, "<q"), _read(header, "<q", nodes + 4),
            _read(header, "<q", nodes + 12), _read(header, "<q", values),
            _read(header, "<q", values + 8))


def batch_rows(header: bytes) -> int | None:
    """The rows a record batch's ``Message`` header claims; None when the message is no record
    batch. Raises ValueError when ``header`` is not a well-formed ``Message``."""
    batch = _record_batch(header)
    return None if batch is None else _scalar(header, batch, _LENGTH, "<q")


def repeated_metadata_key(header: bytes) -> tuple[bytes | None, bytes] | None:
    """The first key that the custom metadata of a schema's ``Message`` header names twice,
    with the name of the field whose metadata it is (None: the schema's own); None when no
    key repeats or the message is no schema. Each table is read once (linear in the header).
    Raises ValueError when ``header`` is not a well-formed ``Message``."""
    schema = _header_table(header, SCHEMA, "Schema")
    if schema is None:
        return None
    key = _repeated_key(header, _table_field(header, schema, _SCHEMA_METADATA))
    if key is not None:
        return None, key
    fields = _tables(header, _table_field(header, schema, _FIELDS))
    seen: set[int] = set()
    while fields:
        field = fields.pop()
        if field in seen:
            continue
        seen.add(field)
        key = _repeated_key(header, _table_field(header, field, _FIELD_METADATA))
        if key is not None:
            return _string(header, _table_field(header, field, _NAME)), key
        fields += _tables(header, _table_field(header, field, _CHILDREN))
    return None


def _tables(header: bytes, vector: int | None) -> list[int]:
    """The tables a vector of table offsets (None: absent, empty) points to."""
    if vector is None:
        return []
    return [_uoffset(header, vector + 4 + 4 * i) for i in range(_read(header, "<I", vector))]


def _string(header: bytes, at: int | None) -> bytes | None:
    """The bytes of a FlatBuffers string (None: absent)."""
    if at is None:
        return None
    size = _read(header, "<I", at)
    if at + 4 + size > len(header):
        raise ValueError(f"a string at byte {at} runs past the header's {len(header)} bytes")
    return header[at + 4:at + 4 + size]


def _repeated_key(header: bytes, vector: int | None) -> bytes | None:
    """The first key a ``KeyValue`` vector names twice; None when none repeats."""
    keys: set[bytes] = set()
    for pair in _tables(header, vector):
        key = _string(header, _table_field(header, pair, _KEY)) or b""  # absent: empty
        if key in keys:
            return key
        keys.add(key)
    return None


def _record_batch(header: bytes) -> int | None:
    """Where the ``RecordBatch`` table of the ``Message`` ``header`` is; None when the
    message is no record batch."""
    return _header_table(header, RECORD_BATCH, "RecordBatch")


def _header_table(header: bytes, kind: int, name: str) -> int | None:
    """Where the header table (``name``, of union type ``kind``) of the ``Message`` ``header``
    is; None when the message holds another kind of header."""
    message = _uoffset(header, 0)
    if _scalar(header, message, _HEADER_TYPE, "<B") != kind:
        return None
    table = _table_field(header, message, _HEADER)
    if table is None:
        raise ValueError(f"a {name} message without its {name} header")
    return table


def _read(header: bytes, fmt: str, at: int) -> int:
    if at < 0 or at + struct.calcsize(fmt) > len(header):
        raise ValueError(f"a header field at byte {at} lies outside its {len(header)} bytes")
    return int(struct.unpack_from(fmt, header, at)[0])


def _uoffset(header: bytes, at: int) -> int:
    """The table an unsigned 32-bit offset stored at ``at`` points to."""
    return at + _read(header, "<I", at)


def _slot(header: bytes, table: int, field: int) -> int:
    """Where ``field`` of ``table`` is stored (0: absent, its default)."""
    vtable = table - _read(header, "<i", table)
    size = _read(header, "<H", vtable)
    entry = 4 + 2 * field
    return 0 if entry + 2 > size else _read(header, "<H", vtable + entry)


def _scalar(header: bytes, table: int, field: int, fmt: str) -> int:
    """A scalar field of ``table`` (its default, 0, when absent)."""
    slot = _slot(header, table, field)
    return 0 if slot == 0 else _read(header, fmt, table + slot)


def _table_field(header: bytes, table: int, field: int) -> int | None:
    """The table a field of ``table`` points to; None when absent."""
    slot = _slot(header, table, field)
    return None if slot == 0 else _uoffset(header, table + slot)
