"""The report's figures as SVG, drawn without matplotlib.

While :func:`collecting` is active (the report runs its notebook inside it), the ``plot_*``
functions of :mod:`forensics.present.plots` called without an ``ax`` draw their view with
:mod:`forensics.present.svg.views` and return a :class:`~forensics.present.svg.canvas.Figure`;
each such figure is kept, as pyplot keeps its open figures, until :func:`take_figures` hands
them to the notebook executor at the end of the cell. Outside it (a notebook in Jupyter, a
script) the same calls draw with matplotlib, as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_collected: list[Any] | None = None


@contextmanager
def collecting() -> Iterator[None]:
    """Within the block, views draw as SVG and their figures are kept for :func:`take_figures`."""
    global _collected
    before, _collected = _collected, []
    try:
        yield
    finally:
        _collected = before


def active() -> bool:
    """Whether figures are drawn as SVG now (inside :func:`collecting`)."""
    return _collected is not None


def keep(figure: Any) -> Any:
    """Keep ``figure`` for :func:`take_figures` (when collecting); return it."""
    if _collected is not None:
        _collected.append(figure)
    return figure


def take_figures() -> list[Any]:
    """The figures drawn since the last call, in order; none are kept after."""
    if _collected is None:
        return []
    taken = list(_collected)
    _collected.clear()
    return taken
