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

matplotlib is imported by this module only, and only when a view draws with it (``import
forensics`` and importing this module never import it; the data functions, which the SVG views
of :mod:`forensics.present.svg` share, never do); without a display and without ``MPLBACKEND``
the Agg backend is selected before pyplot is first imported. Inside
:func:`forensics.present.svg.collecting` (a report), a view called without ``ax`` is drawn as
SVG instead, and its :class:`~forensics.present.svg.canvas.Figure` is returned: a report imports
no matplotlib.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from forensics.errors import UnknownSiteError, UnknownVariantError
from forensics.present import svg
from forensics.present.timeline_bins import BinDensity, Marks, density_of, draw_density
from forensics.sites import SINK, SITES, get_site

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: Colour of everything out of bounds (markers, heatmap cells, histogram bars, verdicts).
VIOLATION_COLOR = "#d62728"
#: Colour of in-range values.
IN_RANGE_COLOR = "#1f77b4"
#: Colour of the valid bound lines.
BOUND_COLOR = "#2b2b2b"
#: Colour of misattributed (suspect) findings.
SUSPECT_COLOR = "#e6ab02"
#: Cell colour per verdict in :func:`plot_verdict_matrix`.
VERDICT_COLORS: dict[str, str] = {
    "violation": VIOLATION_COLOR,
    "error": "#ff7f0e",
    "suspect": SUSPECT_COLOR,
    "ok": "#2ca02c",
    "unjudged": "#bdbdbd",
}
#: Neutral colours for several tensors on one Axes (never the violation colour).
TENSOR_COLORS = ("#1f77b4", "#9467bd", "#17becf", "#8c564b", "#7f7f7f", "#bcbd22")
KINDS = ("timeline", "heatmap", "histogram", "verdicts")

#: above this many steps a timeline aggregates steps into bins (see :data:`TIMELINE_BINS`)
DENSE_STEPS = 200
#: at most about this many step bins on a dense timeline: one band point and at most one
#: out-of-bounds marker per bin, so 10,000 steps draw as readably as 100
TIMELINE_BINS = 80
#: at most this many step labels on a heatmap's x axis (4-5 digit steps stay apart)
STEP_LABELS = 8
#: above this many rows (or DENSE_STEPS steps) a heatmap marks offending cells with markers
DENSE_ROWS = 64

def _pyplot() -> Any:
    """``matplotlib.pyplot``, imported on first use: on the Agg backend when there is no display,
    no ``MPLBACKEND`` and pyplot was not imported already."""
    if "matplotlib.pyplot" not in sys.modules:
        import matplotlib

        headless = not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
        if headless and "MPLBACKEND" not in os.environ:
            matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _as_svg(view: str, result: Any, **kwargs: Any) -> Any:
    """The ``view`` drawn as an SVG figure (inside :func:`forensics.present.svg.collecting`),
    kept for the notebook executor."""
    return svg.draw(view, result, **kwargs)


# ----------------------------------------------------------------------------- data access


def capture_name(result: Any) -> str:
    """The capture's name as shown in titles (a Capture's ``.name``, a path's stem, or str)."""
    capture = getattr(result, "capture", None)
    name = getattr(capture, "name", capture)
    text = str(name) if name is not None else "capture"
    return text.removesuffix(".capture")


def variant_names(result: Any) -> list[str]:
    """The result's variant names, in replay order."""
    return [str(getattr(v, "name", v)) for v in getattr(result, "variants", [])]


def _mathsafe(text: object) -> str:
    """Text for matplotlib: a ``$`` from a capture must not switch on mathtext."""
    return str(text).replace("$", r"\$")


def title_text(result: Any, site: str, variant: str, what: str) -> str:
    """A view's title: the capture, the site and the variant, then ``what`` it shows."""
    return f"{capture_name(result)} · {site} · {variant}\n{what}"


def _title(result: Any, site: str, variant: str, what: str) -> str:
    return _mathsafe(title_text(result, site, variant, what))


def _check_variant(result: Any, variant: str | None) -> str:
    names = variant_names(result)
    if variant is None:
        return "upstream" if "upstream" in names or not names else names[0]
    if variant not in names:
        raise UnknownVariantError(
            f"variant {variant!r} is not in the replay of {capture_name(result)!r}; "
            f"expected one of {names}; replay with variants=[..., {variant!r}]")
    return variant


def result_sites(result: Any) -> list[str]:
    """Sites present in the result (from its verdicts), in pipeline order."""
    present: set[str] = set()
    for per_site in (getattr(result, "verdicts", None) or {}).values():
        present.update(per_site)
    for frame in (_bounds(result), _findings(result)):
        if frame is not None and len(frame):
            present.update(frame["site"].astype(str))
    return [s for s in SITES if s in present] + sorted(present - set(SITES))


def check_site_name(site: str, present: Sequence[str], capture: str = "the capture") -> str:
    """Return ``site`` when it is a known site present in the capture.

    Raises:
        UnknownSiteError: an unknown site (listing every site) or one without records
            (listing the sites present).
    """
    if site not in SITES:
        get_site(site)  # raises UnknownSiteError listing the valid sites
    if present and site not in present:
        raise UnknownSiteError(f"site {site!r} has no records in {capture!r}; "
                               f"expected one of {list(present)}")
    return site


def _check_site(result: Any, site: str | None, variant: str) -> str:
    present = result_sites(result)
    if site is None:
        return _default_site(result, variant, present)
    return check_site_name(site, present, capture_name(result))


def _default_site(result: Any, variant: str, present: list[str]) -> str:
    """The first site (pipeline order) with an out-of-bounds finding of the variant, else with a
    misattributed one (a suspect site, so a soak's only finding is pictured), else the sink,
    else the first."""
    findings = _findings(result)
    if findings is not None and len(findings):
        for kind in ("out_of_bounds", "misattributed"):
            bad = findings[(findings["variant"] == variant) & (findings["kind"] == kind)]
            for site in present:
                if (bad["site"] == site).any():
                    return site
    if SINK in present:
        return SINK
    return present[0] if present else SINK


def _findings(result: Any) -> pd.DataFrame | None:
    frame = getattr(result, "findings", None)
    return frame if isinstance(frame, pd.DataFrame) else None


def _bounds(result: Any) -> pd.DataFrame | None:
    frame = getattr(result, "bounds", None)
    return frame if isinstance(frame, pd.DataFrame) else None


def _numeric(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    frame = frame.copy()
    for column in columns:
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype("float64")
    return frame


def _select(frame: pd.DataFrame | None, site: str, variant: str) -> pd.DataFrame:
    if frame is None or not len(frame):
        return pd.DataFrame()
    return frame[(frame["site"] == site) & (frame["variant"] == variant)]


def _oob(result: Any, site: str, variant: str) -> pd.DataFrame:
    frame = _select(_findings(result), site, variant)
    if not len(frame):
        return frame
    frame = frame[frame["kind"] == "out_of_bounds"]
    return _numeric(frame, ["step", "value", "lower", "upper"])


def bounds_frame(result: Any, site: str, variant: str) -> tuple[pd.DataFrame, bool]:
    """The bounds rows of (site, variant) with numeric columns, and whether they are complete.

    Without ``result.bounds`` the rows are rebuilt from the out-of-bounds findings (one row per
    offending element) and the flag is False: in-range values are then unknown.
    """
    bounds = _bounds(result)
    if bounds is not None:
        frame = _select(bounds, site, variant)
        return _numeric(frame, ["step", "min", "max", "lower", "upper"]), True
    oob = _oob(result, site, variant)
    frame = pd.DataFrame({"step": oob.get("step", []), "tensor": oob.get("tensor", []),
                          "min": oob.get("value", []), "max": oob.get("value", []),
                          "lower": oob.get("lower", []), "upper": oob.get("upper", [])})
    return _numeric(frame, ["step", "min", "max", "lower", "upper"]), False


# ----------------------------------------------------------------------------- figure helpers


def _axes(ax: Axes | None, figsize: tuple[float, float] = (7.0, 4.0)) -> Axes:
    if ax is not None:
        return ax
    _, new_ax = _pyplot().subplots(figsize=figsize, layout="constrained")
    return new_ax


def _empty(ax: Axes, message: str) -> None:
    ax.text(0.5, 0.5, _mathsafe(message), transform=ax.transAxes, ha="center", va="center",
            color="#555555")


def is_id_tensor(site: str, tensor: str) -> bool:
    """Whether the values checked for ``tensor`` are token ids (else they are row indices):
    produced values (``out.<field>``) and the embedding's ``input_ids``."""
    return tensor.startswith("out.") or (site == SINK and tensor == "input_ids")


def _value_unit(site: str, tensors: Sequence[str]) -> str:
    ids = [t for t in tensors if is_id_tensor(site, t)]
    if not tensors:
        return "token id" if site == SINK else "index"
    if len(ids) == len(tensors):
        return "token id"
    return "row index / token id" if ids else "row index"


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


# ----------------------------------------------------------------------------- timeline


def _per_step(frame: pd.DataFrame) -> pd.DataFrame:
    """Per step: smallest and largest value used, tightest bound, whether any record violated."""
    frame = frame.assign(bad_low=frame["min"] < frame["lower"],
                         bad_high=frame["max"] >= frame["upper"])
    return (frame.groupby("step", sort=True)
            .agg(min=("min", "min"), max=("max", "max"), lower=("lower", "max"),
                 upper=("upper", "min"), bad_low=("bad_low", "any"),
                 bad_high=("bad_high", "any"))
            .reset_index())


TensorChoice = str | Sequence[str] | None


def pick_tensors(frame: pd.DataFrame, scale: float = 100.0) -> tuple[list[str], list[str]]:
    """Split a site's checked tensors into those drawn together and those on another scale.

    The reference is the tensor of the earliest violation (else the one with the largest
    bound); tensors whose largest bound is within ``scale`` times the reference's are drawn,
    so row indices (bounds of a few rows) and token ids (bounds of the vocabulary) are not
    squeezed onto one axis. Returns (drawn, omitted), each sorted.
    """
    if not len(frame):
        return [], []
    frame = frame.assign(tensor=frame["tensor"].astype(str))
    upper = frame.groupby("tensor")["upper"].max().fillna(1).clip(lower=1)
    bad = frame[(frame["max"] >= frame["upper"]) | (frame["min"] < frame["lower"])]
    reference = (bad.sort_values("step")["tensor"].iloc[0] if len(bad)
                 else upper.idxmax())
    ratio = np.maximum(upper / upper[reference], upper[reference] / upper)
    drawn = sorted(t for t in upper.index if ratio[t] <= scale)
    return drawn, sorted(set(upper.index) - set(drawn))


def _tensors_of(frame: pd.DataFrame, tensor: TensorChoice) -> tuple[list[str], list[str]]:
    """(tensors to draw, tensors left out) for a ``tensor`` argument."""
    if tensor is None:
        return pick_tensors(frame)
    wanted = [tensor] if isinstance(tensor, str) else list(tensor)
    present = set(frame["tensor"].astype(str)) if len(frame) else set()
    return sorted(t for t in wanted if t in present), sorted(present - set(wanted))


def choose_tensors(result: Any, site: str, variants: Sequence[str]) -> list[str]:
    """The tensors to draw for ``site`` in every panel: those :func:`pick_tensors` chooses for
    the first of ``variants`` with a violation there (else for the first variant)."""
    frames = [bounds_frame(result, site, v)[0] for v in variants]
    for frame in frames:
        if len(frame) and ((frame["max"] >= frame["upper"])
                           | (frame["min"] < frame["lower"])).any():
            return pick_tensors(frame)[0]
    return pick_tensors(frames[0])[0] if frames else []


#: per step, how the variant's out-of-bounds findings there are judged (see
#: :func:`step_verdicts`)
OPEN, RESOLVED, UNSEEN = "out of bounds", "resolved", "not judged"
#: marker colours of resolved and not judged findings (never the violation colour)
RESOLVED_COLOR, UNSEEN_COLOR = "#2ca02c", "#7f7f7f"
#: how a timeline marks the values out of bounds of each state: (state, marker, colour); the
#: marker is matplotlib's (``X`` a filled cross, ``o`` a circle, ``s`` a square)
MARK_STYLES = ((OPEN, "X", VIOLATION_COLOR), (RESOLVED, "o", RESOLVED_COLOR),
               (UNSEEN, "s", UNSEEN_COLOR))
#: the legend entry of a timeline's suspect steps
SUSPECT_LABEL = "suspect: a row read another request's row"


@dataclass
class TimelineTensor:
    """One checked tensor of a timeline: its steps (binned, each with its ``state``), and its
    unresolved violations (step, value), unbinned."""

    name: str
    color: str
    binned: pd.DataFrame
    bad: list[tuple[float, float]]

    def bound_label(self) -> str:
        """The legend text of the tensor's upper bound."""
        return f"valid bound (dashed): < {_fmt_bound(self.binned['upper'].to_numpy())}"

    def lower_label(self) -> str:
        """The legend text of the tensor's lower bound."""
        return f"lower bound = {_fmt_bound(self.binned['lower'].to_numpy())}"


@dataclass
class TimelineData:
    """What a bounds timeline shows, decided once for every drawing of it (matplotlib here,
    SVG in :mod:`forensics.present.svg.timeline`); texts are plain (not yet made safe for
    their output)."""

    result: Any
    site: str
    variant: str
    width: int
    complete: bool
    lines: list[TimelineTensor]
    omitted: list[str]
    suspects: tuple[list[float], list[float]]
    #: a dense timeline's counts per bin (:mod:`forensics.present.timeline_bins`), else None
    density: BinDensity | None = None

    @property
    def dense(self) -> bool:
        """Whether steps are aggregated into bins of :attr:`width` steps."""
        return self.width > 1

    @property
    def first(self) -> tuple[float, float] | None:
        """The first unresolved, judged violation (step, value) of any tensor drawn."""
        bad = [b for line in self.lines for b in line.bad]
        return min(bad) if bad else None

    def title(self) -> str:
        """The timeline's title (:func:`title_text`)."""
        per = "step" if self.width == 1 else f"{self.width}-step bin"
        return title_text(self.result, self.site, self.variant,
                          f"smallest and largest value used per {per}")

    def ylabel(self) -> str:
        """The value axis' label, with its unit."""
        return f"value used ({_value_unit(self.site, [t.name for t in self.lines])})"

    def empty(self) -> str:
        """The message of a timeline with no tensor to draw."""
        return f"no checked values for {self.site} under {self.variant}"

    def notes(self) -> list[str]:
        """What the timeline leaves out: in-range values (no bounds), tensors on another scale."""
        notes = [] if self.complete else ["offending values only (the result has no bounds)"]
        if self.omitted:
            notes.append(f"not drawn (on another scale): {', '.join(self.omitted)}")
        return notes

    def series_label(self, line: TimelineTensor) -> str:
        """The legend text of a tensor's band."""
        return f"{line.name} (min..max{f' per {self.width} steps' if self.dense else ''})"

    def marks(self, line: TimelineTensor, state: str) -> list[tuple[float, float, int]]:
        """(step, value, bad steps) of each value out of bounds of ``line`` in ``state``."""
        return _violations(line.binned[line.binned["state"] == state])

    def mark_label(self, state: str) -> str:
        """The legend text of the values out of bounds in ``state``."""
        text = {OPEN: "out of bounds", RESOLVED: f"resolved by {self.variant}",
                UNSEEN: f"not judged by {self.variant}"}[state]
        return text + (f" (per {self.width}-step bin; size: bad steps)" if self.dense else "")

    def lined(self, state: str) -> bool:
        """Whether each bin with a value out of bounds in ``state`` gets a thin vertical line
        too (unresolved ones on a dense timeline: one bad step among 10,000 still shows)."""
        return self.dense and state == OPEN


def timeline_data(result: Any, site: str | None = None, variant: str | None = None,
                  tensor: TensorChoice = None) -> TimelineData:
    """What :func:`plot_bounds_timeline` draws for (site, variant) (defaults as it says).

    Raises:
        UnknownSiteError, UnknownVariantError: ``site`` or ``variant`` is not in the result.
    """
    variant = _check_variant(result, variant)
    site = _check_site(result, site, variant)
    frame, complete = bounds_frame(result, site, variant)
    tensors, omitted = _tensors_of(frame, tensor)
    width = step_bin_width(frame["step"]) if len(frame) else 1
    verdicts = step_verdicts(result, site, variant)
    lines = [_timeline_tensor(_per_step(frame[frame["tensor"].astype(str) == name]), name,
                              TENSOR_COLORS[i % len(TENSOR_COLORS)], width, verdicts)
             for i, name in enumerate(tensors)]
    return TimelineData(result, site, variant, width, complete, lines, omitted,
                        suspect_steps(result, site, variant, frame),
                        density_of(result, site, variant, [line.name for line in lines], width,
                                   [line.binned for line in lines], MARK_STYLES))


def _timeline_tensor(steps: pd.DataFrame, name: str, color: str, width: int,
                     verdicts: dict[float, str] | None) -> TimelineTensor:
    """One tensor's steps, each with its state (:func:`step_verdicts`: out of bounds, resolved
    or not judged), binned ``width`` steps a point."""
    steps = steps.assign(state=[OPEN if verdicts is None else verdicts.get(float(t), UNSEEN)
                                for t in steps["step"]])
    bad = [(a, b) for a, b, _ in _violations(steps[steps["state"] == OPEN])]
    return TimelineTensor(name, color, bin_steps(steps, width), bad)


def suspect_steps(result: Any, site: str, variant: str, frame: pd.DataFrame
                  ) -> tuple[list[float], list[float]]:
    """The steps with a misattributed finding (a suspect verdict) of (site, variant), and for
    each the top of the band there (the largest value of ``frame`` at that step, else 0)."""
    found = _select(_findings(result), site, variant)
    if not len(found):
        return [], []
    steps = sorted(set(pd.to_numeric(found.loc[found["kind"] == "misattributed", "step"])))
    top = (frame.groupby("step")["max"].max() if len(frame) else pd.Series(dtype=float))
    return [float(s) for s in steps], [float(top.get(step, 0.0)) for step in steps]


def first_note(x: float, y: float) -> str:
    """The text naming the first unresolved violation (step ``x``, value ``y``)."""
    return f"first: step {x:.0f}, value {y:.0f}"


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
    if ax is None and svg.active():
        return _as_svg("timeline", result, site=site, variant=variant, tensor=tensor)
    data = timeline_data(result, site, variant, tensor)
    ax = _axes(ax, figsize=(7.0, 4.6))
    if data.density is not None and data.lines:  # counts per bin (forensics.present.timeline_bins)
        xs = [float(x) for line in data.lines for x in line.binned["step"]]
        marks = Marks((min(xs) - data.width / 2, max(xs) + data.width / 2), data.first,
                      first_note(*data.first) if data.first else "", data.suspects[0],
                      SUSPECT_COLOR, SUSPECT_LABEL)
        draw_density(ax, data.density, title_text(result, data.site, data.variant,
                                                  data.density.ylabel()), marks, _mathsafe)
        _legend_below(ax)
        return ax
    labelled: set[str] = set()
    for i, line in enumerate(data.lines):
        _draw_tensor(ax, data, line, i == 0, labelled)
    _mark_suspect_steps(ax, data)
    if data.first is not None:
        _note_first(ax, *data.first)
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
    _legend_below(ax)
    return ax


def _integer_steps(ax: Axes) -> None:
    """Steps are whole numbers: integer ticks only (a capture of two steps shows no 0.5)."""
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def step_verdicts(result: Any, site: str, variant: str) -> dict[float, str] | None:
    """Per step with an out-of-bounds finding of ``variant`` at ``site``: :data:`OPEN` when
    one is unresolved and judged, else :data:`RESOLVED` when one is resolved, else
    :data:`UNSEEN` (the variant cannot judge it). None without a findings table: every
    value out of bounds is then drawn as such."""
    found = _select(_findings(result), site, variant)
    if _findings(result) is None:
        return None
    out: dict[float, str] = {}
    if not len(found):
        return out
    found = found[found["kind"] == "out_of_bounds"]
    judged = (found["judged"] != False) if "judged" in found else True  # noqa: E712
    resolved = found["resolved"] == True  # noqa: E712
    for step, state in ((found["step"][judged & ~resolved], OPEN),
                        (found["step"][judged & resolved], RESOLVED),
                        (found["step"][~judged] if "judged" in found else found["step"][:0],
                         UNSEEN)):
        for value in step.astype(float):
            out.setdefault(float(value), state)
    return out


def _mark_suspect_steps(ax: Axes, data: TimelineData) -> None:
    """Mark the suspect steps (:func:`suspect_steps`) along the top of the band: a diamond per
    step, labelled once."""
    steps, y = data.suspects
    if steps:
        ax.scatter(steps, y, marker="D", s=36, facecolor="none", edgecolor=SUSPECT_COLOR,
                   linewidths=1.5, zorder=6, label=SUSPECT_LABEL)


def _note_first(ax: Axes, x: float, y: float) -> None:
    """Label the first violation (x, y) with an arrow; the note goes towards the middle of the
    axes (below a point in the upper half, above one in the lower half), so it stays inside
    the axes, clear of the title and of the markers along the bound."""
    lo, hi = ax.get_ylim()
    dy = -30 if y > (lo + hi) / 2 else 30
    ax.annotate(f"first: step {x:.0f}, value {y:.0f}", (x, y), textcoords="offset points",
                xytext=(14, dy), va="top" if dy < 0 else "bottom", fontsize=8,
                color=VIOLATION_COLOR, zorder=7,
                arrowprops={"arrowstyle": "->", "color": VIOLATION_COLOR, "lw": 0.8},
                bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.85})


def step_bin_width(steps: pd.Series) -> int:
    """The width in steps of a dense timeline's bins: 1 up to :data:`DENSE_STEPS` distinct
    steps, else a round width (1, 2 or 5 x 10^k) giving at most :data:`TIMELINE_BINS` bins."""
    if steps.nunique() <= DENSE_STEPS:
        return 1
    span = float(steps.max() - steps.min()) + 1
    raw = span / TIMELINE_BINS
    scale = 10 ** int(np.floor(np.log10(raw)))
    return int(next(m * scale for m in (1, 2, 5, 10) if m * scale >= raw))


def bin_steps(steps: pd.DataFrame, width: int) -> pd.DataFrame:
    """:func:`_per_step`'s table aggregated into bins of ``width`` steps (each bin drawn at its
    centre): extremes and tightest bound of the bin, whether any step of it violated, and
    ``bad_steps``, how many did."""
    if width <= 1:
        return steps.assign(bad_steps=(steps["bad_low"] | steps["bad_high"]).astype(int))
    key = (steps["step"] // width) * width
    state = {}
    if "state" in steps:  # a bin takes its worst state: out of bounds, resolved, not judged
        rank = steps["state"].map({OPEN: 0, RESOLVED: 1}).fillna(2)
        rank = rank.where(steps["bad_low"] | steps["bad_high"], 3)
        state = {"state": ("rank", "min")}
        steps = steps.assign(rank=rank)
    binned = (steps.assign(bad=steps["bad_low"] | steps["bad_high"])
              .groupby(key.rename("bin"), sort=True)
              .agg(min=("min", "min"), max=("max", "max"), lower=("lower", "max"),
                   upper=("upper", "min"), bad_low=("bad_low", "any"),
                   bad_high=("bad_high", "any"), bad_steps=("bad", "sum"), **state)
              .reset_index().rename(columns={"bin": "step"})
              .assign(step=lambda f: f["step"] + (width - 1) / 2))
    if state:
        binned["state"] = binned["state"].map({0: OPEN, 1: RESOLVED, 2: UNSEEN, 3: UNSEEN})
    return binned


def _draw_tensor(ax: Axes, data: TimelineData, line: TimelineTensor, first: bool,
                 labelled: set[str]) -> None:
    """Draw one tensor's band, bound and values out of bounds (binned when the timeline is
    dense), each drawn as its state says (out of bounds, resolved or not judged).
    ``labelled``: legend entries drawn so far (each is drawn once)."""
    binned, color, dense, width = line.binned, line.color, data.dense, data.width
    x = binned["step"].to_numpy()
    upper, lower = binned["upper"].to_numpy(), binned["lower"].to_numpy()
    ax.fill_between(x, binned["min"], binned["max"], step="mid", color=color, alpha=0.15)
    ax.plot(x, binned["max"], marker=None if dense else "o", ms=3, lw=0.8 if dense else 1,
            color=color, label=_mathsafe(data.series_label(line)))
    ax.plot(x, binned["min"], marker=None if dense else ".", ms=2, lw=0.6 if dense else 0.8,
            ls=":", color=color)
    edges = _edges(x, width)  # a bound of one step still shows as a segment
    ax.step(edges, _padded(upper), where="mid", ls="--", lw=1.4, color=BOUND_COLOR,
            label=_once(labelled, line.bound_label()))
    ax.step(edges, _padded(lower), where="mid", ls="-.", lw=0.8, color=BOUND_COLOR,
            label=line.lower_label() if first else None)
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
               label=_once(labelled, data.mark_label(state)))


def _once(labelled: set[str], text: str) -> str | None:
    """``text`` the first time it is asked for (a legend entry), else None."""
    if text in labelled:
        return None
    labelled.add(text)
    return text


def _edges(x: np.ndarray, width: int) -> np.ndarray:
    """``x`` with one point half a bin before the first and after the last."""
    if not len(x):
        return x
    return np.concatenate([[x[0] - width / 2], x, [x[-1] + width / 2]])


def _padded(values: np.ndarray) -> np.ndarray:
    """``values`` with its first and last repeated (see :func:`_edges`)."""
    if not len(values):
        return values
    return np.concatenate([values[:1], values, values[-1:]])


def _violations(steps: pd.DataFrame) -> list[tuple[float, float, int]]:
    """(step, offending extreme, bad steps) of each row of ``steps`` that left its bound:
    the largest value above the bound and the smallest below it, each once."""
    count = steps["bad_steps"] if "bad_steps" in steps else pd.Series(1, index=steps.index)
    found = []
    for flag, column in (("bad_high", "max"), ("bad_low", "min")):
        hit = steps[steps[flag]]
        found += [(float(a), float(b), int(c)) for a, b, c in
                  zip(hit["step"], hit[column], count[hit.index], strict=True)]
    return found


def _fmt_bound(values: np.ndarray) -> str:
    finite = values[np.isfinite(values)]
    if not len(finite):
        return "?"
    lo, hi = int(finite.min()), int(finite.max())
    return f"{lo}" if lo == hi else f"{lo}..{hi}"


# ----------------------------------------------------------------------------- heatmap


def distance_past_bound(value: Any, lower: Any, upper: Any) -> np.ndarray:
    """How far each value lies outside ``[lower, upper)``: 0 inside, 1 for ``upper`` or
    ``lower - 1`` (the first invalid value on either side), growing outwards."""
    v, lo, hi = (np.asarray(a, dtype="float64") for a in (value, lower, upper))
    above = np.where(v >= hi, v - hi + 1, 0.0)
    below = np.where(v < lo, lo - v, 0.0)
    return np.nan_to_num(above + below)


#: the colours of a heatmap's distances past the bound, from 1 (the first invalid value) out
VIOLATION_RAMP = ("#f7c6c6", VIOLATION_COLOR, "#5c0d0e")
#: colour of a heatmap's checked cells inside the bound
CHECKED_COLOR = "#e0e0e0"
HEATMAP_WHAT = "out-of-bounds values per batch row and step"
CHECKED_LABEL, SUSPECT_CELL_LABEL = ("checked, inside the valid bound",
                                     "misattributed (another request's row)")
DISTANCE_LABEL = "distance past the valid bound [lower, upper)\n(1 = first invalid value)"


def _violation_cmap() -> Any:
    from matplotlib.colors import LinearSegmentedColormap

    return LinearSegmentedColormap.from_list("forensics_violation", list(VIOLATION_RAMP))


@dataclass
class HeatmapData:
    """What a rows x steps heatmap of (site, variant) shows, for either renderer.

    ``grid[row index, step index]`` is the largest distance past the bound of the findings
    still out of bounds there (0: none); ``checked`` the step indices where the site was
    checked; ``written`` the (row index, step index, value) cells whose value is written;
    ``suspects`` the cells of misattributed findings; ``settled`` per state (:data:`RESOLVED`,
    :data:`UNSEEN`) the cells of findings that are not out of bounds for this variant.
    """

    title: str
    variant: str
    steps: list[float]
    rows: list[float]
    grid: np.ndarray
    checked: list[int]
    written: list[tuple[int, int, float]]
    suspects: tuple[np.ndarray, np.ndarray] | None
    settled: list[tuple[str, np.ndarray, np.ndarray]]
    empty: str | None = None

    @property
    def peak(self) -> float:
        """The largest distance in the grid (1 without any)."""
        return float(np.nanmax(self.grid)) if self.grid.size and self.grid.max() > 0 else 1.0

    @property
    def log(self) -> bool:
        """Whether distances are coloured on a log scale (a peak above 100)."""
        return self.peak > 100

    @property
    def dense(self) -> bool:
        """Whether the grid is too fine for a cell per pixel (offending cells get markers)."""
        return len(self.steps) > DENSE_STEPS or len(self.rows) > DENSE_ROWS

    def shade(self, value: float) -> float:
        """``value``'s place (0 to 1) on the colour ramp: log from 1 to the peak when
        :attr:`log`, else linear from 0.5 to the peak + 0.5."""
        if self.log:
            return float(np.clip(np.log(max(value, 1.0)) / np.log(max(self.peak, 2.0)), 0, 1))
        return float(np.clip((value - 0.5) / max(self.peak, 1.0), 0, 1))

    def xticks(self) -> list[tuple[int, str]]:
        """(step index, label) of the labelled steps."""
        return [(i, f"{self.steps[i]:.0f}") for i in step_ticks(self.steps, most=STEP_LABELS)]

    def yticks(self) -> list[tuple[int, str]]:
        """(row index, label) of the labelled rows (``summary`` for a summary record's row)."""
        return [(i, "summary" if self.rows[i] < 0 else f"{self.rows[i]:.0f}")
                for i in _thin(len(self.rows))]

    def settled_label(self, state: str) -> str:
        """The legend text of settled cells in ``state``."""
        return f"{state} by {self.variant}"


def heatmap_data(result: Any, site: str | None = None, variant: str | None = None,
                 align: Sequence[str] | None = None) -> HeatmapData:
    """The data of :func:`plot_row_heatmap` (``align``: the variants whose steps and rows the
    grid spans too)."""
    variant = _check_variant(result, variant)
    site = _check_site(result, site, variant)
    title = title_text(result, site, variant, HEATMAP_WHAT)
    oob, settled = _open_and_settled(_oob(result, site, variant))
    steps, rows = _heatmap_span(result, site, [variant, *(align or [])])
    if not steps:
        return HeatmapData(title, variant, [], rows, np.zeros((len(rows), 0)), [], [], None, [],
                           empty=f"no records for {site} under {variant}")
    at = {s: i for i, s in enumerate(steps)}
    checked = sorted(at[s] for s in _checked_steps(result, site, variant))
    findings = _select(_findings(result), site, variant)
    return HeatmapData(title, variant, steps, rows, _heatmap_grid(oob, steps, rows), checked,
                       _written_cells(oob, steps, rows), _suspect_cells(findings, steps, rows),
                       _settled_cells(settled, steps, rows))


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
    if ax is None and svg.active():
        return _as_svg("heatmap", result, site=site, variant=variant, align=align)
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
        ax.text(s, r, f"{value:.0f}", ha="center", va="center", fontsize=6, color="white")
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
                                  label=data.settled_label(state)))
    _legend_below(ax, handles)
    return _heatmap_labels(ax, data)


def _open_and_settled(oob: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The out-of-bounds findings split: those still out of bounds (judged, unresolved), and
    the others (resolved, or not judged), which are never coloured as out of bounds."""
    if not len(oob):
        return oob, oob
    settled = oob["resolved"] == True  # noqa: E712
    if "judged" in oob:
        settled |= oob["judged"] == False  # noqa: E712
    return oob[~settled], oob[settled]


def _settled_cells(settled: pd.DataFrame, steps: list[float], rows: list[float]
                   ) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(state, row indices, step indices) of the resolved findings' cells and of the cells of
    findings the variant cannot judge (states without cells left out)."""
    if not len(settled):
        return []
    settled = settled[pd.to_numeric(settled["step"], errors="coerce").isin(steps)]
    ri, si = _cell_index(settled, steps, rows)
    resolved = (settled["resolved"] == True).to_numpy()  # noqa: E712
    return [(state, np.asarray(ri)[mask], np.asarray(si)[mask])
            for state, mask in ((RESOLVED, resolved), (UNSEEN, ~resolved)) if mask.any()]


def _mark_small_cells(ax: Axes, grid: np.ndarray, image: Any) -> None:
    """On a grid too fine for a cell per pixel (more than :data:`DENSE_STEPS` steps or
    :data:`DENSE_ROWS` rows), draw each offending cell as a square marker in the image's
    colours too: resampled to the screen, the image alone drops most of them."""
    rows, cols = np.nonzero(grid > 0)
    if len(rows):
        ax.scatter(cols, rows, c=grid[rows, cols], cmap=image.get_cmap(), norm=image.norm,
                   marker="s", s=6, linewidths=0, zorder=4)


def _heatmap_span(result: Any, site: str, variants: Sequence[str]
                  ) -> tuple[list[float], list[float]]:
    """The steps (checked or offending) and rows of ``site`` over ``variants``, sorted."""
    steps: set[float] = set()
    rows: set[float] = set()
    for name in dict.fromkeys(variants):
        oob = _oob(result, site, name)
        steps |= _checked_steps(result, site, name) | set(oob.get("step", pd.Series()).dropna())
        rows |= set(_heatmap_rows(oob, _select(_findings(result), site, name)))
    return sorted(steps), sorted(rows) or [0.0]


def _checked_steps(result: Any, site: str, variant: str) -> set[float]:
    """Steps at which the site was checked: from ``bounds``, else from the result's records."""
    frame, complete = bounds_frame(result, site, variant)
    steps = set(frame["step"].dropna()) if len(frame) else set()
    if not complete:
        records = getattr(result, "records", None)
        if isinstance(records, list):
            steps |= {float(r.step) for r in records if getattr(r, "site", None) == site}
    return steps


def _heatmap_rows(oob: pd.DataFrame, findings: pd.DataFrame) -> list[float]:
    rows: set[float] = set()
    for frame in (oob, findings):
        if len(frame):
            rows.update(pd.to_numeric(frame["row"], errors="coerce").fillna(-1).astype(float))
    if not rows:
        return [0.0]
    numbered = [r for r in rows if r >= 0]
    dense = [float(r) for r in range(int(max(numbered)) + 1)] if numbered else []
    return ([-1.0] if -1.0 in rows else []) + dense


def _cell_index(frame: pd.DataFrame, steps: list[float], rows: list[float]
                ) -> tuple[np.ndarray, np.ndarray]:
    step_at = {s: i for i, s in enumerate(steps)}
    row_at = {r: i for i, r in enumerate(rows)}
    r = pd.to_numeric(frame["row"], errors="coerce").fillna(-1).astype(float)
    s = pd.to_numeric(frame["step"], errors="coerce").astype(float)
    return (np.array([row_at[x] for x in r], dtype=int),
            np.array([step_at[x] for x in s], dtype=int))


def _heatmap_grid(oob: pd.DataFrame, steps: list[float], rows: list[float]) -> np.ndarray:
    grid = np.zeros((len(rows), len(steps)))
    if len(oob):
        ri, si = _cell_index(oob, steps, rows)
        dist = distance_past_bound(oob["value"], oob["lower"], oob["upper"])
        np.maximum.at(grid, (ri, si), dist)
    return grid


def _written_cells(oob: pd.DataFrame, steps: list[float], rows: list[float]
                   ) -> list[tuple[int, int, float]]:
    """(row index, step index, value) of the first finding of each offending cell, on a grid
    of at most 400 cells (on a larger one the values are not written)."""
    if not len(oob) or len(steps) * len(rows) > 400:
        return []
    ri, si = _cell_index(oob, steps, rows)
    cells: dict[tuple[int, int], float] = {}
    for r, s, value in zip(ri, si, oob["value"], strict=True):
        cells.setdefault((int(r), int(s)), float(value))
    return [(r, s, value) for (r, s), value in cells.items()]


def _suspect_cells(findings: pd.DataFrame, steps: list[float], rows: list[float]
                   ) -> tuple[np.ndarray, np.ndarray] | None:
    """(row indices, step indices) of the ``misattributed`` findings' cells, None without."""
    if not len(findings):
        return None
    sus = findings[findings["kind"] == "misattributed"]
    sus = sus[pd.to_numeric(sus["step"], errors="coerce").isin(steps)]
    if not len(sus):
        return None
    return _cell_index(sus, steps, rows)


def _heatmap_labels(ax: Axes, data: HeatmapData) -> Axes:
    ax.set_title(_mathsafe(data.title), fontsize=10)
    ax.set_xlabel("engine step")
    ax.set_ylabel("batch row (index)")
    if data.steps:
        ax.set_xticks(*zip(*data.xticks(), strict=True))
        ax.set_yticks(*zip(*data.yticks(), strict=True))
    return ax


def step_ticks(steps: list[float], most: int = STEP_LABELS) -> list[int]:
    """Positions in ``steps`` (sorted) to label: at most ``most``, at round step numbers
    (multiples of 1, 2 or 5 x 10^k) where the steps hold them, so labels read 1000, 2000...
    rather than 1, 1251, 2501..."""
    if len(steps) <= most:
        return list(range(len(steps)))
    span = max(steps[-1] - steps[0], 1.0)
    raw = span / most
    scale = 10 ** int(np.floor(np.log10(raw)))
    width = next(m * scale for m in (1, 2, 5, 10) if m * scale >= raw)
    wanted = np.arange(np.ceil(steps[0] / width) * width, steps[-1] + 1, width)
    found = np.searchsorted(steps, wanted)
    return sorted({int(i) for i in found if i < len(steps)})[:most]


def _thin(n: int, most: int = 20) -> list[int]:
    stride = max(1, int(np.ceil(n / most)))
    return list(range(0, n, stride))


# ----------------------------------------------------------------------------- histogram


def _histogram_data(result: Any, site: str, variant: str, tensor: TensorChoice
                    ) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, list[str], list[str]]:
    """(bounds rows drawn, in-range extremes of each record, every offending value, tensors
    drawn, tensors omitted for being on another scale)."""
    frame, _ = bounds_frame(result, site, variant)
    oob = _oob(result, site, variant)
    drawn, omitted = _tensors_of(frame, tensor)
    if drawn or tensor is not None:
        frame = frame[frame["tensor"].astype(str).isin(drawn)]
        oob = oob[oob["tensor"].astype(str).isin(drawn)] if len(oob) else oob
    inside = np.array([], dtype="float64")
    for column in ("min", "max") if len(frame) else ():
        ok = (frame[column] >= frame["lower"]) & (frame[column] < frame["upper"])
        inside = np.concatenate([inside, frame.loc[ok, column].to_numpy(dtype="float64")])
    outside = oob["value"].to_numpy(dtype="float64") if len(oob) else np.array([])
    return frame, inside, outside, drawn, omitted


def _guess_vocab_size(site: str, frame: pd.DataFrame) -> int | None:
    """The most common bound of the token-id tensors in ``frame`` (None without any)."""
    if not len(frame):
        return None
    ids = frame[[is_id_tensor(site, str(t)) for t in frame["tensor"]]]
    uppers = ids["upper"].dropna()
    return int(uppers.mode().iloc[0]) if len(uppers) else None


class _ValueAxis:
    """Maps values to x positions: one linear stretch, or two windows (around ``lower`` and
    ``upper``) joined by a break when the valid range is wide."""

    def __init__(self, lower: float, upper: float, window: int, values: np.ndarray) -> None:
        self.lower, self.upper, self.window = lower, upper, window
        lo = min([lower - 1, *values]) if len(values) else lower - 1
        hi = max([upper, *values]) if len(values) else upper
        self.broken = (hi - lo) > 6 * window
        self.gap = max(2, window // 4)
        self.start, self.stop = (lo, hi) if not self.broken else (0.0, 0.0)

    def pos(self, values: np.ndarray) -> np.ndarray:
        """x position of each value (values beyond a window sit on its edge)."""
        v = np.asarray(values, dtype="float64")
        if not self.broken:
            return v
        w, mid = self.window, (self.lower + self.upper) / 2
        left = np.clip(v - (self.lower - w), 0, 2 * w - 1)
        right = np.clip(v - (self.upper - w), 0, 2 * w - 1) + 2 * w + self.gap
        return np.where(v < mid, left, right)

    def shown(self, values: np.ndarray) -> np.ndarray:
        """Mask of the values inside a window (all of them on a linear axis)."""
        v = np.asarray(values, dtype="float64")
        if not self.broken:
            return np.ones(len(v), dtype=bool)
        w = self.window
        return (np.abs(v - self.lower) < w) | (np.abs(v - self.upper) < w)

    def bins(self) -> np.ndarray:
        if not self.broken:
            return np.arange(self.start - 0.5, self.stop + 1.5)
        return np.arange(-0.5, 4 * self.window + self.gap)

    def ticks(self) -> tuple[list[float], list[str]]:
        if not self.broken:
            return [], []
        w = self.window
        values = [self.lower - w // 2, self.lower, self.upper - w // 2, self.upper,
                  self.upper + w // 2]
        return list(self.pos(np.array(values))), [f"{v:.0f}" for v in values]


def plot_value_histogram(result: Any, site: str | None = None, variant: str | None = None,
                         ax: Axes | None = None, vocab_size: int | None = None,
                         window: int = 32, tensor: TensorChoice = None) -> Axes:
    """How often each value occurs near the bound, on a log count axis.

    In range (:data:`IN_RANGE_COLOR`): the smallest and largest value of each record (from
    ``result.bounds``). Out of bounds (:data:`VIOLATION_COLOR`): every offending element of the
    findings. The valid range is shaded and its bound drawn and named; the sentinels ``-1``
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
    if ax is None and svg.active():
        return _as_svg("histogram", result, site=site, variant=variant, vocab_size=vocab_size,
                       window=window, tensor=tensor)
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


HISTOGRAM_WHAT, HISTOGRAM_YLABEL = "values near the bound", "count (log scale)"
IN_RANGE_LABEL, OUT_LABEL = ("in range (per-record min and max)",
                             "out of bounds (every element)")
PLACEHOLDER_NOTE = "−1: async placeholder / new row"


@dataclass
class HistogramData:
    """What the value histogram of (site, variant) shows, for either renderer.

    ``edges`` are the bins' edges on the axis' positions (:class:`_ValueAxis`), ``inside`` and
    ``outside`` the counts per bin of in-range extremes and of offending values (None without
    any value); ``hidden``: in-range values far from both bounds, not shown; ``sentinels``:
    (value, note, side) of each sentinel the axis shows.
    """

    title: str
    xlabel: str
    axis: _ValueAxis
    lower: float
    upper: float
    edges: np.ndarray | None
    inside: np.ndarray | None
    outside: np.ndarray | None
    hidden: int
    sentinels: list[tuple[float, str, int]]
    omitted: list[str]

    def ylim(self) -> tuple[float, float]:
        """The count axis' range: from below 1 to three times the tallest bar (at least 10)."""
        top = float(np.max(self.inside + self.outside)) if self.inside is not None else 0.0
        return 0.7, max(10.0, top * 3)

    def range_edges(self) -> tuple[float, float]:
        """The valid range's left and right edges on the axis."""
        lo, hi = self.axis.pos(np.array([self.lower, self.upper])) - 0.5
        return float(lo), float(hi)

    def range_label(self) -> str:
        """The valid range's legend text."""
        return f"valid range [{self.lower:.0f}, {self.upper:.0f})"

    def bound_labels(self) -> tuple[str, str]:
        """The legend texts of the upper and the lower bound lines."""
        return (f"valid bound: upper = {self.upper:.0f} (exclusive)",
                f"valid bound: lower = {self.lower:.0f}")

    def hidden_note(self) -> str:
        """The note on in-range values not shown ("" when none)."""
        return (f"{self.hidden} in-range values far from both bounds not shown"
                if self.hidden else "")

    def omitted_note(self) -> str:
        """The note on tensors on another scale, not drawn."""
        return "not drawn (another scale):\n" + "\n".join(self.omitted)

    def break_at(self) -> tuple[float, float]:
        """The middle and the width of a broken axis' break."""
        return 2 * self.axis.window + (self.axis.gap - 1) / 2, float(self.axis.gap)


def histogram_data(result: Any, site: str | None = None, variant: str | None = None,
                   vocab_size: int | None = None, window: int = 32,
                   tensor: TensorChoice = None) -> HistogramData:
    """The data of :func:`plot_value_histogram` (its arguments)."""
    variant = _check_variant(result, variant)
    site = _check_site(result, site, variant)
    frame, inside, outside, drawn, omitted = _histogram_data(result, site, variant, tensor)
    vocab = vocab_size if vocab_size is not None else _guess_vocab_size(site, frame)
    lower, upper = _range_of(frame, outside)
    if vocab is not None:
        window = max(window, int(abs(upper - vocab)) + 4)
    axis = _ValueAxis(lower, upper, window, np.concatenate([inside, outside]))
    shown_in = inside[axis.shown(inside)]
    edges = low = high = None
    if len(shown_in) + len(outside):
        edges = np.asarray(list(axis.bins()), dtype=float)
        low, _ = np.histogram(axis.pos(shown_in), bins=edges)
        high, _ = np.histogram(axis.pos(outside), bins=edges)
    sentinels = [(-1.0, PLACEHOLDER_NOTE, -1)]
    if vocab is not None:
        sentinels.append((float(vocab), f"vocab_size = {vocab}: rejection sentinel", 1))
    xlabel = (f"value used ({_value_unit(site, drawn)})"
              + (" — broken axis: values near each bound" if axis.broken else ""))
    return HistogramData(title_text(result, site, variant, HISTOGRAM_WHAT), xlabel, axis,
                         lower, upper, edges, low, high, len(inside) - len(shown_in),
                         [s for s in sentinels if axis.shown(np.array([s[0]]))[0]], omitted)


def _range_of(frame: pd.DataFrame, outside: np.ndarray) -> tuple[float, float]:
    if len(frame) and frame["upper"].notna().any():
        return float(frame["lower"].min()), float(frame["upper"].max())
    return 0.0, float(outside.max()) if len(outside) else 1.0


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
                  color=VIOLATION_COLOR, label=OUT_LABEL)
        ax.set_ylim(*data.ylim())
    else:
        _empty(ax, "no values")
    _plain_counts(ax)
    if data.hidden:
        ax.text(0.5, 0.9, data.hidden_note(), transform=ax.transAxes, ha="center", fontsize=7,
                color="#555555", zorder=6,
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8})
    ticks, labels = data.axis.ticks()
    if ticks:
        ax.set_xticks(ticks, labels, fontsize=7)
        middle, gap = data.break_at()
        ax.axvspan(middle - gap / 2, middle + gap / 2, color="white", zorder=3)
        ax.text(middle, 0.5, "≈", transform=ax.get_xaxis_transform(), ha="center",
                fontsize=14, color="#555555", zorder=4)


def _draw_valid_range(ax: Axes, data: HistogramData) -> None:
    lo, hi = data.range_edges()
    upper_label, lower_label = data.bound_labels()
    ax.axvspan(lo, hi, color="#2ca02c", alpha=0.08, label=data.range_label())
    ax.axvline(hi, color=BOUND_COLOR, ls="--", lw=1.2, label=upper_label)
    ax.axvline(lo, color=BOUND_COLOR, ls="-.", lw=0.8, label=lower_label)


def _annotate_sentinel(ax: Axes, axis: _ValueAxis, value: float, text: str,
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


# ----------------------------------------------------------------------------- verdicts


#: the colour of a verdict matrix cell without a verdict
NO_VERDICT_COLOR = "#e8e8e8"


def verdict_grid(result: Any) -> tuple[list[str], list[str], dict[str, dict[str, str]]]:
    """The verdict matrix' sites (rows, pipeline order), variants (columns, replay order) and
    verdicts (variant -> site -> verdict)."""
    verdicts: dict[str, dict[str, str]] = getattr(result, "verdicts", None) or {}
    return result_sites(result), variant_names(result) or list(verdicts), verdicts


def verdict_cell(verdict: str | None) -> tuple[str, str, str]:
    """A verdict matrix cell's (text, fill colour, text colour) for ``verdict`` (None: none)."""
    ink = "white" if verdict in ("violation", "error") else "black"
    return verdict or "-", VERDICT_COLORS.get(str(verdict), NO_VERDICT_COLOR), ink


def verdict_title(result: Any) -> str:
    """The verdict matrix' title."""
    return f"{capture_name(result)} · all sites · all variants\nverdicts"


def plot_verdict_matrix(result: Any, ax: Axes | None = None) -> Axes:
    """Sites (rows, pipeline order) x variants (columns), each cell coloured by its verdict.

    Colours come from :data:`VERDICT_COLORS` (``violation`` is :data:`VIOLATION_COLOR`); a
    missing verdict is light grey.

    Returns:
        The Axes.
    """
    if ax is None and svg.active():
        return _as_svg("verdicts", result)
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


# ----------------------------------------------------------------------------- side by side

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
        ValueError: an unknown ``kind``; UnknownSiteError, UnknownVariantError as the plots do.
    """
    if svg.active():
        return _as_svg("side_by_side", result, kind=kind, site=site, variants=variants,
                       **kwargs)
    if kind not in PLOTTERS:
        raise ValueError(f"unknown plot kind {kind!r}; expected one of {list(PLOTTERS)}")
    names = list(variants) if variants is not None else variant_names(result)
    names = names or [_check_variant(result, None)]
    site = site or _check_site(result, None, _check_variant(result, names[0]))
    if kind != "heatmap" and kwargs.get("tensor") is None:
        kwargs["tensor"] = choose_tensors(result, site, names)
    fig, axes = _pyplot().subplots(1, len(names), figsize=(6.0 * len(names), 4.8),
                             sharey=kind != "heatmap", layout="constrained", squeeze=False)
    if kind == "heatmap":
        kwargs["align"] = names
    for ax, name in zip(axes[0], names, strict=True):
        PLOTTERS[kind](result, site=site, variant=name, ax=ax, **kwargs)
    return fig


def plot(result: Any, kind: str = "timeline", site: str | None = None,
         variant: str | None = None, ax: Axes | None = None) -> Axes:
    """Dispatch to one view by name (``timeline``, ``heatmap``, ``histogram``, ``verdicts``).

    Returns:
        The Axes.
    Raises:
        ValueError: an unknown ``kind``; UnknownSiteError, UnknownVariantError as the plots do.
    """
    if kind == "verdicts":
        return plot_verdict_matrix(result, ax=ax)
    if kind not in PLOTTERS:
        raise ValueError(f"unknown plot kind {kind!r}; expected one of {list(KINDS)}")
    return PLOTTERS[kind](result, site=site, variant=variant, ax=ax)


def save(ax: Axes, path: str | os.PathLike[str], dpi: int = 120) -> None:
    """Save the figure holding ``ax`` to ``path`` (format from the suffix) and close it."""
    figure: Any = ax.figure
    from forensics.atomic import write_atomically

    try:
        write_atomically(path, lambda tmp: figure.savefig(tmp, dpi=dpi, bbox_inches="tight"),
                         shared=True)
    finally:
        close(figure)


def close(item: Any) -> None:
    """Close the pyplot figure of an Axes or Figure (frees it after saving)."""
    _pyplot().close(getattr(item, "figure", item))
