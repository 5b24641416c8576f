"""The bounds timeline's scene: per checked tensor, its steps (binned on a dense timeline) with
the state of each value out of bounds, the suspect steps, and the texts of the view."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from forensics.present.selection import (
    TensorChoice,
    axis_origin,
    bounds_frame,
    chosen_site,
    chosen_variant,
    coords,
    exact_coords,
    exact_ints,
    findings_of,
    rows_of,
    tensors_to_draw,
    title_text,
    unjudged_title,
    value_origin,
    value_unit,
)
from forensics.present.style import (
    DENSE_STEPS,
    MARK_STYLES,
    OPEN,
    RESOLVED,
    TENSOR_COLORS,
    TIMELINE_BINS,
    UNSEEN,
)
from forensics.present.timeline_bins import BinDensity, density_of

#: the columns of a timeline's values, drawn on its y axis
VALUES = ("min", "max", "lower", "upper")


def _per_step(frame: pd.DataFrame) -> pd.DataFrame:
    """Per step: smallest and largest value used, tightest bound, whether any record violated
    (exact integers: :func:`~forensics.present.selection.bounds_frame`; a comparison with an
    unknown value is no violation)."""
    frame = frame.assign(bad_low=(frame["min"] < frame["lower"]).fillna(False).astype(bool),
                         bad_high=(frame["max"] >= frame["upper"]).fillna(False).astype(bool))
    return (frame.groupby("step", sort=True)
            .agg(min=("min", "min"), max=("max", "max"), lower=("lower", "max"),
                 upper=("upper", "min"), bad_low=("bad_low", "any"),
                 bad_high=("bad_high", "any"))
            .reset_index())


@dataclass
class TimelineTensor:
    """One checked tensor of a timeline: its steps (binned, each with its ``state``; steps
    and values as drawn, relative to the timeline's origins), and its unresolved violations
    (step, value) as exact integers, unbinned."""

    name: str
    color: str
    binned: pd.DataFrame
    bad: list[tuple[int, int]]
    #: the value every drawn value is relative to (:attr:`TimelineData.yorigin`, else 0)
    yorigin: int = 0
    #: those of :attr:`bad` that are their step's smallest value (below the lower bound); the
    #: rest are their step's largest
    low: frozenset[tuple[int, int]] = frozenset()

    def bound_label(self) -> str:
        """The legend text of the tensor's upper bound."""
        return f"valid bound (dashed): < {_fmt_bound(self.binned['upper'], self.yorigin)}"

    def lower_label(self) -> str:
        """The legend text of the tensor's lower bound."""
        return f"lower bound = {_fmt_bound(self.binned['lower'], self.yorigin)}"

    def runs(self, width: int) -> list[pd.DataFrame]:
        """The binned steps split where the tensor holds no record (:func:`runs`): each run
        is drawn as one line, band and bound."""
        return [self.binned.iloc[run] for run in runs(coords(self.binned["step"]), width)]

    def stepped(self, width: int, columns: Sequence[str], run: pd.DataFrame | None = None
                ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The binned ``columns`` (of ``run``, one of :meth:`runs`; None: all) as step lines
        spanning each bin's whole ``width``, so that a bound of one step still shows as a
        segment: the edges (half a bin before the first step and after the last) and each
        column padded to them, as coordinates to draw
        (:func:`~forensics.present.selection.coords`)."""
        rows = self.binned if run is None else run
        edges = bin_edges(coords(rows["step"]), width)
        return edges, {c: padded_to_edges(coords(rows[c])) for c in columns}


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
    #: the suspect steps (relative to :attr:`origin`) and the top of the band at each
    #: (relative to :attr:`yorigin`)
    suspects: tuple[list[int], list[int]]
    #: a dense timeline's counts per bin (:mod:`forensics.present.timeline_bins`), else None
    density: BinDensity | None = None
    #: the step every drawn x is relative to (:func:`~forensics.present.selection.axis_origin`:
    #: 0 unless a step is past 2**53); labels add it back, exactly
    origin: int = 0
    #: the value every drawn value is relative to (:func:`~forensics.present.selection.
    #: value_origin`): None unless a value is past 2**53, else the y ticks are labelled with
    #: :func:`~forensics.present.selection.round_ticks`
    yorigin: int | None = None

    @property
    def dense(self) -> bool:
        """Whether steps are aggregated into bins of :attr:`width` steps."""
        return self.width > 1

    @property
    def first(self) -> tuple[int, int] | None:
        """The first unresolved, judged violation (step, value) of any tensor drawn, exact."""
        bad = [b for line in self.lines for b in line.bad]
        return min(bad) if bad else None

    def first_note(self) -> str:
        """The text naming :attr:`first` (its step's largest or smallest value: the first
        finding's own value may be another of that step's), or "" where there is none."""
        if self.first is None:
            return ""
        low = any(self.first in line.low for line in self.lines)
        return first_note(*self.first, "smallest" if low else "largest")

    def first_at(self) -> tuple[int, int] | None:
        """Where :attr:`first` is drawn: (its step less :attr:`origin`, its value less
        :attr:`yorigin`)."""
        if self.first is None:
            return None
        return self.first[0] - self.origin, self.first[1] - (self.yorigin or 0)

    def title(self, what: str | None = None) -> str:
        """The timeline's title (:func:`~forensics.present.selection.title_text`) of ``what``
        it shows (None: the smallest and largest value used per step or bin), then what the
        capture held that no variant judged (:func:`~forensics.present.selection.
        unjudged_title`): a step drawn clean may hold records no variant judged."""
        per = "step" if self.width == 1 else f"{self.width}-step bin"
        return unjudged_title(self.result, title_text(
            self.result, self.site, self.variant,
            what or f"smallest and largest value used per {per}"))

    def ylabel(self) -> str:
        """The value axis' label, with its unit."""
        return f"value used ({value_unit(self.site, [t.name for t in self.lines])})"

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
        """(step, value, bad steps) of each value out of bounds of ``line`` in ``state``, the
        step and value as coordinates to draw (a bin's step is its centre)."""
        found = _violations(line.binned[line.binned["state"] == state])
        steps = exact_coords([step for step, _, _ in found])
        return [(step, float(value), count)
                for step, (_, value, count) in zip(steps, found, strict=True)]

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
    """What :func:`~forensics.present.plots.plot_bounds_timeline` draws for (site, variant)
    (defaults as it says).

    Raises:
        UnknownSiteError, UnknownVariantError: ``site`` or ``variant`` is not in the result.
    """
    variant = chosen_variant(result, variant)
    site = chosen_site(result, site, variant)
    frame, complete = bounds_frame(result, site, variant)
    tensors, omitted = tensors_to_draw(frame, tensor)
    origin = axis_origin(frame["step"]) if len(frame) else 0
    frame = frame.assign(step=frame["step"] - origin)  # drawn relative to the origin
    width = step_bin_width(frame["step"]) if len(frame) else 1
    drawn = frame[frame["tensor"].astype(str).isin(tensors)] if len(frame) else frame
    yorigin = value_origin(pd.concat([drawn[c] for c in VALUES])) if len(drawn) else None
    drawn = drawn.assign(**{c: drawn[c] - (yorigin or 0) for c in VALUES})  # as drawn
    verdicts = step_verdicts(result, site, variant)
    lines = [_timeline_tensor(_per_step(drawn[drawn["tensor"].astype(str) == name]), name,
                              TENSOR_COLORS[i % len(TENSOR_COLORS)], width, verdicts,
                              (origin, yorigin or 0))
             for i, name in enumerate(tensors)]
    suspects, tops = suspect_steps(result, site, variant, drawn, origin)
    return TimelineData(result, site, variant, width, complete, lines, omitted,
                        ([s - origin for s in suspects], tops),
                        density_of(result, site, variant, [line.name for line in lines], width,
                                   [line.binned for line in lines], MARK_STYLES, origin),
                        origin, yorigin)


def _timeline_tensor(steps: pd.DataFrame, name: str, color: str, width: int,
                     verdicts: dict[int, str] | None, origins: tuple[int, int]
                     ) -> TimelineTensor:
    """One tensor's steps (steps and values relative to ``origins``), each with its state
    (:func:`step_verdicts`: out of bounds, resolved or not judged; looked up by the exact
    step), binned ``width`` steps a point."""
    origin, yorigin = origins
    steps = steps.assign(state=[OPEN if verdicts is None
                                else verdicts.get(int(t) + origin, UNSEEN)
                                for t in steps["step"]])
    unresolved = steps[steps["state"] == OPEN]
    bad = [(int(a) + origin, b + yorigin) for a, b, _ in _violations(unresolved)]
    low = [(int(a) + origin, b + yorigin) for a, b, _ in _violations(unresolved, high=False)]
    return TimelineTensor(name, color, bin_steps(steps, width), bad, yorigin, frozenset(low))


def suspect_steps(result: Any, site: str, variant: str, frame: pd.DataFrame, origin: int = 0
                  ) -> tuple[list[int], list[int]]:
    """The steps with a misattributed finding (a suspect verdict) of (site, variant), and for
    each the top of the band there (the largest value of ``frame``, whose steps are relative
    to ``origin``, at that step, else 0; as ``frame`` holds it, relative to the values'
    origin), as exact integers."""
    found = rows_of(findings_of(result), site, variant)
    if not len(found):
        return [], []
    steps = sorted({int(s) for s in
                    exact_ints(found.loc[found["kind"] == "misattributed", "step"]).dropna()})
    top = ({int(k) + origin: v
            for k, v in frame.groupby("step")["max"].max().dropna().items()}
           if len(frame) else {})
    return steps, [int(top.get(step, 0)) for step in steps]


def first_note(x: int, y: int, extreme: str) -> str:
    """The text naming the first unresolved violation (step ``x``, and ``y``, that step's
    ``extreme`` value, "largest" or "smallest": exact integers, never rounded through a
    float)."""
    return f"first: step {int(x)}, {extreme} value {int(y)}"


def step_verdicts(result: Any, site: str, variant: str) -> dict[int, str] | None:
    """Per step with an out-of-bounds finding of ``variant`` at ``site``: :data:`OPEN` when
    one is unresolved and judged, else :data:`RESOLVED` when one is resolved, else
    :data:`UNSEEN` (the variant cannot judge it). None without a findings table: every
    value out of bounds is then drawn as such."""
    found = rows_of(findings_of(result), site, variant)
    if findings_of(result) is None:
        return None
    out: dict[int, str] = {}
    if not len(found):
        return out
    found = found[found["kind"] == "out_of_bounds"]
    judged = (found["judged"] != False) if "judged" in found else True  # noqa: E712
    resolved = found["resolved"] == True  # noqa: E712
    for step, state in ((found["step"][judged & ~resolved], OPEN),
                        (found["step"][judged & resolved], RESOLVED),
                        (found["step"][~judged] if "judged" in found else found["step"][:0],
                         UNSEEN)):
        for value in exact_ints(step).dropna():
            out.setdefault(int(value), state)
    return out


def step_bin_width(steps: pd.Series) -> int:
    """The width in steps of a dense timeline's bins: 1 up to :data:`DENSE_STEPS` distinct
    steps, else a round width (1, 2 or 5 x 10^k) giving at most :data:`TIMELINE_BINS` bins."""
    if steps.nunique() <= DENSE_STEPS:
        return 1
    span = float(int(steps.max()) - int(steps.min()) + 1)
    raw = span / TIMELINE_BINS
    scale = 10 ** int(np.floor(np.log10(raw)))
    return int(next(m * scale for m in (1, 2, 5, 10) if m * scale >= raw))


def bin_steps(steps: pd.DataFrame, width: int) -> pd.DataFrame:
    """:func:`_per_step`'s table aggregated into bins of ``width`` steps (each bin drawn at its
    centre, a coordinate; ``start``, its first step, exact): extremes and tightest bound of the
    bin, whether any step of it violated, and ``bad_steps``, how many did."""
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
              .assign(start=lambda f: f["step"],
                      step=lambda f: coords(f["step"]) + (width - 1) / 2))
    if state:
        binned["state"] = binned["state"].map({0: OPEN, 1: RESOLVED, 2: UNSEEN, 3: UNSEEN})
    return binned


def runs(x: np.ndarray, width: int) -> list[slice]:
    """The runs of ``x`` (a tensor's drawn steps, or a dense timeline's bin centres,
    ascending) a timeline draws each line, band and bound through: a run ends where the next
    point is more than one bin (``width`` steps; 1 when not dense) on. The steps between hold
    no record, and a line across them (step 0 to step 2**63-1) would say values were there:
    the lines break, each point keeps its own mark. The one rule of the SVG and the
    matplotlib views alike."""
    if not len(x):
        return []
    cuts = (np.flatnonzero(np.diff(np.asarray(x, dtype=float)) > 1.5 * width) + 1).tolist()
    bounds = [0, *cuts, len(x)]
    return [slice(a, b) for a, b in zip(bounds, bounds[1:], strict=False)]


def bin_edges(x: np.ndarray, width: int) -> np.ndarray:
    """``x`` with one point half a bin before the first and after the last."""
    if not len(x):
        return x
    return np.concatenate([[x[0] - width / 2], x, [x[-1] + width / 2]])


def padded_to_edges(values: np.ndarray) -> np.ndarray:
    """``values`` with its first and last repeated (see :func:`bin_edges`)."""
    if not len(values):
        return values
    return np.concatenate([values[:1], values, values[-1:]])


def _violations(steps: pd.DataFrame, high: bool = True) -> list[tuple[Any, Any, int]]:
    """(step, offending extreme, bad steps) of each row of ``steps`` that left its bound:
    the largest value above the bound (unless not ``high``) and the smallest below it, each
    once (exact integers for steps of one step each; a bin's step is its centre, half-way
    between two steps)."""
    count = steps["bad_steps"] if "bad_steps" in steps else pd.Series(1, index=steps.index)
    found = []
    for flag, column in (("bad_high", "max"), ("bad_low", "min"))[0 if high else 1:]:
        hit = steps[steps[flag]]
        found += [(a, int(b), int(c)) for a, b, c in
                  zip(hit["step"], hit[column], count[hit.index], strict=True)]
    return found


def _fmt_bound(values: pd.Series, origin: int = 0) -> str:
    """A bound's text: its value, or its range over the steps ("unknown" when no step states
    it); ``values`` relative to ``origin``, the text exact."""
    known = exact_ints(values).dropna()
    if not len(known):
        return "unknown"
    lo, hi = int(known.min()) + origin, int(known.max()) + origin
    return f"{lo}" if lo == hi else f"{lo}..{hi}"
