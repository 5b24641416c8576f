"""The one way JSON text from a file we did not write is parsed (a capture's manifest, events
lines, expected verdicts and segment metadata; an imported source's headers and members): an
object that names a key twice is refused (:class:`DuplicateKeyError`), since one reader (``jq``,
a browser) shows the first value and another (Python) the last. The check is the parser's
``object_pairs_hook``: linear in the text, no second pass.
"""

from __future__ import annotations

import json
import math
from typing import Any

from forensics.escaping import capped, python_string

#: characters of a repeated key shown in a message
SHOWN = 80


class DuplicateKeyError(ValueError):
    """A JSON object names one key twice; the message names the key (escaped)."""


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(f"key {python_string(capped(key, SHOWN))} is there twice "
                                    "in one object (one reader takes the first value, another "
                                    "the last)")
        out[key] = value
    return out


def strict_json(text: str | bytes) -> Any:
    """``json.loads(text)``, refusing an object that names a key twice.

    Raises DuplicateKeyError (a ValueError) naming the key; ValueError (not JSON);
    RecursionError (nested past Python's limit)."""
    return json.loads(text, object_pairs_hook=_unique)


def _number_as_text(text: str) -> float | str:
    """A JSON number or constant as Python reads it, but one no JSON holds (``NaN``,
    ``Infinity``, ``1e400``) as its text (``"nan"``, ``"inf"``), as the probe writes a
    kernel's non-finite scalar."""
    value = float(text)
    return value if math.isfinite(value) else str(value)


def loads_finite(text: str) -> Any:
    """:func:`strict_json` of a capture's JSON text (its manifest, an event line), a number no
    JSON holds read as its text (:func:`_number_as_text`): what is read is written again
    (``shrink``, ``redact``) and printed as strict JSON.

    Raises DuplicateKeyError, ValueError (not JSON) or RecursionError (nested past Python's
    limit)."""
    return json.loads(text, object_pairs_hook=_unique, parse_constant=_number_as_text,
                      parse_float=_number_as_text)
