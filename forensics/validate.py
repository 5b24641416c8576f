"""Validation of records against their site's schema (used by every reader and importer)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from forensics.errors import CaptureFormatError
from forensics.records import FieldSpec, Record, check_value
from forensics.sites import get_site

if TYPE_CHECKING:
    import numpy as np

    from forensics.sites._common import BatchColumns

SUMMARY_COMMON = ("min", "max")


def _is_int(value: Any) -> bool:
    import numpy as np

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
    module = get_site(site)
    specs = {spec.name: spec for spec in module.FIELDS}
    for out in module.OUTPUT_FIELDS:
        base = specs[out]
        specs[f"{out}_after"] = FieldSpec(f"{out}_after", base.kind, base.ndim, required=False)
    return specs


def validate_record(record: Record, where: str, *, typed: bool = False) -> Record:
    """Check ``record`` against its site's schema and normalise its values in place.

    ``where`` names the source for messages, e.g. ``"record 3 in 'dump.pt'"``. ``typed``: the
    caller guarantees that every value already has the Python type of its field's kind (numpy
    integer arrays, ``int``, lists of ``str``, dicts of ``str`` to ``int``, lists of lists of
    ``int``), e.g. a reader decoding columns whose Arrow types it checked, or trusted in-process
    code; then only tensor ranks are checked per value (names, required fields and the site's
    cross-field checks are always checked).

    Returns:
        The same record, its values normalised (numpy arrays, ints, lists).
    Raises:
        UnknownSiteError: the site is not registered.
        CaptureFormatError: a missing, unknown or malformed field, naming the field and the fix.
    """
    module = get_site(record.site)
    where = f"{where} (site {record.site!r})"
    if not _is_int(record.step) or int(record.step) < 0:
        raise CaptureFormatError(f"{where}: 'step' must be a non-negative integer, got "
                                 f"{record.step!r}; give each record its engine step")
    if not _is_int(record.rank) or int(record.rank) < 0:
        raise CaptureFormatError(f"{where}: 'rank' must be a non-negative integer, got "
                                 f"{record.rank!r}")
    record.step, record.rank = int(record.step), int(record.rank)
    if record.summary:
        return _validate_summary(record, module.SUMMARY_BOUND, where)
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
            record.fields[name] = check_value(spec, record.fields[name], where)
        elif spec.kind == "tensor" and record.fields[name].ndim != spec.ndim:
            check_value(spec, record.fields[name], where)  # raises, naming the field
    check = getattr(module, "check_record", None)
    if check is not None:
        check(record, where)
    return record


def screen_batch(site: str, cols: BatchColumns) -> np.ndarray:
    """The records of a decoded batch that :func:`validate_record` (``typed=True``) may reject,
    found in one columnar pass instead of one Python check per record.

    Every record it leaves out passes ``validate_record``; the caller runs ``validate_record``
    on those it flags, which raises naming the record and the field (or passes: the screen may
    flag more than it must). ``cols`` holds full records of ``site`` whose columns have their
    fields' kinds (see ``forensics.store.batch``).
    """
    import numpy as np

    from forensics.sites._common import ScreenUnsure

    module = get_site(site)
    check = getattr(module, "check_batch", None)
    if check is None and hasattr(module, "check_record"):
        return np.ones(cols.rows, dtype=bool)  # no columnar form: every record per record
    bad = np.zeros(cols.rows, dtype=bool)
    for name, spec in site_field_specs(site).items():
        present = cols.present(name)
        if spec.required:
            bad |= ~present
        if spec.kind == "tensor" and present.any():
            bad |= present & (cols.ndim(name) != spec.ndim)
    try:
        return bad if check is None else bad | check(cols)
    except ScreenUnsure:
        return np.ones(cols.rows, dtype=bool)


def _validate_summary(record: Record, bound: str, where: str) -> Record:
    for name in (*SUMMARY_COMMON, bound):
        value = record.fields.get(name)
        if not _is_int(value):
            raise CaptureFormatError(f"{where}: summary record needs an integer {name!r}, got "
                                     f"{value!r}; summary records carry {list(SUMMARY_COMMON)} "
                                     f"and {bound!r}")
        record.fields[name] = int(value)  # type: ignore[arg-type]
    return record
