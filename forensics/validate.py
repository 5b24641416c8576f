"""Validation of records against their site's schema (used by every reader and importer)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np

from forensics.errors import CaptureFormatError
from forensics.records import (
    INT64_MAX,
    INT64_MIN,
    MAX_CONTAINERS,
    MAX_FIELD_KEYS,
    MAX_RANK,
    FieldSpec,
    Record,
    check_value,
)
from forensics.schema import SUMMARY_COMMON, SiteSchema
from forensics.sites import get_site

if TYPE_CHECKING:
    from forensics.sites._common import BatchColumns

#: the largest vocabulary, embedding row count, output length or draft count a real engine
#: has (2**24, about 16.8 million; the largest vocabularies today are near 2**18): a capture's
#: integer past it is refused before anything is sized by it
MAX_BOUND = 2**24
#: the integer fields that size something in a replay, checked against :data:`MAX_BOUND`
CAPPED_FIELDS = ("vocab_size", "num_embeddings", "output_len", "prev_num_spec_tokens",
                 "tp_size")
#: value signatures of typed full records whose names, required fields and tensor ranks passed
_TYPED_OK: set[tuple[Any, ...]] = set()
_SIGNATURES_MAX = 4096  # a cache of signatures, emptied when it grows past this
_PLAIN_TYPES = (int, str, list, dict)
#: the names a record's dict holds besides its fields
META_KEYS = ("site", "step", "rank", "summary")


def _is_int(value: Any) -> bool:
    if type(value) is int:
        return True
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def field_specs(site: str) -> dict[str, FieldSpec]:
    """All field specs a full record of ``site`` may carry, ``<field>_after`` outputs included.

    Returns a new dict each call. Raises UnknownSiteError for an unknown site."""
    if not isinstance(site, str):
        get_site(site)  # raises UnknownSiteError
    return dict(site_field_specs(site))


@functools.lru_cache(maxsize=64)
def site_field_specs(site: str) -> dict[str, FieldSpec]:
    """As :func:`field_specs`, but the one cached dict per site: read it, never change it."""
    return get_site(site).field_specs()


def validate_record(record: Record, where: str, *, typed: bool = False,
                    signature: tuple[Any, ...] | None = None) -> Record:
    """Check ``record`` against its site's schema and normalise its values in place.

    ``where`` names the source for messages, e.g. ``"record 3 in 'dump.pt'"``. ``typed``: the
    caller guarantees that every value already has the Python type of its field's kind (numpy
    integer arrays, ``int``, lists of ``str``, dicts of ``str`` to ``int``, lists of lists of
    ``int``), e.g. a reader decoding columns whose Arrow types it checked, or trusted in-process
    code; then only tensor ranks are checked per value (names, required fields and the site's
    cross-field checks are always checked). ``signature``: the record's
    :func:`value_signature` when the caller has it (typed records only).

    Returns:
        The same record, its values normalised (numpy arrays, ints, lists).
    Raises:
        UnknownSiteError: the site is not registered.
        CaptureFormatError: a missing, unknown or malformed field, naming the field and the fix.
    """
    site = get_site(record.site)
    where = f"{where} (site {record.site!r})"
    if not _is_int(record.step) or not 0 <= int(record.step) < 2**63:
        raise CaptureFormatError(f"{where}: 'step' must be a non-negative int64, got "
                                 f"{record.step!r}; give each record its engine step")
    if not _is_int(record.rank) or not 0 <= int(record.rank) < MAX_RANK:
        raise CaptureFormatError(f"{where}: 'rank' must be a rank from 0 to {MAX_RANK - 1} "
                                 f"(a segment's file name holds six digits: a larger rank's "
                                 f"records would be read by no one), got {record.rank!r}; "
                                 "give the tensor-parallel rank")
    record.step, record.rank = int(record.step), int(record.rank)
    if record.summary:
        _refuse_values(record, where)
        return _validate_summary(record, site.summary_bound, where)
    key = (signature or value_signature(record)) if typed else ()
    if key in _TYPED_OK:  # typed, and the same names, types and ranks passed before
        return _check_cross_fields(site, record, where)
    specs = site_field_specs(record.site)
    unknown = sorted(set(record.fields) - set(specs))
    if unknown:
        raise CaptureFormatError(f"{where}: unknown field {unknown[0]!r}; expected: "
                                 f"{sorted(specs)}")
    for name, spec in specs.items():
        if name not in record.fields:
            if spec.required:
                raise CaptureFormatError(f"{where}: missing field {name!r}; expected: "
                                         f"{[s.name for s in specs.values() if s.required]}")
            continue
        if not typed:
            record.fields[name] = _checked(spec, record.fields[name], where)
        elif spec.kind == "tensor" and record.fields[name].ndim != spec.ndim:
            check_value(spec, record.fields[name], where)  # raises, naming the field
    if typed:
        remember_signature(_TYPED_OK, key)
    return _check_cross_fields(site, record, where)


def _checked(spec: FieldSpec, value: Any, where: str) -> Any:
    """:func:`check_value`, with numpy's refusal of a value it cannot make an array of (a
    ragged list given for a tensor) as the CaptureFormatError naming ``where`` and the field."""
    try:
        return _held_to_caps(spec, check_value(spec, value, where), where)
    except CaptureFormatError:
        raise
    except (ValueError, TypeError, OverflowError):
        what = (f"a {spec.ndim}-dimensional integer tensor" if spec.kind == "tensor"
                else f"of kind {spec.kind}")
        raise CaptureFormatError(
            f"{where}: field {spec.name!r} must be {what}, got a value numpy cannot make an "
            "array of (rows of different lengths?); fix the producer or the dump") from None


def _held_to_caps(spec: FieldSpec, value: Any, where: str) -> Any:
    """``value`` (normalised) when it holds no more lists or entries than a reader of a
    capture takes in one row (:func:`most_items`); what a reader would refuse is never written.

    Raises CaptureFormatError naming the field, the count and the cap."""
    held = most_items(spec.kind)
    if held is not None and len(value) > held[0]:
        raise CaptureFormatError(
            f"{where}: field {spec.name!r} holds {len(value)} {held[1]}, past the {held[0]} "
            "one record holds (one per request of a batch); fix the producer or the dump")
    return value


def most_items(kind: str) -> tuple[int, str] | None:
    """The most items one row of a field of ``kind`` holds, and what they are (None: a kind of
    no such cap): a ragged field's :data:`~forensics.records.MAX_CONTAINERS` lists (one per
    request of a batch; an empty one is 4 bytes of Arrow offsets and 56 of Python), a string
    list's as many strings (request ids, one per request of a batch; an empty one is 4 bytes
    of Arrow offsets, a distinct one 50 and more of Python), an index map's :func:`most_keys`
    entries (as many as an importer takes in a field's dict). The writers hold records to it
    and the readers count it from a column's offsets before any item is built."""
    if kind == "ragged":
        return MAX_CONTAINERS, "lists"
    if kind in ("str_list", "opt_str_list"):
        return MAX_CONTAINERS, "strings"
    if kind == "index_map":
        return most_keys(), "entries"
    return None


def check_caps(record: Record, where: str) -> Record:
    """Return ``record`` when every field of :data:`CAPPED_FIELDS` it holds is at most
    :data:`MAX_BOUND`.

    Raises:
        CaptureFormatError: naming the field, its value and the cap.
    """
    for name in CAPPED_FIELDS:
        value = record.fields.get(name)
        if value is None:
            continue
        array = np.asarray(value)
        if array.size and array.dtype.kind in "iu" and int(array.max()) > MAX_BOUND:
            raise CaptureFormatError(
                f"{where}: {name!r} is {int(array.max())}, past {MAX_BOUND} (2**24), more than "
                f"a real engine has; fix the record's {name}")
    return record


def int_range(spec: FieldSpec) -> tuple[int, int]:
    """The range an int field's value lies in, both ends included: its ``limits`` (int64's
    when none), at most :data:`MAX_BOUND` for a field of :data:`CAPPED_FIELDS`; the one rule
    records are read by and a generated repro's data file is (:mod:`forensics.share.repro`)."""
    low, high = spec.limits or (INT64_MIN, INT64_MAX)
    return low, min(high, MAX_BOUND) if spec.name in CAPPED_FIELDS else high


def check_limits(record: Record, where: str) -> Record:
    """Return ``record`` when every int field it holds lies in its ``limits``.

    Raises:
        CaptureFormatError: naming the field, its value and the range.
    """
    for name, spec in site_field_specs(record.site).items():
        if spec.limits is not None and name in record.fields:
            low, high = spec.limits
            if not low <= record.fields[name] <= high:
                what = f">= {low}" if high == INT64_MAX else f"in [{low}, {high}]"
                raise CaptureFormatError(
                    f"{where}: field {name!r} must be {what}, got {record.fields[name]}; fix "
                    "the producer or the dump")
    return record


def _check_cross_fields(site: SiteSchema, record: Record, where: str) -> Record:
    check_caps(record, where)
    check_limits(record, where)
    if site.check_record is not None:
        site.check_record(record, where)
    return record


def screen_batch(site: str, cols: BatchColumns) -> np.ndarray:
    """The records of a decoded batch that :func:`validate_record` (``typed=True``) may reject,
    found in one columnar pass instead of one Python check per record.

    Every record it leaves out passes ``validate_record``; the caller runs ``validate_record``
    on those it flags, which raises naming the record and the field (or passes: the screen may
    flag more than it must). ``cols`` holds full records of ``site`` whose columns have their
    fields' kinds (see ``forensics.store.batch``).
    """
    from forensics.screening import ScreenUnsure

    check, check_record = get_site(site).check_batch, get_site(site).check_record
    if check is None and check_record is not None:
        return np.ones(cols.rows, dtype=bool)  # no columnar form: every record per record
    bad = np.zeros(cols.rows, dtype=bool)
    for name, spec in site_field_specs(site).items():
        present = cols.present(name)
        if spec.required:
            bad |= ~present
        if spec.kind == "tensor" and present.any():
            bad |= present & (cols.ndim(name) != spec.ndim)
        if name in CAPPED_FIELDS and present.any():
            bad |= present & _past_cap(cols, name, spec.kind)
        if spec.limits is not None and present.any():
            ints = cols.ints(name)
            bad |= present & ((ints < spec.limits[0]) | (ints > spec.limits[1]))
    try:
        return bad if check is None else bad | check(cols)
    except ScreenUnsure:
        return np.ones(cols.rows, dtype=bool)


def _past_cap(cols: BatchColumns, name: str, kind: str) -> np.ndarray:
    """Where a capped field (:data:`CAPPED_FIELDS`) is past :data:`MAX_BOUND`, per record."""
    from forensics.screening import ScreenUnsure

    if kind == "int":
        return cols.ints(name) > MAX_BOUND
    if kind != "tensor":
        return np.ones(cols.rows, dtype=bool)
    try:
        values, counts = cols.flat(name)
    except ScreenUnsure:
        return np.ones(cols.rows, dtype=bool)
    over = np.zeros(cols.rows, dtype=bool)
    owner = np.repeat(np.arange(cols.rows), counts)
    over[owner[values > MAX_BOUND]] = True
    return over


def value_signature(record: Record) -> tuple[Any, ...]:
    """A hashable key of what the per-value schema checks of a full record depend on: its
    site, summary flag, field names in order and, per value, its type (numpy arrays: an int
    made of the dtype number and the rank). Records with one signature pass or fail those
    checks alike."""
    return (record.site, record.summary, tuple(record.fields), tuple([
        v.dtype.num << 8 | v.ndim if type(v) is np.ndarray else type(v)
        for v in record.fields.values()]))


def remember_signature(cache: set[tuple[Any, ...]] | dict[tuple[Any, ...], Any],
                       signature: tuple[Any, ...], value: Any = None) -> None:
    """Keep ``signature`` in ``cache`` (a set, or a dict mapping it to ``value``) unless a
    value is of a type the signature does not pin down (an ndarray subclass, say); the cache
    is emptied when it grows past a few thousand signatures."""
    if not all(type(k) is int or k in _PLAIN_TYPES for k in signature[3]):
        return
    if len(cache) >= _SIGNATURES_MAX:
        cache.clear()
    if isinstance(cache, set):
        cache.add(signature)
    else:
        cache[signature] = value


#: the field kinds that hold a record's values (ids, rows): what a summary record stands for
VALUE_KINDS = ("tensor", "ragged")


def _refuse_values(record: Record, where: str) -> None:
    """Refuse a summary record that holds values of its site's own (a tensor field, or its
    ``_after``): judged by its ``min`` and ``max`` alone, they went unjudged ("no violation"
    of a record holding ``input_ids = [5, 200]`` against 100 rows, its ``max`` said 5)."""
    specs = site_field_specs(record.site)
    held = sorted(name for name in record.fields if getattr(
        specs.get(name[:-len("_after")] if name.endswith("_after") else name), "kind", None)
        in VALUE_KINDS)
    if held:
        raise CaptureFormatError(
            f"{where}: summary record holds the field {held[0]!r}, values of its site that a "
            "summary record's min and max stand for, and which nothing would judge; drop "
            f"'summary' to judge the record's values, or drop {held[0]!r}")


def _validate_summary(record: Record, bound: str, where: str) -> Record:
    """A summary record's ``min``, ``max`` and ``bound`` integers and caps, and its names held
    to :func:`max_fields` (it may carry names beyond those, e.g. a log's ``line``)."""
    check_field_count(len(record.fields) + len(META_KEYS), where)
    for name in (*SUMMARY_COMMON, bound):
        value = record.fields.get(name)
        if not _is_int(value):
            raise CaptureFormatError(f"{where}: summary record needs an integer {name!r}, got "
                                     f"{value!r}; summary records carry {list(SUMMARY_COMMON)} "
                                     f"and {bound!r}")
        record.fields[name] = int(value)  # type: ignore[arg-type]
    return check_caps(record, where)


def max_fields() -> int:
    """The most names one record may hold: the largest site's declared fields (a summary
    record's ``min``, ``max`` and bound, where more), and :data:`META_KEYS`."""
    from forensics.sites import SITES

    declared = max(len(site_field_specs(site)) for site in SITES)
    return max(declared, len(SUMMARY_COMMON) + 1) + len(META_KEYS)


def most_keys() -> int:
    """The most keys the dicts of one record hold: a field's dict of :data:`~forensics.
    records.MAX_FIELD_KEYS` and the record's own fields (:func:`max_fields`)."""
    return MAX_FIELD_KEYS + max_fields()


def check_field_count(count: int, where: str) -> None:
    """Refuse a record of more than :func:`max_fields` names (``count``) before any of its
    values is converted: each took a JSON parse or a tensor's copy before validation named
    the first field no site has (1.37 million ``__metadata__`` keys: 15 s and 405 MB).

    Raises CaptureFormatError naming ``where`` (the file, or the record in it), the count and
    the cap."""
    cap = max_fields()
    if count > cap:
        raise CaptureFormatError(f"{where}: a record of {count} field names, past the {cap} "
                                 "any site declares (with site, step, rank and summary); "
                                 "write one record's fields, one record per file")

