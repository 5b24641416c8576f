"""``CaptureWriter``: append-only, crash-safe writing of records into a capture directory.

``append`` validates and buffers; ``flush`` writes one Arrow record batch per buffered
(site, rank) to that pair's segment and fsyncs it, then its index entry. A process killed at any
moment leaves every flushed record readable; a batch cut short is ignored by the reader.
Each writer only ever creates new files (exclusively), so several processes, or several writers
in one process, can share a capture.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import pyarrow as pa

from forensics.atomic import Folder, open_folder
from forensics.errors import (
    CaptureFormatError,
    ForensicsError,
    OutputError,
    OutputExistsError,
    reason,
)
from forensics.escaping import terminal
from forensics.modes import owner_only
from forensics.records import Record
from forensics.store import arrow_numpy
from forensics.store.arrow_codec import (
    ColumnSig,
    build_schema,
    encode_batch,
    merge_columns,
    record_columns,
    schema_columns,
    trusted_columns,
)
from forensics.store.events import EventLog
from forensics.store.fs import append_whole, cut_back, fsync_dir, make_folders, write_all
from forensics.store.index import IndexWriter
from forensics.store.manifest import build_manifest, complete_manifest, write_manifest_once
from forensics.store.paths import (
    INDEX_SUFFIX,
    MANIFEST,
    WRITTEN_AGAIN,
    SegmentName,
    check_process_name,
    named,
)
from forensics.store.replace import clear_build, install, new_build, recover, tmp_path
from forensics.store.segment import MAX_READ_BYTES, MAX_SCHEMA_BYTES
from forensics.validate import validate_record

__all__ = ["CaptureWriter", "new_capture", "write_capture"]

EOS = b"\xff\xff\xff\xff\x00\x00\x00\x00"
#: ``write_capture`` flushes after this many records (bounded memory, batches of a few
#: thousand rows that the reader decodes in one go)
FLUSH_EVERY = 16384
#: a batch past this many bytes is written as several (of whole records), well within the
#: :data:`~forensics.store.segment.MAX_READ_BYTES` every command reads into memory
MAX_BATCH_BYTES = MAX_READ_BYTES // 4


class _SegmentFile:
    """One open segment: its Arrow stream file and its ``.idx`` sidecar."""

    def __init__(self, root: Path, site: str, rank: int, process: str,
                 columns: dict[str, ColumnSig]) -> None:
        self.schema = build_schema(site, rank, process, columns)
        self.columns = schema_columns(self.schema)
        header = self.schema.serialize()
        if header.size > MAX_SCHEMA_BYTES:  # the reader would refuse the segment
            raise CaptureFormatError(
                f"records of site {site!r} with {len(columns)} fields make a segment schema of "
                f"{header.size} bytes, past the {MAX_SCHEMA_BYTES} a reader takes; write fewer "
                "summary extras (or shorter names)")
        with contextlib.ExitStack() as undo:  # a disk that refuses the header: both closed
            self.fd, self.path = _create_exclusive(root, site, rank, process)
            undo.callback(os.close, self.fd)
            self.index = IndexWriter(self.path.with_name(self.path.name + INDEX_SUFFIX))
            undo.callback(self.index.close)
            write_all(self.fd, header)
            os.fsync(self.fd)
            undo.pop_all()
        fsync_dir(root)

    def fits(self, columns: dict[str, ColumnSig]) -> bool:
        return all(self.columns.get(name) == sig for name, sig in columns.items())

    def write(self, records: list[Record]) -> None:
        self.write_batch(encode_batch(records, self.schema))

    def write_batch(self, batch: pa.RecordBatch) -> None:
        """Append ``batch`` (of this segment's schema) as batches of whole records of at most
        :data:`MAX_BATCH_BYTES` each (one record past it is its own batch)."""
        for part in _parts(batch, MAX_BATCH_BYTES):
            self._write_one(part)

    def _write_one(self, batch: pa.RecordBatch) -> None:
        """Append ``batch`` (of this segment's schema), fsync, then index it. The offset is
        the file's size, so a process forked from the owner may append too (one at a time).
        A batch the disk refuses part way is cut off again, its index entry too: the
        segment's next batch follows the last whole one."""
        data = batch.serialize()
        steps = arrow_numpy.values(batch.column(0))
        pos = os.fstat(self.fd).st_size
        append_whole(self.fd, data)
        try:
            self.index.append(pos, data.size, batch.num_rows, int(steps.min()),
                              int(steps.max()))
        except BaseException:
            cut_back(self.fd, pos)
            raise

    def close(self) -> None:
        """Write the end-of-stream marker and fsync; the segment and its index are closed
        whatever fails (once: closing again does nothing), then the first failure raised."""
        fd, self.fd = self.fd, -1
        if fd < 0:
            return
        with contextlib.ExitStack() as closing:
            closing.callback(self.index.close)
            closing.callback(os.close, fd)
            write_all(fd, EOS)
            os.fsync(fd)


def _parts(batch: pa.RecordBatch, most: int) -> Iterator[pa.RecordBatch]:
    """``batch`` halved by rows until each part holds at most ``most`` bytes or one row."""
    if batch.num_rows <= 1 or batch.nbytes <= most:
        yield batch
        return
    half = batch.num_rows // 2
    yield from _parts(batch.slice(0, half), most)
    yield from _parts(batch.slice(half), most)


def _create_exclusive(root: Path, site: str, rank: int, process: str) -> tuple[int, Path]:
    seq = 0
    while True:
        path = root / SegmentName(site, rank, process, seq).filename
        index = path.with_name(path.name + INDEX_SUFFIX)
        if not index.exists():
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
                return owner_only(fd), path
            except FileExistsError:
                pass
        seq += 1


class CaptureWriter:
    """Writes records and events into the capture directory ``path`` (created if needed).

    ``manifest``: entries for ``manifest.json`` (written once; kept when another process wrote
    it first, unless that one states no model and this one does: :func:`complete_manifest`).
    ``process``: the name used in this writer's file names (default ``p<pid>``).
    ``shown``: how messages name the directory (default ``path``; :func:`new_capture` writes
    through its open folder, ``/proc/self/fd/N``, and names it by its real path).
    Raises ConfigurationError for a bad process name, OSError when the directory is unusable.
    """

    def __init__(self, path: str | os.PathLike[str], manifest: dict[str, Any] | None = None,
                 *, process: str | None = None, shown: str | os.PathLike[str] | None = None
                 ) -> None:
        self.path = Path(path)
        self.shown = Path(path if shown is None else shown)
        make_folders(self.path)  # private, as its files; owner-writable whatever the umask
        self.process = check_process_name(process if process is not None else f"p{os.getpid()}")
        full = build_manifest(manifest)
        if not write_manifest_once(self.path, full):
            complete_manifest(self.path, full)
        self._buffers: dict[tuple[str, int], list[tuple[Record, dict[str, ColumnSig]]]] = {}
        self._segments: dict[tuple[str, int], _SegmentFile] = {}
        self._events = EventLog(self.path, self.process)
        self._appended = 0
        self._closed = False

    def append(self, record: Record, *, validated: bool = False) -> None:
        """Validate ``record`` and buffer it until the next :meth:`flush`.

        ``validated=True`` is for records built by trusted in-process code to their site's
        schema (the simulator, a probe): the schema and value checks are skipped and only the
        column types are taken (a record that breaks the schema then makes a capture that the
        reader rejects). Such a record must be a full record (not a summary) whose tensors are
        numpy integer arrays, ints ``int`` and lists plain lists.

        Raises:
            UnknownSiteError, CaptureFormatError: the record fails its site's schema or holds a
                value the store cannot keep (the message names the record and field).
        """
        if self._closed:
            raise CaptureFormatError(f"writer of '{terminal(self.shown)}' is closed")
        if validated and not record.summary:
            columns = trusted_columns(record)
        else:
            where = f"record {self._appended} appended to '{terminal(self.path.name)}'"
            validate_record(record, where)
            columns = record_columns(record, where)
        self._buffers.setdefault((record.site, record.rank), []).append((record, columns))
        self._appended += 1

    def open_segment(self, site: str, rank: int, columns: dict[str, ColumnSig]) -> None:
        """Create (or rotate) the segment of ``site`` and ``rank`` for ``columns`` now, so that
        a process forked from this one may append batches of those columns to it with
        :meth:`write_columns` (one such process at a time; this one writes none meanwhile)."""
        self._segment_for((site, rank), columns)

    def write_columns(self, site: str, rank: int, columns: dict[str, ColumnSig],
                      arrays: dict[str, pa.Array]) -> None:
        """Write one record batch of ``site`` and ``rank`` from ready Arrow columns, now.

        For trusted in-process producers that build many records' columns at once (the
        simulator): ``columns`` is the field signature the records would have
        (:func:`~forensics.store.arrow_codec.trusted_columns`), ``arrays`` holds ``step``,
        ``rank``, ``summary`` and every column of :func:`~forensics.store.arrow_codec.
        build_schema` for them, encoded as :func:`~forensics.store.arrow_codec.encode_batch`
        does. Values are not validated; records buffered for the same site and rank are
        flushed first, so the segment keeps the order of the calls.

        Raises:
            CaptureFormatError: the writer is closed, or a column is missing or of another
                Arrow type than the segment's schema says.
        """
        if self._closed:
            raise CaptureFormatError(f"writer of '{terminal(self.shown)}' is closed")
        key = (site, rank)
        if key in self._buffers:
            self._flush_key(key, self._buffers.pop(key))
        segment = self._segment_for(key, columns)
        try:
            batch = pa.RecordBatch.from_arrays([arrays[f.name] for f in segment.schema],
                                               schema=segment.schema)
        except (KeyError, TypeError, ValueError, pa.ArrowInvalid) as exc:
            raise CaptureFormatError(f"columns of {site!r} rank {rank} do not fit the segment "
                                     f"schema of '{terminal(self.path.name)}': "
                                     f"{reason(exc)}") from None
        segment.write_batch(batch)

    def extend(self, records: Iterable[Record], *, validated: bool = False,
               flush_every: int | None = None) -> None:
        """Append every record of ``records`` (see :meth:`append`); with ``flush_every``,
        flush after each ``flush_every`` records (bounded memory for long streams)."""
        for count, record in enumerate(records, 1):
            self.append(record, validated=validated)
            if flush_every and count % flush_every == 0:
                self.flush()

    def flush(self) -> None:
        """Write one record batch per buffered (site, rank) and fsync each; empty the buffers.

        Raises CaptureFormatError when a batch cannot be encoded; OSError from the disk.
        """
        buffers, self._buffers = self._buffers, {}
        for key in sorted(buffers):
            self._flush_key(key, buffers[key])

    def _flush_key(self, key: tuple[str, int],
                   items: list[tuple[Record, dict[str, ColumnSig]]]) -> None:
        for group, columns in _groups(items):
            self._segment_for(key, columns).write(group)

    def _segment_for(self, key: tuple[str, int], columns: dict[str, ColumnSig]) -> _SegmentFile:
        current = self._segments.get(key)
        if current is not None and current.fits(columns):
            return current
        if current is not None:
            merged = merge_columns(current.columns, columns)
            columns = merged if merged is not None else columns
            del self._segments[key]  # closed (its files) even when its end cannot be written
            current.close()
        segment = _SegmentFile(self.path, key[0], key[1], self.process, columns)
        self._segments[key] = segment
        return segment

    def add_event(self, event: dict[str, Any]) -> None:
        """Append ``event`` (a JSON-serialisable dict) to this process's events file, fsynced.

        Raises CaptureFormatError when it is not a JSON-serialisable dict.
        """
        self._events.append(event)

    def close(self) -> None:
        """Flush, then close every file, each whatever the flush or the others do (a full
        disk leaks no descriptor); the first failure is raised once all are closed. Closing
        twice is harmless."""
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            self._close_files()

    def _close_files(self) -> None:
        """Close every segment (and its index) and the events file (see :meth:`close`)."""
        segments = list(self._segments.values())
        self._segments.clear()
        with contextlib.ExitStack() as closing:
            closing.callback(self._events.close)
            for segment in reversed(segments):  # closed in the order they were made
                closing.callback(segment.close)

    def __enter__(self) -> CaptureWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _groups(items: list[tuple[Record, dict[str, ColumnSig]]]
            ) -> list[tuple[list[Record], dict[str, ColumnSig]]]:
    """Split buffered records into consecutive runs whose columns agree on every type."""
    groups: list[tuple[list[Record], dict[str, ColumnSig]]] = []
    for record, columns in items:
        if groups:
            if columns is groups[-1][1] or columns == groups[-1][1]:
                groups[-1][0].append(record)
                continue
            merged = merge_columns(groups[-1][1], columns)
            if merged is not None:
                groups[-1][0].append(record)
                groups[-1] = (groups[-1][0], merged)
                continue
        groups.append(([record], columns))
    return groups


def write_capture(path: str | os.PathLike[str], records: Iterable[Record],
                  manifest: dict[str, Any] | None = None, force: bool = False, *,
                  events: Iterable[dict[str, Any]] = (), validated: bool = False) -> Path:
    """Write ``records`` (and ``events``) as a new capture at ``path``; return its path.

    Records are flushed every :data:`FLUSH_EVERY` records (one record batch per site and rank
    each time). ``validated``: see :meth:`CaptureWriter.append`.

    The capture is built beside ``path`` and renamed into place, so a failure leaves nothing.
    Raises:
        OutputExistsError: ``path`` exists and ``force`` is false, or it is not a capture
            (``force`` only replaces captures).
        UnknownSiteError, CaptureFormatError: a record fails validation.
    """
    with new_capture(path, manifest, force) as writer:
        writer.extend(records, validated=validated, flush_every=FLUSH_EVERY)
        for event in events:
            writer.add_event(event)
    return Path(path)


@contextmanager
def new_capture(path: str | os.PathLike[str], manifest: dict[str, Any] | None = None,
                force: bool = False) -> Iterator[CaptureWriter]:
    """A writer (process name :data:`~forensics.store.paths.WRITTEN_AGAIN`) on a new capture
    built beside ``path``, put in place when the block ends without an exception
    (:func:`forensics.store.replace.install`: a SIGKILL at any moment leaves the old capture
    or the new one, whole); on an exception nothing is left behind.

    Raises:
        OutputExistsError: as :func:`write_capture`.
        OutputError: the file system refuses (no space, read-only, missing parent).
    """
    target = named(path, "output")
    try:
        with open_folder(target.parent) as folder:  # held open: no link swapped in is followed
            with _built(folder, target.name, manifest, force) as writer:
                yield writer
    except ForensicsError:  # a refusal (an output in the way, a planted link) says itself
        raise
    except OSError as exc:
        raise OutputError(f"cannot write capture '{terminal(target)}': "
                          f"{exc.strerror or reason(exc)}{_at(exc)}; check the folder, its "
                          "permissions and free space") from None


@contextmanager
def _built(folder: Folder, name: str, manifest: dict[str, Any] | None,
           force: bool) -> Iterator[CaptureWriter]:
    """:func:`new_capture` in the open ``folder``: the capture ``name`` built beside where it
    goes and put in place; an OSError's file named by its real path."""
    out, shown = folder.path / name, folder.real / name
    recover(out, clean=True, shown=shown)
    check_replaceable(out, force, shown=shown)
    tmp = tmp_path(out)
    made = False
    try:
        new_build(tmp)
        made = True
        with CaptureWriter(tmp, manifest, process=WRITTEN_AGAIN,
                           shown=folder.shown(tmp)) as writer:
            yield writer
        install(tmp, out)
    except OSError as exc:  # a refusal of ours (an OSError too: no file) keeps its message
        if exc.filename:
            exc.filename = str(folder.shown(exc.filename))
        raise
    finally:
        if made:
            with contextlib.suppress(OSError):
                clear_build(tmp)  # what is left of ours (a link planted since: as a link)


def _at(exc: OSError) -> str:
    return f" (at '{terminal(exc.filename)}')" if exc.filename else ""


def check_replaceable(out: Path, force: bool, shown: Path | None = None) -> None:
    """Return when a capture may be written at ``out``: nothing is there, or a capture is and
    ``force`` is set. ``shown``: how messages name ``out`` (default: as it is).

    Raises:
        OutputExistsError: naming the output and the fix.
    """
    name = terminal(out if shown is None else shown)
    if not (out.exists() or out.is_symlink()):
        return
    if not force:
        raise OutputExistsError(f"output '{name}' exists; pass --force (force=True) to "
                                "replace it")
    if out.is_symlink() or not out.is_dir():
        raise OutputExistsError(f"output '{name}' exists and is not a capture directory; "
                                "remove it yourself or choose another name")
    if any(out.iterdir()) and not (out / MANIFEST).is_file():
        raise OutputExistsError(f"output '{name}' is a non-empty directory without "
                                f"{MANIFEST}, not a capture; --force only replaces captures")
