"""The report's figures as SVG, drawn without matplotlib.

While :func:`collecting` is active (the report runs its notebook inside it, with
:func:`forensics.present.svg.views.draw` as the drawer), the ``plot_*`` functions of
:mod:`forensics.present.plots` called without an ``ax`` hand their view to :func:`draw` and
return its :class:`~forensics.present.svg.canvas.Figure`; each such figure is kept, as pyplot
keeps its open figures, until :func:`take_figures` hands them to the notebook executor at the
end of the cell. Outside it (a notebook in Jupyter, a script) the same calls draw with
matplotlib, as before. (The drawer is passed in, not imported here: the views import
:mod:`forensics.present.scene` for their data.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_collected: list[Any] | None = None
_drawer: Callable[..., Any] | None = None


@contextmanager
def collecting(drawer: Callable[..., Any]) -> Iterator[None]:
    """Within the block, views are drawn by ``drawer(view, result, **kwargs)`` and their
    figures kept for :func:`take_figures`."""
    global _collected, _drawer
    before = _collected, _drawer
    _collected, _drawer = [], drawer
    try:
        yield
    finally:
        _collected, _drawer = before


def active() -> bool:
    """Whether figures are drawn as SVG now (inside :func:`collecting`)."""
    return _drawer is not None


def draw(view: str, result: Any, **kwargs: Any) -> Any:
    """The ``view`` of ``result`` drawn by the active drawer, kept for :func:`take_figures`."""
    if _drawer is None or _collected is None:
        raise RuntimeError("svg.draw outside svg.collecting()")
    figure = _drawer(view, result, **kwargs)
    figure.kept = True
    _collected.append(figure)
    return figure


def take_figures() -> list[Any]:
    """The figures drawn since the last call, in order; none are kept after."""
    if _collected is None:
        return []
    taken = list(_collected)
    _collected.clear()
    return taken
