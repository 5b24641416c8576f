"""Counts per step bin for a timeline whose steps outnumber its bins.

A dense timeline (:func:`forensics.present.plots.timeline_data`: more steps than the plot has
bins) cannot draw each step: its min..max band over a bin of a long capture spans the whole
value range, and a bin with one bad step among hundreds is as red as one where every step is
bad. Instead it draws, per bin, how many values out of bounds it holds (a density), stacked
by how the variant judges them: out of bounds, resolved, not judged. The values counted are
the variant's ``out_of_bounds`` findings of the site's drawn tensors (one per element); a
result without a findings table counts the steps whose extremes left their bound instead
(:attr:`BinDensity.unit` says which).

:mod:`forensics.present.svg.timeline` draws it for the report, :func:`draw_density` on a
matplotlib Axes (:func:`forensics.present.plots.plot_bounds_timeline`), with the same texts;
matplotlib is imported only there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from forensics.present.plots import TimelineData

#: what a density counts, with a findings table and without one
VALUES, STEPS = "values out of bounds", "steps with a value out of bounds"


@dataclass(frozen=True)
class BinDensity:
    """Per bin of ``width`` steps holding any value out of bounds: its first step and, per
    state (:data:`forensics.present.plots.MARK_STYLES`' order), how many it holds."""

    width: int
    starts: list[int]
    counts: dict[str, list[int]]
    unit: str

    def totals(self) -> list[int]:
        """Each bin's count, every state together."""
        return [int(sum(column)) for column in zip(*self.counts.values(), strict=True)] \
            if self.counts else []

    def ylabel(self) -> str:
        """The count axis' label: what is counted, per how many steps."""
        return f"{self.unit} per {self.width}-step bin"

    def stacked(self) -> list[tuple[str, int, int, int]]:
        """(state, bin start, bottom, top) of every bar, the states stacked in order."""
        bottom = np.zeros(len(self.starts), dtype=np.int64)
        bars = []
        for state, column in self.counts.items():
            for i, count in enumerate(column):
                if count:
                    bars.append((state, self.starts[i], int(bottom[i]), int(bottom[i] + count)))
            bottom += np.asarray(column, dtype=np.int64)
        return bars


def _states(found: pd.DataFrame) -> np.ndarray:
    """Each finding's state: not judged, else resolved, else out of bounds."""
    from forensics.present import plots

    everyone = pd.Series(True, index=found.index)
    judged = (found["judged"] != False) if "judged" in found else everyone  # noqa: E712
    resolved = (found["resolved"] == True) if "resolved" in found else ~everyone  # noqa: E712
    return np.where(~judged.to_numpy(dtype=bool), plots.UNSEEN,
                    np.where(resolved.to_numpy(dtype=bool), plots.RESOLVED, plots.OPEN))


def bin_density(findings: pd.DataFrame | None, tensors: list[str], width: int,
                binned: list[pd.DataFrame]) -> BinDensity:
    """The density of a dense timeline: ``findings`` (the variant's, at the site; None: the
    result has no findings table) counted per bin of ``width`` steps, those of ``tensors``
    only; without findings, the bad steps of each tensor's ``binned`` steps
    (:func:`forensics.present.plots.bin_steps`: ``bad_steps`` and ``state`` per bin)."""
    from forensics.present import plots

    order = [state for state, _, _ in plots.MARK_STYLES]
    if findings is None:
        frames = [b.assign(start=(b["step"] - (width - 1) / 2).round().astype("int64"),
                           count=b["bad_steps"],
                           state=b["state"] if "state" in b else plots.OPEN)
                  for b in binned if len(b)]
        table = (pd.concat(frames, ignore_index=True) if frames
                 else pd.DataFrame(columns=["start", "count", "state"]))
        unit = STEPS
    else:
        found = (findings[findings["kind"] == "out_of_bounds"]
                 if {"kind", "step"} <= set(findings.columns) else pd.DataFrame(columns=["step"]))
        if "tensor" in found.columns:
            found = found[found["tensor"].astype(str).isin(tensors)]
        steps = pd.to_numeric(found["step"]).to_numpy(dtype=np.int64)
        table = pd.DataFrame({"start": (steps // width) * width, "count": 1,
                              "state": _states(found)})
        unit = VALUES
    table = table[table["count"] > 0]
    counts = table.pivot_table(index="start", columns="state", values="count", aggfunc="sum",
                               fill_value=0) if len(table) else pd.DataFrame()
    starts = [int(s) for s in counts.index]
    return BinDensity(width, starts, {state: [int(v) for v in counts[state]]
                                      for state in order if state in counts.columns}, unit)


def first_bin_top(density: BinDensity, step: float) -> float:
    """The height of the bar stack of the bin holding ``step`` (0 when it has none)."""
    start = int(step // density.width) * density.width
    totals = dict(zip(density.starts, density.totals(), strict=True))
    return float(totals.get(start, 0))


def density_of(result: Any, site: str, variant: str, tensors: list[str], width: int,
               binned: list[pd.DataFrame]) -> BinDensity | None:
    """:func:`bin_density` of (site, variant) of ``result`` when the timeline is dense
    (``width`` > 1), else None."""
    if width <= 1:
        return None
    table = getattr(result, "findings", None)
    found = None
    if isinstance(table, pd.DataFrame):
        found = (table[(table["site"] == site) & (table["variant"] == variant)]
                 if {"site", "variant"} <= set(table.columns) else table.iloc[0:0])
    return bin_density(found, tensors, width, binned)


def bar_label(data: TimelineData, state: str) -> str:
    """The legend text of the bars of ``state`` (the drawn tensors named once, on the bars
    out of bounds)."""
    from forensics.present import plots

    tensors = ", ".join(line.name for line in data.lines)
    return {plots.OPEN: f"out of bounds ({tensors})",
            plots.RESOLVED: f"resolved by {data.variant}",
            plots.UNSEEN: f"not judged by {data.variant}"}[state]


def density_title(data: TimelineData, density: BinDensity) -> str:
    """The title of a dense timeline: the capture, site and variant, and what is counted."""
    from forensics.present import plots

    return plots.title_text(data.result, data.site, data.variant, density.ylabel())


def empty_text(data: TimelineData, density: BinDensity) -> str:
    """What a dense timeline without a value out of bounds says."""
    return f"no {density.unit} for {data.site} under {data.variant}"


def open_centres(density: BinDensity) -> list[float]:
    """The centre step of each bin holding a value out of bounds (a line is drawn there)."""
    from forensics.present import plots

    return [start + (density.width - 1) / 2 for state, start, _, _ in density.stacked()
            if state == plots.OPEN]


def draw_density(ax: Axes, data: TimelineData, density: BinDensity) -> None:
    """The dense timeline ``data`` as counts per bin on ``ax``: a stack of bars per bin (one
    colour per state), a thin line at each bin out of bounds, the suspect steps along the
    bottom, the first violation noted, title and axis labels."""
    from forensics.present import plots

    colors = {state: color for state, _, color in plots.MARK_STYLES}
    labelled: set[str] = set()
    for state, start, bottom, top in density.stacked():
        label = bar_label(data, state)
        ax.bar(start + (density.width - 1) / 2, top - bottom, width=density.width,
               bottom=bottom, color=colors[state], linewidth=0,
               label=None if label in labelled else plots._mathsafe(label))
        labelled.add(label)
    for x in open_centres(density):
        ax.axvline(x, color=plots.VIOLATION_COLOR, lw=0.8, alpha=0.5, zorder=4)
    steps, _ = data.suspects
    if steps:
        ax.scatter(steps, [0.0] * len(steps), marker="D", s=36, facecolor="none",
                   edgecolor=plots.SUSPECT_COLOR, linewidths=1.5, zorder=6,
                   label=plots.SUSPECT_LABEL)
    ceiling = max([*density.totals(), 1]) * 1.25
    ax.set_ylim(0, ceiling)
    xs = [float(x) for line in data.lines for x in line.binned["step"]]
    ax.set_xlim(min(xs) - density.width / 2, max(xs) + density.width / 2)
    if data.first is not None:  # towards the middle, so the note stays inside the axes
        step, value = data.first
        y = first_bin_top(density, step)
        dy = -30 if y > ceiling / 2 else 30
        ax.annotate(plots.first_note(step, value), (step, y), textcoords="offset points",
                    xytext=(14, dy), va="top" if dy < 0 else "bottom", fontsize=8,
                    color=plots.VIOLATION_COLOR, zorder=7,
                    arrowprops={"arrowstyle": "->", "color": plots.VIOLATION_COLOR, "lw": 0.8},
                    bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none",
                          "alpha": 0.85})
    if not density.starts:
        ax.text(0.5, 0.5, plots._mathsafe(empty_text(data, density)), transform=ax.transAxes,
                ha="center", va="center", color="#555555")
    ax.set_title(plots._mathsafe(density_title(data, density)), fontsize=10)
    ax.set_xlabel("engine step")
    ax.set_ylabel(density.ylabel())
