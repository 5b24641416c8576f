"""The value histogram as an SVG panel: what :func:`forensics.present.plots.plot_value_histogram`
draws, from the same :func:`~forensics.present.scene.histogram.histogram_data` (axis, bins and
counts, hidden values, shown sentinels, texts).

Classes a reader (or a test) can find: ``bar in-range`` and ``bar open`` (one rect per bin
with a count, ``data-x`` its centre on the axis, ``data-y`` the middle of its span of counts),
``range`` (the
valid range), ``bound upper`` / ``bound lower``, ``sentinel`` (its line) and ``note sentinel``
(its text), ``break`` and ``note break`` (a broken axis' gap and its ``≈``), ``note hidden``,
``note omitted``, ``empty``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from forensics.present.scene.histogram import HistogramData, histogram_data
from forensics.present.selection import TensorChoice
from forensics.present.style import (
    BOUND_COLOR,
    HISTOGRAM_YLABEL,
    IN_RANGE_COLOR,
    IN_RANGE_LABEL,
    VIOLATION_COLOR,
)
from forensics.present.svg.canvas import LegendEntry, Panel

#: the legend colour of the valid range (its shade, 8% green on white)
RANGE_SWATCH = "#ebf5eb"


def histogram_panel(result: Any, site: str | None = None, variant: str | None = None,
                    vocab_size: int | None = None, window: int = 32,
                    tensor: TensorChoice = None) -> Panel:
    """How often each value occurs near the bound, on a log count axis.

    Raises:
        UnknownSiteError, UnknownVariantError: ``site`` or ``variant`` is not in the result.
    """
    data = histogram_data(result, site, variant, vocab_size, window, tensor)
    ticks, labels = data.axis.ticks()
    edges = data.edges if data.edges is not None else np.asarray(list(data.axis.bins()))
    panel = Panel(title=data.title, xlabel=data.xlabel, ylabel=HISTOGRAM_YLABEL,
                  ylog=True, integer_x=True, xlim=(float(edges[0]), float(edges[-1])),
                  ylim=data.ylim(), xticks=list(zip(ticks, labels, strict=True)) or None)
    _bars(panel, data)
    _valid_range(panel, data)
    for value, text, side in data.sentinels:
        x = float(data.axis.pos(np.array([value]))[0])
        panel.vline(x, VIOLATION_COLOR, dash="1.5,2", role="sentinel")
        panel.vnote(x, text, VIOLATION_COLOR, side=side, role="note sentinel")
    if data.axis.broken:
        _break(panel, data)
    if data.hidden_note():
        panel.text(0.5, 0.92, data.hidden_note(), anchor="middle", role="note hidden")
    if data.omitted:
        panel.text(0.99, 0.6, data.omitted_note(), anchor="end", role="note omitted")
    return panel


def _bars(panel: Panel, data: HistogramData) -> None:
    """The stacked bars: in-range counts from the axis' floor, offending counts on top."""
    if data.edges is None or data.inside is None or data.outside is None:
        panel.text(0.5, 0.5, "no values", anchor="middle", role="empty")
        return
    floor = data.ylim()[0]
    edges = data.edges
    for i in np.flatnonzero(data.inside + data.outside).tolist():
        low, high = int(data.inside[i]), int(data.outside[i])
        left, right = float(edges[i]), float(edges[i + 1])
        if low:
            panel.cell(left, floor, right, low, IN_RANGE_COLOR, role="bar in-range")
        if high:
            panel.cell(left, low or floor, right, low + high, VIOLATION_COLOR,
                       role="bar open")
    panel.legend[:0] = [LegendEntry(IN_RANGE_LABEL, IN_RANGE_COLOR, "patch"),
                        LegendEntry(data.out_label(), VIOLATION_COLOR, "patch")]


def _valid_range(panel: Panel, data: HistogramData) -> None:
    """The valid range shaded, and its upper (dashed) and lower (dash-dotted) bound lines
    (none for a bound not known)."""
    lo, hi = data.range_edges()
    upper, lower = data.bound_labels()
    panel.vspan(lo, hi, "#2ca02c", opacity=0.08, role="range")
    panel.legend.append(LegendEntry(data.range_label(), RANGE_SWATCH, "patch"))
    if upper is not None:
        panel.vline(hi, BOUND_COLOR, width=1.2, dash="5,3", label=upper, role="bound upper")
    if lower is not None:
        panel.vline(lo, BOUND_COLOR, width=0.8, dash="6,2,1.5,2", label=lower,
                    role="bound lower")


def _break(panel: Panel, data: HistogramData) -> None:
    """A broken axis' gap: a white column with ``≈`` in its middle."""
    middle, gap = data.break_at()
    panel.vspan(middle - gap / 2, middle + gap / 2, "white", opacity=1.0, role="break")
    lo, hi = panel.xlim or (0.0, 1.0)
    panel.text((middle - lo) / ((hi - lo) or 1.0), 0.5, "≈", size=14, anchor="middle",
               role="note break")
