"""The report's views as SVG figures: one function per view, as :mod:`forensics.present.plots`
has one per matplotlib view, drawn from the same scenes (:mod:`forensics.present.scene`) and
styles (:mod:`forensics.present.style`), so a picture in a report says what the notebook's
picture says.

Each panel function (``timeline_panel``, ``heatmap_panel``, ``histogram_panel``) lives in the
view's own module and returns a :class:`~forensics.present.svg.canvas.Panel`; this module puts
panels into figures: one panel (:func:`figure`) or one per variant (:func:`side_by_side`), and
the verdict matrix; :func:`draw` is the drawer a report passes to
:func:`forensics.present.svg.collecting`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from forensics.present.scene import KINDS
from forensics.present.selection import check_kind, side_by_side_choice
from forensics.present.svg.canvas import Figure, Panel
from forensics.present.svg.heatmap import heatmap_panel
from forensics.present.svg.histogram import histogram_panel
from forensics.present.svg.timeline import timeline_panel
from forensics.present.svg.verdicts import verdict_figure

PANELS: dict[str, Callable[..., Panel]] = {
    "timeline": timeline_panel,
    "heatmap": heatmap_panel,
    "histogram": histogram_panel,
}
#: pixels of one panel, as matplotlib's figures of 7 x 4.6 inches at 100 dpi
PANEL_WIDTH, PANEL_HEIGHT = 640, 440


def draw(view: str, result: Any, **kwargs: Any) -> Figure:
    """The drawer of :func:`forensics.present.svg.collecting`: ``view`` is a ``kind`` of
    :func:`figure`, or ``side_by_side`` (``kind`` then in ``kwargs``)."""
    if view == "side_by_side":
        return side_by_side(result, **kwargs)
    return figure(view, result, **kwargs)


def figure(kind: str, result: Any, **kwargs: Any) -> Figure:
    """One view of one variant (``kind``: ``timeline``, ``heatmap``, ``histogram`` or
    ``verdicts``) as a figure."""
    if kind == "verdicts":
        return verdict_figure(result)
    check_kind(kind, KINDS)
    return Figure([PANELS[kind](result, **kwargs)], PANEL_WIDTH, PANEL_HEIGHT, kind=kind)


def side_by_side(result: Any, kind: str = "timeline", site: str | None = None,
                 variants: Sequence[str] | None = None, **kwargs: Any) -> Figure:
    """One panel per variant (default: all replayed) of the same ``kind`` and site, as
    :func:`forensics.present.plots.plot_side_by_side` draws them: shared value axis except on
    heatmaps, whose grids span every variant's steps and rows."""
    names, site, options = side_by_side_choice(result, kind, site, variants, list(PANELS),
                                               kwargs)
    panels = [PANELS[kind](result, site=site, variant=name, **options) for name in names]
    if kind != "heatmap":
        share_y(panels)
    return Figure(panels, PANEL_WIDTH * len(panels), PANEL_HEIGHT, kind=kind)


def share_y(panels: Sequence[Panel]) -> None:
    """Give every panel the same value range (the union of theirs), unless a panel set its own."""
    if any(p.ylim is not None for p in panels):
        return
    ys = [y for p in panels for y in p.ys]
    for p in panels:
        p.ys = list(ys)
