"""Each view as renderer-neutral data, decided once for both painters: what a timeline, a
heatmap, a histogram or the verdict matrix shows (one module each), which
:mod:`forensics.present.plots` paints with matplotlib and :mod:`forensics.present.svg` as SVG."""

from __future__ import annotations

#: the views, by name (each a ``kind`` of :func:`forensics.present.plots.plot`)
KINDS = ("timeline", "heatmap", "histogram", "verdicts")
