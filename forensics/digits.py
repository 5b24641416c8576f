"""Integers written as text by a user or a capture: ASCII digits only.

``str.isdigit`` takes characters ``int()`` refuses (``'²'``) or reads as digits of another
script (``'٣'``), and ``int()`` refuses thousands of digits; every such number is read here.
"""

from __future__ import annotations


def ascii_int(text: str, max_digits: int) -> int | None:
    """The non-negative integer ``text`` writes in 1 to ``max_digits`` ASCII digits; None for
    any other text."""
    if 0 < len(text) <= max_digits and text.isascii() and text.isdigit():
        return int(text)
    return None
