"""The judge's one rule for records that claim the same key (a step and rank, with or without
a site): two engines claiming one rank, or a step number repeated. Which of them wrote what
another read is unknown, so every judge leaves such a key unjudged (:func:`by_key`)."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def by_key(items: Iterable[tuple[K, V]]) -> tuple[dict[K, V], list[K]]:
    """Each key's last value, and the keys held more than once (in the order each was found
    held again): a caller judges no step and rank among the latter."""
    latest: dict[K, V] = {}
    again: dict[K, None] = {}
    for key, value in items:
        if key in latest:
            again[key] = None
        latest[key] = value
    return latest, list(again)
