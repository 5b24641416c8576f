"""Escaping of capture strings for each output a triage writes (terminal, Markdown, CSV, HTML).

Every string that comes from a capture (names, hosts, versions, messages) passes through the
function of the output it lands in.
"""

from __future__ import annotations

import html
import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_MARKDOWN = re.compile(r"([\\`*_\[\]|<>~#])")
#: a CSV cell starting with one of these is read as a formula by spreadsheets
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def terminal(text: object) -> str:
    """``text`` with control, bidi and escape characters shown as ``\\xNN`` / ``\\uNNNN``."""
    return _CONTROL.sub(lambda m: ascii(m.group(0))[1:-1], str(text))


def markdown(text: object) -> str:
    """``text`` for a Markdown table cell or line: controls shown, markup characters escaped."""
    return _MARKDOWN.sub(r"\\\1", terminal(text)).replace("\n", " ")


def csv_cell(text: object) -> object:
    """A CSV cell: a string starting like a formula gets a leading ``'``; others as they are."""
    if isinstance(text, str) and text.startswith(FORMULA_START):
        return "'" + text
    return text


def html_text(text: object) -> str:
    """``text`` escaped for HTML (quotes included)."""
    return html.escape(str(text), quote=True)
