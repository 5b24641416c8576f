"""One segment file, read with ordinary reads into this process's own memory (its schema, batch
table and batches; never through a memory map, so a file cut while it is read is one error,
never SIGBUS), or opened through a memory map on request (``Segment(..., mapped=True)``).

Opening reads the schema message and the ``.idx`` sidecar (or scans the stream where no index
covers it); batches are parsed, validated (the structural ``validate()``; each column gets
``validate(full=True)`` when first read, see ``BatchView.column``) and checked against the index
only when first used. A message cut short at the end of the file is ignored and reported
(``truncated``); anything else malformed raises CaptureFormatError.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

from forensics.errors import CaptureFormatError, ForensicsError, SegmentChanged, reason
from forensics.escaping import terminal
from forensics.store.batch import BatchView
from forensics.store.guarded import data_extents, open_guarded, stored_size
from forensics.store.index import ENTRY, read_index
from forensics.store.ipc_header import (
    batch_rows,
    body_length,
    compression_of,
    first_column,
    overlapping_buffer,
)
from forensics.store.maps import map_file, release_pages
from forensics.store.paths import INDEX_SUFFIX, SegmentName
from forensics.store.schemas import Schemas

CONTINUATION = 0xFFFFFFFF
MIN_ROW_BYTES = 16  # every row stores at least an int64 step and an int64 rank
CACHE_SIZE = 32
MAX_SCHEMA_BYTES = 1 << 20  # a segment's schema message is a few KiB
#: an index entry's offset or length past this is no file's (and their sum stays in int64)
MAX_INDEXED_BYTES = 1 << 62
#: the most bytes one batch may take to be read into memory (:meth:`Segment.read_batch`)
MAX_READ_BYTES = 1 << 30
#: what pyarrow and numpy raise of a malformed batch
_UNREADABLE = (pa.ArrowException, OSError, ValueError, TypeError, KeyError, IndexError,
               OverflowError, EOFError, MemoryError)
_INCOMPLETE = "incomplete"
_EOS = "eos"


class Segment:
    """A segment of a capture: ``.rows``, ``.step_min``, ``.step_max`` per batch, ``batch(i)``.
    Every byte (the schema, the index's heads, each batch) is read with ordinary reads into
    this process's memory: a file cut while it is read gives a short read (SegmentChanged),
    never SIGBUS. ``mapped``: True reads through a memory map instead (zero-copy; a file cut
    between :meth:`check_whole` and the read of a page past its end raises SIGBUS and ends
    the process: for a caller who knows no one writes the capture)."""

    def __init__(self, root: Path, name: SegmentName, schemas: Schemas | None = None,
                 mapped: bool = False) -> None:
        self.root = root
        self._mapped = mapped
        self._buf: pa.Buffer | None = None
        self._bytes: np.ndarray | None = None
        self._reading = -1  # the file's descriptor while it is opened (reads without a map)
        self._lock = threading.RLock()  # one thread at a time holds ``_reading`` open
        self.size = 0
        self._schemas = Schemas() if schemas is None else schemas
        self.name = name.filename
        self.site, self.rank, self.process, self.seq = name.site, name.rank, name.process, \
            name.seq
        self.path = root / self.name
        self.where = f"segment '{terminal(self.name)}' of '{terminal(root.name)}'"
        self.truncated = False
        self.columns: dict[str, tuple[str, str]] = {}
        self._table = np.zeros(0, dtype=ENTRY)
        #: the batches whose entries come from the ``.idx`` file (the rest were read)
        self._from_index = 0
        self._extents: np.ndarray | None = None
        self._used = True  # pages may be resident: a batch or steps read since the release
        #: where this segment puts itself when in use (its capture's set), if anywhere
        self.tracker: set[Segment] | None = None
        self._cache: OrderedDict[int, BatchView] = OrderedDict()
        try:
            self._open()
        except ForensicsError:
            raise
        except (pa.ArrowException, OSError, ValueError, TypeError, KeyError, IndexError,
                OverflowError, EOFError, MemoryError) as exc:
            raise CaptureFormatError(f"{self.where} is unreadable: {reason(exc)}") from None

    # ------------------------------------------------------------------ opening

    def _open(self) -> None:
        fd = open_guarded(self.path, "segment", self.root)
        try:
            size, self.stored = stored_size(fd)
            opened = os.fstat(fd)
            self._identity = (opened.st_dev, opened.st_ino)
            self._stamp = (opened.st_size, opened.st_mtime_ns, opened.st_ctime_ns)
            if size == 0:
                self.truncated = True
                return
            #: the stored ranges of a sparse file (None: no hole)
            self._extents = None if self.stored == size else \
                np.array(data_extents(fd, size), dtype=np.int64).reshape(-1, 2)
            if self._mapped:
                self._buf = map_file(fd, size)
                self._bytes = np.frombuffer(self._buf, dtype=np.uint8)
            self._reading, self.size = fd, size
            self.check_whole()  # cut between its size being read and its mapping: refused
            self._read_layout()
        finally:
            self._reading = -1
            os.close(fd)

    def _read_layout(self) -> None:
        """Read the schema and the batch table (the index, checked, and the batches past it)."""
        message, end = self._message_at(0)
        if isinstance(message, str):  # cut short, or an end-of-stream marker only
            self.truncated = message == _INCOMPLETE
            if self.truncated:
                self._check_cut_schema()
            return
        if message.type != "schema":
            raise CaptureFormatError(f"{self.where}: starts with a {message.type!r} message; "
                                     "expected the schema")
        self._check_schema_size(end)
        self.schema, info, self.columns = self._schemas.decode(message, self.where)
        stated = (info.get("site"), info.get("rank"), info.get("process", self.process))
        if stated != (self.site, self.rank, self.process):  # records credited as named
            raise CaptureFormatError(f"{self.where}: schema says site {stated[0]!r} rank "
                                     f"{stated[1]!r} process {stated[2]!r}; the file name "
                                     "disagrees")
        self._table = self._indexed(end)
        tail = int(self._table["offset"][-1] + self._table["length"][-1]) if len(self._table) \
            else end
        self._from_index = len(self._table)
        self._scan_tail(tail)
        self._check_stored()

    def _check_schema_size(self, end: int) -> None:
        """Refuse a schema message past :data:`MAX_SCHEMA_BYTES` before pyarrow decodes it:
        decoded, a schema takes many times its bytes (a 64 MiB one of 300,000 columns took
        `inspect` to 531 MB, a 29 MiB 'forensics' metadata text of empty JSON lists to 898 MB),
        and a segment's schema, a few KiB, is held while its capture is open."""
        if end > MAX_SCHEMA_BYTES:
            raise CaptureFormatError(
                f"{self.where}: its schema message takes {end} bytes, past the "
                f"{MAX_SCHEMA_BYTES} a segment's schema may take (the probe's take a few "
                "KiB); rewrite the segment with fewer columns and metadata, or delete it")

    def _check_stored(self) -> None:
        """Refuse a batch table claiming more rows than the bytes the file stores can hold
        (each row takes at least :data:`MIN_ROW_BYTES`): a sparse file's hole holds no rows,
        however its entries' heads were planted."""
        claimed = int(self._table["rows"].sum()) if len(self._table) else 0
        if claimed > self.stored // MIN_ROW_BYTES:
            raise CaptureFormatError(
                f"{self.where}: its batches claim {claimed} records but the file stores only "
                f"{self.stored} of its {self.size} bytes (a sparse file); a record takes at "
                f"least {MIN_ROW_BYTES} bytes: restore the segment from the source or delete "
                "it")

    def _check_cut_schema(self) -> None:
        """A first message cut short is a crash while the schema was written only when it
        claims a schema-sized length and the index lists no batch; else the segment is bad."""
        claimed = int.from_bytes(self._at(4, 4), "little") if self.size >= 8 else 0
        entries = read_index(self.path.with_name(self.name + INDEX_SUFFIX), self.root,
                             self.stored)
        if claimed > MAX_SCHEMA_BYTES or (entries is not None and len(entries)):
            raise CaptureFormatError(
                f"{self.where}: its first message claims {claimed} bytes, past the end of the "
                f"file ({self.size} bytes), so every record in it would be lost; the segment "
                "is corrupt: restore it from the source or delete it")

    def _indexed(self, schema_end: int) -> np.ndarray:
        """The index entries of the batches the mapped file holds, checked against it. Entries
        past the mapped end that continue the chain are batches a live writer appended after
        the file was mapped (its index is read later): they are left to the next open."""
        index_path = self.path.with_name(self.name + INDEX_SUFFIX)
        entries = read_index(index_path, self.root, self.stored)  # a hole holds no batch
        if entries is None or not len(entries):
            return np.zeros(0, dtype=ENTRY)
        offsets, lengths = entries["offset"], entries["length"]
        outside = np.flatnonzero(~((offsets >= 0) & (offsets <= MAX_INDEXED_BYTES)
                                   & (lengths >= 0) & (lengths <= MAX_INDEXED_BYTES)))
        if len(outside):
            raise CaptureFormatError(f"{self.where}: index entry {int(outside[0])} points "
                                     f"outside the segment; delete '{terminal(index_path.name)}' "
                                     "to rescan")
        ends = offsets + lengths
        starts_ok = np.concatenate([[offsets[0] == schema_end], offsets[1:] == ends[:-1]])
        visible = int(np.searchsorted(ends, self.size, side="right")) if starts_ok.all() \
            else len(entries)  # a broken chain is judged whole: its first break is named
        shown = entries[:visible]
        sane = ((shown["length"] > 0) & (shown["rows"] > 0)
                & (shown["rows"] <= shown["length"] // MIN_ROW_BYTES)
                & (shown["step_min"] >= 0) & (shown["step_min"] <= shown["step_max"]))
        bad = np.flatnonzero(~(starts_ok[:visible] & sane & self._heads_stored(shown)))
        if len(bad):
            raise CaptureFormatError(f"{self.where}: index entry {int(bad[0])} does not match "
                                     f"the segment; delete '{terminal(index_path.name)}' to rescan")
        return shown

    def check_index(self) -> None:
        """Refuse (CaptureFormatError) an index entry whose batch does not hold the records
        and steps it claims (:meth:`_check_claims`). Opening trusts the entries (a batch is
        checked against its entry when read): this is what a reader that reads no batch, and
        states what the index says (``inspect``), calls first; linear in the batches."""
        self.in_use()
        with self._opened("index entry at ", 0) if self._bytes is None else \
                contextlib.nullcontext():  # one open for all of its entries' reads
            for i in range(self._from_index):
                self._check_claims(i)

    def _check_claims(self, i: int) -> None:
        """Refuse index entry ``i`` unless its batch holds the records and steps it claims,
        read from the batch's header and its ``step`` column alone (8 bytes a record; no
        column decoded)."""
        entry = self._table[i]
        claimed = (int(entry["rows"]), int(entry["step_min"]), int(entry["step_max"]))
        held = self._held_steps(int(entry["offset"]), int(entry["length"]), claimed[0])
        if held == claimed:
            return
        held_text = held if isinstance(held, str) else \
            f"{held[0]} record(s) of steps {held[1]}..{held[2]}"
        raise CaptureFormatError(f"{self.where}: index entry {i} {self._claims(i, held_text)}")

    def _claims(self, i: int, held: str) -> str:
        """``claims N record(s) of steps A..B, but the segment holds HELD there; delete
        'NAME.idx' to rescan``: what index entry ``i`` claims, what its batch holds, the fix."""
        entry = self._table[i]
        return (f"claims {int(entry['rows'])} record(s) of steps {int(entry['step_min'])}.."
                f"{int(entry['step_max'])}, but the segment holds {held} there; delete "
                f"'{terminal(self.path.with_name(self.name + INDEX_SUFFIX).name)}' to rescan")

    def _held_steps(self, offset: int, length: int, rows: int) -> tuple[int, int, int] | str:
        """The records of the batch at ``offset`` (``length`` bytes, whose head
        :meth:`_heads_stored` found) and their smallest and largest step, read from its header
        and the values of its first column, ``step`` (read only up to the ``rows`` the index
        claims, which the bytes stored bound); else what the segment holds there instead."""
        meta = _meta_within(self._at(offset, 8), length)
        if meta is None:  # the file written to since it was opened
            return "no Arrow message that fits the entry"
        header = self._at(offset + 8, meta)
        try:
            first, codec = first_column(header), compression_of(header)
        except ValueError as exc:
            return f"a bad message ({reason(exc)})"
        if codec is not None:
            return f"a batch compressed ({codec}): a capture's batches are stored uncompressed"
        field = self.schema.field(0)
        if first is None or (field.name, field.type) != ("step", pa.int64()):
            return "no record batch of steps first"
        count, column, nulls, start, size = first
        if not 0 < count <= rows:  # more than the claim bounds what is read
            return f"a batch of {count} record(s)"
        if column != count or nulls or not 0 <= start <= start + 8 * count \
                <= min(start + size, length - 8 - meta):
            return f"a batch of {count} record(s) whose {count} steps it does not hold"
        steps = np.frombuffer(self.span(offset + 8 + meta + start, 8 * count), dtype="<i8")
        return count, int(steps.min()), int(steps.max())

    def _heads_stored(self, entries: np.ndarray) -> np.ndarray:
        """Per entry: whether the segment holds, at its offset, the head of an Arrow message
        that fits in the entry (a continuation marker and a metadata length). An entry's
        claimed rows size nothing until this evidence is found: a sparse file's hole reads as
        zeros, so an index pointing into one (a 16 GB segment of 12 KiB stored) is refused."""
        offsets = entries["offset"]
        inside = (offsets + 8 <= self.size) & self._stored_at(offsets, 8)
        heads = self._heads(offsets, inside)
        words = heads.view("<u4").reshape(-1, 2) if len(heads) else np.zeros((0, 2), "<u4")
        marker = words[:, 0] == CONTINUATION
        meta = words[:, 1].astype(np.int64)
        return inside & marker & (meta > 0) & (meta < 2**31) & (8 + meta < entries["length"])

    def _heads(self, offsets: np.ndarray, inside: np.ndarray) -> np.ndarray:
        """The 8 bytes at each of ``offsets`` that is ``inside`` (zeros at the others)."""
        if self._bytes is not None:
            return self._bytes[np.where(inside, offsets, 0)[:, None] + np.arange(8)]
        heads = np.zeros((len(offsets), 8), dtype=np.uint8)
        for row in np.flatnonzero(inside):
            heads[row] = np.frombuffer(self._at(int(offsets[row]), 8), dtype=np.uint8)
        return heads

    def _stored_at(self, offsets: np.ndarray, width: int) -> np.ndarray:
        """Per offset: whether its ``width`` bytes lie in one stored range of the file (always
        without holes), so that checking them reads no hole: a page of a hole read through
        the map is a page of zeros the reader holds, however many entries point into it."""
        if self._extents is None:
            return np.ones(len(offsets), dtype=bool)
        starts, ends = self._extents[:, 0], self._extents[:, 1]
        which = np.searchsorted(starts, offsets, side="right") - 1
        found = which >= 0
        which = np.maximum(which, 0)
        return found & (offsets + width <= ends[which]) if len(starts) else \
            np.zeros(len(offsets), dtype=bool)

    def _stored_in(self, start: int, end: int) -> int:
        """The bytes of ``start:end`` that the file stores (all of them without holes)."""
        if self._extents is None:
            return end - start
        overlap = (np.minimum(self._extents[:, 1], end)
                   - np.maximum(self._extents[:, 0], start))
        return int(overlap[overlap > 0].sum())

    def _scan_tail(self, pos: int) -> None:
        rows: list[tuple[int, int, int, int, int]] = []
        while pos < self.size:
            message, end = self._message_at(pos)
            if isinstance(message, str):
                self.truncated = message == _INCOMPLETE
                break
            view = self._decode(message, pos, len(self._table) + len(rows))
            steps = view.steps
            rows.append((pos, end - pos, len(view), int(steps.min()), int(steps.max())))
            pos = end
        if rows:
            self._table = np.concatenate([self._table, np.array(rows, dtype=ENTRY)])

    def _message_at(self, pos: int) -> tuple[pa.ipc.Message | str, int]:
        remaining = self.size - pos
        if remaining < 8:
            return _INCOMPLETE, pos
        head = self._at(pos, 8)
        marker = int.from_bytes(head[:4], "little")
        length = int.from_bytes(head[4:], "little", signed=True)
        if marker != CONTINUATION or length < 0:
            raise CaptureFormatError(f"{self.where}: no Arrow IPC message at byte {pos}")
        if length == 0:
            return _EOS, pos + 8
        if 8 + length > remaining:
            return _INCOMPLETE, pos
        whole = self._buf.slice(pos) if self._buf is not None else \
            self._message_bytes(pos, length)
        if whole is None:
            return _INCOMPLETE, pos
        reader = pa.BufferReader(whole)
        try:
            message = pa.ipc.read_message(reader)
        except (pa.ArrowInvalid, EOFError, OSError) as exc:
            if "Expected to" in str(exc):
                return _INCOMPLETE, pos
            raise CaptureFormatError(f"{self.where}: bad message at byte {pos}: "
                                     f"{reason(exc)}") from None
        return message, pos + reader.tell()

    def _message_bytes(self, pos: int, length: int) -> pa.Buffer | None:
        """The message at ``pos`` (its metadata ``length`` bytes long) with its body, read into
        memory; None when its body runs past the file's end (cut short)."""
        whole = self._message_extent(pos, length)
        return None if whole is None else pa.py_buffer(self._at(pos, whole))

    def _message_extent(self, pos: int, length: int) -> int | None:
        """The bytes the message at ``pos`` (its metadata ``length`` bytes long) takes with its
        body, from its header alone; None when its body runs past the file's end. Refuses
        (CaptureFormatError) a bad header, a batch claiming more records than the bytes stored
        there hold (a hole is never read) and one past :data:`MAX_READ_BYTES`; its header is
        read only when it is stored whole (no hole) and within that cap."""
        self._check_read(pos, 8 + length)
        if self._stored_in(pos + 8, pos + 8 + length) < length:
            raise CaptureFormatError(
                f"{self.where}: the message at byte {pos} claims a header of {length} bytes but "
                f"the file stores only {self._stored_in(pos + 8, pos + 8 + length)} of them (a "
                "sparse file): restore the segment from the source or delete it")
        header = self._at(pos + 8, length)
        try:
            body, rows = body_length(header), batch_rows(header)
        except ValueError as exc:
            raise CaptureFormatError(f"{self.where}: bad message at byte {pos}: "
                                     f"{reason(exc)}") from None
        whole = 8 + length + body
        if body < 0 or whole > self.size - pos:
            return None
        if rows is not None:
            self._check_rows_stored(rows, pos, pos + whole)
        self._check_read(pos, whole)
        return whole

    def _check_read(self, pos: int, size: int) -> None:
        """Refuse (CaptureFormatError) to read ``size`` bytes of the message at ``pos`` into
        memory when they are past :data:`MAX_READ_BYTES`."""
        if size > MAX_READ_BYTES:
            raise CaptureFormatError(
                f"{self.where}: the message at byte {pos} takes {size} bytes, past the "
                f"{MAX_READ_BYTES} one may take to be read into memory (the probe's take a "
                "few MiB): rewrite the segment in smaller batches")

    def _at(self, pos: int, n: int) -> bytes:
        """``n`` bytes at ``pos``: from the map, or read from the file (not mapped).
        Raises CaptureFormatError when the file holds fewer (:meth:`_read_at`)."""
        if self._bytes is not None:
            return self._bytes[pos:pos + n].tobytes()
        return bytes(self._read_at(pos, n))

    def span(self, pos: int, n: int) -> memoryview | bytearray:
        """``n`` bytes at ``pos``: a view of the map, or (not mapped) read into memory."""
        return self._bytes[pos:pos + n].data if self._bytes is not None else \
            self._read_at(pos, n)

    # ------------------------------------------------------------------ batches

    @property
    def rows(self) -> np.ndarray:
        """Rows per batch."""
        return self._table["rows"]

    @property
    def step_min(self) -> np.ndarray:
        """Smallest step per batch."""
        return self._table["step_min"]

    @property
    def step_max(self) -> np.ndarray:
        """Largest step per batch."""
        return self._table["step_max"]

    def __len__(self) -> int:
        return int(self._table["rows"].sum())

    def batch(self, i: int) -> BatchView:
        """Return batch ``i``, validated on first use. Raises CaptureFormatError."""
        self.in_use()
        view = self._cache.get(i)
        if view is not None:
            self._cache.move_to_end(i)
            return view
        if not self._mapped:
            return self._remember(i, self.read_batch(i))
        entry = self._table[i]
        offset, length = int(entry["offset"]), int(entry["length"])
        self.check_whole()

        def mapped() -> BatchView:
            message, end = self._message_at(offset)
            if isinstance(message, str) or end != offset + length:
                raise self._unlike_index(i, offset)
            return self._decode(message, offset, i)

        return self._checked(i, mapped)

    def _checked(self, i: int, decoded: Callable[[], BatchView]) -> BatchView:
        """Batch ``i`` as ``decoded`` reads it, an Arrow error in it one line naming the
        segment and the batch, then held to its index entry (:meth:`_as_indexed`)."""
        try:
            view = decoded()
        except ForensicsError:
            raise
        except _UNREADABLE as exc:
            raise CaptureFormatError(f"{self.where}: batch {i} is unreadable: "
                                     f"{reason(exc)}") from None
        return self._as_indexed(view, i)

    def _unlike_index(self, i: int, offset: int) -> CaptureFormatError:
        """That batch ``i``'s message at ``offset`` is not the one its index entry places."""
        return CaptureFormatError(f"{self.where}: batch {i} at byte {offset} does not match "
                                  "the index")

    def _as_indexed(self, view: BatchView, i: int) -> BatchView:
        """``view`` (batch ``i``), once its rows and steps are its index entry's."""
        entry = self._table[i]
        held = (len(view), int(view.steps.min()), int(view.steps.max())) if len(view) else \
            (0, None, None)
        if held != (int(entry["rows"]), int(entry["step_min"]), int(entry["step_max"])):
            text = f"{held[0]} record(s) of steps {held[1]}..{held[2]}" if held[0] else \
                "no record"
            raise CaptureFormatError(f"{self.where}: batch {i} does not match its index entry: "
                                     f"the entry {self._claims(i, text)}")
        return view

    def read_batch(self, i: int) -> BatchView:
        """Batch ``i`` read with ordinary reads (``pread``) into this process's own memory (its
        header first, then all of it), never through a map, decoded and validated there (not
        cached): the file cut or rewritten meanwhile is a short read (SegmentChanged) or a
        batch unlike its index entry, never SIGBUS; once read, no change of the file reaches it.

        Raises:
            CaptureFormatError: as :meth:`batch`; a batch past :data:`MAX_READ_BYTES`.
            SegmentChanged: the file is no longer the one opened, or holds less than the batch.
        """
        offset, length = int(self._table[i]["offset"]), int(self._table[i]["length"])
        self.check_whole()  # a file already cut is refused before its batch's bytes are taken
        what = f"batch {i} at "
        with self._opened(what, offset):
            data = self.batch_bytes(i, what, private=True)

        def read() -> BatchView:
            reader = pa.BufferReader(pa.py_buffer(data))
            message = pa.ipc.read_message(reader)
            if reader.tell() != length:
                raise self._unlike_index(i, offset)
            return self._decode(message, offset, i, cached=False)

        return self._checked(i, read)

    def batch_bytes(self, i: int, what: str = "", private: bool = False
                    ) -> memoryview | bytearray:
        """Batch ``i``'s message: a view of the map (``private``, or not mapped: read into this
        process's memory, ``what`` naming the read), once its head and header (read first)
        make it the message its index entry places: an entry stretched over a hole is refused
        before the hole is read, one past :data:`MAX_READ_BYTES` before any byte is.
        Raises CaptureFormatError; SegmentChanged (:meth:`_read_at`)."""
        offset, length = int(self._table[i]["offset"]), int(self._table[i]["length"])
        if length > MAX_READ_BYTES:
            raise CaptureFormatError(
                f"{self.where}: batch {i} takes {length} bytes, past the {MAX_READ_BYTES} one "
                "batch may take to be read into memory (the probe's take a few MiB): rewrite "
                "the segment in smaller batches")
        read = private or self._bytes is None
        meta = _meta_within(self._read_at(offset, 8, what) if read else self._at(offset, 8),
                            length)
        if meta is None or self._message_extent(offset, meta) != length:  # header first
            raise self._unlike_index(i, offset)
        return self._read_at(offset, length, what) if read else self.span(offset, length)

    @contextlib.contextmanager
    def _opened(self, what: str, offset: int) -> Iterator[None]:
        """While inside, this segment's file is open for :meth:`_read_at` (``_reading``), to
        this thread alone: the file being opened, or opened again and checked to be the one
        opened first. Raises
        SegmentChanged when it is no longer that file (``what``, ``offset``: the read)."""
        with self._lock:
            if self._reading >= 0:
                yield
                return
            try:
                fd = open_guarded(self.path, "segment", self.root)
            except OSError:
                fd = -1
            try:
                info = os.fstat(fd) if fd >= 0 else None
                if info is None or (info.st_dev, info.st_ino) != self._identity:
                    raise SegmentChanged(
                        f"{self.where} was replaced or removed while it was read ({what}byte "
                        f"{offset}); read the capture again once nothing writes to it")
                self._reading = fd
                yield
            finally:
                self._reading = -1
                if fd >= 0:
                    os.close(fd)

    def _read_at(self, offset: int, length: int, what: str = "") -> bytearray:
        """``length`` bytes at ``offset`` of this segment's file (``what``: ``"batch 3 at "``)
        read into a new private buffer, from the file as :meth:`_opened` holds it. Raises
        SegmentChanged when it is no longer that file, or holds fewer bytes."""
        data = bytearray(length)
        got = 0
        with self._opened(what, offset):
            into = memoryview(data)
            while got < length:
                step = os.preadv(self._reading, [into[got:]], offset + got)
                if step <= 0:
                    break
                got += step
        if got < length:
            raise SegmentChanged(
                f"{self.where} was truncated while it was read: {what}byte {offset} holds "
                f"{got} of its {length} bytes; read the capture again once nothing writes to "
                "it")
        return data

    def _decode(self, message: pa.ipc.Message, pos: int, i: int, cached: bool = True
                ) -> BatchView:
        if message.type != "record batch":
            raise CaptureFormatError(f"{self.where}: unexpected {message.type!r} message at "
                                     f"byte {pos}; expected a record batch")
        self._refuse_compressed(message, pos)
        batch = pa.ipc.read_record_batch(message, self.schema)
        batch.validate()
        if batch.num_rows == 0:
            raise CaptureFormatError(f"{self.where}: empty record batch at byte {pos}")
        self._check_rows_stored(batch.num_rows, pos,
                                pos + 8 + message.metadata.size + message.body.size)
        view = BatchView(batch, self.columns, self.site, self.rank,
                         f"{self.where}, batch {i}")
        return self._remember(i, view) if cached else view

    def _check_rows_stored(self, rows: int, pos: int, end: int) -> None:
        """Refuse (CaptureFormatError) the record batch at ``pos`` (to ``end``) claiming more
        ``rows`` than the bytes the file stores there can hold (a sparse file's hole)."""
        if rows * MIN_ROW_BYTES > self._stored_in(pos, end):
            raise CaptureFormatError(
                f"{self.where}: the record batch at byte {pos} claims {rows} records "
                f"but the file stores only {self._stored_in(pos, end)} of its {end - pos} bytes "
                "(a sparse file): restore the segment from the source or delete it")

    def _remember(self, i: int, view: BatchView) -> BatchView:
        """Keep ``view`` (batch ``i``) among the :data:`CACHE_SIZE` last read; return it."""
        self._cache[i] = view
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return view

    def _refuse_compressed(self, message: pa.ipc.Message, pos: int) -> None:
        """Refuse a record batch whose body is compressed before pyarrow decodes it: it would
        decompress to whatever its buffers claim (a 39 KiB batch held 1.2 GB), and the probe
        never writes one; and one whose buffers overlap (16 columns of one 15 MB buffer took
        ``to_frame`` to 1.4 GB): no writer lays out one."""
        header = message.metadata.to_pybytes()
        try:
            codec, aliased = compression_of(header), overlapping_buffer(header)
        except ValueError as exc:
            raise CaptureFormatError(f"{self.where}: bad message at byte {pos}: "
                                     f"{reason(exc)}") from None
        if aliased is not None:
            raise CaptureFormatError(
                f"{self.where}: the record batch at byte {pos} has buffer {aliased} overlapping "
                "the one before it (columns decoded from the same bytes, each as big as they "
                "are: copying them takes the file's size again per column); Arrow's writers "
                "lay buffers one after another: rewrite the segment, or delete it")
        if codec is not None:
            raise CaptureFormatError(
                f"{self.where}: the record batch at byte {pos} is compressed ({codec}); a "
                "capture's batches are stored uncompressed (a compressed body can decode to "
                "far more memory than the file holds): rewrite the segment uncompressed, or "
                "delete it")

    def held(self) -> str:
        """The file this segment opened, as it was then: name, device, inode, size,
        modification and change time (read from the open file, so no file put at its path
        since). The change time moves at every write, even one that puts the size and
        modification time back (``os.utime``): no call sets it."""
        return ":".join(str(part) for part in (self.name, *self._identity, *self._stamp))

    def still_held(self) -> bool:
        """Whether the file at this segment's path is still the one it opened, as it was then
        (:meth:`held`): False once it was written to (in place or not), replaced or removed."""
        try:
            info = os.stat(self.path, follow_symlinks=False)
        except OSError:
            return False
        return ((info.st_dev, info.st_ino), (info.st_size, info.st_mtime_ns, info.st_ctime_ns)
                ) == (self._identity, self._stamp)

    def check_whole(self) -> None:
        """Refuse (SegmentChanged) to read a file truncated or replaced since it was opened,
        checked by its path just before a batch is read. Mapped, a cut in the moment between
        this check and the read raises SIGBUS (T31l); read (the default), a short read (T92a)."""
        try:
            info = os.stat(self.path)
            same = (info.st_dev, info.st_ino) == self._identity
            size = info.st_size
        except OSError:
            same, size = False, 0
        if not same:
            raise SegmentChanged(f"{self.where} was replaced or removed while it was read; "
                                 "read the capture again once nothing writes to it")
        if size < self.size:
            raise SegmentChanged(
                f"{self.where} was truncated while it was read ({size} of its {self.size} "
                "bytes left at its path); read the capture again once nothing writes to it")

    def in_use(self) -> None:
        """Say that this segment's pages are being read: the next :meth:`release` drops them."""
        self._used = True
        if self.tracker is not None:
            self.tracker.add(self)

    def release(self) -> None:
        """Drop what this segment holds of its file in resident memory, when it was in use
        since the last release (:meth:`in_use`; releasing every segment per chunk stays linear
        in them): the batches it keeps (those handed out stay valid), or, mapped, its pages
        (Linux). Nothing is lost: a batch is read again when next used."""
        buf = getattr(self, "_buf", None)
        if self._used and not self._mapped:
            self._cache.clear()
        elif buf is not None and buf.size and self._used:
            release_pages(buf.address, buf.size)
        self._used = False

    def steps_of(self, i: int) -> np.ndarray:
        """The step of every row of batch ``i`` (from the index when the batch has one step)."""
        self.in_use()
        entry = self._table[i]
        if entry["step_min"] == entry["step_max"]:
            return np.full(int(entry["rows"]), int(entry["step_min"]), dtype=np.int64)
        return self.batch(i).steps


def _meta_within(head: bytes | bytearray, length: int) -> int | None:
    """The metadata length the 8-byte ``head`` of a message gives, when it is a continuation
    marker and a length that fits an index entry of ``length`` bytes (as
    :meth:`Segment._heads_stored` found it at open); None when not (the file written since)."""
    meta = int.from_bytes(head[4:], "little", signed=True)
    ok = int.from_bytes(head[:4], "little") == CONTINUATION and 0 < meta < length - 8
    return meta if ok else None
