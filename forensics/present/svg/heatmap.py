"""The rows x steps heatmap as an SVG panel: what :func:`forensics.present.plots.plot_row_heatmap`
draws, from the same :func:`~forensics.present.scene.heatmap.heatmap_data` (grid, checked steps,
written values, suspect and settled cells, colour scale, ticks, texts).

Classes a reader (or a test) can find: ``checked`` (a run of checked steps, one rect for all its
rows), ``cell open`` (an offending cell, ``data-x`` its step index and ``data-y`` its row
index, its value in the following ``cell-text`` on a small grid), ``mark suspect``,
``mark resolved``, ``mark unseen``, ``empty``. In place of matplotlib's colour bar the legend
gives the colour of a distance of 1 (the first invalid value) and of the largest distance.
"""

from __future__ import annotations

from typing import Any

from forensics.present.scene.heatmap import HeatmapData, heatmap_data
from forensics.present.style import (
    CHECKED_COLOR,
    CHECKED_LABEL,
    RESOLVED,
    RESOLVED_COLOR,
    SUSPECT_CELL_LABEL,
    SUSPECT_COLOR,
    UNSEEN_COLOR,
    VIOLATION_COLOR,
    VIOLATION_RAMP,
)
from forensics.present.svg.canvas import LegendEntry, Panel

#: pixels of a settled or suspect cell's marker
MARK_SIZE = 10.0
#: on a dense grid an offending cell is drawn at least this fraction of the axes wide and high
#: (about 3 pixels), so one cell among 10,000 steps still shows
DENSE_CELL = 1 / 180


def heatmap_panel(result: Any, site: str | None = None, variant: str | None = None,
                  align: Any = None) -> Panel:
    """Batch rows x engine steps, each offending cell coloured by how far past the bound it is.

    Raises:
        UnknownSiteError, UnknownVariantError: ``site`` or ``variant`` is not in the result.
    """
    data = heatmap_data(result, site, variant, align)
    panel = Panel(title=data.title, xlabel="engine step", ylabel="batch row (index)",
                  integer_x=False, xlim=(-0.5, max(len(data.steps), 1) - 0.5),
                  ylim=(-0.5, len(data.rows) - 0.5), invert_y=True,
                  xticks=[(float(i), label) for i, label in data.xticks()] if data.steps else [],
                  yticks=[(float(i), label) for i, label in data.yticks()] if data.steps else [])
    if data.empty:
        panel.text(0.5, 0.5, data.empty, anchor="middle", role="empty")
        return panel
    _checked_runs(panel, data)
    _offending_cells(panel, data)
    panel.legend[:0] = [LegendEntry(CHECKED_LABEL, CHECKED_COLOR, "patch"),
                        LegendEntry("out of bounds", VIOLATION_COLOR, "patch")]
    if data.suspects is not None:
        ri, si = data.suspects
        panel.marks(si.tolist(), ri.tolist(), "D", SUSPECT_COLOR, filled=False,
                    size=MARK_SIZE, label=SUSPECT_CELL_LABEL, role="mark suspect")
    for state, ri, si in data.settled:
        shape, color, cls = (("o", RESOLVED_COLOR, "resolved") if state == RESOLVED
                             else ("s", UNSEEN_COLOR, "unseen"))
        panel.marks(si.tolist(), ri.tolist(), shape, color, filled=False, size=MARK_SIZE,
                    label=data.settled_label(state), role=f"mark {cls}")
    panel.legend.extend(_distance_key(data))
    return panel


def _checked_runs(panel: Panel, data: HeatmapData) -> None:
    """The checked steps in grey: one rect per run of consecutive step indices, all rows."""
    top, bottom = -0.5, len(data.rows) - 0.5
    runs: list[list[int]] = []
    for i in data.checked:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    for first, last in runs:
        panel.cell(first - 0.5, top, last + 0.5, bottom, CHECKED_COLOR, role="checked")


def _offending_cells(panel: Panel, data: HeatmapData) -> None:
    """Each offending cell in the colour of its distance, its value written on a small grid;
    at least :data:`DENSE_CELL` of the axes on a dense one."""
    written = {(r, s): value for r, s, value in data.written}
    half_w = max(0.5, len(data.steps) * DENSE_CELL / 2) if data.dense else 0.5
    half_h = max(0.5, len(data.rows) * DENSE_CELL / 2) if data.dense else 0.5
    rows, steps = (data.grid > 0).nonzero()
    for r, s in zip(rows.tolist(), steps.tolist(), strict=True):
        value = written.get((r, s))
        panel.cell(s - half_w, r - half_h, s + half_w, r + half_h,
                   ramp(data.shade(float(data.grid[r, s]))),
                   text="" if value is None else str(value), role="cell open")


def _distance_key(data: HeatmapData) -> list[LegendEntry]:
    """Legend entries for the colour of a distance of 1 and of the largest distance (none
    when every distance is 1: "out of bounds" is then its colour)."""
    if data.peak <= 1:
        return []
    scale = " (colours on a log scale)" if data.log else ""
    key = [LegendEntry("distance past the bound: 1 (the first invalid value)",
                       ramp(data.shade(1.0)), "patch")]
    return [*key, LegendEntry(f"distance past the bound: {data.farthest}{scale}",
                              ramp(data.shade(data.peak)), "patch")]


def ramp(t: float) -> str:
    """The colour at ``t`` (0 to 1) of :data:`~forensics.present.style.VIOLATION_RAMP`,
    interpolated linearly."""
    stops = [tuple(int(c[i:i + 2], 16) for i in (1, 3, 5)) for c in VIOLATION_RAMP]
    t = min(max(t, 0.0), 1.0) * (len(stops) - 1)
    i = min(int(t), len(stops) - 2)
    a, b, f = stops[i], stops[i + 1], t - i
    return "#" + "".join(f"{round(x + (y - x) * f):02x}" for x, y in zip(a, b, strict=True))
