"""The frames the probe's records take through the shared-memory ring to the writer process.

A frame is 8-byte aligned and starts with its length (``uint32``, header included) and its
kind (``uint8``). The kinds:

- ``JOINED``: a record made only of joined copies of one-dimensional tensors (the usual
  ``batch_change`` record): a fixed header (layout number, rank, step), every tensor's length
  (``int64``), then each joined buffer's bytes as they are. No Python object is made per
  field: the engine's side copies each buffer with one ``memmove``.
- ``LAYOUT``: announces a layout number before its first ``JOINED`` frame: the site, and per
  joined copy the field names, numpy dtypes and carrier items per value (JSON).
- ``RECORD``: any other record: a JSON header (site, step, rank, the plain Python values:
  ints, lists of strings, dicts, lists of lists) and each numpy array's bytes after it.
- ``EVENT``: an event (JSON).
- ``PAD``: the unused end of the ring before it wraps.

No pickle: the writer process rebuilds :class:`~forensics.probe.copy.PendingRecord`\\ s from
numbers, JSON and bytes, and numpy dtypes only of the numeric and boolean kinds.
"""

from __future__ import annotations

import ctypes
import json
import struct
from itertools import chain
from operator import mul
from typing import Any

import numpy as np

from forensics.probe.copy import Deferred, Joined, PendingRecord

PAD, JOINED, LAYOUT, RECORD, EVENT = 0, 1, 2, 3, 4
ALIGN = 8
HEAD = struct.Struct("<IB3x")  # length, kind
JOINED_HEAD = struct.Struct("<IBxHqq")  # length, kind, layout, rank, step
BLOB_HEAD = struct.Struct("<IB3xI4x")  # length, kind, JSON length (RECORD, LAYOUT, EVENT)
ARRAY_KINDS = "biuf"  # numpy dtype kinds a RECORD frame may carry (the store checks them)


class FrameError(ValueError):
    """A frame that cannot be read (a bug on one side, never the capture's data)."""


def padded(size: int) -> int:
    """``size`` rounded up to the frame alignment."""
    return -(-size // ALIGN) * ALIGN


# -- the engine's side -----------------------------------------------------------------------
class Layout:
    """A ``JOINED`` layout: its number, the struct of its lengths and its ``LAYOUT`` frame."""

    __slots__ = ("number", "lengths", "fixed", "announce")

    def __init__(self, number: int, site: str, parts: tuple[Any, ...]) -> None:
        self.number = number
        self.lengths = struct.Struct(f"<{sum(len(names) for names, _ in parts)}q")
        self.fixed = JOINED_HEAD.size + self.lengths.size  # the frame before its buffers
        self.announce = blob(LAYOUT, {"number": number, "site": site, "parts": [
            [list(names), [dtype.str for dtype in plan.dtypes], list(plan.ratios),
             plan.carrier.itemsize] for names, plan in parts]})


def joined_parts(pending: PendingRecord) -> tuple[Any, ...] | None:
    """The (names, plan) of each joined copy of ``pending`` when it can take a ``JOINED``
    frame (no other field, every copy joined into one buffer of one-dimensional tensors),
    else None."""
    if pending.fields or not pending.joined:
        return None
    for _, joined in pending.joined:
        if joined.plan is None or not joined.flat:
            return None
    return tuple([(names, joined.plan) for names, joined in pending.joined])


def joined_size(layout: Layout, pending: PendingRecord) -> tuple[int, list[Any], list[int]]:
    """The frame size of ``pending`` in ``layout``, its joined buffers (host tensors) and
    their sizes in bytes."""
    buffers = [joined.data for _, joined in pending.joined]
    if Deferred in set(map(type, buffers)):
        buffers = [b.buffer if type(b) is Deferred else b for b in buffers]
    sizes = [b.nbytes for b in buffers]
    return layout.fixed + sum(map(padded, sizes)), buffers, sizes


def put_joined(address: int, view: memoryview, offset: int, size: int, layout: Layout,
               pending: PendingRecord, buffers: list[Any], sizes: list[int]) -> None:
    """Write ``pending``'s ``JOINED`` frame of ``size`` bytes at ``offset`` of the ring
    (``view``, whose memory starts at ``address``): the header, the tensors' lengths, and
    each joined buffer by one ``memmove``."""
    JOINED_HEAD.pack_into(view, offset, size, JOINED, layout.number, pending.rank, pending.step)
    layout.lengths.pack_into(view, offset + JOINED_HEAD.size, *chain.from_iterable(
        chain.from_iterable([joined.shapes for _, joined in pending.joined])))
    at = address + offset + layout.fixed
    for buffer, nbytes in zip(buffers, sizes, strict=True):
        ctypes.memmove(at, buffer.data_ptr(), nbytes)
        at += padded(nbytes)


def blob(kind: int, header: dict[str, Any], arrays: tuple[np.ndarray, ...] = ()) -> bytes:
    """A ``RECORD``, ``LAYOUT`` or ``EVENT`` frame: ``header`` as JSON, then ``arrays``'
    bytes, each padded. Raises TypeError or ValueError for a value JSON cannot hold."""
    text = json.dumps(header, allow_nan=False, default=_plain_number).encode()
    parts = [b"", text, bytes(padded(len(text)) - len(text))]
    for array in arrays:
        data = np.ascontiguousarray(array).tobytes()
        parts += [data, bytes(padded(len(data)) - len(data))]
    body = b"".join(parts)
    return BLOB_HEAD.pack(BLOB_HEAD.size + len(body), kind, len(text)) + body


def record_blob(pending: PendingRecord) -> bytes:
    """The ``RECORD`` frame of ``pending`` (its copies completed)."""
    record = pending.to_record()
    plain: dict[str, Any] = {}
    arrays: dict[str, Any] = {}
    data: list[np.ndarray] = []
    for name, value in record.fields.items():
        if isinstance(value, np.ndarray):
            arrays[name] = [value.dtype.str, list(value.shape)]
            data.append(value)
        else:
            plain[name] = value
    return blob(RECORD, {"site": record.site, "step": record.step, "rank": record.rank,
                         "fields": plain, "arrays": arrays}, tuple(data))


def _plain_number(value: Any) -> Any:
    """JSON for a numpy integer or boolean (vLLM's state may hold them)."""
    if isinstance(value, (np.integer, np.bool_)):
        return value.item()
    raise TypeError(f"{type(value).__name__} cannot cross to the writer process")


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
    """A ``LAYOUT`` as the writer process reads its ``JOINED`` frames: the site, the struct
    of the lengths, and per joined copy (names, plan, first and last length, dtype)."""

    __slots__ = ("site", "lengths", "parts")

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
        self.lengths = struct.Struct(f"<{first}q")


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
        if kind == JOINED:
            return length, kind, self._joined(view, offset, offset + length)
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

    def _joined(self, view: memoryview, offset: int, end: int) -> PendingRecord:
        """The record of the ``JOINED`` frame from ``offset`` to ``end`` of ``view``: its
        joined buffers are views of the ring (valid until the frame is acknowledged)."""
        _, _, number, rank, step = JOINED_HEAD.unpack_from(view, offset)
        layout = self.layouts.get(number)
        if layout is None:
            raise FrameError(f"a record of layout {number}, never announced")
        lengths = layout.lengths.unpack_from(view, offset + JOINED_HEAD.size)
        at = offset + JOINED_HEAD.size + layout.lengths.size
        pending = PendingRecord(layout.site, step, rank)
        joined = pending.joined
        for names, plan, first, last, carrier in layout.parts:
            mine = lengths[first:last]
            items = sum(map(mul, mine, plan.ratios))
            nbytes = items * plan.itemsize
            if at + nbytes > end or (mine and min(mine) < 0):
                raise FrameError("a joined copy past its frame's end")
            joined.append((names, Joined(np.frombuffer(view, carrier, items, at), plan,
                                         tuple(zip(mine)), flat=True)))
            at += padded(nbytes)
        return pending


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
