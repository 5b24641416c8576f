"""``forensics.open_many(paths)``: one ``pyarrow.dataset`` per site over every capture's segments.

Each segment's record batches are the store's own (memory-mapped, validated before use), with
``capture``, ``host`` and ``pid`` columns added beside the ``rank`` they hold: the data is read in
place, not copied. Batches of one site may differ (a field some records lack, an integer width):
the site's schema is their union, a missing column reads as null, and only a column narrower than
the union's type is widened (a copy of that column alone).

A capture's own columns never overwrite ours: a summary extra named like an added column is
namespaced (``extra.capture``), and an extra whose type differs across captures is split by kind
(``foo.int``, ``foo.str``), so no capture changes or stops what the others read. Each capture is
read on its own: with ``on_error="skip"`` one that cannot be read (undecodable names, out of range
numbers, unreadable files, a path too long) is left out and the others are unaffected. The host
and pid are read as every reader reads them (:data:`forensics.manifest_facts.PROCESS_HOST`,
:data:`~forensics.manifest_facts.PID`): a host past 256 characters, which would be copied onto
every row, or a pid out of range, is unknown (null).
A capture's column whose name folds (case, Unicode compatibility) onto one of ours or of its
site's fields (``Capture``, ``Input_Ids``: a case-insensitive query engine such as DuckDB would
read it for ours) is namespaced too (``extra.Capture``), and columns of two captures whose names
fold onto each other (``Foo``, ``foo``) are each renamed by their spelling (``Foo.case_100``,
``foo.case_000``), so no capture's column is read for another's.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from forensics.errors import CaptureFormatError, ConfigurationError, one_line
from forensics.escaping import terminal
from forensics.records import EXTRA_PREFIX

if TYPE_CHECKING:
    from pathlib import Path

    import pyarrow as pa
    import pyarrow.dataset as ds

    from forensics.store.batch import BatchView
    from forensics.store.reader import Capture

#: columns added to every batch, beside the store's ``step``, ``rank`` and ``summary``
ADDED_COLUMNS = ("capture", "host", "pid")
ON_ERROR = ("raise", "skip")


def open_many(paths: Iterable[str | os.PathLike[str]], on_error: str = "raise"
              ) -> dict[str, ds.Dataset]:
    """``{site: dataset}`` over the captures under ``paths`` (captures, folders holding them,
    globs), sites in pipeline order; a capture folder inside another capture is not read, and a
    warning names it.

    ``on_error``: ``"raise"`` (default) or ``"skip"`` (leave out a capture that cannot be read).
    One path given alone (a ``str`` or ``os.PathLike``, not in a list) is that one path: a string
    was read as its characters (``open_many("..")`` gave the captures under ``.``, and
    ``open_many("data")`` said ``'d' names no capture directory``) and a ``Path`` was a
    ``TypeError``.
    Raises:
        ConfigurationError: a path names no capture, or ``on_error`` is not a choice.
        CaptureFormatError, UnsafeInputError: a capture cannot be read (``on_error="raise"``).
    """
    from forensics.fleet.paths import find_captures, unlisted_note, unread_note
    from forensics.sites import SITES

    if on_error not in ON_ERROR:
        raise ConfigurationError(f"open_many: on_error={on_error!r}; choose one of {ON_ERROR}")
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    captures: dict[str, dict[str, list[pa.RecordBatch]]] = {}
    unlisted: list[tuple[Path, OSError]] = []
    found = find_captures(paths, unlisted)
    for note in (unread_note(found), unlisted_note(unlisted)):
        if note:
            warnings.warn(note, stacklevel=2)
    left: list[str] = []  # each capture left out, with why
    for path in found:
        try:
            captures[str(path)] = capture_batches(path)
        except Exception as exc:
            if on_error == "raise":
                raise
            left.append(f"'{terminal(str(path))}': {one_line(exc)}")
    datasets = fit_together(captures, SITES, on_error, left)
    if left:  # they dropped out unsaid: the datasets named none of them
        more = f"; and {len(left) - 3} more" if len(left) > 3 else ""
        warnings.warn(f"open_many: left out (on_error='skip'): {len(left)} capture(s) that "
                      "cannot be read, or whose columns do not fit beside the others: "
                      f"{'; '.join(left[:3])}{more}", stacklevel=2)
    return datasets


def fit_together(captures: dict[str, dict[str, list[pa.RecordBatch]]], sites: Sequence[str],
                 on_error: str = "raise", left: list[str] | None = None
                 ) -> dict[str, ds.Dataset]:
    """``{site: dataset}`` over ``captures``' batches (:func:`_datasets`); with ``on_error``
    ``"skip"`` the captures that do not fit beside the others are left out, all those one pass
    finds at once (the union type changes as they go: passes go on until none is left out),
    each one's line added to ``left``."""
    while True:
        unfit: list[UnfitCapture] | None = None if on_error == "raise" else []
        found = _datasets(captures, sites, unfit)
        if not unfit:
            return found
        if left is not None:
            left += [exc.line for exc in unfit]
        left_out = {exc.key for exc in unfit}  # the captures' own keys: never their labels
        kept = {k: v for k, v in captures.items() if k not in left_out}
        if len(kept) == len(captures):
            raise unfit[0]
        captures = kept


class UnfitCapture(CaptureFormatError):
    """A capture's column holds a value the site's union type cannot (a uint64 id past int64
    beside signed ones): it cannot be read in one dataset with the others."""

    def __init__(self, capture: str, column: str, kind: object, why: object) -> None:
        from forensics.escaping import from_unicode_path, terminal

        # the label is the path through unicode_path: shown as every path is (terminal), so a
        # name holding the text \x1b never reads as one holding ESC
        path = terminal(from_unicode_path(capture))
        #: the capture and why, as a warning of those left out names it
        self.line = (f"'{path}' column {column!r} does not fit the type {kind} the other "
                     f"captures share ({terminal(why)})")
        super().__init__(f"open_many: capture {self.line}; open it alone, or pass "
                         "on_error='skip' to leave it out")
        self.capture = capture
        #: the key of the capture in :func:`fit_together`'s ``captures`` (set by it)
        self.key: str | None = None


def _datasets(captures: dict[str, dict[str, list[pa.RecordBatch]]], sites: Sequence[str],
              unfit: list[UnfitCapture] | None = None) -> dict[str, ds.Dataset]:
    """``{site: dataset}`` over the batches of ``captures``, sites in ``sites`` order.

    Raises UnfitCapture for a capture whose column cannot be widened to the union type, or,
    given ``unfit``, adds each such to it and leaves its batches out (one pass finds them all:
    a pass per unfit capture, each over every capture, was quadratic in a fleet of them)."""
    batches: dict[str, list[pa.RecordBatch]] = {}
    owners: dict[str, list[str]] = {}  # each batch's capture key (two labels may be alike)
    for key, found in captures.items():
        for site, site_batches in found.items():
            batches.setdefault(site, []).extend(site_batches)
            owners.setdefault(site, []).extend([key] * len(site_batches))
    return {site: site_dataset(_split_conflicts(_split_spellings(batches[site])), unfit,
                               owners[site])
            for site in sites if site in batches}


def _name_of(found: dict[str, list[pa.RecordBatch]]) -> str | None:
    """The ``capture`` column's value of a capture's batches (None: it has none)."""
    for site_batches in found.values():
        for batch in site_batches:
            return str(batch.column("capture").dictionary[0].as_py())
    return None


def capture_batches(path: str | os.PathLike[str]) -> dict[str, list[pa.RecordBatch]]:
    """Every record batch of the capture at ``path`` per site, with the added columns, as
    views of the capture's memory maps: ``open_many`` holds every batch of every capture at
    once, which read into memory would take the fleet's whole size (a segment cut under a
    map still raises SIGBUS: the threat model's T31l, T92a).

    Raises CaptureFormatError or UnsafeInputError when the capture cannot be read.
    """
    from forensics.store.reader import load

    return batches_of(load(path, mapped=True))


def batches_of(capture: Capture, keep: Mapping[str, Collection[str]] | None = None
               ) -> dict[str, list[pa.RecordBatch]]:
    """Every record batch of the loaded ``capture`` per site, with the added columns.
    ``keep``: only the sites it names, each batch read into this process's memory with
    ordinary reads (:meth:`~forensics.store.segment.Segment.read_batch`: no memory map, so a
    segment cut meanwhile is a CaptureFormatError, never SIGBUS), of only the columns it names
    there (:func:`copied`); None: every batch whole, as views of the capture's memory maps."""
    from forensics.escaping import unicode, unicode_path
    from forensics.manifest_facts import PID, PROCESS_HOST, read_fact

    host, _, _ = read_fact(capture.manifest, PROCESS_HOST)
    host = unicode(host) if host else None
    pid, _, _ = read_fact(capture.manifest, PID)
    where = unicode_path(os.path.abspath(capture.path))
    out: dict[str, list[pa.RecordBatch]] = {}
    views = capture.batches() if keep is None else (
        view for site in keep for view in capture.batches(site, private=True))
    for view in views:
        batch = view.batch if keep is None else copied(view, keep[view.site])
        out.setdefault(view.site, []).append(
            _with_origin(batch, where, host, pid, ours(view.site)))
    return out


def copied(view: BatchView, names: Collection[str]) -> pa.RecordBatch:
    """The columns of ``view`` (a batch read into this process's memory) named in ``names``
    (each fully validated: :meth:`~forensics.store.batch.BatchView.column`), copied into
    buffers of their own, so the batch's other columns are not held (the threat model's T80b,
    T84d)."""
    import pyarrow as pa

    kept = [name for name in view.batch.schema.names if name in names]
    schema = pa.schema([view.batch.schema.field(name) for name in kept])
    batch = pa.RecordBatch.from_arrays([view.column(name) for name in kept], schema=schema)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        writer.write_batch(batch)
    return pa.ipc.open_stream(sink.getvalue()).read_next_batch()


def folded(name: str) -> str:
    """``name`` as a case-insensitive reader may compare it: NFKC, then case-folded."""
    import unicodedata

    return unicodedata.normalize("NFKC", name).casefold()


@functools.cache  # one per site: read-only, asked for every batch
def ours(site: str) -> dict[str, str]:
    """``{folded name: name}`` of the columns a capture's own may not take at ``site``: the
    added ones, the store's ``step``, ``rank``, ``summary``, and the site's fields (with their
    ``.shape``)."""
    from forensics.sites import get_site
    from forensics.store.arrow_codec import BASE_COLUMNS

    fields = [f.name for f in get_site(site).fields]
    names = [*ADDED_COLUMNS, *BASE_COLUMNS, *fields, *(f"{name}.shape" for name in fields)]
    return {folded(name): name for name in names}


def own_name(name: str, reserved: dict[str, str]) -> str:
    """A batch column's name in the dataset: ``extra.NAME`` for an added column's name, or a
    name that folds onto one of ``reserved`` (:func:`ours`) without being it; else ``name``."""
    clash = name in ADDED_COLUMNS or reserved.get(folded(name), name) != name
    return EXTRA_PREFIX + name if clash else name


def _with_origin(batch: pa.RecordBatch, capture: str, host: str | None, pid: int | None,
                 reserved: dict[str, str]) -> pa.RecordBatch:
    """``batch`` without field metadata, with constant ``capture``, ``host`` (strings,
    dictionary-encoded: :func:`repeated`) and ``pid`` (a column of the batch named like one of
    ours renamed: :func:`own_name`)."""
    import pyarrow as pa

    n = batch.num_rows
    arrays = [*batch.columns, repeated(capture, n), repeated(host, n),
              pa.array([pid] * n, pa.int64())]
    fields = [pa.field(own_name(f.name, reserved), f.type) for f in batch.schema]
    text = pa.dictionary(pa.int32(), pa.string())  # strings, each stored once per batch
    fields += [pa.field("capture", text), pa.field("host", text), pa.field("pid", pa.int64())]
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def repeated(text: str | None, n: int) -> pa.Array:
    """``text`` (None: null) on ``n`` rows, stored once: a dictionary of one string and ``n``
    int32 indices (4 bytes a row however long the capture's path)."""
    import numpy as np
    import pyarrow as pa

    indices = pa.array(np.zeros(n, dtype=np.int32), mask=np.full(n, text is None))
    return pa.DictionaryArray.from_arrays(indices, pa.array([text or ""], pa.string()))


def _split_spellings(batches: list[pa.RecordBatch]) -> list[pa.RecordBatch]:
    """``batches`` with every column whose name folds (:func:`folded`) onto another's of
    another spelling (``Foo`` in one capture, ``foo`` in another) renamed ``NAME.case_MASK``
    in each (MASK: 1 for each upper-case character), so a case-insensitive reader never
    reads one capture's column for another's."""
    import pyarrow as pa

    spellings: dict[str, set[str]] = {}
    for batch in batches:
        for name in batch.schema.names:
            spellings.setdefault(folded(name), set()).add(name)
    clashing = {name for found in spellings.values() if len(found) > 1 for name in found}
    if not clashing:
        return batches
    return [pa.RecordBatch.from_arrays(batch.columns, schema=pa.schema(
        [pa.field(_spelled(f.name) if f.name in clashing else f.name, f.type)
         for f in batch.schema])) for batch in batches]


def _spelled(name: str) -> str:
    """``name.case_MASK``: the name with where its upper-case characters are."""
    return f"{name}.case_{''.join('1' if ch.isupper() else '0' for ch in name)}"


def _split_conflicts(batches: list[pa.RecordBatch]) -> list[pa.RecordBatch]:
    """``batches`` with every column whose types cannot be unified across them renamed
    ``NAME.KIND`` in each (:func:`~forensics.store.frame.kind_of`), so each capture's values
    stay readable."""
    import pyarrow as pa

    from forensics.store.frame import kind_of

    types: dict[str, list[pa.DataType]] = {}
    for batch in batches:
        for f in batch.schema:
            if f.type not in types.setdefault(f.name, []):
                types[f.name].append(f.type)
    clashing = {name for name, found in types.items() if len(found) > 1 and not _unifies(
        [pa.field(name, t) for t in found])}
    if not clashing:
        return batches
    return [pa.RecordBatch.from_arrays(batch.columns, schema=pa.schema(
        [pa.field(f"{f.name}.{kind_of(f.type)}" if f.name in clashing else f.name, f.type)
         for f in batch.schema])) for batch in batches]


def _unifies(fields: list[pa.Field]) -> bool:
    """Whether fields of one name can be unified (permissive promotion)."""
    import pyarrow as pa

    try:
        pa.unify_schemas([pa.schema([f]) for f in fields], promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return False
    return True


def site_dataset(batches: list[pa.RecordBatch], unfit: list[UnfitCapture] | None = None,
                 owners: Sequence[str] | None = None) -> ds.Dataset:
    """One dataset over ``batches`` of one site: their union schema, each batch in place but
    for columns it must widen to that schema (a batch that cannot: UnfitCapture, or, given
    ``unfit``, added to it, its ``key`` the batch's in ``owners``, and left out)."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    schema = pa.unify_schemas([b.schema for b in batches], promote_options="permissive")
    groups: dict[pa.Schema, list[pa.RecordBatch]] = {}
    for number, batch in enumerate(batches):
        try:
            widened = _widened(batch, schema)
        except UnfitCapture as exc:
            if unfit is None:
                raise
            exc.key = None if owners is None else owners[number]
            unfit.append(exc)
            continue
        groups.setdefault(widened.schema, []).append(widened)
    children = [ds.dataset(group, schema=group[0].schema) for group in groups.values()]
    return ds.dataset(children, schema=schema)


def _widened(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` with each column whose type differs from ``schema``'s cast to it.

    Raises UnfitCapture when a value does not fit (the capture is named)."""
    import pyarrow as pa

    if all(f.type == schema.field(f.name).type for f in batch.schema):
        return batch
    arrays = [col if f.type == schema.field(f.name).type else
              _cast(batch, f.name, col, schema.field(f.name).type)
              for f, col in zip(batch.schema, batch.columns, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(
        [schema.field(f.name) for f in batch.schema]))


def _cast(batch: pa.RecordBatch, name: str, column: pa.Array, kind: pa.DataType) -> pa.Array:
    """``column`` (``name`` of ``batch``) cast to ``kind``; UnfitCapture when a value does not
    fit it."""
    import pyarrow as pa

    try:
        return column.cast(kind)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise UnfitCapture(_name_of({"": [batch]}) or "?", name, kind, exc) from None
