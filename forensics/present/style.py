"""How every picture looks, declared once: colours, markers, legend and axis texts, and the
sizes past which a view aggregates; both painters (matplotlib in :mod:`forensics.present.plots`,
SVG in :mod:`forensics.present.svg`) read them from here."""

from __future__ import annotations

#: Colour of everything out of bounds (markers, heatmap cells, histogram bars, verdicts).
VIOLATION_COLOR = "#d62728"
#: Colour of in-range values.
IN_RANGE_COLOR = "#1f77b4"
#: Colour of the valid bound lines.
BOUND_COLOR = "#2b2b2b"
#: Colour of misattributed (suspect) findings.
SUSPECT_COLOR = "#e6ab02"
#: Cell colour per verdict in :func:`forensics.present.plots.plot_verdict_matrix`.
VERDICT_COLORS: dict[str, str] = {
    "violation": VIOLATION_COLOR,
    "error": "#ff7f0e",
    "suspect": SUSPECT_COLOR,
    "ok": "#2ca02c",
    "unjudged": "#bdbdbd",
}
#: Neutral colours for several tensors on one Axes (never the violation colour).
TENSOR_COLORS = ("#1f77b4", "#9467bd", "#17becf", "#8c564b", "#7f7f7f", "#bcbd22")
#: above this many steps a timeline aggregates steps into bins (see :data:`TIMELINE_BINS`)
DENSE_STEPS = 200
#: at most about this many step bins on a dense timeline: one band point and at most one
#: out-of-bounds marker per bin, so 10,000 steps draw as readably as 100
TIMELINE_BINS = 80
#: at most this many step labels on a heatmap's x axis (4-5 digit steps stay apart)
STEP_LABELS = 8
#: above this many rows (or DENSE_STEPS steps) a heatmap marks offending cells with markers
DENSE_ROWS = 64
#: per step, how the variant's out-of-bounds findings there are judged (see
#: :func:`forensics.present.scene.timeline.step_verdicts`)
OPEN, RESOLVED, UNSEEN = "out of bounds", "resolved", "not judged"
#: marker colours of resolved and not judged findings (never the violation colour)
RESOLVED_COLOR, UNSEEN_COLOR = "#2ca02c", "#7f7f7f"
#: how a timeline marks the values out of bounds of each state: (state, marker, colour); the
#: marker is matplotlib's (``X`` a filled cross, ``o`` a circle, ``s`` a square)
MARK_STYLES = ((OPEN, "X", VIOLATION_COLOR), (RESOLVED, "o", RESOLVED_COLOR),
               (UNSEEN, "s", UNSEEN_COLOR))
#: the legend entry of a timeline's suspect steps
SUSPECT_LABEL = "suspect: a row read another request's row"
#: the colours of a heatmap's distances past the bound, from 1 (the first invalid value) out
VIOLATION_RAMP = ("#f7c6c6", VIOLATION_COLOR, "#5c0d0e")
#: colour of a heatmap's checked cells inside the bound
CHECKED_COLOR = "#e0e0e0"
HEATMAP_WHAT = "out-of-bounds values per batch row and step"
CHECKED_LABEL, SUSPECT_CELL_LABEL = ("checked, inside the valid bound",
                                     "misattributed (another request's row)")
DISTANCE_LABEL = "distance past the valid bound [lower, upper)\n(1 = first invalid value)"
HISTOGRAM_WHAT, HISTOGRAM_YLABEL = "values near the bound", "count (log scale)"
IN_RANGE_LABEL, OUT_LABEL = ("in range (per-record min and max)",
                             "out of bounds (every element)")
#: the bars out of bounds of summary records alone (a log's or a dump's least and greatest
#: values: the record's other elements are not known), and of both kinds of record
OUT_SUMMARY_LABEL = "out of bounds (summary records: min or max alone, other elements unknown)"
OUT_MIXED_LABEL = "out of bounds (every element; summary records: min or max alone)"
PLACEHOLDER_NOTE = "−1: async placeholder / new row"
#: the colour of a verdict matrix cell without a verdict
NO_VERDICT_COLOR = "#e8e8e8"

#: the finest resolution a figure is saved at (a 7 x 4.6 in figure at 1200 dpi is 46 million
#: pixels, 185 MB in memory; one at 100,000 dpi asked for terabytes)
MAX_DPI = 1200
#: the coarsest: below about 6 dpi a label's font is under one pixel, FreeType's error
#: (``invalid ppem value``) in the middle of a save
MIN_DPI = 10
