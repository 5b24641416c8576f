"""The rows x steps heatmap's scene: per cell the distance past the bound of the findings still
out of bounds there, the checked steps, the written values, and the suspect and settled cells."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from forensics.present.selection import (
    bounds_frame,
    chosen_site,
    chosen_variant,
    exact_ints,
    findings_of,
    out_of_bounds,
    rows_of,
    title_text,
)
from forensics.present.style import (
    DENSE_ROWS,
    DENSE_STEPS,
    HEATMAP_WHAT,
    RESOLVED,
    STEP_LABELS,
    UNSEEN,
)

#: the most cells a heatmap draws along its steps and along its rows: past them neighbouring
#: steps (rows) share a cell, coloured by the largest distance among them (a grid of every row
#: of a 20,000-request batch by each of 2,000 steps drew in 4.5 GB and 39 s; ten times both, a
#: 2 MB capture, asked for hundreds of gigabytes)
MAX_STEP_CELLS, MAX_ROW_CELLS = 10_000, 512


def distance_past_bound(value: Any, lower: Any, upper: Any) -> list[int]:
    """How far each of ``value`` lies outside ``[lower, upper)`` (each a sequence like
    ``value``, or one number for all), exactly (Python ints: from -2**63 to 2**63 - 1 is past
    int64): 0 inside or unknown, 1 for ``upper`` or ``lower - 1`` (the first invalid value on
    either side), growing outwards."""
    n = len(value)
    out = []
    for v, lo, hi in zip(*(exact_ints([a] * n if np.ndim(a) == 0 else a)
                           .to_numpy(dtype=object, na_value=None)
                           for a in (value, lower, upper)), strict=True):
        above = int(v) - int(hi) + 1 if v is not None and hi is not None and v >= hi else 0
        below = int(lo) - int(v) if v is not None and lo is not None and v < lo else 0
        out.append(above + below)
    return out


@dataclass
class HeatmapData:
    """What a rows x steps heatmap of (site, variant) shows, for either renderer.

    ``grid[row cell, step cell]`` is the largest distance past the bound of the findings
    still out of bounds there (0: none; a cell is one row and one step, or neighbouring ones
    past :data:`MAX_ROW_CELLS`, :data:`MAX_STEP_CELLS`; ``rows`` and ``steps`` give each cell's
    first); ``checked`` the step indices where the site was
    checked; ``written`` the (row index, step index, value) cells whose value is written;
    ``suspects`` the cells of misattributed findings; ``settled`` per state (:data:`RESOLVED`,
    :data:`UNSEEN`) the cells of findings that are not out of bounds for this variant;
    ``farthest`` the largest distance, exact (the grid's floats colour, never label). Steps,
    rows and values are exact integers.
    """

    title: str
    variant: str
    steps: list[int]
    rows: list[int]
    grid: np.ndarray
    checked: list[int]
    written: list[tuple[int, int, int]]
    suspects: tuple[np.ndarray, np.ndarray] | None
    settled: list[tuple[str, np.ndarray, np.ndarray]]
    empty: str | None = None
    farthest: int = 0

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
        return [(i, str(self.steps[i])) for i in step_ticks(self.steps, most=STEP_LABELS)]

    def yticks(self) -> list[tuple[int, str]]:
        """(row index, label) of the labelled rows (``summary`` for a summary record's row)."""
        return [(i, "summary" if self.rows[i] < 0 else str(self.rows[i]))
                for i in _thin(len(self.rows))]

    def settled_label(self, state: str) -> str:
        """The legend text of settled cells in ``state``."""
        return f"{state} by {self.variant}"


def heatmap_data(result: Any, site: str | None = None, variant: str | None = None,
                 align: Sequence[str] | None = None) -> HeatmapData:
    """The data of :func:`~forensics.present.plots.plot_row_heatmap` (``align``: the variants
    whose steps and rows the grid spans too)."""
    variant = chosen_variant(result, variant)
    site = chosen_site(result, site, variant)
    title = title_text(result, site, variant, HEATMAP_WHAT)
    oob, settled = open_and_settled(_with_steps(out_of_bounds(result, site, variant)))
    steps, rows = _heatmap_span(result, site, [variant, *(align or [])])
    if not len(steps.values):
        return HeatmapData(title, variant, [], rows.labels(), np.zeros((rows.count, 0)), [], [],
                           None, [], empty=f"no records for {site} under {variant}")
    checked = sorted({int(i) for i in steps.of(sorted(_checked_steps(result, site, variant)))})
    findings = rows_of(findings_of(result), site, variant)
    distances = distance_past_bound(oob.get("value", []), oob.get("lower", []),
                                    oob.get("upper", []))
    return HeatmapData(title, variant, steps.labels(), rows.labels(),
                       _heatmap_grid(oob, distances, steps, rows), checked,
                       _written_cells(oob, steps, rows), _suspect_cells(findings, steps, rows),
                       _settled_cells(settled, steps, rows), farthest=max(distances, default=0))


def _with_steps(oob: pd.DataFrame) -> pd.DataFrame:
    """The findings of ``oob`` at a known step (a finding of no step has no column)."""
    return oob[oob["step"].notna()] if len(oob) else oob


@dataclass(frozen=True)
class Cells:
    """The sorted distinct ``values`` (int64, exact) along one heatmap axis, drawn in at most
    ``most`` cells: value ``i`` in cell ``i * count // len(values)`` (neighbours share a cell
    past ``most``)."""

    values: np.ndarray
    most: int

    @property
    def count(self) -> int:
        """How many cells the axis draws."""
        return min(len(self.values), self.most)

    def of(self, values: Any) -> np.ndarray:
        """The cell of each of ``values`` (each one of :attr:`values`)."""
        at = np.searchsorted(self.values, np.asarray(values, dtype="int64"))
        return np.asarray(at * self.count // max(len(self.values), 1), dtype=int)

    def labels(self) -> list[int]:
        """The first value of each cell."""
        n, count = len(self.values), self.count
        return [int(v) for v in self.values[(np.arange(count) * n + count - 1) // count]]


def open_and_settled(oob: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The out-of-bounds findings split: those still out of bounds (judged, unresolved), and
    the others (resolved, or not judged), which are never coloured as out of bounds."""
    if not len(oob):
        return oob, oob
    settled = oob["resolved"] == True  # noqa: E712
    if "judged" in oob:
        settled |= oob["judged"] == False  # noqa: E712
    return oob[~settled], oob[settled]


def _settled_cells(settled: pd.DataFrame, steps: Cells, rows: Cells
                   ) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(state, row cells, step cells) of the resolved findings' cells and of the cells of
    findings the variant cannot judge (states without cells left out)."""
    if not len(settled):
        return []
    settled = settled[exact_ints(settled["step"]).isin(steps.values).fillna(False)
                      .to_numpy(dtype=bool)]
    ri, si = _cell_index(settled, steps, rows)
    resolved = (settled["resolved"] == True).to_numpy()  # noqa: E712
    return [(state, np.asarray(ri)[mask], np.asarray(si)[mask])
            for state, mask in ((RESOLVED, resolved), (UNSEEN, ~resolved)) if mask.any()]


def _heatmap_span(result: Any, site: str, variants: Sequence[str]) -> tuple[Cells, Cells]:
    """The steps (checked or offending) and rows of ``site`` over ``variants``, sorted, in
    at most :data:`MAX_STEP_CELLS` and :data:`MAX_ROW_CELLS` cells."""
    steps: set[int] = set()
    rows: set[int] = set()
    for name in dict.fromkeys(variants):
        oob = out_of_bounds(result, site, name)
        steps |= _checked_steps(result, site, name) | _ints(oob.get("step", []))
        rows |= set(_heatmap_rows(oob, rows_of(findings_of(result), site, name)))
    return (Cells(np.array(sorted(steps), dtype="int64"), MAX_STEP_CELLS),
            Cells(np.array(sorted(rows) or [0], dtype="int64"), MAX_ROW_CELLS))


def _ints(values: Any) -> set[int]:
    """The distinct known values of ``values`` as exact Python ints."""
    return {int(v) for v in exact_ints(values).dropna()}


def _checked_steps(result: Any, site: str, variant: str) -> set[int]:
    """Steps at which the site was checked: from ``bounds``, else from the result's records."""
    frame, complete = bounds_frame(result, site, variant)
    steps = _ints(frame["step"]) if len(frame) else set()
    if not complete:
        records = getattr(result, "records", None)
        if isinstance(records, list):
            steps |= _ints([r.step for r in records if getattr(r, "site", None) == site])
    return steps


def _rows(frame: pd.DataFrame) -> pd.Series:
    """Each finding's batch row, exact (-1: a summary record's, of no row)."""
    return exact_ints(frame["row"]).fillna(-1)


def _heatmap_rows(oob: pd.DataFrame, findings: pd.DataFrame) -> list[int]:
    rows: set[int] = set()
    for frame in (oob, findings):
        if len(frame):
            rows |= _ints(_rows(frame))
    if not rows:
        return [0]
    numbered = [r for r in rows if r >= 0]
    dense = list(range(max(numbered) + 1)) if numbered else []
    return ([-1] if -1 in rows else []) + dense


def _cell_index(frame: pd.DataFrame, steps: Cells, rows: Cells) -> tuple[np.ndarray, np.ndarray]:
    """(row cell, step cell) of each finding of ``frame`` (every one at a step of ``steps``)."""
    return (rows.of(_rows(frame).to_numpy(dtype="int64")),
            steps.of(exact_ints(frame["step"]).to_numpy(dtype="int64")))


def _heatmap_grid(oob: pd.DataFrame, distances: list[int], steps: Cells, rows: Cells
                  ) -> np.ndarray:
    """Per cell the largest of ``distances`` (one per finding of ``oob``), as a float: a
    colour, never a label (:attr:`HeatmapData.farthest` is the exact one)."""
    grid = np.zeros((rows.count, steps.count))
    if len(oob):
        ri, si = _cell_index(oob, steps, rows)
        np.maximum.at(grid, (ri, si), np.asarray([float(d) for d in distances]))
    return grid


def _written_cells(oob: pd.DataFrame, steps: Cells, rows: Cells
                   ) -> list[tuple[int, int, int]]:
    """(row index, step index, value) of the first finding of each offending cell, on a grid
    of at most 400 cells (on a larger one the values are not written)."""
    if not len(oob) or steps.count * rows.count > 400:
        return []
    ri, si = _cell_index(oob, steps, rows)
    cells: dict[tuple[int, int], int] = {}
    for r, s, value in zip(ri, si, exact_ints(oob["value"]), strict=True):
        if value is not pd.NA:
            cells.setdefault((int(r), int(s)), int(value))
    return [(r, s, value) for (r, s), value in cells.items()]


def _suspect_cells(findings: pd.DataFrame, steps: Cells, rows: Cells
                   ) -> tuple[np.ndarray, np.ndarray] | None:
    """(row cells, step cells) of the ``misattributed`` findings' cells, None without."""
    if not len(findings):
        return None
    sus = findings[findings["kind"] == "misattributed"]
    sus = sus[exact_ints(sus["step"]).isin(steps.values).fillna(False).to_numpy(dtype=bool)]
    if not len(sus):
        return None
    return _cell_index(sus, steps, rows)


def step_ticks(steps: list[int], most: int = STEP_LABELS) -> list[int]:
    """Positions in ``steps`` (sorted, exact) to label: at most ``most``, at round step numbers
    (multiples of 1, 2 or 5 x 10^k) where the steps hold them, so labels read 1000, 2000...
    rather than 1, 1251, 2501... (in integers: at 2**62 a float is 1024 steps wide)."""
    if len(steps) <= most:
        return list(range(len(steps)))
    span = max(steps[-1] - steps[0], 1)
    scale = 10 ** (len(str(max(span // most, 1))) - 1)
    width = next(m * scale for m in (1, 2, 5, 10) if m * scale * most >= span)
    first = -(-steps[0] // width) * width
    found = (bisect.bisect_left(steps, wanted) for wanted in range(first, steps[-1] + 1, width))
    return sorted({i for i in found if i < len(steps)})[:most]


def _thin(n: int, most: int = 20) -> list[int]:
    stride = max(1, int(np.ceil(n / most)))
    return list(range(0, n, stride))
