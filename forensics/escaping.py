"""One escaping rule per output: every string that comes from a capture goes through the
function of the output it lands in, keys and column names included.

- :func:`terminal`: control characters (C0, DEL, C1, and the Unicode line separators and
  bidirectional overrides) shown as ``\\x1b``-style escapes, so a string is one line of inert
  text; the base of the other three;
- :func:`html`: :func:`terminal`, then ``& < > " '`` as entities;
- :func:`markdown`: :func:`terminal`, then every character Markdown or raw HTML could read as
  markup backslash-escaped (``<`` as ``&lt;``); :func:`markdown_code`: a code span;
- :func:`csv_cell`: :func:`terminal`, then a cell starting with ``= + - @``, tab or CR
  prefixed with ``'`` (a spreadsheet would evaluate it as a formula).
"""

from __future__ import annotations

import html as _html
import re
from typing import Any

#: characters never written raw: C0 controls, DEL, C1 controls, line/paragraph separators,
#: bidirectional marks and overrides, the byte-order mark, lone surrogates (an undecodable
#: file name)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ufeff"
                      "\ud800-\udfff]")
#: characters Markdown (GitHub-flavoured) may read as markup anywhere in a line
_MARKDOWN = re.compile(r"([\\`*\[\]|~#!>$]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
#: a line start Markdown may read as a list item or a block
_BLOCK_START = re.compile(r"^(\s*\d*)([-+=.)])")
#: first characters that make a spreadsheet evaluate a cell
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal(value: Any) -> str:
    """``value`` as one line of text: every control character as a ``\\x..``/``\\u....``
    escape."""
    return _CONTROL.sub(_visible, str(value))


def html(value: Any) -> str:
    """``value`` as HTML text: :func:`terminal`, then markup characters as entities."""
    return _html.escape(terminal(value), quote=True)


def markdown(value: Any) -> str:
    """``value`` as Markdown text: one line, markup characters escaped, no raw HTML."""
    text = terminal(value).replace("&", "&amp;").replace("<", "&lt;")
    text = _MARKDOWN.sub(r"\\\1", text)
    return _BLOCK_START.sub(lambda m: m.group(1) + "\\" + m.group(2), text, count=1)


def markdown_code(value: Any) -> str:
    """``value`` as a Markdown code span (one line; a ``|`` escaped for tables)."""
    text = terminal(value).replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def csv_cell(value: Any) -> Any:
    """A CSV cell: a string escaped (:func:`terminal`) and prefixed with ``'`` when it starts
    like a formula; other values unchanged."""
    if not isinstance(value, str):
        return value
    text = terminal(value)
    return "'" + text if text.startswith(FORMULA_STARTS) or value.startswith(FORMULA_STARTS) \
        else text
