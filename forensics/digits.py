"""Integers written as text by a user or a capture: ASCII digits only; runs of integers
(:func:`runs`), which a text writes as ranges; a capture's JSON integer, never a bool
(:func:`plain_int`).

``str.isdigit`` takes characters ``int()`` refuses (``'²'``) or reads as digits of another
script (``'٣'``), and ``int()`` refuses thousands of digits; every such number is read here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeGuard


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


def plain_int(value: object) -> TypeGuard[int]:
    """Whether ``value`` is an int and not a bool (a JSON ``true`` is an int to Python: a
    capture's ``"max_num_reqs": true`` once read as 1)."""
    return isinstance(value, int) and not isinstance(value, bool)
