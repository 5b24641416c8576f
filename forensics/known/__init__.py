"""Known failure signatures of vLLM: the catalogue (data), its schema, the matcher, and the
"known or new / explained or not" answer a conclusion leads with.

``forensics known [CAPTURE]`` lists the catalogue and explains which entries match a capture.
"""

from __future__ import annotations

from forensics.known.answer import (
    CRASH_VERDICTS,
    EXPLAINED,
    NO_CRASH,
    UNEXPLAINED,
    KnownAnswer,
    answer,
    crash_verdict_of,
)
from forensics.known.schema import CATALOGUE_PATH, Catalogue, Entry, load_catalogue

__all__ = ["CATALOGUE_PATH", "CRASH_VERDICTS", "EXPLAINED", "NO_CRASH", "UNEXPLAINED",
           "Catalogue", "Entry", "KnownAnswer", "answer", "crash_verdict_of",
           "load_catalogue"]
