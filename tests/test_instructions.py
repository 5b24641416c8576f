"""The linear-time tests' ruler (:mod:`tests.instructions`) tells linear from quadratic work,
and gives the same count, within 1%, every run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.instructions import LIMIT, instructions, scaling


def make_work(case: str, size: int, scratch: Path) -> Callable[[], object]:
    """``linear``: one pass over ``size`` items; ``quadratic``: a pass from each item."""
    items = list(range(size))
    if case == "linear":
        return lambda: sum(items)
    return lambda: [sum(items[k:]) for k in range(size)]


def test_the_ruler_tells_linear_from_quadratic_work(tmp_path: Path) -> None:
    ratios = scaling(__file__, {"linear": 20_000, "quadratic": 400}, tmp_path)
    assert 3.5 < ratios["linear"] < LIMIT, ratios
    assert ratios["quadratic"] > 11, ratios


def test_the_count_is_the_same_every_run(tmp_path: Path) -> None:
    first, again = instructions(__file__, [("quadratic", 300)] * 2, tmp_path)
    assert abs(first - again) < first / 100, (first, again)
