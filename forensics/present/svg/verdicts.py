"""The verdict matrix as an SVG figure: what :func:`forensics.present.plots.plot_verdict_matrix`
draws, from the same :func:`~forensics.present.scene.verdicts.verdict_grid` and
:func:`~forensics.present.scene.verdicts.verdict_cell`.

Each cell is a ``rect`` of class ``cell`` at ``data-x`` (the variant's column) and ``data-y``
(the site's row), followed by its ``cell-text``; the x tick labels name the variants, the y
tick labels the sites.
"""

from __future__ import annotations

import math
from typing import Any

from forensics.present.scene.verdicts import verdict_cell, verdict_grid, verdict_title
from forensics.present.svg.canvas import TICK_SIZE, TITLE_SIZE, Figure, Panel, text_width

#: pixels of one cell
CELL_WIDTH, CELL_HEIGHT = 150, 36
#: the x tick labels' rotation in degrees (as matplotlib's matrix)
ROTATION = 20.0


def verdict_figure(result: Any) -> Figure:
    """Sites (rows, pipeline order) x variants (columns), each cell coloured by its verdict
    (:data:`~forensics.present.style.VERDICT_COLORS`) and holding its text."""
    sites, variants, verdicts = verdict_grid(result)
    rows, columns = max(1, len(sites)), max(1, len(variants))
    panel = Panel(title=verdict_title(result), xlabel="variant", ylabel="site",
                  integer_x=False, xlim=(-0.5, columns - 0.5), ylim=(-0.5, rows - 0.5),
                  invert_y=True, xtick_rotation=ROTATION,
                  xticks=[(float(j), v) for j, v in enumerate(variants)],
                  yticks=[(float(i), s) for i, s in enumerate(sites)])
    for i, site in enumerate(sites):
        for j, variant in enumerate(variants):
            text, fill, ink = verdict_cell(verdicts.get(variant, {}).get(site))
            panel.cell(j - 0.5, i - 0.5, j + 0.5, i + 0.5, fill, text=text, text_color=ink)
    return Figure([panel], *_size(panel, rows, columns), kind="verdicts")


def _size(panel: Panel, rows: int, columns: int) -> tuple[int, int]:
    """(width, height) in pixels giving each cell :data:`CELL_WIDTH` x :data:`CELL_HEIGHT`
    beside the tick labels (as the canvas lays out its margins), and room for the title."""
    labels = [label for _, label in panel.yticks or []] or ["000000"]
    left = 22 + max(text_width(s, TICK_SIZE) for s in labels) + 16
    title = max(text_width(line, TITLE_SIZE) for line in panel.title.split("\n"))
    width = max(left + CELL_WIDTH * columns + 20, title + 40)
    drop = max((text_width(v, TICK_SIZE) for _, v in panel.xticks or []), default=0.0)
    top = 8 + 16 * (panel.title.count("\n") + 1) + 6
    height = top + CELL_HEIGHT * rows + 44 + drop * math.sin(math.radians(ROTATION))
    return math.ceil(width), math.ceil(height)
