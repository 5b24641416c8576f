"""Integers written as text by a user or a capture: ASCII digits only; runs of integers
(:func:`runs`), which a text writes as ranges.

``str.isdigit`` takes characters ``int()`` refuses (``'²'``) or reads as digits of another
script (``'٣'``), and ``int()`` refuses thousands of digits; every such number is read here.
"""

from __future__ import annotations

from collections.abc import Iterable


def ascii_int(text: str, max_digits: int) -> int | None:
    """The non-negative integer ``text`` writes in 1 to ``max_digits`` ASCII digits; None for
    any other text."""
    if 0 < len(text) <= max_digits and text.isascii() and text.isdigit():
        return int(text)
    return None


def runs(values: Iterable[int]) -> list[tuple[int, int]]:
    """Ascending distinct ``values`` as runs of consecutive integers, ``(first, last)`` each:
    ``[1, 2, 3, 7]`` -> ``[(1, 3), (7, 7)]``."""
    found: list[list[int]] = []
    for value in values:
        if found and value == found[-1][1] + 1:
            found[-1][1] = value
        else:
            found.append([value, value])
    return [(a, b) for a, b in found]
