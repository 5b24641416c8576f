"""Plots of a replay: each ``plot_*`` function draws one view on one Axes and returns it.

Every function takes a :class:`~forensics.replaying.ReplayResult` (or any object with the same
attributes), draws on ``ax`` (``ax=None`` makes a new figure through pyplot, so notebooks show it)
and returns the Axes. Axes are labelled with units, the valid bound is drawn and named, anything
out of bounds is drawn in :data:`VIOLATION_COLOR`, and the title names the capture, the site and
the variant.

What each view reads from the result:

- :func:`plot_bounds_timeline`: ``result.bounds`` (columns ``variant, site, step, rank, record,
  tensor, min, max, lower, upper``: one row per record, variant and checked tensor). A result
  without ``bounds`` falls back to the out-of-bounds findings (only the offending values);
- :func:`plot_row_heatmap`: ``result.findings`` (``row``, ``step``, ``value``, ``lower``,
  ``upper``, ``kind``) and the steps of ``result.bounds`` when present;
- :func:`plot_value_histogram`: the in-range extremes of ``result.bounds`` and every offending
  value of ``result.findings``;
- :func:`plot_verdict_matrix`: ``result.verdicts``;
- :func:`plot_side_by_side`: one of the above per variant, in one figure.

Each view's data is its scene (:mod:`forensics.present.scene`, shared with the SVG views of
:mod:`forensics.present.svg`), its colours and texts are :mod:`forensics.present.style`'s; this
module only paints them. matplotlib is imported by this module only, and only when a view draws
with it (``import forensics`` and importing this module never import it); without a display
and without ``MPLBACKEND`` the Agg backend is selected before pyplot is first imported. Inside
:func:`forensics.present.svg.collecting` (a report), a view called without ``ax`` is drawn as
SVG instead, and its :class:`~forensics.present.svg.canvas.Figure` is returned: a report imports
no matplotlib.
"""


from __future__ import annotations

import functools
import inspect
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numpy as np

from forensics.digits import plain_int
from forensics.errors import ConfigurationError, reason
from forensics.present import svg
from forensics.present.scene import KINDS
from forensics.present.scene.heatmap import HeatmapData, heatmap_data
from forensics.present.scene.histogram import HistogramData, ValueAxis, histogram_data
from forensics.present.scene.timeline import (
    TimelineData,
    TimelineTensor,
    timeline_data,
)
from forensics.present.scene.verdicts import verdict_cell, verdict_grid, verdict_title
from forensics.present.selection import (
    TensorChoice,
    check_kind,
    coords,
    round_ticks,
    side_by_side_choice,
)
from forensics.present.style import (
    BOUND_COLOR,
    CHECKED_COLOR,
    CHECKED_LABEL,
    DISTANCE_LABEL,
    HISTOGRAM_YLABEL,
    IN_RANGE_COLOR,
    IN_RANGE_LABEL,
    MARK_STYLES,
    MAX_DPI,
    MIN_DPI,
    OPEN,
    RESOLVED,
    RESOLVED_COLOR,
    SUSPECT_CELL_LABEL,
    SUSPECT_COLOR,
    SUSPECT_LABEL,
    UNSEEN_COLOR,
    VIOLATION_COLOR,
    VIOLATION_RAMP,
)
from forensics.present.timeline_bins import Marks, draw_density

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: the environment variable that chooses matplotlib's backend (read by matplotlib on import)
BACKEND_ENV = "MPLBACKEND"
#: a plot function (:func:`_svg_when_collecting`)
_Plot = TypeVar("_Plot", bound=Callable[..., Any])


def _pyplot() -> Any:
    """``matplotlib.pyplot``, imported on first use: on the Agg backend when there is no display,
    no ``MPLBACKEND`` and pyplot was not imported already."""
    try:
        if "matplotlib.pyplot" not in sys.modules:
            import matplotlib

            headless = not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
            if headless and BACKEND_ENV not in os.environ:
                matplotlib.use("Agg")
            import matplotlib.pyplot as plt

            plt.switch_backend(matplotlib.get_backend())  # loaded now, not at the first figure
        import matplotlib.pyplot as plt
    except (ValueError, ImportError) as exc:
        if BACKEND_ENV not in os.environ:
            raise
        raise ConfigurationError(
            f"{BACKEND_ENV}={os.environ[BACKEND_ENV][:120]!r} is no matplotlib backend this "
            f"Python can load ({type(exc).__name__}: {reason(exc, 200)}); unset it or give "
            f"one such as Agg") from None
    return plt


def _as_svg(view: str, result: Any, **kwargs: Any) -> Any:
    """The ``view`` drawn as an SVG figure (inside :func:`forensics.present.svg.collecting`),
    kept for the notebook executor."""
    return svg.draw(view, result, **kwargs)


def _svg_when_collecting(view: str) -> Callable[[_Plot], _Plot]:
    """A plot that, given no ``ax`` while SVG figures are collected, draws the SVG ``view``
    (:func:`_as_svg`) with its other arguments instead: the rule of every single plot."""
    def wrap(plot: _Plot) -> _Plot:
        signature = inspect.signature(plot)

        @functools.wraps(plot)
        def plot_or_svg(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            options = dict(bound.arguments)
            if options.pop("ax") is None and svg.active():
                return _as_svg(view, options.pop("result"), **options)
            return plot(*args, **kwargs)
        return cast(_Plot, plot_or_svg)
    return wrap


def _mathsafe(text: object) -> str:
    """Text for matplotlib: a ``$`` from a capture must not switch on mathtext."""
    return str(text).replace("$", r"\$")


def _axes(ax: Axes | None, figsize: tuple[float, float] = (7.0, 4.0)) -> Axes:
    if ax is not None:
        return ax
    _, new_ax = _pyplot().subplots(figsize=figsize, layout="constrained")
    return new_ax


def _empty(ax: Axes, message: str) -> None:
    ax.text(0.5, 0.5, _mathsafe(message), transform=ax.transAxes, ha="center", va="center",
            color="#555555")


def _legend_below(ax: Axes, handles: Sequence[Any] | None = None) -> None:
    """A legend under the x axis label, outside the axes, so it covers no data; of ``handles``
    when given, else of the labelled artists."""
    if handles is None:
        handles, labels = ax.get_legend_handles_labels()
    else:
        labels = [h.get_label() for h in handles]
    if handles:
        ax.legend(handles, labels, fontsize=7, loc="upper center", ncol=2, frameon=False,
                  bbox_to_anchor=(0.5, -0.16))


@_svg_when_collecting("timeline")
def plot_bounds_timeline(result: Any, site: str | None = None, variant: str | None = None,
                         ax: Axes | None = None, tensor: TensorChoice = None) -> Axes:
    """Per step, the smallest and largest index or id a site used, against its valid bound.

    One band per checked tensor (min to max), the bound ``[lower, upper)`` as dashed step
    lines, and every step whose extreme leaves the bound marked in :data:`VIOLATION_COLOR`.
    Past :data:`DENSE_STEPS` steps: counts per bin instead, how many values out of bounds each
    bin holds (:mod:`forensics.present.timeline_bins`).

    Args:
        result: a ReplayResult (``bounds``, ``findings``, ``capture``, ``variants``).
        site: the site to draw; default the site of the variant's first violation, else a
            suspect site, else the sink.
        variant: default ``upstream`` (or the first variant replayed).
        ax: the Axes to draw on; None makes a new figure.
        tensor: a checked tensor or a list of them; default those on the scale of the first
            violation (see :func:`pick_tensors`).
    Returns:
        The Axes.
    Raises:
        UnknownSiteError, UnknownVariantError: ``site`` or ``variant`` is not in the result.
    """
    data = timeline_data(result, site, variant, tensor)
    ax = _axes(ax, figsize=(7.0, 4.6))
    if data.density is not None and data.lines:  # counts per bin (forensics.present.timeline_bins)
        xs = [float(x) for line in data.lines for x in line.binned["step"]]
        marks = Marks((min(xs) - data.width / 2, max(xs) + data.width / 2), data.first_at(),
                      data.first_note() if data.first else "", data.suspects[0],
                      SUSPECT_COLOR, SUSPECT_LABEL)
        draw_density(ax, data.density, data.title(data.density.ylabel()), marks, _mathsafe)
        _step_labels(ax, data.origin)
        _legend_below(ax)
        return ax
    labelled: set[str] = set()
    for i, line in enumerate(data.lines):
        _draw_tensor(ax, data, line, i == 0, labelled)
    _mark_suspect_steps(ax, data)
    if data.first is not None:
        _note_first(ax, data)
    if not data.lines:
        _empty(ax, data.empty())
    ax.set_title(_mathsafe(data.title()), fontsize=10)
    if data.notes():
        ax.text(0.01, 0.99, _mathsafe("\n".join(data.notes())), transform=ax.transAxes,
                fontsize=7, va="top", color="#555555")
    ax.set_xlabel("engine step")
    ax.set_ylabel(data.ylabel())
    ax.margins(y=0.12)
    _integer_steps(ax)
    _step_labels(ax, data.origin)
    _value_labels(ax, data.yorigin)
    _legend_below(ax)
    return ax


def _integer_steps(ax: Axes) -> None:
    """Steps are whole numbers: integer ticks only (a capture of two steps shows no 0.5)."""
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _step_labels(ax: Axes, origin: int) -> None:
    """With steps drawn relative to ``origin`` (past 2**53), the x ticks are round steps within
    the axes, each labelled with its exact step (:func:`round_ticks`)."""
    if origin:
        lo, hi = sorted(ax.get_xlim())
        ticks = round_ticks(lo, hi, origin)
        ax.set_xticks([t for t, _ in ticks], [label for _, label in ticks])


def _value_labels(ax: Axes, origin: int | None) -> None:
    """With values drawn relative to ``origin`` (past 2**53), round whole y ticks within the
    axes, each labelled with its exact value (:func:`round_ticks`: never a float's rounded
    digits under an offset such as "1e18", never a value past int64)."""
    if origin is not None:
        lo, hi = sorted(ax.get_ylim())
        ticks = round_ticks(lo, hi, origin)
        ax.set_yticks([t for t, _ in ticks], [label for _, label in ticks])


def _mark_suspect_steps(ax: Axes, data: TimelineData) -> None:
    """Mark the suspect steps (:func:`suspect_steps`) along the top of the band: a diamond per
    step, labelled once."""
    steps, y = data.suspects
    if steps:
        ax.scatter(coords(steps), coords(y), marker="D", s=36, facecolor="none",
                   edgecolor=SUSPECT_COLOR, linewidths=1.5, zorder=6, label=SUSPECT_LABEL)


def _note_first(ax: Axes, data: TimelineData) -> None:
    """Label the first violation with an arrow (its exact step and value, drawn at
    :meth:`TimelineData.first_at`); the note goes towards the middle of the axes (below a
    point in the upper half, above one in the lower half), so it stays inside the axes, clear
    of the title and of the markers along the bound."""
    at = data.first_at()
    if data.first is None or at is None:
        return
    x, y = at
    lo, hi = ax.get_ylim()
    dy = -30 if y > (lo + hi) / 2 else 30
    ax.annotate(data.first_note(), (float(x), float(y)), textcoords="offset points",
                xytext=(14, dy), va="top" if dy < 0 else "bottom", fontsize=8,
                color=VIOLATION_COLOR, zorder=7,
                arrowprops={"arrowstyle": "->", "color": VIOLATION_COLOR, "lw": 0.8},
                bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.85})


def _draw_tensor(ax: Axes, data: TimelineData, line: TimelineTensor, first: bool,
                 labelled: set[str]) -> None:
    """Draw one tensor's band, bound and values out of bounds (binned when the timeline is
    dense), each drawn as its state says (out of bounds, resolved or not judged).
    ``labelled``: legend entries drawn so far (each is drawn once)."""
    color, dense, width = line.color, data.dense, data.width
    for i, run in enumerate(line.runs(width)):  # broken where no record is (scene's runs)
        x, low, high = (coords(run[c]) for c in ("step", "min", "max"))
        ax.fill_between(x, low, high, step="mid", color=color, alpha=0.15)
        series = _mathsafe(data.series_label(line))
        ax.plot(x, high, marker=None if dense else "o", ms=3, lw=0.8 if dense else 1,
                color=color, label=series if i == 0 else f"_{series}")  # "_": no legend
        ax.plot(x, low, marker=None if dense else ".", ms=2, lw=0.6 if dense else 0.8,
                ls=":", color=color)
        edges, bound = line.stepped(width, ("upper", "lower"), run)
        ax.step(edges, bound["upper"], where="mid", ls="--", lw=1.4, color=BOUND_COLOR,
                label=_once(labelled, line.bound_label()))
        ax.step(edges, bound["lower"], where="mid", ls="-.", lw=0.8, color=BOUND_COLOR,
                label=line.lower_label() if first and i == 0 else None)
    for state, marker, mark_color in MARK_STYLES:
        _draw_marks(ax, data, line, state, marker, mark_color, labelled)


def _draw_marks(ax: Axes, data: TimelineData, line: TimelineTensor, state: str, marker: str,
                color: str, labelled: set[str]) -> None:
    """The values out of bounds of the bins in ``state``: a marker each (sized by bad steps
    when dense, never below a visible size) and, where :meth:`TimelineData.lined`, a thin
    vertical line, so one bad step among 10,000 still shows."""
    marks = data.marks(line, state)
    if not marks:
        return
    mx, my, count = (np.array(v) for v in zip(*marks, strict=True))
    size = 60.0 if not data.dense else 40.0 + 40.0 * count / max(count.max(), 1)
    if data.lined(state):
        for step in np.unique(mx):
            ax.axvline(step, color=color, lw=0.8, alpha=0.5, zorder=4)
    filled = state == OPEN
    ax.scatter(mx, my, marker=marker, s=size, linewidths=0.5 if filled else 1.5,
               facecolor=color if filled else "none", edgecolor=color, zorder=5,
               label=_once(labelled, _mathsafe(data.mark_label(state))))


def _once(labelled: set[str], text: str) -> str | None:
    """``text`` the first time it is asked for (a legend entry), else None."""
    if text in labelled:
        return None
    labelled.add(text)
    return text


def _violation_cmap() -> Any:
    from matplotlib.colors import LinearSegmentedColormap

    return LinearSegmentedColormap.from_list("forensics_violation", list(VIOLATION_RAMP))


@_svg_when_collecting("heatmap")
def plot_row_heatmap(result: Any, site: str | None = None, variant: str | None = None,
                     ax: Axes | None = None, align: Sequence[str] | None = None) -> Axes:
    """Batch rows x engine steps, each offending cell coloured by how far past the bound it is.

    Grey columns are steps where the site was checked (from ``result.bounds``) and stayed in
    range; a cell holds the largest distance of the row's out-of-bounds findings at that step
    (1 = the first invalid value, e.g. ``vocab_size`` itself or ``-1``); ``misattributed``
    findings are marked with a diamond. Summary records (no row) appear as row ``summary``.

    Args:
        align: variants whose steps and rows the grid spans too (side-by-side panels share
            their axes: a variant without findings still shows every row of the others).
    Returns:
        The Axes.
    Raises:
        UnknownSiteError, UnknownVariantError: ``site`` or ``variant`` is not in the result.
    """
    from matplotlib.colors import LogNorm, Normalize
    from matplotlib.patches import Patch

    data = heatmap_data(result, site, variant, align)
    ax = _axes(ax)
    if data.empty:
        _empty(ax, data.empty)
        return _heatmap_labels(ax, data)
    shade = np.full(data.grid.shape, np.nan)
    shade[:, data.checked] = 1.0
    extent = (-0.5, len(data.steps) - 0.5, len(data.rows) - 0.5, -0.5)
    ax.imshow(shade, cmap="Greys", vmin=0, vmax=8, aspect="auto", extent=extent,
              interpolation="nearest")
    peak = data.peak
    norm = LogNorm(1, max(peak, 2)) if data.log else Normalize(0.5, max(peak, 1) + 0.5)
    image = ax.imshow(np.where(data.grid > 0, data.grid, np.nan), cmap=_violation_cmap(),
                      norm=norm, aspect="auto", extent=extent, interpolation="nearest")
    if data.dense:
        _mark_small_cells(ax, data.grid, image)
    bar = ax.figure.colorbar(image, ax=ax, pad=0.02)
    if not data.log:
        bar.set_ticks(range(1, int(max(peak, 1)) + 1, max(1, int(peak) // 8)))
    bar.set_label(DISTANCE_LABEL, fontsize=8)
    for r, s, value in data.written:
        ax.text(s, r, str(value), ha="center", va="center", fontsize=6, color="white")
    handles: list[Any] = [Patch(color=CHECKED_COLOR, label=CHECKED_LABEL),
                          Patch(color=VIOLATION_COLOR, label="out of bounds")]
    if data.suspects is not None:
        ri, si = data.suspects
        handles.append(ax.scatter(si, ri, marker="D", s=30, facecolor="none",
                                  edgecolor=SUSPECT_COLOR, linewidths=1.5, zorder=6,
                                  label=SUSPECT_CELL_LABEL))
    for state, ri, si in data.settled:
        marker, color = ("o", RESOLVED_COLOR) if state == RESOLVED else ("s", UNSEEN_COLOR)
        handles.append(ax.scatter(si, ri, marker=marker, s=30, facecolor="none",
                                  edgecolor=color, linewidths=1.5, zorder=6,
                                  label=_mathsafe(data.settled_label(state))))
    _legend_below(ax, handles)
    return _heatmap_labels(ax, data)


def _mark_small_cells(ax: Axes, grid: np.ndarray, image: Any) -> None:
    """On a grid too fine for a cell per pixel (more than :data:`style.DENSE_STEPS` steps or
    :data:`style.DENSE_ROWS` rows), draw each offending cell as a square marker in the image's
    colours too: resampled to the screen, the image alone drops most of them."""
    rows, cols = np.nonzero(grid > 0)
    if len(rows):
        ax.scatter(cols, rows, c=grid[rows, cols], cmap=image.get_cmap(), norm=image.norm,
                   marker="s", s=6, linewidths=0, zorder=4)


def _heatmap_labels(ax: Axes, data: HeatmapData) -> Axes:
    ax.set_title(_mathsafe(data.title), fontsize=10)
    ax.set_xlabel("engine step")
    ax.set_ylabel("batch row (index)")
    if data.steps:
        ax.set_xticks(*zip(*data.xticks(), strict=True))
        ax.set_yticks(*zip(*data.yticks(), strict=True))
    return ax


@_svg_when_collecting("histogram")
def plot_value_histogram(result: Any, site: str | None = None, variant: str | None = None,
                         ax: Axes | None = None, vocab_size: int | None = None,
                         window: int = 32, tensor: TensorChoice = None) -> Axes:
    """How often each value occurs near the bound, on a log count axis.

    In range (:data:`IN_RANGE_COLOR`): the smallest and largest value of each record (from
    ``result.bounds``). Out of bounds (:data:`VIOLATION_COLOR`): every offending element of the
    findings the variant leaves out of bounds (those it resolves or cannot judge: a note; of a
    summary record, its min or max alone, the legend says). The
    valid range is shaded and its bound drawn and named; the sentinels ``-1``
    (async placeholder, or a new row) and ``vocab_size`` (a rejection sentinel) are annotated.
    When the valid range is wide, the x axis shows ``window`` values on each side of ``lower``
    and of ``upper`` with a break between them; values farther out sit on a window's edge.

    Args:
        vocab_size: the sentinel to annotate; default, for id sites, the most common upper bound.
        window: values shown on each side of a bound on a broken axis.
        tensor: a checked tensor or a list of them (default: those on the scale of the first
            violation, see :func:`pick_tensors`).
    Returns:
        The Axes.
    Raises:
        UnknownSiteError, UnknownVariantError: ``site`` or ``variant`` is not in the result.
    """
    data = histogram_data(result, site, variant, vocab_size, window, tensor)
    ax = _axes(ax, figsize=(7.0, 4.6))
    _draw_histogram(ax, data)
    _draw_valid_range(ax, data)
    for x, text, side in data.sentinels:
        _annotate_sentinel(ax, data.axis, x, text, side)
    ax.set_title(_mathsafe(data.title), fontsize=10)
    ax.set_xlabel(data.xlabel)
    if data.omitted:
        ax.text(0.99, 0.6, _mathsafe(data.omitted_note()), transform=ax.transAxes, ha="right",
                fontsize=7, color="#555555")
    ax.set_ylabel(HISTOGRAM_YLABEL)
    _legend_below(ax)
    return ax


def _plain_counts(ax: Axes) -> None:
    """Counts on the log axis written as plain numbers (``1``, ``10``, ``1,000``), not as
    mathtext powers: easier to read, and mathtext's first use costs a small report a tenth of
    its figure time."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _draw_histogram(ax: Axes, data: HistogramData) -> None:
    ax.set_yscale("log")
    if data.edges is not None and data.inside is not None and data.outside is not None:
        # stacked steps: two artists, not one bar per bin and value kind
        ax.stairs(data.inside, data.edges, fill=True, color=IN_RANGE_COLOR, label=IN_RANGE_LABEL)
        ax.stairs(data.inside + data.outside, data.edges, baseline=data.inside, fill=True,
                  color=VIOLATION_COLOR, label=data.out_label())
        ax.set_ylim(*data.ylim())
    else:
        _empty(ax, "no values")
    _plain_counts(ax)
    if data.hidden_note():
        ax.text(0.5, 0.9, data.hidden_note(), transform=ax.transAxes, ha="center", fontsize=7,
                color="#555555", zorder=6,
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8})
    ticks, labels = data.axis.ticks()
    if ticks:
        ax.set_xticks(ticks, labels, fontsize=7)
    if data.axis.broken:
        middle, gap = data.break_at()
        ax.axvspan(middle - gap / 2, middle + gap / 2, color="white", zorder=3)
        ax.text(middle, 0.5, "≈", transform=ax.get_xaxis_transform(), ha="center",
                fontsize=14, color="#555555", zorder=4)


def _draw_valid_range(ax: Axes, data: HistogramData) -> None:
    lo, hi = data.range_edges()
    upper_label, lower_label = data.bound_labels()
    ax.axvspan(lo, hi, color="#2ca02c", alpha=0.08, label=data.range_label())
    if upper_label is not None:  # a bound not known gets no line
        ax.axvline(hi, color=BOUND_COLOR, ls="--", lw=1.2, label=upper_label)
    if lower_label is not None:
        ax.axvline(lo, color=BOUND_COLOR, ls="-.", lw=0.8, label=lower_label)


def _annotate_sentinel(ax: Axes, axis: ValueAxis, value: float, text: str,
                       side: int = 1) -> None:
    """Mark ``value`` with a dotted line and a label beside it, clear of the value's own bar:
    on the left (``side=-1``, for ``-1``: nothing lies below it) or the right (``value`` is
    one the axis shows: :attr:`HistogramData.sentinels`)."""
    x = float(axis.pos(np.array([value]))[0])
    ax.axvline(x, color=VIOLATION_COLOR, ls=":", lw=1)
    bar = float(axis.pos(np.array([value + 0.5]))[0] - x)  # half a bar, in data units
    offset = ax.transData.transform((x + bar, 0))[0] - ax.transData.transform((x, 0))[0]
    ax.annotate(text, xy=(x, 1.0), xycoords=("data", "axes fraction"),
                xytext=(side * (abs(offset) * 72 / ax.figure.dpi + 3), -4),
                textcoords="offset points", rotation=90, va="top",
                ha="right" if side < 0 else "left", fontsize=7, color=VIOLATION_COLOR,
                bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8})


@_svg_when_collecting("verdicts")
def plot_verdict_matrix(result: Any, ax: Axes | None = None) -> Axes:
    """Sites (rows, pipeline order) x variants (columns), each cell coloured by its verdict.

    Colours come from :data:`style.VERDICT_COLORS` (``violation`` is :data:`VIOLATION_COLOR`); a
    missing verdict is light grey.

    Returns:
        The Axes.
    """
    from matplotlib.colors import to_rgb

    sites, variants, verdicts = verdict_grid(result)
    ax = _axes(ax, figsize=(1.6 + 1.5 * max(1, len(variants)), 0.9 + 0.5 * max(1, len(sites))))
    colors = np.ones((max(1, len(sites)), max(1, len(variants)), 3))
    for i, site in enumerate(sites):
        for j, variant in enumerate(variants):
            text, fill, ink = verdict_cell(verdicts.get(variant, {}).get(site))
            colors[i, j] = to_rgb(fill)
            ax.text(j, i, _mathsafe(text), ha="center", va="center", fontsize=9, color=ink)
    ax.imshow(colors, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(variants)), [_mathsafe(v) for v in variants], rotation=20,
                  ha="right")
    ax.set_yticks(range(len(sites)), sites)
    ax.set_xlabel("variant")
    ax.set_ylabel("site")
    ax.set_title(_mathsafe(verdict_title(result)), fontsize=10)
    return ax


PLOTTERS: dict[str, Callable[..., Any]] = {
    "timeline": plot_bounds_timeline,
    "heatmap": plot_row_heatmap,
    "histogram": plot_value_histogram,
}


def plot_side_by_side(result: Any, kind: str = "timeline", site: str | None = None,
                      variants: Sequence[str] | None = None, **kwargs: Any) -> Figure:
    """One figure, one Axes per variant (default: all replayed), drawing the same ``kind`` view.

    Args:
        kind: ``timeline``, ``heatmap`` or ``histogram``.
        site: the site for every panel (default: chosen from the first variant, see
            :func:`plot_bounds_timeline`).
    Returns:
        The Figure.
    Raises:
        ConfigurationError (a ValueError): an unknown ``kind``, naming the choices;
            UnknownSiteError, UnknownVariantError as the plots do.
    """
    if svg.active():
        return _as_svg("side_by_side", result, kind=kind, site=site, variants=variants,
                       **kwargs)
    names, site, options = side_by_side_choice(result, kind, site, variants, list(PLOTTERS),
                                               kwargs)
    fig, axes = _pyplot().subplots(1, len(names), figsize=(6.0 * len(names), 4.8),
                             sharey=kind != "heatmap", layout="constrained", squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        PLOTTERS[kind](result, site=site, variant=name, ax=ax, **options)
    return fig


def plot(result: Any, kind: str = "timeline", site: str | None = None,
         variant: str | None = None, ax: Axes | None = None) -> Axes:
    """Dispatch to one view by name (``timeline``, ``heatmap``, ``histogram``, ``verdicts``).

    Returns:
        The Axes.
    Raises:
        ConfigurationError (a ValueError): an unknown ``kind``, naming the choices;
            UnknownSiteError, UnknownVariantError as the plots do.
    """
    if kind == "verdicts":
        return plot_verdict_matrix(result, ax=ax)
    check_kind(kind, KINDS)
    return PLOTTERS[kind](result, site=site, variant=variant, ax=ax)


def check_dpi(dpi: object, written: str | None = None) -> int:
    """``dpi`` if it is a whole number of dots per inch from :data:`MIN_DPI` to :data:`MAX_DPI`
    (``written``: the text it was read from, for the message).

    Raises:
        ConfigurationError: any other value (0 and negative ones were matplotlib's internal
            error, a huge one its out-of-memory error).
    """
    if not plain_int(dpi) or not MIN_DPI <= dpi <= MAX_DPI:
        shown = str(dpi) if written is None else written
        raise ConfigurationError(f"dpi {shown[:40]!r} is not a resolution from {MIN_DPI} to "
                                 f"{MAX_DPI} dots per inch; give one, e.g. 120")
    return dpi


def save(ax: Axes, path: str | os.PathLike[str], dpi: int = 120) -> None:
    """Save the figure holding ``ax`` to ``path`` (format from the suffix) and close it.

    Raises:
        ConfigurationError: ``path`` lies in a capture folder (a capture is data: nothing is
            written into it); ``dpi`` is not one :func:`check_dpi` takes; ``path``'s suffix is no
            image type matplotlib writes (a path without one said "Format 'tmp' is not
            supported", the suffix of the file written first, in a ValueError traceback).
    """
    figure: Any = ax.figure
    from forensics.atomic import user_path, write_atomically
    from forensics.store.paths import refuse_in_capture_folder

    try:
        check_dpi(dpi)
        refuse_in_capture_folder(path, "path")
        kind = _image_type(figure, user_path(path))
        write_atomically(user_path(path), lambda tmp: figure.savefig(
            tmp, format=kind, dpi=dpi, bbox_inches="tight"), shared=True)
    finally:
        close(figure)


def _image_type(figure: Any, path: Path) -> str:
    """The image type ``path``'s suffix names, one ``figure``'s canvas writes; else raise
    ConfigurationError naming ``path`` and the fix."""
    kind = path.suffix.lower().lstrip(".")
    if kind not in figure.canvas.get_supported_filetypes():
        from forensics.escaping import terminal

        raise ConfigurationError(f"'{terminal(path)}': the image type is the file's suffix, and "
                                 f"{terminal(repr(path.suffix))} is none matplotlib writes; end "
                                 "it in .png, .svg or .pdf")
    return kind


def close(item: Any) -> None:
    """Close the pyplot figure of an Axes or Figure (frees it after saving)."""
    _pyplot().close(getattr(item, "figure", item))
