"""The one way JSON text from a file we did not write is parsed (a capture's manifest, events
lines, expected verdicts and segment metadata; an imported source's headers and members): an
object that names a key twice is refused (:class:`DuplicateKeyError`), since one reader (``jq``,
a browser) shows the first value and another (Python) the last. The check is the parser's
``object_pairs_hook``: linear in the text, no second pass. Lists and objects nested past
:data:`MAX_DEPTH` are refused before parsing (:class:`NestingError`): the parser's own limit is
Python's recursion limit less the caller's stack, so one text read in ``inspect`` was "not
valid JSON" in a triage worker or a report's notebook. An integer of more than
:data:`MAX_DIGITS` digits is refused alike (:class:`NumberError`): Python's own refusal read "not
valid JSON" of valid JSON and told the user to call ``sys.set_int_max_str_digits()``.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from forensics.escaping import capped, python_string

#: characters of a repeated key shown in a message
SHOWN = 80
#: the deepest lists and objects nest in JSON text we did not write (a manifest, an event, a
#: header: short records a few levels deep); the same for every caller, whatever its stack
MAX_DEPTH = 100
#: the most digits of an integer in JSON text we did not write (Python's own default limit;
#: a capture's numbers are 64-bit: at most 20 digits)
MAX_DIGITS = 4300


class DuplicateKeyError(ValueError):
    """A JSON object names one key twice; the message names the key (escaped)."""


class RefusedJsonError(ValueError):
    """Valid JSON text that every reader refuses alike; the message says why and the fix."""


class NestingError(RefusedJsonError):
    """JSON text whose lists and objects nest past :data:`MAX_DEPTH`; the message says how
    deep and the fix."""


class NumberError(RefusedJsonError):
    """JSON text holding an integer of more than :data:`MAX_DIGITS` digits; the message says
    how many and the fix."""


def _integer(text: str) -> int:
    """The JSON integer ``text``; NumberError past :data:`MAX_DIGITS` digits (never converted,
    whatever Python's own limit is set to)."""
    digits = len(text) - text.startswith("-")
    if digits > MAX_DIGITS:
        raise NumberError(f"an integer of {digits} digits, past the {MAX_DIGITS} forensics "
                          "reads; a capture's numbers are 64-bit integers (at most 20 "
                          "digits): remove the number or replace the file with the one its "
                          "producer wrote")
    return int(text)


def check_nesting(text: str | bytes) -> None:
    """Raise NestingError when ``text``'s lists and objects nest past :data:`MAX_DEPTH`
    (brackets inside strings not counted); linear in the text, in pieces of
    :data:`_PIECE` bytes (:func:`_outside_strings`)."""
    opened = text.count(b"[") + text.count(b"{") if isinstance(text, bytes) else \
        text.count("[") + text.count("{")
    if opened <= MAX_DEPTH:
        return
    depth = _outside_strings(text)[0]
    if depth > MAX_DEPTH:
        raise NestingError(f"lists and objects nested {depth} deep, past the {MAX_DEPTH} "
                           "forensics reads; a record of the toolkit is a few levels deep: "
                           "remove the nested value or replace the file with the one its "
                           "producer wrote")


def keys_in(text: str | bytes) -> int:
    """The keys of all ``text``'s JSON objects, counted before it is parsed: its colons
    outside strings (as :func:`check_nesting` reads strings; linear in the text)."""
    colons = text.count(b":") if isinstance(text, bytes) else text.count(":")
    return _outside_strings(text)[1] if colons else 0


#: the bytes :func:`_outside_strings` reads at once (its arrays are a few times this)
_PIECE = 1 << 18


def _outside_strings(text: str | bytes) -> tuple[int, int]:
    """How deep ``text``'s lists and objects nest, and its colons, outside strings: a
    quote after an odd run of backslashes is inside its string; a string never closed runs
    to the end (the parser reads no bracket past its quote either; a regular expression
    that required the closing quote made each quote of an unclosed ``"\\"\\"...`` start a
    scan to the end: a manifest of 80 KB took 8 s). Counted a piece at a
    time with numpy (every bracket of a text of a million ``{}`` made a string of its own:
    80 MB and 0.17 s of CPU; now 5 MB and 0.04 s). A UTF-8 byte of a character past ASCII is
    never a quote, a backslash or a bracket."""
    import numpy as np

    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    steps = np.zeros(256, np.int8)
    steps[[ord("["), ord("{")]], steps[[ord("]"), ord("}")]] = 1, -1
    depth = deepest = inside = slashes = colons = 0  # carried from piece to piece
    for start in range(0, len(data), _PIECE):
        piece = np.frombuffer(data, np.uint8, min(_PIECE, len(data) - start), start)
        places = np.arange(len(piece))
        # where the last byte that is no backslash is, at or before each place (-1: none)
        last = np.maximum.accumulate(np.where(piece != ord("\\"), places, -1))
        before = np.r_[slashes, np.where(last[:-1] >= 0, places[:-1] - last[:-1],
                                         places[:-1] + 1 + slashes)]
        quotes = (piece == ord('"')) & (before % 2 == 0)
        within = (np.cumsum(quotes) + inside) % 2 == 1
        levels = depth + np.cumsum(np.where(within, 0, steps[piece]), dtype=np.int64)
        colons += int(np.count_nonzero((piece == ord(":")) & ~within))
        deepest = max(deepest, int(levels.max()))
        depth, inside = int(levels[-1]), int(within[-1])
        slashes = len(piece) - 1 - int(last[-1]) + (slashes if last[-1] < 0 else 0)
    return deepest, colons


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

    Raises DuplicateKeyError (a ValueError) naming the key; NestingError (a ValueError: nested
    past :data:`MAX_DEPTH`); NumberError (a ValueError: an integer past :data:`MAX_DIGITS`
    digits); ValueError (not JSON)."""
    check_nesting(text)
    return json.loads(text, object_pairs_hook=_unique, parse_int=_integer)


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

    Raises DuplicateKeyError, NestingError (nested past :data:`MAX_DEPTH`), NumberError (an
    integer past :data:`MAX_DIGITS` digits) or ValueError (not JSON)."""
    check_nesting(text)
    return json.loads(text, object_pairs_hook=_unique, parse_constant=_number_as_text,
                      parse_float=_number_as_text, parse_int=_integer)


class KeyCountError(ValueError):
    """A JSON object of more keys than its reader takes, refused before the values past them
    are parsed; ``most``: the keys it takes."""

    def __init__(self, most: int) -> None:
        super().__init__(f"more than {most} keys")
        self.most = most


_SPACE = re.compile(r"[ \t\n\r]*")


def _skip(text: str, pos: int) -> int:
    """Where the first character at or after ``pos`` that is no JSON space is."""
    found = _SPACE.match(text, pos)
    return found.end() if found else pos


def strict_object(text: str, most: int) -> Any:
    """:func:`strict_json` of ``text``, where a JSON object of more than ``most`` keys is
    refused after reading ``most + 1`` of them (``json`` builds every value of an object before
    any check sees it: 1.37 million keys took 1.5 s and 420 MB). Its values are parsed by
    ``json``'s own scanner, each once; text that is no object is :func:`strict_json`'s.

    Raises KeyCountError, DuplicateKeyError, NestingError, NumberError or ValueError (not
    JSON)."""
    check_nesting(text)
    pos = _skip(text, 0)
    if not text.startswith("{", pos):
        return strict_json(text)
    scan = json.JSONDecoder(object_pairs_hook=_unique, parse_int=_integer).scan_once  # type: ignore[attr-defined]
    pairs: list[tuple[str, Any]] = []
    pos = _skip(text, pos + 1)
    while not text.startswith("}", pos) or pairs:
        if not text.startswith('"', pos):
            raise json.JSONDecodeError("Expecting property name enclosed in double quotes",
                                       text, pos)
        key, pos = json.decoder.scanstring(text, pos + 1)  # type: ignore[attr-defined]
        if len(pairs) == most:
            raise KeyCountError(most)
        pos = _skip(text, pos)
        if not text.startswith(":", pos):
            raise json.JSONDecodeError("Expecting ':' delimiter", text, pos)
        try:
            value, pos = scan(text, _skip(text, pos + 1))
        except StopIteration as stop:
            raise json.JSONDecodeError("Expecting value", text, stop.value) from None
        pairs.append((key, value))
        pos = _skip(text, pos)
        if not text.startswith(",", pos):
            break
        pos = _skip(text, pos + 1)
    if not text.startswith("}", pos):
        raise json.JSONDecodeError("Expecting ',' delimiter or '}'", text, pos)
    if _skip(text, pos + 1) != len(text):
        raise json.JSONDecodeError("Extra data", text, pos + 1)
    return _unique(pairs)
