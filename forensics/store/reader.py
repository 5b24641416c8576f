"""``forensics.load(path) -> Capture``: a lazy view of a capture directory (each batch read
into this process's own memory when used; memory-mapped on request, ``mapped=True``).

Opening lists the directory, reads the manifest, events and each segment's schema and batch
index; no record is materialised until it is asked for. Records come out in pipeline order
``(step, rank, site)``; ties keep the order in which they were written.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from forensics.errors import CaptureFormatError
from forensics.escaping import terminal
from forensics.manifest_facts import runner_of
from forensics.records import Record
from forensics.sites import SITES, site_order
from forensics.store.duplicates import find_duplicate
from forensics.store.manifest import read_expected, read_manifest
from forensics.store.maps import require_map_slots
from forensics.store.paths import SegmentName, capture_dir, parse_segment_name
from forensics.store.schemas import Schemas
from forensics.store.segment import Segment
from forensics.store.stamps import first_changed, stamps, stamps_text

if TYPE_CHECKING:
    from forensics.store.batch import BatchView

__all__ = ["Capture", "RecordList", "load"]

#: records decoded together when iterating (each batch's rows of a chunk in one go)
ITER_CHUNK = 4096


def load(path: str | os.PathLike[str], mapped: bool = False) -> Capture:
    """Open the capture directory at ``path``. Its segments are read with ordinary reads into
    this process's memory, never through a map: a segment cut while it is read is one error
    (:class:`~forensics.errors.SegmentChanged`), never SIGBUS (every command). ``mapped``:
    True maps them instead (zero-copy, for a caller who knows no one writes the capture: a
    segment cut between the reader's check and its read then raises SIGBUS and ends the
    process; a capture of more segments than the process can map is refused up front).

    Returns:
        A :class:`Capture` (lazy: a batch is read when used, records decoded on use).
    Raises:
        CaptureFormatError: not a capture, or a malformed manifest, event file or segment.
        UnsafeInputError: a file or manifest entry that points outside the capture.
    """
    return Capture(path, mapped)


class Capture:
    """A capture directory: manifest, events, segments and their records (see INTERNALS.md)."""

    def __init__(self, path: str | os.PathLike[str], mapped: bool = False) -> None:
        from forensics.store.events import read_events
        from forensics.store.paths import named
        from forensics.store.replace import recover

        path = named(path)
        recover(path)
        self.path = capture_dir(path)
        #: what each file it reads was before it read any (:mod:`forensics.store.stamps`)
        self._files = stamps(self.path)
        name = self.path.resolve().name
        self.name = name[: -len(".capture")] if name.endswith(".capture") else name
        self.manifest: dict[str, Any] = read_manifest(self.path)
        self.expected: dict[str, Any] | None = read_expected(self.path)
        events, truncated_events, places = read_events(self.path)
        #: the flight recorder's ``kernel_launch`` / ``kernel_summary`` events (not timeline
        #: events: ``forensics kernels`` reads them, :mod:`forensics.kernels.format`)
        self.kernel_events = [e for e in events if str(e["kind"]).startswith("kernel_")]
        #: where each of :attr:`kernel_events` is ("events file 'NAME' line N")
        self.kernel_places = [place for e, place in zip(events, places, strict=True)
                              if str(e["kind"]).startswith("kernel_")]
        self.events = [e for e in events if not str(e["kind"]).startswith("kernel_")]
        self._segments, unknown = _open_segments(self.path, mapped)
        #: site -> records, of the segments of sites this install does not know (a plugin's
        #: not installed here): read by nothing, judged by nothing, listed by ``inspect`` and
        #: named by a replay's conclusion, never dropped in silence
        self.unknown_sites: dict[str, int] = _count_unknown(self.path, unknown)
        #: the segments in use since the last :meth:`release` (those it releases)
        self._in_use: set[Segment] = set(self._segments)
        for seg in self._segments:
            seg.tracker = self._in_use
        self.segments: list[str] = [s.name for s in self._segments]
        #: files whose cut-short tail was ignored (a crash while writing)
        self.truncated: list[str] = [s.name for s in self._segments if s.truncated]
        self.truncated += truncated_events
        self._order: tuple[dict[str, np.ndarray], np.ndarray] | None = None

    def __repr__(self) -> str:
        return f"<Capture {self.name!r}: {len(self)} records, {len(self.segments)} segments>"

    def __len__(self) -> int:
        return sum(len(s) for s in self._segments)

    def held(self) -> str:
        """A digest of the segment files this capture opened, as they were then
        (:meth:`~forensics.store.segment.Segment.held`), and of every file it read (manifest,
        events, ``.idx`` sidecars: :func:`~forensics.store.stamps.stamps`): a capture opened
        again after one was replaced, added, removed or written to (even in place, its size
        and modification time put back) has another. A triage compares it
        (:class:`forensics.fleet.piece.Held`)."""
        import hashlib

        text = "\n".join([*sorted(segment.held() for segment in self._segments),
                          *stamps_text(self._files)])
        return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()

    def changed(self) -> str | None:
        """The name of a file that is no longer as this capture read it (a segment written
        to, replaced or removed since it was opened:
        :meth:`~forensics.store.segment.Segment.still_held`; any file it reads written to,
        replaced, added or removed since it was opened:
        :func:`~forensics.store.stamps.first_changed`), or None when each still is: what was
        read of it may be of another file."""
        moved = next((s.name for s in self._segments if not s.still_held()), None)
        return moved if moved is not None else first_changed(self.path, self._files)

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    @property
    def sites(self) -> list[str]:
        """Sites that have records, in pipeline order."""
        present = {s.site for s in self._segments if len(s)}
        return [site for site in SITES if site in present]

    @property
    def ranks(self) -> list[int]:
        """Ranks that have records, ascending."""
        return sorted({s.rank for s in self._segments if len(s)})

    @property
    def steps(self) -> list[int]:
        """Distinct steps that have records, ascending."""
        return [int(s) for s in np.unique(self._locate()["step"])]

    def step_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """Distinct steps that have records, ascending, and how many records each has: read
        batch by batch, holding one batch's steps and the distinct steps so far (a split
        triage's plan; ordering every record took about 64 bytes a record)."""
        parts: list[tuple[np.ndarray, np.ndarray]] = []
        pending = distinct = 0
        for seg in self._segments:
            for i in range(len(seg.rows)):
                parts.append(np.unique(_steps_of(seg, i), return_counts=True))
                pending += len(parts[-1][0])
                if pending > max(2 * distinct, 1 << 16):  # merged as often as it pays
                    parts, pending = [_merged_counts(parts)], 0
                    distinct = len(parts[0][0])
        return _merged_counts(parts)

    def records(self, site: str | None = None, steps: int | Iterable[int] | None = None,
                rank: int | None = None) -> RecordList:
        """Records in pipeline order, optionally of one site, some steps and one rank.

        ``steps`` is one step, a ``range`` or any iterable of steps. Returns a lazy sequence;
        a record is decoded (and validated) when it is accessed.
        Raises UnknownSiteError for an unknown ``site``.
        """
        order = self._locate()
        mask = np.ones(len(order["step"]), dtype=bool)
        if site is not None:
            mask &= order["site"] == site_order(site)
        if rank is not None:
            mask &= order["rank"] == int(rank)
        if steps is not None:
            mask &= _step_mask(order["step"], steps)
        return RecordList(self._segments, order["segment"][mask], order["batch"][mask],
                          order["row"][mask])

    def _locate(self) -> dict[str, np.ndarray]:
        """Every record's step, rank, site, segment, batch and row in pipeline order."""
        return self._ordered()[0]

    def _ordered(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """:func:`_order_rows` of the capture (computed once)."""
        if self._order is None:
            self._order = _order_rows(self._segments)
        return self._order

    def batches(self, site: str | None = None, private: bool = False) -> Iterator[BatchView]:
        """Every record batch (validated; read into this process's memory, or, a capture
        loaded ``mapped``, columns as zero-copy views of its maps), segment by segment in
        pipeline order of sites: for columnar readers such as :func:`forensics.judge.scan.scan`.
        ``private``: each read with ordinary reads into this process's own memory, not kept
        (:meth:`~forensics.store.segment.Segment.read_batch`: a segment truncated meanwhile is
        an error, never SIGBUS, mapped or not). Raises CaptureFormatError for a corrupt batch,
        SegmentChanged for a segment cut or replaced while read."""
        for seg in self._segments:
            if site is None or seg.site == site:
                for i in range(len(seg.rows)):
                    yield seg.read_batch(i) if private else seg.batch(i)

    def chunks(self, size: int) -> Iterator[tuple[BatchView, int, int, np.ndarray]]:
        """Every record batch in the order of :meth:`batches`, cut into runs of at most
        ``size`` rows: ``(batch, start, stop, positions)``, ``positions`` being where rows
        ``start:stop`` stand in :meth:`records` (pipeline order). For columnar readers that
        report per record, such as the replay."""
        where = self._ordered()[1]
        at = 0
        for seg in self._segments:
            for i in range(len(seg.rows)):
                view = seg.batch(i)
                for start in range(0, len(view), size):
                    stop = min(start + size, len(view))
                    seg.in_use()  # its pages are read until the next release
                    yield view, start, stop, where[at + start:at + stop]
                at += len(view)

    def release(self) -> None:
        """Drop the batches the segments keep (or, mapped, their pages) from the process's
        resident memory (see :meth:`forensics.store.segment.Segment.release`): a long read such
        as a replay calls it between chunks so that its RSS does not grow by the capture's
        size. Records and arrays already decoded stay valid."""
        for seg in self._in_use:  # only these: releasing per chunk stays linear in segments
            seg.release()
        self._in_use.clear()

    def to_frame(self, site: str) -> Any:
        """One pandas row per record of ``site``: step, rank, summary, scalars, and for each
        tensor or list field ``<field>_len`` and ``<field>`` (its values as lists).

        Raises UnknownSiteError for an unknown site; CaptureFormatError for a corrupt batch.
        """
        from forensics.store.frame import site_frame

        return site_frame(site, [s for s in self._segments if s.site == site])

    def to_arrow(self, site: str) -> Any:
        """:meth:`to_frame` as a pyarrow Table (int64, list and map columns): for Polars,
        DuckDB or Parquet. Raises as :meth:`to_frame` does."""
        from forensics.store.frame import site_table

        return site_table(self.to_frame(site), site,
                          f"capture '{terminal(self.path)}', site {site!r}")

    def check_index(self) -> None:
        """Refuse (CaptureFormatError, one line) a segment's index entry whose batch does not
        hold the records and steps it claims (:meth:`Segment.check_index`): :meth:`summary`
        states the index's claims, and reads no batch."""
        for seg in self._segments:
            seg.check_index()

    def summary(self) -> dict[str, Any]:
        """The ``forensics inspect --json`` object (DESIGN.md), from the batch index alone."""
        sites: dict[str, int] = {}
        site_steps: dict[str, list[int]] = {}
        process_steps: dict[str, list[int]] = {}
        for seg in self._segments:
            if not len(seg):
                continue
            sites[seg.site] = sites.get(seg.site, 0) + len(seg)
            first, last = int(seg.step_min.min()), int(seg.step_max.max())
            for spans, key in ((site_steps, seg.site), (process_steps, seg.process)):
                old = spans.get(key, [first, last])
                spans[key] = [min(old[0], first), max(old[1], last)]
        ordered = {site: sites[site] for site in SITES if site in sites}
        every = list(site_steps.values())
        return {
            "capture": str(self.path),
            "name": self.name,
            "records": len(self),
            "sites": ordered,
            "steps": [min(a for a, _ in every), max(b for _, b in every)] if every else None,
            "site_steps": {site: site_steps[site] for site in ordered},
            #: the steps of each writing process's records (segments name their process)
            "process_steps": process_steps,
            "ranks": self.ranks,
            "segments": len(self.segments),
            "unknown_sites": dict(self.unknown_sites),
            "truncated": bool(self.truncated),
            "truncated_files": list(self.truncated),
            "events": self.events,
            "manifest": self.manifest,
            "runner": runner_of(self.manifest),
        }


def records_in(root: Path, names: Iterable[str]) -> int:
    """How many records the segment files ``names`` of the capture at ``root`` hold, as
    :func:`load` reads them (a batch cut short is not counted; a name that is no segment of
    a known site is skipped).

    Raises:
        CaptureFormatError: a malformed segment.
        UnsafeInputError: a segment that is not a regular file or a link out of ``root``.
    """
    schemas, total = Schemas(), 0
    for entry in names:
        name = parse_segment_name(entry)
        if name is not None and name.site in SITES and name.filename == entry:
            total += len(Segment(root, name, schemas))
    return total


def _open_segments(root: Path, mapped: bool = False
                   ) -> tuple[list[Segment], list[SegmentName]]:
    """The segments of known sites, opened (with ordinary reads; ``mapped``: through memory
    maps), in pipeline order; and the names of the segments of sites this install
    does not know (not opened).

    Raises CaptureFormatError for a segment not named as a writer names it, or one holding
    another's batches."""
    segments: list[Segment] = []
    named: list[SegmentName] = []
    unknown: list[SegmentName] = []
    for entry in sorted(os.listdir(root)):
        name = parse_segment_name(entry)
        if name is None:
            continue
        if name.filename != entry:  # 'r00' or '00000': it would be read as another file
            raise CaptureFormatError(
                f"segment file '{terminal(entry)}' of '{terminal(root)}' is not named as a "
                f"writer names it: it reads as '{name.filename}'; rename it to that (if no file "
                "has that name) or delete it")
        (named if name.site in SITES else unknown).append(name)
    if mapped:
        require_map_slots(root, len(named))  # before any is mapped
    schemas = Schemas()
    for name in named:
        segments.append(Segment(root, name, schemas, mapped))
    segments.sort(key=lambda s: (site_order(s.site), s.rank, s.process, s.seq))
    twins = find_duplicate(segments)
    if twins is not None:
        raise CaptureFormatError(
            f"segments '{terminal(twins[0].name)}' and '{terminal(twins[1].name)}' of "
            f"'{terminal(root)}' hold the same batches (a copied file would count every record "
            "twice); delete the copy")
    return segments, unknown


def _count_unknown(root: Path, names: list[SegmentName]) -> dict[str, int]:
    """Site -> records (as :func:`records_in` counts them), of the segments ``names`` of
    sites this install does not know, by site name. Each is opened (its schema and batch
    index checked, each entry against its batch's header and steps: every reader states the
    count, and no batch of it is read otherwise), then let go; one at a time."""
    counts: dict[str, int] = {}
    schemas = Schemas()
    for name in names:
        segment = Segment(root, name, schemas)
        segment.check_index()
        counts[name.site] = counts.get(name.site, 0) + len(segment)
    return dict(sorted(counts.items()))


def _order_rows(segments: list[Segment]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Every record's step, rank, site, segment, batch and row in pipeline order; and, in
    the stored order (segment by segment, batch by batch, row by row), where each record
    stands in the pipeline order."""
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("step", "rank", "site", "segment",
                                                          "batch", "row")}
    for number, seg in enumerate(segments):
        rows = seg.rows.astype(np.int64)
        total = int(rows.sum())
        starts = np.repeat(np.cumsum(rows) - rows, rows)
        parts["step"].append(np.concatenate([_steps_of(seg, i) for i in range(len(rows))])
                             if total else np.zeros(0, np.int64))
        parts["batch"].append(np.repeat(np.arange(len(rows)), rows))
        parts["row"].append(np.arange(total) - starts)
        for key, value in (("rank", seg.rank), ("site", site_order(seg.site)),
                           ("segment", number)):
            parts[key].append(np.full(total, value, dtype=np.int64))
    arrays = {k: np.concatenate(v) if v else np.zeros(0, np.int64) for k, v in parts.items()}
    # lexsort: last key first; segment and row keep the written order of ties
    order = np.lexsort((arrays["row"], arrays["segment"], arrays["site"], arrays["rank"],
                        arrays["step"]))
    position = np.empty_like(order)  # the inverse permutation: stored -> pipeline
    position[order] = np.arange(len(order))
    return {k: v[order] for k, v in arrays.items()}, position


def _steps_of(seg: Segment, i: int) -> np.ndarray:
    """The steps of batch ``i`` of ``seg``; reading a batch maps its pages in, so they are
    dropped at once (ordering a capture must not make it all resident)."""
    steps = seg.steps_of(i)
    seg.release()
    return steps


def _merged_counts(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """``(steps, counts)`` pairs (each of distinct steps) as one: distinct ascending steps and
    each one's total count."""
    if not parts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    steps, where = np.unique(np.concatenate([p[0] for p in parts]), return_inverse=True)
    counts = np.zeros(len(steps), np.int64)
    np.add.at(counts, where, np.concatenate([p[1] for p in parts]).astype(np.int64))
    return steps.astype(np.int64), counts


def _step_mask(column: np.ndarray, steps: int | Iterable[int]) -> np.ndarray:
    if isinstance(steps, (int, np.integer)) and not isinstance(steps, bool):
        return column == int(steps)
    if isinstance(steps, range):
        inside = (column >= steps.start) & (column < steps.stop) if steps.step > 0 else \
            (column <= steps.start) & (column > steps.stop)
        return inside & ((column - steps.start) % steps.step == 0)
    if isinstance(steps, bool):
        raise TypeError("steps must be an int, a range or an iterable of ints, not a bool")
    return np.isin(column, np.fromiter((int(s) for s in steps), dtype=np.int64))


def _batch_spans(keys: np.ndarray, rows: np.ndarray) -> dict[int, tuple[int, int, int]]:
    """Per batch (``keys``: segment and batch of each position): the first and last of its
    ``rows`` asked for, and the last position that asks for one."""
    if not len(keys):
        return {}
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    first = np.minimum.reduceat(rows[order], starts)
    last = np.maximum.reduceat(rows[order], starts)
    last_at = np.maximum.reduceat(order, starts)
    return {int(k): (int(a), int(b), int(c)) for k, a, b, c in
            zip(ordered[starts], first, last, last_at, strict=True)}


class RecordList(Sequence[Record]):
    """A lazy sequence of records: each is decoded and validated when accessed."""

    def __init__(self, segments: list[Segment], segment: np.ndarray, batch: np.ndarray,
                 row: np.ndarray) -> None:
        self._segments = segments
        self._segment, self._batch, self._row = segment, batch, row

    def __len__(self) -> int:
        return len(self._segment)

    @overload
    def __getitem__(self, index: int) -> Record: ...

    @overload
    def __getitem__(self, index: slice) -> RecordList: ...

    def __getitem__(self, index: int | slice) -> Record | RecordList:
        if isinstance(index, slice):
            return RecordList(self._segments, self._segment[index], self._batch[index],
                              self._row[index])
        seg = self._segments[int(self._segment[index])]
        return seg.batch(int(self._batch[index])).record(int(self._row[index]))

    def __iter__(self) -> Iterator[Record]:
        keys = self._segment.astype(np.int64) * (1 << 32) + self._batch
        spans = _batch_spans(keys, self._row)
        held: dict[int, list[Record]] = {}  # batches decoded once, kept to their last row here
        for start in range(0, len(self), ITER_CHUNK):
            stop = min(start + ITER_CHUNK, len(self))
            yield from self._chunk(start, stop, keys[start:stop], spans, held)
            for key in [key for key in held if spans[key][2] < stop]:
                del held[key]

    def _chunk(self, start: int, stop: int, keys: np.ndarray,
               spans: dict[int, tuple[int, int, int]],
               held: dict[int, list[Record]]) -> list[Record]:
        """Records ``start:stop`` of the sequence, each batch's rows decoded in one go: a batch
        whose rows this chunk holds all of, the rows asked for; one read again by a later chunk
        (batches spanning many steps, read in pipeline order), its rows from the first to the
        last the sequence asks for, once, into ``held`` (decoding a piece of it for each chunk
        read and decoded it again each time, and each piece held the whole batch's buffers:
        time and memory grew as the records times the batches)."""
        row = self._row[start:stop]
        out: list[Record | None] = [None] * (stop - start)
        for key in np.unique(keys).tolist():
            where = np.flatnonzero(keys == key)
            rows = row[where]
            first_row, last_row, last_at = spans[key]
            if key not in held and last_at >= stop:
                view = self._segments[key >> 32].batch(key & 0xFFFFFFFF)
                held[key] = view.records(first_row, last_row + 1)
            if key in held:
                decoded = held[key]
                for i, r in zip(where.tolist(), rows.tolist(), strict=True):
                    out[i] = decoded[r - first_row]
                continue
            lo, hi = int(rows.min()), int(rows.max()) + 1
            view = self._segments[key >> 32].batch(key & 0xFFFFFFFF)
            if hi - lo == len(rows):  # a run of rows (whole captures, step ranges): in one go
                decoded = view.records(lo, hi)
                for i, r in zip(where.tolist(), rows.tolist(), strict=True):
                    out[i] = decoded[r - lo]
            else:  # scattered rows: decode only those asked for
                for i, r in zip(where.tolist(), rows.tolist(), strict=True):
                    out[i] = view.record(r)
        return [r for r in out if r is not None]
