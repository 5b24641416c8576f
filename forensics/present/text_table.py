"""Aligned text tables for a terminal or a log (``findings``, ``triage``): each column padded to
its widest cell, but to at most :data:`TEXT_WIDTH` characters, so one long cell (a capture's
request id of thousands of characters) runs past its column instead of padding every other row
of the table to its width (a table of rows times its widest cell: a 76 KB capture once printed
200 MB)."""

from __future__ import annotations

from collections.abc import Sequence

#: the widest a column is padded to (a longer cell runs past its column)
TEXT_WIDTH = 40


def aligned(rows: Sequence[Sequence[str]], indent: str = "") -> list[str]:
    """One line per row of already escaped cells (the first row a header), each column but the
    last padded to its widest cell up to :data:`TEXT_WIDTH`, columns two spaces apart: the
    text is linear in the cells' length."""
    if not rows:
        return []
    columns = len(rows[0])
    widths = [min(max(len(row[i]) for row in rows), TEXT_WIDTH) for i in range(columns - 1)]
    return [indent + "  ".join([*(cell.ljust(width) for cell, width in
                                  zip(row, widths, strict=False)), row[-1]])
            for row in rows]
