"""A list of strings as Python prints it (``['a', "b'c", 'd\\'e"']``), read as data: each
string in the quotes ``repr`` chose (double where it holds ``'`` and no ``"``), its escapes
decoded by name, never evaluated."""

from __future__ import annotations

import re

#: one printed string (either quote, backslash escapes inside), then the list's ``,`` or ``]``
ITEM_RE = re.compile(r"""\s*+(?:'((?:[^'\\]|\\.)*+)'|"((?:[^"\\]|\\.)*+)")\s*+([,\]])""",
                     re.DOTALL)
#: a backslash escape ``repr`` writes in a string
ESCAPE_RE = re.compile(r"\\(?:x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|(.))",
                       re.DOTALL)
#: the one-character escapes ``repr`` writes
SIMPLE = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "r": "\r", "t": "\t"}


def quoted_list(text: str, start: int) -> list[str] | None:
    """The strings of the list printed in ``text`` from ``start`` (just after its ``[``), or
    None where it is not a list of printed strings (or one holds an escape ``repr`` does not
    write): read in time linear in ``text``."""
    if text.startswith("]", start):
        return []
    out: list[str] = []
    at = start
    while True:
        item = ITEM_RE.match(text, at)
        if item is None:
            return None
        value = _unescaped(item.group(1) if item.group(1) is not None else item.group(2))
        if value is None:
            return None
        out.append(value)
        at = item.end()
        if item.group(3) == "]":
            return out


def _unescaped(text: str) -> str | None:
    """``text`` with its escapes decoded, or None where one is not an escape ``repr`` writes."""
    bad = False

    def decoded(found: re.Match[str]) -> str:
        nonlocal bad
        code = found.group(1) or found.group(2) or found.group(3)
        if code is not None and int(code, 16) <= 0x10FFFF:
            return chr(int(code, 16))
        if code is not None or found.group(4) not in SIMPLE:  # past Unicode: repr writes none
            bad = True
            return ""
        return SIMPLE[found.group(4)]

    value = ESCAPE_RE.sub(decoded, text)
    return None if bad else value
