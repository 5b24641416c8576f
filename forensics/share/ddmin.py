"""Delta debugging (Zeller and Hildebrandt's ``ddmin``): a 1-minimal subset that keeps a property.

Generic over the items (steps, record positions, anything hashable); the caller's ``test``
says whether a subset still has the property. Every subset is tested at most once.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T", bound=Hashable)


class _Cached(Generic[T]):
    """``test`` with a memory: a subset is passed to ``test`` once. A subset is remembered by
    its length and the hash of its items in order (every subset ddmin tests keeps the order of
    ``items``), not by a copy: copies made the memory quadratic in the items (2,000 items, 8,000
    subsets tested: half a gigabyte)."""

    def __init__(self, test: Callable[[list[T]], bool]) -> None:
        self.test, self.calls = test, 0
        self.seen: dict[tuple[int, int], bool] = {}

    def __call__(self, items: list[T]) -> bool:
        key = (len(items), hash(tuple(items)))
        if key not in self.seen:
            self.calls += 1
            self.seen[key] = bool(self.test(items))
        return self.seen[key]


def split(items: Sequence[T], n: int) -> list[list[T]]:
    """``items`` cut into ``n`` consecutive chunks of near-equal size (none empty)."""
    n = max(1, min(n, len(items)))
    bounds = [len(items) * i // n for i in range(n + 1)]
    return [list(items[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]


def ddmin(items: Sequence[T], test: Callable[[list[T]], bool]) -> tuple[list[T], int]:
    """The smallest subset of ``items`` that ``ddmin`` finds keeping ``test`` true.

    ``items`` must pass ``test`` (not checked again). The result is 1-minimal: removing any
    one of its items makes ``test`` false. Order is kept.

    Returns:
        (the subset, the number of calls of ``test``).
    """
    cached: _Cached[T] = _Cached(test)
    current, n = list(items), 2
    while len(current) >= 2:
        chunks = split(current, n)
        found = next((c for c in chunks if cached(c)), None)
        if found is not None:
            current, n = found, 2
            continue
        complements: Iterable[list[T]] = () if len(chunks) == 2 else (
            [x for j, chunk in enumerate(chunks) if j != i for x in chunk]
            for i in range(len(chunks)))  # one at a time: all at once is quadratic
        found = next((c for c in complements if cached(c)), None)
        if found is not None:
            current, n = found, max(n - 1, 2)
        elif n >= len(current):
            break
        else:
            n = min(len(current), 2 * n)
    return current, cached.calls
