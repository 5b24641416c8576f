"""Delta debugging (Zeller and Hildebrandt's ``ddmin``): a 1-minimal subset that keeps a property.

Generic over the items (steps, record positions, anything hashable); the caller's ``test``
says whether a subset still has the property. Every subset is tested at most once.

``ddmin`` tests O(n) subsets of up to n items when every item is needed (the complements of
n chunks at each granularity): quadratic in the items tested in all. A :class:`Budget` bounds
what the tests may cost; spent, the search stops at the smallest subset found so far (it still
has the property, but may not be 1-minimal).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T", bound=Hashable)


@dataclass
class Budget:
    """What the tests of a search may cost in all (in the caller's unit: ``cost`` of each
    subset tested, by default its items); ``spent`` so far, and whether a test was refused."""

    limit: int
    spent: int = 0
    exhausted: bool = False

    def allows(self, cost: int) -> bool:
        """Spend ``cost`` if it fits; else note the budget exhausted and return False."""
        if self.spent + cost > self.limit:
            self.exhausted = True
            return False
        self.spent += cost
        return True


class Spent(Exception):
    """The next test would overrun the budget, or ``test`` can no longer answer (raised by it:
    an overall deadline passed): the search stops where it is."""


class _Cached(Generic[T]):
    """``test`` with a memory: a subset is passed to ``test`` once. A subset is remembered by
    its length and the hash of its items in order (every subset ddmin tests keeps the order of
    ``items``), not by a copy: copies made the memory quadratic in the items (2,000 items, 8,000
    subsets tested: half a gigabyte)."""

    def __init__(self, test: Callable[[list[T]], bool], budget: Budget | None,
                 cost: Callable[[list[T]], int]) -> None:
        self.test, self.calls, self.budget, self.cost = test, 0, budget, cost
        self.seen: dict[tuple[int, int], bool] = {}

    def __call__(self, items: list[T]) -> bool:
        key = (len(items), hash(tuple(items)))
        if key not in self.seen:
            if self.budget is not None and not self.budget.allows(self.cost(items)):
                raise Spent
            self.calls += 1
            self.seen[key] = bool(self.test(items))
        return self.seen[key]


def split(items: Sequence[T], n: int) -> list[list[T]]:
    """``items`` cut into ``n`` consecutive chunks of near-equal size (none empty)."""
    n = max(1, min(n, len(items)))
    bounds = [len(items) * i // n for i in range(n + 1)]
    return [list(items[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]


def ddmin(items: Sequence[T], test: Callable[[list[T]], bool], budget: Budget | None = None,
          cost: Callable[[list[T]], int] = len) -> tuple[list[T], int]:
    """The smallest subset of ``items`` that ``ddmin`` finds keeping ``test`` true.

    ``items`` must pass ``test`` (not checked again). The result is 1-minimal (removing any
    one of its items makes ``test`` false) unless ``budget`` ran out first or ``test`` raised
    :class:`Spent` (it is then the smallest subset found passing ``test``; ``budget.exhausted``
    says when the budget ran out); a test costs
    ``cost(subset)`` of the budget. Order is kept.

    Returns:
        (the subset, the number of calls of ``test``).
    """
    cached: _Cached[T] = _Cached(test, budget, cost)
    current, n = list(items), 2
    try:
        while len(current) >= 2 and n:
            current, n = _round(current, n, cached)
    except Spent:
        pass  # ``current`` is the last subset that passed
    return current, cached.calls


def _round(current: list[T], n: int, cached: _Cached[T]) -> tuple[list[T], int]:
    """One round of ddmin at granularity ``n``: the next subset and granularity (0: the
    subset is 1-minimal, the search is over)."""
    chunks = split(current, n)
    found = next((c for c in chunks if cached(c)), None)
    if found is not None:
        return found, 2
    complements: Iterable[list[T]] = () if len(chunks) == 2 else (
        [x for j, chunk in enumerate(chunks) if j != i for x in chunk]
        for i in range(len(chunks)))  # one at a time: all at once is quadratic
    found = next((c for c in complements if cached(c)), None)
    if found is not None:
        return found, max(n - 1, 2)
    return current, 0 if n >= len(current) else min(len(current), 2 * n)
