"""The frames the probe's records take through the shared-memory ring to the writer process.

A frame is 8-byte aligned and starts with its length (``uint32``, header included) and its
kind (``uint8``). The kinds:

- ``BLOCK``: consecutive records of one site made only of joined copies of one-dimensional
  tensors, with the same fields and dtypes (the usual ``batch_change`` record): a header
  (layout number, record count), every record's step and rank and every tensor's length
  (``int64``), then per joined copy all the records' buffers end to end. The engine's side
  writes it at a poke, in a few numpy calls and one ``torch.cat`` per joined copy (straight
  into the ring): nothing per record but reading its attributes.
- ``LAYOUT``: announces a layout number before its first ``BLOCK`` frame: the site, and per
  joined copy the field names, numpy dtypes and carrier items per value (JSON).
- ``RECORD``: any other record: a JSON header (site, step, rank, the plain Python values:
  ints, lists of strings, dicts, lists of lists) and each numpy array's bytes after it.
- ``EVENT``: an event (JSON).
- ``PAD``: the unused end of the ring before it wraps.

No pickle: the writer process rebuilds :class:`~forensics.probe.copy.PendingRecord`\\ s from
numbers, JSON and bytes, and numpy dtypes only of the numeric and boolean kinds.
"""

from __future__ import annotations

import functools
import json
import struct
from itertools import chain
from operator import attrgetter
from typing import Any

import numpy as np

from forensics.probe.copy import Deferred, Joined, PendingRecord

PAD, BLOCK, LAYOUT, RECORD, EVENT = 0, 1, 2, 3, 4
ALIGN = 8
HEAD = struct.Struct("<IB3x")  # length, kind
BLOCK_HEAD = struct.Struct("<IBxHI4x")  # length, kind, layout, record count
BLOB_HEAD = struct.Struct("<IB3xI4x")  # length, kind, JSON length (RECORD, LAYOUT, EVENT)
ARRAY_KINDS = "biuf"  # numpy dtype kinds a RECORD frame may carry (the store checks them)


class FrameError(ValueError):
    """A frame that cannot be read (a bug on one side, never the capture's data)."""


def padded(size: int) -> int:
    """``size`` rounded up to the frame alignment."""
    return -(-size // ALIGN) * ALIGN


# -- the engine's side -----------------------------------------------------------------------
class Layout:
    """A ``BLOCK`` layout: its number, its fields' count, each joined copy's carrier dtype
    (torch's) and its ``LAYOUT`` frame."""

    __slots__ = ("number", "width", "carriers", "announce")

    def __init__(self, number: int, site: str, parts: tuple[Any, ...]) -> None:
        self.number = number
        self.width = sum(len(names) for names, _ in parts)
        self.carriers = tuple(plan.carrier for _, plan in parts)
        self.announce = blob(LAYOUT, {"number": number, "site": site, "parts": [
            [list(names), [dtype.str for dtype in plan.dtypes], list(plan.ratios),
             plan.carrier.itemsize] for names, plan in parts]})


def joined_parts(pending: PendingRecord) -> tuple[Any, ...] | None:
    """The (names, plan) of each joined copy of ``pending`` when it can go in a ``BLOCK``
    frame (no other field, every copy joined into one buffer of one-dimensional tensors),
    else None."""
    if pending.fields or not pending.joined:
        return None
    for _, joined in pending.joined:
        if joined.plan is None or not joined.flat:
            return None
    return tuple([(names, joined.plan) for names, joined in pending.joined])


def runs(ready: list[PendingRecord]) -> list[tuple[Any, list[PendingRecord]]]:
    """``ready`` in order, as (joined parts, records): consecutive records of one site and
    the same :func:`joined_parts` together (a ``BLOCK`` frame), any other record alone
    (parts None: a ``RECORD`` frame)."""
    out: list[tuple[Any, list[PendingRecord]]] = []
    last: Any = None
    for pending in ready:
        parts = joined_parts(pending)
        key = None if parts is None else (pending.site, parts)
        if key is not None and key == last:
            out[-1][1].append(pending)
        else:
            out.append((parts, [pending]))
        last = key
    return out


def block_size(layout: Layout, pendings: list[PendingRecord]
               ) -> tuple[int, list[list[Any]], list[int]]:
    """The ``BLOCK`` frame size of ``pendings``, each joined copy's buffers (host tensors)
    and their bytes."""
    parts: list[list[Any]] = []
    for j in range(len(layout.carriers)):
        buffers = [p.joined[j][1].data for p in pendings]
        if Deferred in set(map(type, buffers)):
            buffers = [b.buffer if type(b) is Deferred else b for b in buffers]
        parts.append(buffers)
    nbytes = [sum([b.nbytes for b in buffers]) for buffers in parts]
    fixed = BLOCK_HEAD.size + 8 * len(pendings) * (2 + layout.width)
    return fixed + sum(map(padded, nbytes)), parts, nbytes


def put_block(ring: Any, offset: int, size: int, layout: Layout,
              pendings: list[PendingRecord], parts: list[list[Any]], nbytes: list[int]) -> None:
    """Write the ``BLOCK`` frame of ``pendings`` (``size`` bytes, :func:`block_size`) at
    ``offset`` of ``ring`` (a :class:`Ring`): the header, steps, ranks and tensor lengths in
    a few numpy calls, then each joined copy's buffers end to end by one ``torch.cat``."""
    count = len(pendings)
    BLOCK_HEAD.pack_into(ring.view, offset, size, BLOCK, layout.number, count)
    at = (offset + BLOCK_HEAD.size) // 8
    ints = ring.ints
    ints[at:at + count] = np.fromiter(map(_STEP, pendings), np.int64, count)
    ints[at + count:at + 2 * count] = np.fromiter(map(_RANK, pendings), np.int64, count)
    at += 2 * count
    width = count * layout.width
    ints[at:at + width] = np.fromiter(chain.from_iterable(chain.from_iterable(
        [joined.shapes for p in pendings for _, joined in p.joined])), np.int64, width)
    at = (at + width) * 8
    for buffers, count_bytes, carrier in zip(parts, nbytes, layout.carriers, strict=True):
        ring.torch.cat(buffers, out=ring.tensor[at:at + count_bytes].view(carrier))
        at += padded(count_bytes)


_STEP, _RANK = attrgetter("step"), attrgetter("rank")


def blob(kind: int, header: dict[str, Any], arrays: tuple[np.ndarray, ...] = ()) -> bytes:
    """A ``RECORD``, ``LAYOUT`` or ``EVENT`` frame: ``header`` as JSON, then ``arrays``'
    bytes, each padded. Raises TypeError or ValueError for a value JSON cannot hold."""
    return _framed(kind, _ENCODE(header).encode(), list(arrays))


def record_blob(pending: PendingRecord) -> bytes:
    """The ``RECORD`` frame of ``pending`` (its copies completed): byte for byte the frame of
    :func:`blob` of its header, written from cached pieces (:func:`record_header`)."""
    record = pending.to_record()
    data = [value for value in record.fields.values() if isinstance(value, np.ndarray)]
    return _framed(RECORD, record_header(record.site, record.step, record.rank,
                                         record.fields).encode(), data)


def record_header(site: str, step: int, rank: int, fields: dict[str, Any]) -> str:
    """The JSON header of a ``RECORD`` frame, as :data:`_ENCODE` writes ``{"site", "step",
    "rank", "fields": the plain values, "arrays": each array's [dtype, shape]}``, from
    pieces: each field name's JSON made once, a list of request ids' JSON kept while the
    same ids come again (a decode step's batch), each set of arrays' dtypes and shapes'
    JSON made once. Any other value is encoded as it comes (raising what encoding raises)."""
    if not all(type(name) is str for name in fields) or type(site) is not str:
        return _slow_header(site, step, rank, fields)
    plain: list[str] = []
    shapes: list[tuple[str, str, tuple[int, ...]]] = []
    for name, value in fields.items():
        if isinstance(value, np.ndarray):
            shapes.append((name, value.dtype.str, value.shape))
        else:
            plain.append(f"{_name(name)}: {_value(value)}")
    arrays = _ARRAYS.get(key := tuple(shapes))
    if arrays is None:
        if len(_ARRAYS) >= _ARRAYS_KEPT:
            _ARRAYS.clear()
        arrays = _ARRAYS[key] = _ENCODE({name: [dtype, list(shape)]
                                          for name, dtype, shape in shapes})
    return (f'{{"site": {_name(site)}, "step": {_ENCODE(step)}, "rank": {_ENCODE(rank)}, '
            f'"fields": {{{", ".join(plain)}}}, "arrays": {arrays}}}')


def _slow_header(site: str, step: int, rank: int, fields: dict[str, Any]) -> str:
    """:func:`record_header` as one encoding of the whole header (a field name not a str)."""
    plain: dict[Any, Any] = {}
    arrays: dict[Any, Any] = {}
    for name, value in fields.items():
        if isinstance(value, np.ndarray):
            arrays[name] = [value.dtype.str, list(value.shape)]
        else:
            plain[name] = value
    return _ENCODE({"site": site, "step": step, "rank": rank, "fields": plain,
                    "arrays": arrays})


def only_strings(values: list[Any]) -> bool:
    """Whether every item of ``values`` is exactly a ``str`` (a subclass is not; an empty
    list is): one set of types, cheaper than a test per item."""
    return set(map(type, values)) <= _STR_ONLY


_STR_ONLY = {str}
#: the last list of strings encoded (a copy) and its JSON
_last_ids: tuple[list[str], str] = ([], "[]")
#: JSON of a set of arrays' names, dtypes and shapes; cleared when it holds this many
_ARRAYS: dict[tuple[tuple[str, str, tuple[int, ...]], ...], str] = {}
_ARRAYS_KEPT = 256


def _value(value: Any) -> str:
    """The JSON of one plain field value; a list of strings equal to the last one encoded
    (every item a str, as it was) reuses that one's JSON."""
    global _last_ids
    if type(value) is list and value and only_strings(value):
        last = _last_ids
        if value == last[0]:
            return last[1]
        text = _ENCODE(value)
        _last_ids = (list(value), text)
        return text
    return _ENCODE(value)


def _framed(kind: int, text: bytes, arrays: list[np.ndarray]) -> bytes:
    """A frame of ``kind``: the encoded JSON ``text``, then ``arrays``' bytes, each padded."""
    parts = [b"", text, bytes(padded(len(text)) - len(text))]
    for array in arrays:
        data = np.ascontiguousarray(array).tobytes()
        parts += [data, bytes(padded(len(data)) - len(data))]
    body = b"".join(parts)
    return BLOB_HEAD.pack(BLOB_HEAD.size + len(body), kind, len(text)) + body


def _plain_number(value: Any) -> Any:
    """JSON for a numpy integer or boolean (vLLM's state may hold them)."""
    if isinstance(value, (np.integer, np.bool_)):
        return value.item()
    raise TypeError(f"{type(value).__name__} cannot cross to the writer process")


#: the frames' JSON encoder, made once (``json.dumps`` with options builds one per call)
_ENCODE = json.JSONEncoder(allow_nan=False, default=_plain_number).encode
_name = functools.lru_cache(maxsize=1024)(_ENCODE)  # a field name's (or site's) JSON


# -- the writer process's side ---------------------------------------------------------------
class ChildPlan:
    """What a :class:`~forensics.probe.copy.JoinPlan` tells the column-wise writer (numpy
    dtypes, carrier items per value), rebuilt from a ``LAYOUT`` frame without torch."""

    __slots__ = ("dtypes", "ratios", "itemsize")

    def __init__(self, dtypes: list[str], ratios: list[int], itemsize: int) -> None:
        self.dtypes = tuple(_dtype(d) for d in dtypes)
        self.ratios = tuple(int(r) for r in ratios)
        self.itemsize = int(itemsize)
        if len(self.ratios) != len(self.dtypes) or self.itemsize not in (1, 2, 4, 8):
            raise FrameError("a layout whose plan does not add up")


class ChildLayout:
    """A ``LAYOUT`` as the writer process reads its ``BLOCK`` frames: the site, the fields'
    count, and per joined copy (names, plan, first and last field, carrier dtype)."""

    __slots__ = ("site", "width", "parts")

    def __init__(self, header: dict[str, Any]) -> None:
        self.site = str(header["site"])
        self.parts: list[tuple[tuple[str, ...], ChildPlan, int, int, np.dtype[Any]]] = []
        first = 0
        for names, dtypes, ratios, itemsize in header["parts"]:
            plan = ChildPlan(dtypes, ratios, itemsize)
            if len(names) != len(plan.dtypes):
                raise FrameError("a layout whose names and dtypes differ in number")
            self.parts.append((tuple(str(n) for n in names), plan, first, first + len(names),
                               np.dtype(f"u{plan.itemsize}")))
            first += len(names)
        self.width = first


class Decoder:
    """Reads frames back into records and events (the writer process keeps one)."""

    def __init__(self) -> None:
        self.layouts: dict[int, ChildLayout] = {}

    def frame(self, view: memoryview, offset: int) -> tuple[int, int, Any]:
        """The frame at ``offset``: (its length, its kind, a PendingRecord, an event dict or
        None). Raises FrameError for a frame that cannot be read."""
        if offset + HEAD.size > len(view):
            raise FrameError(f"a frame header past the ring's end at {offset}")
        length, kind = HEAD.unpack_from(view, offset)
        if length < HEAD.size or length % ALIGN or offset + length > len(view):
            raise FrameError(f"a frame of {length} bytes at {offset}")
        if kind == PAD:
            return length, kind, None
        if kind == BLOCK:
            return length, kind, self._block(view, offset, offset + length)
        frame = view[offset:offset + length]
        if kind not in (LAYOUT, RECORD, EVENT):
            raise FrameError(f"a frame of unknown kind {kind} at {offset}")
        _, _, size = BLOB_HEAD.unpack_from(frame)
        start = BLOB_HEAD.size
        if start + size > length:
            raise FrameError("a JSON header past its frame's end")
        header = json.loads(bytes(frame[start:start + size]))
        if not isinstance(header, dict):
            raise FrameError("a frame whose JSON is not an object")
        if kind == EVENT:
            return length, kind, header
        if kind == LAYOUT:
            self._layout(header)
            return length, kind, None
        return length, kind, _record(header, frame, start + padded(size))

    def _layout(self, header: dict[str, Any]) -> None:
        self.layouts[int(header["number"])] = ChildLayout(header)

    def _block(self, view: memoryview, offset: int, end: int) -> list[PendingRecord]:
        """The records of the ``BLOCK`` frame from ``offset`` to ``end`` of ``view``: their
        joined buffers are views of the ring (valid until the frame is acknowledged)."""
        _, _, number, count = BLOCK_HEAD.unpack_from(view, offset)
        layout = self.layouts.get(number)
        if layout is None:
            raise FrameError(f"a block of layout {number}, never announced")
        at = offset + BLOCK_HEAD.size
        if at + 8 * count * (2 + layout.width) > end:
            raise FrameError("a block's lengths past its frame's end")
        ints = np.frombuffer(view, np.int64, count * (2 + layout.width), at)
        at += ints.nbytes
        pendings = [PendingRecord(layout.site, step, rank) for step, rank in
                    zip(ints[:count].tolist(), ints[count:2 * count].tolist(), strict=True)]
        lengths = ints[2 * count:].reshape(count, layout.width)
        if count and int(lengths.min()) < 0:
            raise FrameError("a block with a negative length")
        for names, plan, first, last, carrier in layout.parts:
            items = lengths[:, first:last] @ np.array(plan.ratios, dtype=np.int64)
            ends = np.cumsum(items).tolist()
            total = ends[-1] if ends else 0
            if at + total * plan.itemsize > end:
                raise FrameError("a joined copy past its frame's end")
            data = np.frombuffer(view, carrier, total, at)
            shapes = lengths[:, first:last].tolist()
            start = 0
            for pending, stop, shape in zip(pendings, ends, shapes, strict=True):
                pending.joined.append((names, Joined(data[start:stop], plan,
                                                     tuple(zip(shape)), flat=True)))
                start = stop
            at += padded(total * plan.itemsize)
        return pendings


def _record(header: dict[str, Any], frame: memoryview, at: int) -> PendingRecord:
    """The PendingRecord of a ``RECORD`` frame whose arrays start at ``at``."""
    fields = dict(header["fields"])
    for name, (dtype, shape) in header["arrays"].items():
        kind = _dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if count < 0 or at + count * kind.itemsize > len(frame):
            raise FrameError(f"array {name!r} past its frame's end")
        fields[name] = np.frombuffer(frame, kind, count, at).reshape(shape).copy()
        at += padded(count * kind.itemsize)
    return PendingRecord(str(header["site"]), int(header["step"]), int(header["rank"]), fields)


def _dtype(text: str) -> np.dtype[Any]:
    """The numpy dtype spelled ``text`` (numbers and booleans only: never an object)."""
    dtype = np.dtype(str(text))
    if dtype.kind not in ARRAY_KINDS:
        raise FrameError(f"dtype {text!r} cannot cross to the writer process")
    return dtype
