"""Counts per step bin for a timeline whose steps outnumber its bins.

A dense timeline (:func:`forensics.present.scene.timeline.timeline_data`: more steps than
the plot has bins) cannot draw each step: its min..max band over a bin of a long capture
spans the whole value range, and a bin with one bad step among hundreds is as red as one
where every step is bad. Instead it draws, per bin, how many values out of bounds it holds (a
density), stacked by how the variant judges them: out of bounds, resolved, not judged. The
values counted are the variant's ``out_of_bounds`` findings of the site's drawn tensors (one
per element); a result without a findings table counts the steps whose extremes left their
bound instead (:attr:`BinDensity.unit` says which).

:mod:`forensics.present.svg.timeline` draws it for the report, :func:`draw_density` on a
matplotlib Axes (:func:`forensics.present.plots.plot_bounds_timeline`), with the same texts
(:meth:`BinDensity.label`). This module imports nothing of :mod:`forensics.present.plots`
(which calls it): the states and their colours come from the caller (``styles``, plots'
``MARK_STYLES``), and matplotlib only with an Axes to draw on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from forensics.present.selection import exact_ints

if TYPE_CHECKING:
    from matplotlib.axes import Axes

#: what a density counts, with a findings table and without one
VALUES, STEPS = "values out of bounds", "steps with a value out of bounds"


@dataclass(frozen=True)
class BinDensity:
    """Per bin of ``width`` steps holding any value out of bounds: its first step and, per
    state (in ``styles``' order: out of bounds, resolved, not judged), how many it holds; the
    states' colours and legend texts."""

    width: int
    starts: list[int]
    counts: dict[str, list[int]]
    unit: str
    colors: dict[str, str]
    labels: dict[str, str]

    def totals(self) -> list[int]:
        """Each bin's count, every state together."""
        return [int(sum(column)) for column in zip(*self.counts.values(), strict=True)] \
            if self.counts else []

    def ylabel(self) -> str:
        """The count axis' label: what is counted, per how many steps."""
        return f"{self.unit} per {self.width}-step bin"

    def label(self, state: str) -> str:
        """The legend text of the bars of ``state``."""
        return self.labels[state]

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

    def open_centres(self) -> list[float]:
        """The centre step of each bin holding a value out of bounds (the first state)."""
        first = next(iter(self.labels))
        return [start + (self.width - 1) / 2 for state, start, _, _ in self.stacked()
                if state == first]

    def top_at(self, step: int) -> float:
        """The height of the bar stack of the bin holding ``step`` (0 when it has none)."""
        start = int(step // self.width) * self.width
        return float(dict(zip(self.starts, self.totals(), strict=True)).get(start, 0))

    def empty_text(self, site: str, variant: str) -> str:
        """What a dense timeline without a value out of bounds says."""
        return f"no {self.unit} for {site} under {variant}"


def _states(found: pd.DataFrame, states: Sequence[str]) -> np.ndarray:
    """Each finding's state (``states``: out of bounds, resolved, not judged): not judged,
    else resolved, else out of bounds."""
    open_, resolved_, unseen = states
    everyone = pd.Series(True, index=found.index)
    judged = (found["judged"] != False) if "judged" in found else everyone  # noqa: E712
    resolved = (found["resolved"] == True) if "resolved" in found else ~everyone  # noqa: E712
    return np.where(~judged.to_numpy(dtype=bool), unseen,
                    np.where(resolved.to_numpy(dtype=bool), resolved_, open_))


def _labels(states: Sequence[str], tensors: list[str], variant: str) -> dict[str, str]:
    """The legend text of each state's bars (the drawn tensors named on the first)."""
    return dict(zip(states, (f"out of bounds ({', '.join(tensors)})", f"resolved by {variant}",
                             f"not judged by {variant}"), strict=True))


def bin_density(findings: pd.DataFrame | None, tensors: list[str], width: int,
                binned: list[pd.DataFrame], styles: Sequence[tuple[str, str, str]],
                variant: str = "", origin: int = 0) -> BinDensity:
    """The density of a dense timeline: ``findings`` (the variant's, at the site; None: the
    result has no findings table) counted per bin of ``width`` steps, those of ``tensors``
    only; without findings, the bad steps of each tensor's ``binned`` steps
    (:func:`forensics.present.scene.timeline.bin_steps`: ``start``, ``bad_steps`` and
    ``state`` per bin). Steps are exact integers: a bin's start is never read back from its
    centre through a float; they are counted relative to ``origin``, as ``binned`` is.
    ``styles``: (state, marker, colour) of out of bounds, resolved and not judged."""
    states = [state for state, _, _ in styles]
    if findings is None:
        frames = [b.assign(count=b["bad_steps"],
                           state=b["state"] if "state" in b else states[0])
                  for b in binned if len(b)]
        table = (pd.concat(frames, ignore_index=True) if frames
                 else pd.DataFrame(columns=["start", "count", "state"]))
        unit = STEPS
    else:
        found = (findings[findings["kind"] == "out_of_bounds"]
                 if {"kind", "step"} <= set(findings.columns) else pd.DataFrame(columns=["step"]))
        if "tensor" in found.columns:
            found = found[found["tensor"].astype(str).isin(tensors)]
        steps = exact_ints(found["step"]) - origin
        table = pd.DataFrame({"start": (steps // width) * width, "count": 1,
                              "state": _states(found, states)}).dropna(subset=["start"])
        unit = VALUES
    table = table[table["count"] > 0]
    counts = table.pivot_table(index="start", columns="state", values="count", aggfunc="sum",
                               fill_value=0) if len(table) else pd.DataFrame()
    return BinDensity(width, [int(s) for s in counts.index],
                      {state: [int(v) for v in counts[state]]
                       for state in states if state in counts.columns}, unit,
                      {state: color for state, _, color in styles},
                      _labels(states, tensors, variant))


def density_of(result: Any, site: str, variant: str, tensors: list[str], width: int,
               binned: list[pd.DataFrame], styles: Sequence[tuple[str, str, str]],
               origin: int = 0) -> BinDensity | None:
    """:func:`bin_density` of (site, variant) of ``result`` when the timeline is dense
    (``width`` > 1), else None."""
    if width <= 1:
        return None
    table = getattr(result, "findings", None)
    found = None
    if isinstance(table, pd.DataFrame):
        found = (table[(table["site"] == site) & (table["variant"] == variant)]
                 if {"site", "variant"} <= set(table.columns) else table.iloc[0:0])
    return bin_density(found, tensors, width, binned, styles, variant, origin)


@dataclass(frozen=True)
class Marks:
    """What a dense timeline marks besides its bars (decided by the caller): the steps' extent
    on x, the first violation (step, value) and its note, the suspect steps with their colour
    and legend."""

    span: tuple[float, float] | None
    first: tuple[int, int] | None
    first_text: str
    suspects: list[int]
    suspect_color: str
    suspect_label: str


def draw_density(ax: Axes, density: BinDensity, title: str, marks: Marks,
                 escape: Callable[[str], str]) -> None:
    """``density`` on ``ax``: a stack of bars per bin (one colour per state), a thin line at
    each bin out of bounds, the suspect steps along the bottom, the first violation noted
    (towards the middle, inside the axes), ``title`` and the axis labels; ``escape`` makes a
    text safe for matplotlib."""
    labelled: set[str] = set()
    for state, start, bottom, top in density.stacked():
        label = density.label(state)
        ax.bar(start + (density.width - 1) / 2, top - bottom, width=density.width,
               bottom=bottom, color=density.colors[state], linewidth=0,
               label=None if label in labelled else escape(label))
        labelled.add(label)
    line_color = next(iter(density.colors.values()))
    for x in density.open_centres():
        ax.axvline(x, color=line_color, lw=0.8, alpha=0.5, zorder=4)
    if marks.suspects:
        ax.scatter([float(s) for s in marks.suspects], [0.0] * len(marks.suspects),
                   marker="D", s=36, facecolor="none", edgecolor=marks.suspect_color,
                   linewidths=1.5, zorder=6, label=marks.suspect_label)
    ceiling = max([*density.totals(), 1]) * 1.25
    ax.set_ylim(0, ceiling)
    if marks.span is not None:
        ax.set_xlim(*marks.span)
    if marks.first is not None:
        step, _ = marks.first
        y = density.top_at(step)
        dy = -30 if y > ceiling / 2 else 30
        ax.annotate(marks.first_text, (float(step), y), textcoords="offset points",
                    xytext=(14, dy), va="top" if dy < 0 else "bottom", fontsize=8,
                    color=line_color, zorder=7,
                    arrowprops={"arrowstyle": "->", "color": line_color, "lw": 0.8},
                    bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none",
                          "alpha": 0.85})
    ax.set_title(escape(title), fontsize=10)
    ax.set_xlabel("engine step")
    ax.set_ylabel(density.ylabel())
