"""Importers of foreign dumps and logs: one module per format, one registry line each.

Each importer is ``read(path) -> Imported`` (records and events, validated). :func:`import_sources`
reads every source first, then writes one capture, so bad input leaves no partial output.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forensics.atomic import user_path
from forensics.errors import CaptureFormatError
from forensics.escaping import terminal
from forensics.records import INT64_MAX, Record
from forensics.registry import Registry

__all__ = ["IMPORTERS", "Imported", "import_sources", "importer_for", "read_source",
           "source_names"]


@dataclass
class Imported:
    """What one source yields: records (validated) and timeline events."""

    records: list[Record] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    #: positions of the records whose step is only their order in the source (a log line
    #: naming no step)
    ordinal: set[int] = field(default_factory=set)


#: file suffix -> "module:function" of its importer (modules load on first use)
IMPORTERS: Registry[str] = Registry("source type", CaptureFormatError)


def register(suffixes: Iterable[str], target: str) -> None:
    """Register the importer ``target`` ("module:function") for each of ``suffixes``."""
    for suffix in suffixes:
        IMPORTERS.register(suffix.lower(), target)


def importer_for(path: Path) -> Callable[[Path], Imported]:
    """Return the importer of ``path`` by its suffix.

    Raises CaptureFormatError naming the supported suffixes.
    """
    import importlib

    target = IMPORTERS.find(path.suffix.lower())
    if target is None:
        raise CaptureFormatError(f"'{terminal(path)}': unsupported source type "
                                 f"{path.suffix or '(none)'!r}; expected one of "
                                 f"{sorted(IMPORTERS)}")
    module_name, function = target.split(":")
    return getattr(importlib.import_module(module_name), function)  # type: ignore[no-any-return]


def read_source(path: str | os.PathLike[str]) -> Imported:
    """Read one source file. Raises CaptureFormatError (or a subclass) on bad input;
    UnsafeInputError for a FIFO, device, socket or directory."""
    source = user_path(path)
    if not os.path.lexists(source):
        raise CaptureFormatError(f"source '{terminal(source)}' does not exist; check the path")
    return importer_for(source)(source)  # each opens it through forensics.store.guarded


def import_sources(sources: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
                   out: str | os.PathLike[str], force: bool = False,
                   facts: dict[str, Any] | None = None) -> Path:
    """Import ``sources`` (.pt, .safetensors, .npz, logs) into a new capture at ``out``.

    One source given alone (a ``str`` or ``os.PathLike``, not in a list) is that one file: a
    string was read as its characters (``'/' is the same file as '/'``) and a ``Path`` was a
    ``TypeError``.

    ``facts`` (``{"versions.vllm": "0.31.0", ...}``, see :mod:`forensics.importers.facts`)
    are the incident's; every other stated fact is ``unknown``, and the importing tool and
    time go under ``imported``.

    Returns:
        The capture's path.
    Raises:
        CaptureFormatError, UnsafeInputError, UnknownSiteError: a bad source (the message
            names the file, record, site and field).
        OutputExistsError: ``out`` exists and ``force`` is false.
    """
    from forensics.progress import Progress
    from forensics.store.paths import named
    from forensics.store.replace import recover
    from forensics.store.writer import check_replaceable, write_capture

    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    if not sources:
        raise CaptureFormatError("no sources given; pass .pt, .safetensors, .npz or log files")
    target = named(out, "output")
    sources = [user_path(source) for source in sources]  # "" and NUL refused, one line
    recover(target)
    check_replaceable(target, force)  # fail before reading anything
    check_distinct(sources)
    read: list[Imported] = []
    held = 0
    names = source_names(sources)
    bar = Progress(len(sources), "import")
    for source, name in zip(sources, names, strict=True):
        bar.advance(0, terminal(name))  # a planted file's name holds escapes
        read.append(read_source(source))
        for event in read[-1].events:
            event["source"] = name  # the importers name their file by its base name
        held = check_held(held + held_bytes(read[-1].records), source)
        bar.advance()
    bar.close()
    records, events = combined(read, names)
    check_events(events, names, [len(r.events) for r in read])
    from forensics.importers.facts import import_manifest

    manifest = import_manifest(names, facts or {}, ordinal=sum(len(r.ordinal) for r in read))
    return write_capture(target, records, manifest, force=force, events=events)


#: the most bytes the records of one import's sources may hold together (each source is held
#: to its own caps: ``forensics.store.guarded.MAX_DECODED`` of arrays, a log's million
#: records): every source is read before the capture is written, so a folder of small
#: compressed dumps or of long logs would otherwise hold gigabytes
MAX_IMPORTED = 2 << 30
#: the bytes counted for each record besides its arrays (a summary record of a log takes
#: about 370)
RECORD_BYTES = 512


def source_names(sources: Sequence[str | os.PathLike[str]]) -> list[str]:
    """The name each source goes by in the capture (its events' ``source``, the manifest's
    ``sources``): its base name, or as many of its last folders as tell it apart from the
    others (``h1/engine.log`` beside ``h2/engine.log``); names alike once case-folded and
    NFKC-normalised count as one (``café.log`` written two ways prints the same), and two
    that stay alike to their whole path end in `` (source K)``, K their place (1 on)."""
    import unicodedata

    paths = [Path(s) for s in sources]
    widths = [1] * len(paths)

    def name(k: int) -> str:
        parts = paths[k].parts
        return str(paths[k]) if widths[k] >= len(parts) else "/".join(parts[-widths[k]:])

    while True:
        groups: dict[str, list[int]] = {}
        for k in range(len(paths)):
            groups.setdefault(unicodedata.normalize("NFKC", name(k)).casefold(), []).append(k)
        wider = [k for group in groups.values() if len(group) > 1 for k in group
                 if widths[k] < len(paths[k].parts)]
        if not wider:
            break
        for k in wider:
            widths[k] += 1
    alike = {k for group in groups.values() if len(group) > 1 for k in group}
    return [name(k) + (f" (source {k + 1})" if k in alike else "") for k in range(len(paths))]


def check_distinct(sources: Sequence[str | os.PathLike[str]]) -> None:
    """Refuse one file given as two sources (named twice, or a link planted beside it in a
    folder imported by a glob): its records would be imported twice.

    Raises CaptureFormatError naming both."""
    seen: dict[tuple[int, int], int] = {}
    for k, source in enumerate(sources):
        try:
            info = os.stat(source)
        except OSError:
            continue  # read_source says what is wrong with it
        first = seen.setdefault((info.st_dev, info.st_ino), k)
        if first != k:
            raise CaptureFormatError(f"'{terminal(source)}' is the same file as "
                                     f"'{terminal(sources[first])}' (named twice, or a link to "
                                     "it); give each source once")


def held_bytes(records: Sequence[Record]) -> int:
    """The bytes ``records`` hold in memory: their arrays, and :data:`RECORD_BYTES` each."""
    import numpy as np

    return RECORD_BYTES * len(records) + sum(
        value.nbytes for record in records for value in record.fields.values()
        if isinstance(value, np.ndarray))


def check_held(total: int, source: str | os.PathLike[str]) -> int:
    """Return ``total`` (the bytes read so far) when it is within :data:`MAX_IMPORTED`.

    Raises CaptureFormatError naming ``source``, the source that went past it."""
    if total > MAX_IMPORTED:
        raise CaptureFormatError(f"'{terminal(source)}': the sources read up to it hold {total} "
                                 f"bytes of records, past the {MAX_IMPORTED} one import holds; "
                                 "import them in parts")
    return total


def combined(sources: Sequence[Imported], names: Sequence[str] | None = None,
             ) -> tuple[list[Record], list[dict[str, Any]]]:
    """The records and events of ``sources``, in order. Records whose step is only their line
    order (:attr:`Imported.ordinal`) keep that order, placed after every step another source
    names (and after the ordinal records placed before them): beside a dump, a log's lines
    never share a step number with the dump's records.

    Raises CaptureFormatError naming the source (of ``names``) whose lines would be placed
    past int64."""
    named = [{r.step for i, r in enumerate(s.records) if i not in s.ordinal} for s in sources]
    after = max((max(steps) for steps in named if steps), default=-1) + 1
    naming = sum(1 for steps in named if steps)  # sources that name a step
    records: list[Record] = []
    events: list[dict[str, Any]] = []
    for k, source in enumerate(sources):
        others = naming > (1 if named[k] else 0)  # another source names a step
        moved = _ordinal_steps(source, after) if source.ordinal and others else {}
        if moved and max(moved.values()) > INT64_MAX:
            name = names[k] if names is not None else f"source {k}"
            raise CaptureFormatError(
                f"'{terminal(name)}': its {len(moved)} steps of lines naming no step go after step "
                f"{after - 1} of the other sources, past int64; give those lines their step "
                "(step=N) or import the log on its own")
        records += [_shifted(r, moved.get(r.step, r.step) if i in source.ordinal else r.step)
                    for i, r in enumerate(source.records)]
        events += [{**e, "step": moved[e["step"]]} if e.get("step") in moved
                   and e["step"] not in named[k] else e for e in source.events]
        if moved:
            after = max(moved.values()) + 1
    return records, events


def check_events(events: Sequence[dict[str, Any]], names: Sequence[str],
                 counts: Sequence[int]) -> None:
    """Refuse, before anything is written, events that a capture could not be read back with:
    more than the reader's event count, or more bytes (as the events file stores them) than
    its events file may hold. ``counts``: how many of ``events`` each source (``names``) gave,
    in order. Raises CaptureFormatError naming the source that gave the most."""
    from forensics.store import events as store
    from forensics.store.guarded import LIMITS

    sizes, at = [], 0
    for count in counts:
        sizes.append(sum(_stored_size(e) for e in events[at:at + count]))
        at += count
    most = max(range(len(names)), key=lambda k: sizes[k]) if names else 0
    others = f" (with {len(names) - 1} other sources)" if len(names) > 1 else ""
    who = f"'{terminal(names[most])}'{others}"
    if len(events) > store.MAX_EVENTS:
        raise CaptureFormatError(f"{who}: {len(events)} crash events, past the "
                                 f"{store.MAX_EVENTS} a capture holds; split the log and "
                                 "import each part")
    limit = LIMITS["events file"]
    if sum(sizes) > limit:
        raise CaptureFormatError(f"{who}: its crash events take {sum(sizes)} bytes, past the "
                                 f"{limit} a capture's events file holds (each crash dump keeps "
                                 "its batch); split the log and import each part")


def _stored_size(event: dict[str, Any]) -> int:
    """The bytes of ``event``'s line in an events file (0 for one the writer refuses itself,
    in one line)."""
    import json

    try:
        return len(json.dumps(event, sort_keys=True, allow_nan=False)) + 1
    except (TypeError, ValueError, RecursionError):
        return 0


def _ordinal_steps(source: Imported, first: int) -> dict[int, int]:
    """New steps of ``source``'s ordinal records: the same order, from ``first`` on."""
    steps = sorted({source.records[i].step for i in source.ordinal})
    return {step: first + n for n, step in enumerate(steps)}


def _shifted(record: Record, step: int) -> Record:
    """``record`` at ``step`` (itself when that is its step)."""
    if step == record.step:
        return record
    return Record(record.site, step, record.rank, record.fields, summary=record.summary)


register([".pt", ".pth"], "forensics.importers.pt:read")
register([".safetensors"], "forensics.importers.safetensors_:read")
register([".npz"], "forensics.importers.npz:read")
register([".log", ".txt", ".out", ".err"], "forensics.importers.crash_dump:read")  # logs + dump
