"""Turning plain dicts of foreign dumps into validated records (shared by the importers)."""

from __future__ import annotations

from typing import Any

import numpy as np

from forensics.errors import CaptureFormatError, UnknownSiteError
from forensics.records import Record
from forensics.sites import SITES
from forensics.validate import validate_record

META_KEYS = ("site", "step", "rank", "summary")


def where_of(path: Any, index: int) -> str:
    """The source position used in messages: ``record I in 'FILE'``."""
    return f"record {index} in '{path}'"


def record_from_dict(raw: Any, where: str) -> Record:
    """Build and validate a record from a dict with ``site``, ``step``, optional ``rank`` and
    ``summary``, and the site's fields.

    Raises CaptureFormatError (UnknownSiteError for an unknown site) naming ``where``.
    """
    if not isinstance(raw, dict):
        raise CaptureFormatError(f"{where}: expected a dict with 'site', 'step' and the site's "
                                 f"fields, got {type(raw).__name__}")
    bad = [k for k in raw if not isinstance(k, str)]
    if bad:
        raise CaptureFormatError(f"{where}: field names must be strings, got {bad[0]!r}")
    site = _scalar(raw.get("site"))
    if not isinstance(site, str):
        raise CaptureFormatError(f"{where}: missing or non-string 'site' ({site!r}); "
                                 f"expected one of {list(SITES)}")
    at = f"{where} (site {site!r})"
    step, rank = _int_meta(raw, "step", at, None), _int_meta(raw, "rank", at, 0)
    summary = _scalar(raw.get("summary", False))
    if not isinstance(summary, (bool, np.bool_)):
        raise CaptureFormatError(f"{where}: 'summary' must be true or false, got {summary!r}")
    fields = {k: v for k, v in raw.items() if k not in META_KEYS}
    record = Record(site, step, rank, fields, bool(summary))
    try:
        return validate_record(record, where)
    except UnknownSiteError as exc:
        raise UnknownSiteError(f"{where}: {exc}") from None


def _scalar(value: Any) -> Any:
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return value.item()
    return value


def _int_meta(raw: dict[str, Any], key: str, where: str, default: int | None) -> Any:
    value = _scalar(raw.get(key, default))
    if value is None or isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        fix = "give each record its engine step" if key == "step" else "give the TP rank"
        raise CaptureFormatError(f"{where}: {key!r} must be a non-negative integer, got "
                                 f"{value!r}; {fix}")
    return int(value)
