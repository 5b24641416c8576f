"""The seam to the known-signature catalogue (:mod:`forensics.known`, when it is installed)."""

from __future__ import annotations

import importlib
from typing import Any

#: the catalogue's function that names the known issues a replay matches
MATCHER = "match"


def match_known(result: Any, capture: Any) -> list[str]:
    """Names of the known issues ``result`` (a ReplayResult of ``capture``) matches: the
    catalogue's ``forensics.known.match(result, capture)``, each match's ``name`` (or the
    match itself) as text; ``[]`` when the catalogue is absent."""
    try:
        known = importlib.import_module("forensics.known")
    except ImportError:
        return []
    matcher = getattr(known, MATCHER, None)
    if matcher is None:
        return []
    return sorted({str(getattr(m, "name", m)) for m in matcher(result, capture) or ()})
