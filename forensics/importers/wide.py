"""Logs in UTF-16 or UTF-32, which the importers (reading UTF-8) would read as garbage.

A log starting with a UTF-16 or UTF-32 byte-order mark (PowerShell's ``>``) is named by its
mark. Without one (some Windows tools write UTF-16 that way), mostly-ASCII text still shows
its encoding in its first bytes: in UTF-16LE a NUL follows each character, in UTF-16BE one
precedes it, in UTF-32 three do. :func:`wide_encoding` reads only a bounded prefix
(:data:`PREFIX_BYTES`) and asks that nearly every code unit be so (:data:`SHARE`): a UTF-8 log
has no NUL in its text, and binary data (random bytes, runs of NULs, small integers) fails one
half of the test or the other. Text mostly not ASCII (a banner in Chinese) is shown by its
line ends instead: in UTF-16, the NULs of its line-end code units at even offsets across the
whole prefix, of one byte order only (:func:`utf16_by_line_ends`; a CJK character may hold a
0x0a byte, which is no line end). UTF-16 text whose prefix shows no order (no line end) is
refused as of unknown byte order (:func:`unknown_order`).
"""

from __future__ import annotations

import codecs
from pathlib import Path

import numpy as np

from forensics.errors import CaptureFormatError
from forensics.escaping import terminal

#: byte-order marks of text that is not UTF-8 (UTF-32's first: it begins as UTF-16's does)
WIDE_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32LE"), (codecs.BOM_UTF32_BE, "UTF-32BE"),
             (codecs.BOM_UTF16_LE, "UTF-16LE"), (codecs.BOM_UTF16_BE, "UTF-16BE"))
#: the bytes of a log read to tell its encoding (a fixed cost, whatever the log's size)
PREFIX_BYTES = 4096
#: the share of code units that must be one printable ASCII character and NULs
SHARE = 0.9
#: the fewest code units judged (a shorter prefix is read as UTF-8)
MIN_UNITS = 4
#: the fewest line feeds, each a whole wide code unit, that show a prefix's encoding alone
MIN_LINE_ENDS = 2
#: the bytes of text: tab, line ends and printable ASCII
_TEXT = bytes([9, 10, 13, *range(32, 127)])
#: (encoding, code unit's width, offset of its character byte, what the refusal says of it)
_LAYOUTS = (("UTF-32LE", 4, 0, "three NUL bytes after"),
            ("UTF-32BE", 4, 3, "three NUL bytes before"),
            ("UTF-16LE", 2, 0, "a NUL byte after"), ("UTF-16BE", 2, 1, "a NUL byte before"))


def wide_encoding(prefix: bytes) -> tuple[str, str | None] | None:
    """The encoding a log's first bytes ``prefix`` are in, when UTF-16 or UTF-32 (None: read
    it as UTF-8), with what shows it: None for its byte-order mark, else the NULs around its
    characters in words."""
    for bom, name in WIDE_BOMS:
        if prefix.startswith(bom):
            return name, None
    for name, width, at, nuls in _LAYOUTS:
        units = len(prefix) // width
        if units >= MIN_UNITS and _laid_out(prefix[:units * width], width, at, units):
            return name, f"{nuls} nearly every character of its first {units * width} bytes"
    for name, width, at, nuls in _LAYOUTS[:2]:
        ends = _line_ends(prefix, width, at)
        if ends >= MIN_LINE_ENDS and _printable(prefix, name, width):
            return name, f"{nuls} each of the {ends} line feeds of its first {len(prefix)} bytes"
    return utf16_by_line_ends(prefix)


#: UTF-16's byte orders without a mark
_UTF16_ORDERS = ("UTF-16LE", "UTF-16BE")


def utf16_by_line_ends(prefix: bytes) -> tuple[str, str] | None:
    """The byte order of UTF-16 text without a mark in ``prefix``, by where the NULs of its
    line ends fall across the whole of it (each end a code unit at an even offset): those of
    one order only, more of them than the other line-end bytes (a CJK character may hold one)
    and the text printable in that order; None when they do not tell."""
    if 0 not in prefix:
        return None
    units = np.frombuffer(prefix[:len(prefix) // 2 * 2], dtype=np.uint8).reshape(-1, 2)
    ends = {name: int(np.count_nonzero(np.isin(units[:, at], (10, 13)) & (units[:, 1 - at] == 0)))
            for name, at in (("UTF-16LE", 0), ("UTF-16BE", 1))}
    stray = prefix.count(b"\n") + prefix.count(b"\r") - sum(ends.values())
    for (name, found), other in zip(ends.items(), reversed(ends.values()), strict=True):
        if found > stray and not other and _printable(prefix, name, 2):
            nuls = "a NUL byte after" if name.endswith("LE") else "a NUL byte before"
            return name, (f"{nuls} each of its {found} line end(s), at even offsets, in its first "
                          f"{len(prefix)} bytes")
    return None


def unknown_order(prefix: bytes) -> bool:
    """Whether ``prefix``, of no encoding :func:`wide_encoding` tells, is UTF-16 text all the
    same: it holds NULs (UTF-8 text has none), it is not UTF-8, and read as UTF-16 in one byte
    order or the other it is whole code units of nearly all printable text (random bytes
    hold lone surrogates)."""
    if 0 not in prefix or _utf8(prefix):
        return False
    for name in _UTF16_ORDERS:
        try:
            prefix[:len(prefix) // 4 * 4 - 2].decode(name)
        except UnicodeDecodeError:
            continue
        if _printable(prefix, name, 2):
            return True
    return False


def _utf8(prefix: bytes) -> bool:
    """Whether ``prefix`` is UTF-8, a character cut at its end allowed."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(prefix, final=False)
    except UnicodeDecodeError:
        return False
    return True


def _printable(prefix: bytes, name: str, width: int) -> bool:
    """Whether nearly every character of ``prefix`` read as ``name`` (its whole code units)
    is printable text or whitespace (an array of small integers is mostly control
    characters)."""
    text = prefix[:len(prefix) // width * width].decode(name, errors="replace")
    shown = sum(c.isprintable() or c in "\t\r\n" for c in text.replace("\ufffd", "\0"))
    return shown >= SHARE * len(text)


def _line_ends(prefix: bytes, width: int, at: int) -> int:
    """How many line feeds ``prefix`` holds when each of its ``\\n`` bytes is one code unit
    of ``width`` bytes, the byte at ``at`` of a unit, NULs around it (0 when one is not): text
    mostly not ASCII (a banner in Chinese) fails :func:`_laid_out`, and its line ends still
    show the encoding, where a UTF-8 log has no NUL byte."""
    unit = bytes(at) + b"\n" + bytes(width - 1 - at)
    ends = [i for i, byte in enumerate(prefix) if byte == 0x0A]
    if any(i < at or (i - at) % width or prefix[i - at:i - at + width] != unit for i in ends):
        return 0
    return len(ends)


def _laid_out(data: bytes, width: int, at: int, units: int) -> bool:
    """Whether nearly every ``width``-byte unit of ``data`` is a text byte at ``at`` and NULs
    elsewhere (each count a pass in C over a slice of the prefix)."""
    chars = data[at::width]
    if len(chars.translate(None, _TEXT)) > (1 - SHARE) * units:
        return False
    return all(data[k::width].count(0) >= SHARE * units for k in range(width) if k != at)


def refuse_wide(path: Path, prefix: bytes) -> None:
    """Raise CaptureFormatError naming the log ``path``, its encoding and the ``iconv`` that
    converts it when its first bytes ``prefix`` are UTF-16 or UTF-32 text."""
    found = wide_encoding(prefix)
    if found is None and unknown_order(prefix):
        raise CaptureFormatError(
            f"log '{terminal(path)}' looks like UTF-16 text of unknown byte order without a "
            f"byte-order mark (NUL bytes, not UTF-8, and no line ends in its first "
            f"{len(prefix)} bytes that tell the order); logs are read as UTF-8: convert it "
            f"first (iconv -f UTF-16LE -t UTF-8, or -f UTF-16BE -t UTF-8)")
    if found is None:
        return
    name, nuls = found
    if nuls is None:  # iconv reads the byte order from the mark
        what, source = f"is {name} text (it starts with its byte-order mark)", name[:-2]
    else:
        what, source = f"looks like {name} text without a byte-order mark ({nuls})", name
    raise CaptureFormatError(f"log '{terminal(path)}' {what}; logs are read as UTF-8: convert it "
                             f"first (iconv -f {source} -t UTF-8)")


def refuse_wide_line(path: Path, number: int, line: bytes, before: bytes | None = None) -> None:
    """Raise CaptureFormatError naming the log ``path``, its line ``number`` and the encoding
    when that line (past the log's first bytes: UTF-16 or UTF-32 text appended to a UTF-8 log,
    as PowerShell's ``>>`` does) is wide text, read as it is (the first wide line starts
    where the UTF-8 text's line feed ended, its code units whole); a line without NULs, or a
    hole of NULs, is read as before. ``before``: the line before it (None: it is the first;
    ``b""``: empty lines came between).
    A line after a little-endian line feed starts with that feed's NULs and reads as big
    endian: its byte order is told only after UTF-8 text (:func:`_order_told`)."""
    if 0 not in line:
        return
    found = wide_encoding(line[:PREFIX_BYTES])
    if found is None:
        return
    name, nuls = found
    what, source = f"{name} text", name[:-2] if nuls is None else name
    if nuls is not None and name.endswith("BE") and not _order_told(before):
        what = f"{name[:-2]} text of unknown byte order (the line before may end in a " \
               f"{name[:-2]}LE line feed)"
        source = f"{name[:-2]}LE -t UTF-8, or -f {name}"
    raise CaptureFormatError(f"log '{terminal(path)}' line {number} looks like {what} (a part "
                             "of the log in another encoding, appended to it?); logs are read "
                             f"as UTF-8: convert that part first (iconv -f {source} -t UTF-8)")


def _order_told(before: bytes | None) -> bool:
    """Whether a big-endian-looking line after ``before`` is big endian: the log's first
    line, or one after a line of UTF-8 text (no NUL, valid UTF-8), starts a code unit; after an
    empty line, one holding NULs or one that is no UTF-8 (a little-endian line of CJK text),
    its first NULs may end a little-endian line feed (``\\n\\0``), the ``\\n`` of which ended
    that line."""
    if before is None:
        return True
    if before == b"" or 0 in before:
        return False
    try:
        before.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
