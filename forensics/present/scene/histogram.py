"""The value histogram's scene: the value axis (linear, or two windows around the bounds with a
break), the counts per bin of in-range extremes and of offending values, and the sentinels."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from forensics.present.scene.heatmap import open_and_settled, step_ticks
from forensics.present.selection import (
    EXACT_FLOAT,
    TensorChoice,
    bounds_frame,
    chosen_site,
    chosen_variant,
    exact_ints,
    is_id_tensor,
    out_of_bounds,
    tensors_to_draw,
    title_text,
    value_unit,
)
from forensics.present.style import (
    HISTOGRAM_WHAT,
    OUT_LABEL,
    OUT_MIXED_LABEL,
    OUT_SUMMARY_LABEL,
    PLACEHOLDER_NOTE,
)

#: the widest a window grows to take in the vocabulary's sentinel beside the upper bound (a
#: bin per value: a record's bound 2**24 away from the others' once asked for 2**26 bins)
MAX_WINDOW = 1024


def _histogram_data(result: Any, site: str, variant: str, tensor: TensorChoice
                    ) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, list[str], list[str],
                               tuple[int, int], int]:
    """(bounds rows drawn, in-range extremes of each record, every offending value the variant
    leaves out of bounds (int64, exact), tensors drawn, tensors omitted for being on another
    scale, the offending values it resolves and cannot judge: never drawn as out of bounds,
    as the heatmap colours none of them, and how many drawn are of summary records)."""
    frame, _ = bounds_frame(result, site, variant)
    oob = out_of_bounds(result, site, variant)
    drawn, omitted = tensors_to_draw(frame, tensor)
    if drawn or tensor is not None:
        frame = frame[frame["tensor"].astype(str).isin(drawn)]
        oob = oob[oob["tensor"].astype(str).isin(drawn)] if len(oob) else oob
    oob, settled = open_and_settled(oob)
    resolved = int((settled["resolved"] == True).sum()) if len(settled) else 0  # noqa: E712
    inside = np.array([], dtype="int64")
    for column in ("min", "max") if len(frame) else ():
        ok = ((frame[column] >= frame["lower"]) & (frame[column] < frame["upper"])).fillna(False)
        inside = np.concatenate([inside, frame.loc[ok.to_numpy(dtype=bool), column]
                                 .dropna().to_numpy(dtype="int64")])
    oob = oob[oob["value"].notna().to_numpy(dtype=bool)] if len(oob) else oob
    outside = (oob["value"].to_numpy(dtype="int64") if len(oob)
               else np.array([], dtype="int64"))
    return frame, inside, outside, drawn, omitted, (resolved, len(settled) - resolved), \
        summary_values(result, oob)


def summary_values(result: Any, findings: pd.DataFrame) -> int:
    """How many of ``findings`` are of summary records (a log's or a dump's least and greatest
    values: the record's other elements are not known), by the result's index, else its
    records."""
    if not len(findings) or "record" not in findings:
        return 0
    index = getattr(result, "index", None)
    if index is not None and "summary" in index:
        flags = [bool(flag) for flag in index["summary"].tolist()]
    else:
        flags = [bool(getattr(r, "summary", False)) for r in getattr(result, "records", [])]
    positions = [int(r) for r in findings["record"].dropna().tolist()]
    return sum(flags[r] for r in positions if 0 <= r < len(flags))


def named_vocab(result: Any) -> int | None:
    """The vocabulary size the capture's manifest names (None: not named, or not a count)."""
    from forensics.manifest_facts import VOCAB, read_fact

    manifest = getattr(getattr(result, "capture", None), "manifest", None)
    return read_fact(manifest or {}, VOCAB)[0]


def _vocab_of(result: Any, site: str, frame: pd.DataFrame) -> int | None:
    """The vocabulary whose rejection sentinel a histogram of ``frame`` draws: the one the
    manifest names (:func:`named_vocab`), else the most common bound of its token-id
    tensors; None where it holds none (row indices, positions: no token id is drawn)."""
    if not len(frame):
        return None
    ids = frame[[is_id_tensor(site, str(t)) for t in frame["tensor"]]]
    uppers = ids["upper"].dropna()
    if not len(ids):
        return None
    return named_vocab(result) or (int(uppers.mode().iloc[0]) if len(uppers) else None)


def _exact(values: Any) -> np.ndarray:
    """``values`` as an object array of Python ints (and floats where given), for arithmetic
    past int64 (``upper + window``) and past float64's exact integers (2**53)."""
    if isinstance(values, np.ndarray):
        return values.astype(object)
    out = np.empty(len(values), dtype=object)  # a list of ints past int64 is not made float
    out[:] = list(values)
    return out


class ValueAxis:
    """Maps values (exact integers) to x positions: one linear stretch, or two windows (around
    ``lower`` and ``upper``) joined by a break when the valid range is wide. Positions are
    floats to draw; they are computed exactly and relative to the windows (or, past
    :data:`EXACT_FLOAT`, to the first value), so neighbouring values never share one."""

    def __init__(self, lower: int, upper: int, window: int, values: np.ndarray) -> None:
        self.lower, self.upper, self.window = lower, upper, window
        lo = min(lower - 1, int(values.min())) if len(values) else lower - 1
        hi = max(upper, int(values.max())) if len(values) else upper
        self.broken = (hi - lo) > 6 * window
        self.gap = max(2, window // 4)
        self.start, self.stop = (int(lo), int(hi)) if not self.broken else (0, 0)
        self.origin = self.start if max(abs(self.start), abs(self.stop)) > EXACT_FLOAT else 0

    def pos(self, values: Any) -> np.ndarray:
        """x position of each value (values beyond a window sit on its edge)."""
        v = _exact(values)
        if not self.broken:
            return np.asarray(v - self.origin, dtype="float64")
        w = self.window
        left = np.clip(v - (self.lower - w), 0, 2 * w - 1)
        right = np.clip(v - (self.upper - w), 0, 2 * w - 1) + 2 * w + self.gap
        return np.asarray(np.where(2 * v < self.lower + self.upper, left, right),
                          dtype="float64")

    def shown(self, values: Any) -> np.ndarray:
        """Mask of the values inside a window (all of them on a linear axis)."""
        v = _exact(values)
        if not self.broken:
            return np.ones(len(v), dtype=bool)
        w = self.window
        return np.asarray((np.abs(v - self.lower) < w) | (np.abs(v - self.upper) < w),
                          dtype=bool)

    def bins(self) -> np.ndarray:
        if not self.broken:
            return np.arange(self.start - self.origin - 0.5, self.stop - self.origin + 1.5)
        return np.arange(-0.5, 4 * self.window + self.gap)

    def ticks(self) -> tuple[list[float], list[str]]:
        """(position, label) of the labelled values: around both bounds on a broken axis, at
        round values on a linear one drawn from its first value, else none (the renderer's
        own ticks are then exact)."""
        if not self.broken:
            if not self.origin:
                return [], []
            values = list(range(self.start, self.stop + 1))
            values = [values[i] for i in step_ticks(values, most=6)]
        else:
            w = self.window
            values = [self.lower - w // 2, self.lower, self.upper - w // 2, self.upper,
                      self.upper + w // 2]
        return list(self.pos(values)), [str(v) for v in values]


@dataclass
class HistogramData:
    """What the value histogram of (site, variant) shows, for either renderer.

    ``lower`` and ``upper`` are the valid range's bounds as the records state them (None: not
    known; the axis is then laid out from 0, or past the largest offending value, but no label
    names that as a bound); ``edges`` are the bins' edges on the axis' positions
    (:class:`ValueAxis`), ``inside`` and ``outside`` the counts per bin of in-range extremes
    and of offending values (None without any value); ``hidden``: in-range values far from
    both bounds, not shown; ``sentinels``: (value, note, side) of each sentinel the axis
    shows.
    """

    title: str
    xlabel: str
    axis: ValueAxis
    lower: int | None
    upper: int | None
    edges: np.ndarray | None
    inside: np.ndarray | None
    outside: np.ndarray | None
    hidden: int
    sentinels: list[tuple[int, str, int]]
    omitted: list[str]
    #: the offending values of the findings the variant resolves, and of those it cannot
    #: judge: not drawn (the bars out of bounds are the values it leaves out of bounds)
    settled: tuple[int, int] = (0, 0)
    #: how many of the offending values drawn are a summary record's min or max (its other
    #: elements not known), not every element of a record
    summaries: int = 0

    def ylim(self) -> tuple[float, float]:
        """The count axis' range: from below 1 to three times the tallest bar (at least 10)."""
        top = float(np.max(self.inside + self.outside)) if self.inside is not None else 0.0
        return 0.7, max(10.0, top * 3)

    def range_edges(self) -> tuple[float, float]:
        """The valid range's left and right edges on the axis."""
        lo, hi = self.axis.pos(np.array([self.axis.lower, self.axis.upper])) - 0.5
        return float(lo), float(hi)

    def range_label(self) -> str:
        """The valid range's legend text."""
        return f"valid range [{_bound(self.lower)}, {_bound(self.upper)})"

    def bound_labels(self) -> tuple[str | None, str | None]:
        """The legend texts of the upper and the lower bound lines (None: the bound is not
        known, and no line is drawn for it)."""
        return (None if self.upper is None else f"valid bound: upper = {self.upper} (exclusive)",
                None if self.lower is None else f"valid bound: lower = {self.lower}")

    def out_label(self) -> str:
        """The legend text of the bars out of bounds: every element of a record, or a summary
        record's least or greatest value alone (its other elements not known), or both."""
        drawn = int(self.outside.sum()) if self.outside is not None else 0
        if not self.summaries:
            return OUT_LABEL
        return OUT_SUMMARY_LABEL if self.summaries >= drawn else OUT_MIXED_LABEL

    def hidden_note(self) -> str:
        """The note on in-range values not shown and on offending values not drawn as out of
        bounds, resolved or not judged by the variant ("" when none)."""
        resolved, unseen = self.settled
        notes = [f"{self.hidden} in-range values far from both bounds not shown"
                 if self.hidden else "",
                 f"{resolved} value(s) out of bounds not drawn: the variant resolves them"
                 if resolved else "",
                 f"{unseen} value(s) out of bounds not drawn: the variant cannot judge them"
                 if unseen else ""]
        return "\n".join(note for note in notes if note)

    def omitted_note(self) -> str:
        """The note on tensors on another scale, not drawn."""
        return "not drawn (another scale):\n" + "\n".join(self.omitted)

    def break_at(self) -> tuple[float, float]:
        """The middle and the width of a broken axis' break."""
        return 2 * self.axis.window + (self.axis.gap - 1) / 2, float(self.axis.gap)


def histogram_data(result: Any, site: str | None = None, variant: str | None = None,
                   vocab_size: int | None = None, window: int = 32,
                   tensor: TensorChoice = None) -> HistogramData:
    """The data of :func:`~forensics.present.plots.plot_value_histogram` (its arguments)."""
    variant = chosen_variant(result, variant)
    site = chosen_site(result, site, variant)
    frame, inside, outside, drawn, omitted, settled, summaries = _histogram_data(
        result, site, variant, tensor)
    vocab = vocab_size if vocab_size is not None else _vocab_of(result, site, frame)
    lower, upper = _range_of(frame)
    laid = _laid_out(lower, upper, outside)
    if vocab is not None:  # past MAX_WINDOW the sentinel is not drawn (it is in no window)
        window = max(window, min(int(abs(laid[1] - vocab)) + 4, MAX_WINDOW))
    axis = ValueAxis(*laid, window, np.concatenate([inside, outside]))
    shown_in = inside[axis.shown(inside)]
    edges = low = high = None
    if len(shown_in) + len(outside):
        edges = np.asarray(list(axis.bins()), dtype=float)
        low, _ = np.histogram(axis.pos(shown_in), bins=edges)
        high, _ = np.histogram(axis.pos(outside), bins=edges)
    sentinels = [(-1, PLACEHOLDER_NOTE, -1)]
    if vocab is not None:
        sentinels.append((vocab, f"vocab_size = {vocab}: rejection sentinel", 1))
    xlabel = (f"value used ({value_unit(site, drawn)})"
              + (" — broken axis: values near each bound" if axis.broken else ""))
    return HistogramData(title_text(result, site, variant, HISTOGRAM_WHAT), xlabel, axis,
                         lower, upper, edges, low, high, len(inside) - len(shown_in),
                         [s for s in sentinels if axis.shown(np.array([s[0]]))[0]], omitted,
                         settled, summaries)


def _range_of(frame: pd.DataFrame) -> tuple[int | None, int | None]:
    """The valid range the records state, exact: the loosest bounds of ``frame`` (None: no
    record states that bound)."""
    found = [exact_ints(frame[c]).dropna() if len(frame) else pd.Series([], dtype="Int64")
             for c in ("lower", "upper")]
    return (int(found[0].min()) if len(found[0]) else None,
            int(found[1].max()) if len(found[1]) else None)


def _laid_out(lower: int | None, upper: int | None, outside: np.ndarray) -> tuple[int, int]:
    """The bounds the axis is laid out around: those known, else from 0 (a lower bound) and to
    past the largest offending value (an upper one)."""
    low = 0 if lower is None else lower
    high = upper if upper is not None else max(int(outside.max()) if len(outside) else 1,
                                                low + 1)
    return low, high


def _bound(value: int | None) -> str:
    """A bound's text: its value, or "unknown"."""
    return "unknown" if value is None else str(value)
