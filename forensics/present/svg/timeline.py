"""The bounds timeline as an SVG panel: what :func:`forensics.present.plots.plot_bounds_timeline`
draws, from the same :func:`~forensics.present.scene.timeline.timeline_data` (tensors, bins, each
finding's state, suspect steps, texts), so the report's picture says what the notebook's does.

Classes a reader (or a test) can find: ``band``, ``series max`` / ``series min`` (a tensor's
largest and smallest value), ``bound upper`` / ``bound lower``, ``mark open`` (out of bounds),
``mark resolved``, ``mark unseen`` (not judged), ``mark suspect``, ``vline open`` (a dense
timeline's line at each bin out of bounds), ``note first``, ``note omitted``, ``empty``.

A dense timeline (more steps than bins) draws counts instead
(:mod:`forensics.present.timeline_bins`): per bin, a stack of bars of how many values out of
bounds it holds, one ``bar open`` / ``bar resolved`` / ``bar unseen`` rectangle per state
(``data-x``: the bin's centre), and a ``vline open`` at each bin holding a value out of bounds,
so one bad step among 10,000 still shows.
"""

from __future__ import annotations

from typing import Any

from forensics.present.scene.timeline import (
    TimelineData,
    TimelineTensor,
    timeline_data,
)
from forensics.present.selection import TensorChoice, coords, exact_coords
from forensics.present.style import (
    BOUND_COLOR,
    MARK_STYLES,
    OPEN,
    RESOLVED,
    SUSPECT_COLOR,
    SUSPECT_LABEL,
    UNSEEN,
    VIOLATION_COLOR,
)
from forensics.present.svg.canvas import Panel
from forensics.present.timeline_bins import BinDensity

#: the canvas marker of each of matplotlib's markers in :data:`~forensics.present.style.MARK_STYLES`
_SHAPES = {"X": "x", "o": "o", "s": "s"}
#: the class of each state's marks
_CLASSES = {OPEN: "open", RESOLVED: "resolved", UNSEEN: "unseen"}
#: marker sizes in pixels: a step's marker, and a dense timeline's smallest and largest bin
#: marker (sized by its bad steps; the smallest still shows one bad step among 10,000)
MARK_SIZE, BIN_SIZES = 9.0, (8.0, 14.0)


def timeline_panel(result: Any, site: str | None = None, variant: str | None = None,
                   tensor: TensorChoice = None) -> Panel:
    """Per step (or bin), the smallest and largest value each checked tensor used, against its
    valid bound, with every value out of bounds marked as its verdict says.

    Raises:
        UnknownSiteError, UnknownVariantError: ``site`` or ``variant`` is not in the result.
    """
    data = timeline_data(result, site, variant, tensor)
    if data.density is not None and data.lines:
        return _density_panel(data, data.density)
    panel = Panel(title=data.title(), xlabel="engine step", ylabel=data.ylabel(),
                  integer_x=True, ypad=0.12, xorigin=data.origin, yorigin=data.yorigin)
    for i, line in enumerate(data.lines):
        _draw_tensor(panel, data, line, first=i == 0)
    steps, tops = data.suspects
    if steps:
        panel.marks(steps, tops, "D", SUSPECT_COLOR, filled=False, size=MARK_SIZE,
                    label=SUSPECT_LABEL, role="mark suspect")
    if data.first is not None and (at := data.first_at()) is not None:
        panel.note(*at, data.first_note(), VIOLATION_COLOR, role="note first")
    if not data.lines:
        panel.text(0.5, 0.5, data.empty(), anchor="middle", role="empty")
    if data.notes():
        panel.text(0.01, 0.99, "\n".join(data.notes()), role="note omitted")
    panel.xlim = _xlim(data)
    return panel


def _density_panel(data: TimelineData, density: BinDensity) -> Panel:
    """A dense timeline as counts per bin (see the module): a bar stack per bin, a line at
    each bin holding a value out of bounds, the suspect steps and the first violation."""
    panel = Panel(title=data.title(density.ylabel()),
                  xlabel="engine step", ylabel=density.ylabel(), integer_x=True, ypad=0.12,
                  xorigin=data.origin)
    for state, start, bottom, top in density.stacked():
        panel.cell(start - 0.5, bottom, start + density.width - 0.5, top, density.colors[state],
                   role=f"bar {_CLASSES[state]}", label=density.label(state))
    for x in density.open_centres():
        panel.vline(x, VIOLATION_COLOR, width=1.0, opacity=0.6, role="vline open")
    steps, _ = data.suspects
    if steps:
        panel.marks(steps, [0.0] * len(steps), "D", SUSPECT_COLOR, filled=False,
                    size=MARK_SIZE, label=SUSPECT_LABEL, role="mark suspect")
    if data.first is not None and (at := data.first_at()) is not None:
        panel.note(at[0], density.top_at(at[0]), data.first_note(),
                   VIOLATION_COLOR, role="note first")
    if not density.starts:
        panel.text(0.5, 0.5, density.empty_text(data.site, data.variant), anchor="middle",
                   role="empty")
    if data.notes():
        panel.text(0.01, 0.99, "\n".join(data.notes()), role="note omitted")
    panel.xlim = _xlim(data)
    panel.ylim = (0.0, max([*density.totals(), 1]) * 1.12)
    return panel


def _xlim(data: TimelineData) -> tuple[float, float] | None:
    """The steps' extent, half a bin beyond the first and the last (None without steps)."""
    xs = ([float(x) for line in data.lines for x in coords(line.binned["step"])]
          + [float(s) for s in data.suspects[0]])
    if not xs:
        return None
    return min(xs) - data.width / 2, max(xs) + data.width / 2


def _draw_tensor(panel: Panel, data: TimelineData, line: TimelineTensor,
                 first: bool) -> None:
    """One tensor's band, largest and smallest values and bound lines, each run of steps
    apart (broken where it holds no record: :func:`~forensics.present.scene.timeline.runs`),
    and its marks."""
    dense = data.dense
    for run in line.runs(data.width):
        column = {c: coords(run[c]) for c in ("step", "min", "max")}
        x = exact_coords(run["step"])  # data-x exact past 2**53 (column: to draw)
        stepped, padded_columns = line.stepped(data.width, ("min", "max", "lower", "upper"),
                                               run)
        edges = stepped.tolist()
        padded = {c: values.tolist() for c, values in padded_columns.items()}
        panel.band(edges, padded["min"], padded["max"], line.color, opacity=0.15)
        panel.line(x, column["max"].tolist(), line.color, width=0.8 if dense else 1.0,
                   dots=0.0 if dense else 1.8, label=data.series_label(line),
                   role="series max")
        panel.line(x, column["min"].tolist(), line.color, width=0.6 if dense else 0.8,
                   dash="1.5,2", dots=0.0 if dense else 1.0, role="series min")
        panel.line(edges, padded["upper"], BOUND_COLOR, width=1.4, dash="5,3", step=True,
                   label=line.bound_label(), role="bound upper")
        panel.line(edges, padded["lower"], BOUND_COLOR, width=0.8, dash="6,2,1.5,2",
                   step=True, label=line.lower_label() if first else None,
                   role="bound lower")
    for state, marker, color in MARK_STYLES:
        _draw_marks(panel, data, line, state, _SHAPES[marker], color)


def _draw_marks(panel: Panel, data: TimelineData, line: TimelineTensor,
                state: str, shape: str, color: str) -> None:
    """The values out of bounds of ``line`` in ``state``: a marker each (on a dense timeline
    sized by the bin's bad steps) and, where the data says so, a thin vertical line."""
    marks = data.marks(line, state)
    if not marks:
        return
    mx, my, count = (list(v) for v in zip(*marks, strict=True))
    small, large = BIN_SIZES
    sizes = ([small + (large - small) * c / max(max(count), 1) for c in count] if data.dense
             else [MARK_SIZE] * len(mx))
    cls = _CLASSES[state]
    if data.lined(state):
        for step in sorted(set(mx)):
            panel.vline(step, color, width=1.0, opacity=0.6, role=f"vline {cls}")
    panel.marks(mx, my, shape, color, filled=state == OPEN, size=sizes,
                label=data.mark_label(state), role=f"mark {cls}")
