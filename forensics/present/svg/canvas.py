"""A small SVG chart canvas: panels of lines, bands, markers, spans, cells and notes, side by side.

The report draws its figures with this instead of matplotlib: importing matplotlib and laying
out four figures cost a 2-record capture's report more than its whole replay (benchmarks/
README.md). A :class:`Panel` records what to draw in data coordinates; :class:`Figure` lays its
panels out with fixed margins (title lines, tick labels and legend rows are counted, not
measured) and writes one ``<svg>`` document.

Every element that carries meaning has a ``class`` (``mark open``, ``mark resolved``, ``bound``,
``note first``, ``cell``...) and its data coordinates in ``data-x`` / ``data-y``, so tests and
readers can find what a picture says without reading pixels. Every string goes through
:func:`forensics.escaping.html` (XML text and attribute values alike): a capture's strings stay
text, and control characters become visible escapes (an XML document cannot hold them raw).
"""

from __future__ import annotations

import decimal
import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from forensics.escaping import html as esc
from forensics.present.selection import EXACT_FLOAT, round_ticks

FONT = "DejaVu Sans, Verdana, Arial, sans-serif"
#: average glyph width as a fraction of the font size (for laying out legends and margins)
GLYPH = 0.6
TITLE_SIZE, LABEL_SIZE, TICK_SIZE, LEGEND_SIZE, NOTE_SIZE = 12, 11, 10, 9, 9
#: the placeholder of a clip path's id until the figure is drawn (see :meth:`Figure.to_svg`)
_CLIP = "\x00clip"
#: marker shapes: ``x`` a filled cross, ``o`` circle, ``s`` square, ``D`` diamond
SHAPES = ("x", "o", "s", "D")


def text_width(text: str, size: float) -> float:
    """The width in pixels of ``text`` at font ``size`` (an estimate: average glyphs)."""
    return len(text) * size * GLYPH


def nice_ticks(lo: float, hi: float, most: int = 6, integer: bool = False) -> list[float]:
    """Round tick positions (1, 2 or 5 x 10^k apart) covering ``[lo, hi]``, at most ``most``;
    whole numbers only when ``integer``."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(most - 1, 1)
    scale = 10 ** math.floor(math.log10(raw))
    step = next(m * scale for m in (1, 2, 5, 10) if m * scale >= raw)
    if integer:
        step = max(1.0, round(step))
    first = math.ceil(lo / step) * step + 0.0  # + 0.0: no -0 tick
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def log_ticks(lo: float, hi: float) -> list[float]:
    """Powers of ten within ``[lo, hi]`` (a log axis' ticks)."""
    first, last = math.ceil(math.log10(max(lo, 1e-12))), math.floor(math.log10(max(hi, 1e-12)))
    return [10.0 ** k for k in range(first, last + 1)]


def tick_label(value: float) -> str:
    """A tick's text: whole numbers without a decimal point, others to 3 significant digits."""
    if float(value).is_integer():
        return f"{int(value)}"
    return f"{value:.3g}"


@dataclass
class LegendEntry:
    """One legend row: a swatch (``line``, ``patch`` or a marker shape) and its text."""

    label: str
    color: str
    swatch: str = "line"
    dash: str = ""
    filled: bool = True


@dataclass
class Panel:
    """One plot area: what to draw, in data coordinates, and its labels.

    ``xlim``/``ylim`` default to the data's extent (x padded by ``xpad`` data units each side,
    y by ``ypad`` of its span); ``xticks``/``yticks`` default to :func:`nice_ticks` (whole
    numbers on x when ``integer_x``); ``xtick_rotation`` turns the x tick labels by that many
    degrees (rising to the right, each ending at its tick), with room made for them;
    ``xorigin`` is added to each default x tick's label (x drawn relative to it, exact);
    with a ``yorigin`` (y drawn relative to it) the default y ticks are whole numbers, each
    labelled with its exact value (:func:`~forensics.present.selection.round_ticks`).
    """

    title: str = ""
    xlabel: str = ""
    ylabel: str = ""
    ylog: bool = False
    integer_x: bool = True
    xpad: float = 0.5
    ypad: float = 0.12
    xlim: tuple[float, float] | None = None
    ylim: tuple[float, float] | None = None
    xticks: list[tuple[float, str]] | None = None
    yticks: list[tuple[float, str]] | None = None
    invert_y: bool = False
    xtick_rotation: float = 0.0
    xorigin: int = 0
    yorigin: int | None = None
    legend: list[LegendEntry] = field(default_factory=list)
    items: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    xs: list[float] = field(default_factory=list)
    ys: list[float] = field(default_factory=list)

    # -- recording ---------------------------------------------------------------------

    def _extent(self, x: Sequence[float] = (), y: Sequence[float] = ()) -> None:
        self.xs.extend(float(v) for v in x if math.isfinite(float(v)))
        self.ys.extend(float(v) for v in y if math.isfinite(float(v))
                       and (not self.ylog or float(v) > 0))

    def _label(self, label: str | None, entry: LegendEntry) -> None:
        if label and all(e.label != label for e in self.legend):
            self.legend.append(entry)

    def line(self, x: Sequence[float], y: Sequence[float], color: str, *, width: float = 1.0,
             dash: str = "", step: bool = False, dots: float = 0.0, label: str | None = None,
             role: str = "series") -> None:
        """A polyline through (x, y) (``step``: horizontal steps centred on each x), with a dot
        of radius ``dots`` at each point when > 0."""
        x, y = _coordinates(x), list(map(float, y))
        self._extent(x, y)
        self.items.append(("line", dict(x=x, y=y, color=color, width=width, dash=dash,
                                        step=step, dots=dots, role=role)))
        self._label(label, LegendEntry(label or "", color, "line", dash))

    def band(self, x: Sequence[float], lo: Sequence[float], hi: Sequence[float], color: str,
             *, opacity: float = 0.15) -> None:
        """A filled area between ``lo`` and ``hi`` in steps centred on each x."""
        x, lo, hi = list(map(float, x)), list(map(float, lo)), list(map(float, hi))
        self._extent(x, [*lo, *hi])
        self.items.append(("band", dict(x=x, lo=lo, hi=hi, color=color, opacity=opacity)))

    def marks(self, x: Sequence[float], y: Sequence[float], shape: str, color: str, *,
              filled: bool = True, size: float | Sequence[float] = 8.0, label: str | None = None,
              role: str = "mark") -> None:
        """One marker of ``shape`` (:data:`SHAPES`) per (x, y), ``size`` pixels across."""
        x, y = _coordinates(x), list(map(float, y))
        sizes = [float(size)] * len(x) if np.isscalar(size) else list(map(float, size))  # type: ignore[arg-type]
        self._extent(x, y)
        self.items.append(("marks", dict(x=x, y=y, shape=shape, color=color, filled=filled,
                                         size=sizes, role=role)))
        self._label(label, LegendEntry(label or "", color, shape, filled=filled))

    def vline(self, x: float, color: str, *, width: float = 1.0, dash: str = "",
              opacity: float = 1.0, label: str | None = None, role: str = "vline") -> None:
        """A vertical line across the whole panel at ``x``."""
        self._extent([x])
        self.items.append(("vline", dict(x=float(x), color=color, width=width, dash=dash,
                                         opacity=opacity, role=role)))
        self._label(label, LegendEntry(label or "", color, "line", dash))

    def vspan(self, x0: float, x1: float, color: str, *, opacity: float = 0.1,
              label: str | None = None, role: str = "span") -> None:
        """A shaded column from ``x0`` to ``x1`` across the whole panel."""
        self._extent([x0, x1])
        self.items.append(("vspan", dict(x0=float(x0), x1=float(x1), color=color,
                                         opacity=opacity, role=role)))
        self._label(label, LegendEntry(label or "", color, "patch"))

    def cell(self, x0: float, y0: float, x1: float, y1: float, fill: str, *,
             text: str = "", text_color: str = "white", role: str = "cell",
             label: str | None = None) -> None:
        """A filled rectangle in data coordinates, with ``text`` at its centre."""
        self._extent([x0, x1], [y0, y1])
        self.items.append(("cell", dict(x0=float(x0), y0=float(y0), x1=float(x1),
                                        y1=float(y1), fill=fill, text=text,
                                        text_color=text_color, role=role)))
        self._label(label, LegendEntry(label or "", fill, "patch"))

    def text(self, fx: float, fy: float, text: str, *, color: str = "#555555",
             size: float = NOTE_SIZE, anchor: str = "start", role: str = "text") -> None:
        """Text at a fraction (``fx``, ``fy``) of the panel (0, 0 the bottom left); one line
        per ``\\n``."""
        self.items.append(("text", dict(fx=fx, fy=fy, text=text, color=color, size=size,
                                        anchor=anchor, role=role)))

    def vnote(self, x: float, text: str, color: str, *, side: int = 1,
              role: str = "note") -> None:
        """``text`` written upwards along the top of the panel, beside the line at ``x``: on
        its right (``side`` 1) or its left (-1)."""
        self.items.append(("vnote", dict(x=float(x), text=text, color=color, side=side,
                                         role=role)))

    def note(self, x: float, y: float, text: str, color: str, *, role: str = "note") -> None:
        """``text`` beside the point (x, y) with a line to it, placed towards the panel's
        middle so it stays inside."""
        self.items.append(("note", dict(x=float(x), y=float(y), text=text, color=color,
                                        role=role)))


def _coordinates(values: Sequence[float]) -> list[float]:
    """``values`` to draw at, an integer kept as a Python int (exact in ``data-x`` past 2**53,
    where a float is not), anything else a float."""
    return [int(v) if isinstance(v, (int, np.integer)) and not isinstance(v, bool) else float(v)
            for v in values]


def _tick(value: float) -> float:
    """A tick's position as its datum: a whole float as the int it holds exactly (a tick stands
    where its float says, 2e18 at 2000000000000000000; a drawn datum past 2**53 may not)."""
    return int(value) if math.isfinite(value) and float(value).is_integer() else value


def _dash(dash: str) -> str:
    return f' stroke-dasharray="{dash}"' if dash else ""


class _Scale:
    """Data to pixel along one axis (linear, or log10 when ``log``)."""

    def __init__(self, lo: float, hi: float, start: float, stop: float, log: bool = False,
                 origin: int = 0) -> None:
        self.log, self.origin = log, origin
        self.lo, self.hi = (math.log10(lo), math.log10(hi)) if log else (lo, hi)
        self.start, self.stop = start, stop

    def datum(self, value: float) -> str:
        """The data coordinate drawn at ``value`` as text (``data-x``/``data-y``), the origin
        added back: exact for an int (a step as the scene gave it: 2**63 - 1 reads so) and for
        a float that holds its value exactly (a whole number within 2**53 in Python ints: step
        2**62 + 1 reads so, not 4.61169e+18; else the shortest decimal that reads back as the
        float); a float past 2**53 in float notation, which says it is not exact (a whole
        ``9223372036854775808`` was a step no capture holds)."""
        if isinstance(value, int):
            return str(self.origin + value)
        if not math.isfinite(value):
            return repr(float(value))
        if abs(value) > EXACT_FLOAT:
            return repr(float(self.origin) + float(value))
        if float(value).is_integer():
            return str(self.origin + int(value))
        if not self.origin:
            return repr(float(value))
        with decimal.localcontext() as exact:
            exact.prec = 80
            return str(decimal.Decimal(self.origin) + decimal.Decimal(repr(float(value))))

    def __call__(self, value: float) -> float:
        v = math.log10(max(value, 1e-12)) if self.log else value
        span = (self.hi - self.lo) or 1.0
        return self.start + (v - self.lo) / span * (self.stop - self.start)


def _limits(values: list[float], pad: float, relative: bool, log: bool) -> tuple[float, float]:
    if not values:
        return (0.5, 10.0) if log else (0.0, 1.0)
    lo, hi = min(values), max(values)
    if log:
        return lo / 1.5, hi * 1.5
    span = hi - lo
    grow = pad * (span or max(abs(hi), 1.0)) if relative else pad
    return lo - grow, hi + grow


@dataclass
class _Box:
    """A panel's plot area in pixels."""

    left: float
    top: float
    right: float
    bottom: float


class Figure:
    """Panels side by side in one SVG document of ``width`` x ``height`` pixels (each panel
    ``width / len(panels)`` wide; legends under each panel's axes)."""

    def __init__(self, panels: Sequence[Panel], width: int = 600, height: int = 400,
                 right_margin: int = 20, kind: str = "figure") -> None:
        self.panels = list(panels)
        self.width, self.right_margin, self.kind = width, right_margin, kind
        self.height = height + max((self._legend_height(p, width / max(len(self.panels), 1))
                                    for p in self.panels), default=0)
        self.base_height = height

    def _legend_rows(self, panel: Panel, width: float) -> list[list[LegendEntry]]:
        cols = 2 if max((text_width(e.label, LEGEND_SIZE) for e in panel.legend), default=0) \
            < (width - 100) / 2 - 30 else 1
        return [panel.legend[i:i + cols] for i in range(0, len(panel.legend), cols)]

    def _legend_height(self, panel: Panel, width: float) -> int:
        rows = self._legend_rows(panel, width)
        return 16 * len(rows) + (8 if rows else 0)

    def to_svg(self) -> str:
        """The figure as one standalone SVG document."""
        width = self.width / max(len(self.panels), 1)
        parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" '
                 f'height="{self.height}" viewBox="0 0 {self.width} {self.height}" '
                 f'font-family="{FONT}" class="{esc(self.kind)}">',
                 f'<rect width="{self.width}" height="{self.height}" fill="white"/>']
        for i, panel in enumerate(self.panels):
            parts.append(f'<g class="panel" data-index="{i}">')
            parts.extend(_draw_panel(panel, i * width, width, self.base_height,
                                     self.right_margin, self._legend_rows(panel, width)))
            parts.append("</g>")
        parts.append("</svg>")
        text = "\n".join(parts)
        # ids unique to the drawing, so figures inlined in one HTML page clip by their own
        # rectangles (an escaped string never holds the raw NUL of the placeholder)
        return text.replace(_CLIP, f"clip-{hashlib.sha1(text.encode()).hexdigest()[:12]}-")

    def _repr_svg_(self) -> str:
        return self.to_svg()

    def _ipython_display_(self) -> None:
        """Shown as SVG, unless kept for the notebook executor (:func:`forensics.present.svg.draw`),
        which shows it once at the end of the cell: a figure that is also a cell's last
        expression is not shown twice."""
        if not getattr(self, "kept", False):
            from IPython.display import display

            display({"image/svg+xml": self.to_svg()}, raw=True)


def _xtick_drop(panel: Panel) -> float:
    """How far rotated x tick labels reach below unrotated ones, in pixels (0 unrotated)."""
    if not panel.xtick_rotation or not panel.xticks:
        return 0.0
    longest = max(text_width(label, TICK_SIZE) for _, label in panel.xticks)
    return longest * math.sin(math.radians(panel.xtick_rotation))


def _box(panel: Panel, x0: float, width: float, height: float, right: float) -> _Box:
    title_lines = panel.title.count("\n") + 1 if panel.title else 0
    ylabels = [label for _, label in panel.yticks or []] or ["000000"]
    left = 22 + max(text_width(s, TICK_SIZE) for s in ylabels) + (16 if panel.ylabel else 0)
    return _Box(x0 + left, 8 + 16 * title_lines + 6, x0 + width - right,
                height - 44 - _xtick_drop(panel))


def _draw_panel(panel: Panel, x0: float, width: float, height: float, right: float,
                legend: list[list[LegendEntry]]) -> list[str]:
    xlim = panel.xlim or _limits(panel.xs, panel.xpad, False, False)
    ylim = panel.ylim or _limits(panel.ys, panel.ypad, True, panel.ylog)
    if panel.yticks is None and panel.yorigin is not None:
        panel.yticks = round_ticks(*ylim, panel.yorigin)
    if panel.yticks is None:
        ticks = log_ticks(*ylim) if panel.ylog else nice_ticks(*ylim)
        panel.yticks = [(t, f"{t:,.0f}" if panel.ylog else tick_label(t)) for t in ticks]
    box = _box(panel, x0, width, height, right)
    sx = _Scale(*xlim, box.left, box.right, origin=panel.xorigin)
    top, bottom = (box.bottom, box.top) if panel.invert_y else (box.top, box.bottom)
    sy = _Scale(*ylim, bottom, top, log=panel.ylog, origin=panel.yorigin or 0)
    out = [f'<clipPath id="{_CLIP}{int(x0)}"><rect x="{box.left:.1f}" y="{box.top:.1f}" '
           f'width="{box.right - box.left:.1f}" height="{box.bottom - box.top:.1f}"/></clipPath>',
           f'<g clip-path="url(#{_CLIP}{int(x0)})">']
    for kind, item in panel.items:
        out.extend(_DRAW[kind](item, sx, sy, box))
    out.append("</g>")
    out.extend(_frame(panel, box, sx, sy, xlim, x0, width))
    out.extend(_legend(legend, x0, width, height))
    return out


def _frame(panel: Panel, box: _Box, sx: _Scale, sy: _Scale, xlim: tuple[float, float],
           x0: float, width: float) -> list[str]:
    """The axes' frame, ticks, tick labels, axis labels and title."""
    out = [f'<rect x="{box.left:.1f}" y="{box.top:.1f}" width="{box.right - box.left:.1f}" '
           f'height="{box.bottom - box.top:.1f}" fill="none" stroke="#333333"/>']
    ticks = nice_ticks(*xlim, integer=panel.integer_x)
    xticks = (panel.xticks if panel.xticks is not None
              else round_ticks(*xlim, panel.xorigin) if panel.xorigin
              else [(t, tick_label(t)) for t in ticks])
    turn = panel.xtick_rotation
    for value, label in xticks:
        px, py = sx(value), box.bottom + 16
        place = (f'text-anchor="end" transform="rotate({-turn:g} {px:.1f} {py - 4:.1f})"'
                 if turn else 'text-anchor="middle"')
        out.append(f'<line x1="{px:.1f}" y1="{box.bottom:.1f}" x2="{px:.1f}" '
                   f'y2="{box.bottom + 4:.1f}" stroke="#333333"/>'
                   f'<text class="xtick" data-x="{sx.datum(_tick(value))}" x="{px:.1f}" '
                   f'y="{py:.1f}" '
                   f'font-size="{TICK_SIZE}" {place}>{esc(label)}</text>')
    for value, label in panel.yticks or []:
        py = sy(value)
        out.append(f'<line x1="{box.left - 4:.1f}" y1="{py:.1f}" x2="{box.left:.1f}" '
                   f'y2="{py:.1f}" stroke="#333333"/>'
                   f'<text class="ytick" data-y="{sy.datum(_tick(value))}" x="{box.left - 6:.1f}" '
                   f'y="{py + 3.5:.1f}" font-size="{TICK_SIZE}" text-anchor="end">'
                   f"{esc(label)}</text>")
    middle = (box.left + box.right) / 2
    below = box.bottom + 34 + _xtick_drop(panel)
    out.append(f'<text class="xlabel" x="{middle:.1f}" y="{below:.1f}" '
               f'font-size="{LABEL_SIZE}" text-anchor="middle">{esc(panel.xlabel)}</text>')
    if panel.ylabel:
        cy = (box.top + box.bottom) / 2
        out.append(f'<text class="ylabel" x="{x0 + 14:.1f}" y="{cy:.1f}" font-size="{LABEL_SIZE}" '
                   f'text-anchor="middle" transform="rotate(-90 {x0 + 14:.1f} {cy:.1f})">'
                   f"{esc(panel.ylabel)}</text>")
    for i, line in enumerate(panel.title.split("\n") if panel.title else []):
        out.append(f'<text class="title" x="{middle:.1f}" y="{20 + 16 * i}" '
                   f'font-size="{TITLE_SIZE}" text-anchor="middle">{esc(line)}</text>')
    return out


def _legend(rows: list[list[LegendEntry]], x0: float, width: float, height: float) -> list[str]:
    """The legend under the axes: one row per line, up to two entries a row."""
    out = ['<g class="legend">'] if rows else []
    cols = max((len(r) for r in rows), default=1)
    column = (width - 40) / cols
    for r, row in enumerate(rows):
        y = height + 4 + 16 * r
        for c, entry in enumerate(row):
            x = x0 + 20 + c * column
            out.append(_swatch(entry, x, y))
            out.append(f'<text class="legend-entry" x="{x + 26:.1f}" y="{y + 4:.1f}" '
                       f'font-size="{LEGEND_SIZE}">{esc(entry.label)}</text>')
    return [*out, "</g>"] if rows else out


def _swatch(entry: LegendEntry, x: float, y: float) -> str:
    if entry.swatch == "line":
        return (f'<line x1="{x:.1f}" y1="{y:.1f}" x2="{x + 20:.1f}" y2="{y:.1f}" '
                f'stroke="{entry.color}" stroke-width="1.5"{_dash(entry.dash)}/>')
    if entry.swatch == "patch":
        return (f'<rect x="{x + 2:.1f}" y="{y - 5:.1f}" width="16" height="10" '
                f'fill="{entry.color}"/>')
    return _marker(entry.swatch, x + 10, y, 9.0, entry.color, entry.filled)


def _marker(shape: str, x: float, y: float, size: float, color: str, filled: bool,
            attrs: str = "") -> str:
    """One marker centred on (x, y), ``size`` pixels across."""
    h = size / 2
    paint = (f'fill="{color}" stroke="{color}" stroke-width="0.5"' if filled
             else f'fill="none" stroke="{color}" stroke-width="1.5"')
    if shape == "o":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{h:.1f}" {paint}{attrs}/>'
    if shape == "s":
        return f'<rect x="{x - h:.1f}" y="{y - h:.1f}" width="{size:.1f}" height="{size:.1f}" ' \
               f'{paint}{attrs}/>'
    if shape == "D":
        return (f'<path d="M{x:.1f},{y - h:.1f} L{x + h:.1f},{y:.1f} L{x:.1f},{y + h:.1f} '
                f'L{x - h:.1f},{y:.1f} Z" {paint}{attrs}/>')
    t = h / 3  # a filled X: a cross of two bars a third of its size thick
    points = [(-h, -h + t), (-t, 0), (-h, h - t), (-h + t, h), (0, t), (h - t, h), (h, h - t),
              (t, 0), (h, -h + t), (h - t, -h), (0, -t), (-h + t, -h)]
    d = " ".join(f"{x + a:.1f},{y + b:.1f}" for a, b in points)
    return f'<polygon points="{d}" {paint}{attrs}/>'


def _step_points(x: list[float], y: list[float]) -> list[tuple[float, float]]:
    """(x, y) as steps centred on each x (matplotlib's ``step(where="mid")``)."""
    if len(x) < 2:
        return list(zip(x, y, strict=True))
    mids = [(a + b) / 2 for a, b in zip(x, x[1:], strict=False)]
    edges = [x[0], *mids, x[-1]]
    out = []
    for i, value in enumerate(y):
        out += [(edges[i], value), (edges[i + 1], value)]
    return out


def _draw_line(item: dict[str, Any], sx: _Scale, sy: _Scale, box: _Box) -> list[str]:
    pairs = (_step_points(item["x"], item["y"]) if item["step"]
             else list(zip(item["x"], item["y"], strict=True)))
    pairs = [(a, b) for a, b in pairs if math.isfinite(a) and math.isfinite(b)]
    if not pairs:
        return []
    points = " ".join(f"{sx(a):.1f},{sy(b):.1f}" for a, b in pairs)
    xs = ",".join(sx.datum(a) for a, _ in pairs)
    out = [f'<polyline class="{esc(item["role"])}" data-x="{xs}" points="{points}" fill="none" '
           f'stroke="{item["color"]}" stroke-width="{item["width"]}"{_dash(item["dash"])}/>']
    if item["dots"] > 0:
        out += [f'<circle cx="{sx(a):.1f}" cy="{sy(b):.1f}" r="{item["dots"]}" '
                f'fill="{item["color"]}"/>' for a, b in zip(item["x"], item["y"], strict=True)
                if math.isfinite(a) and math.isfinite(b)]
    return out


def _draw_band(item: dict[str, Any], sx: _Scale, sy: _Scale, box: _Box) -> list[str]:
    upper = _step_points(item["x"], item["hi"])
    lower = _step_points(item["x"], item["lo"])[::-1]
    pairs = [(a, b) for a, b in [*upper, *lower] if math.isfinite(a) and math.isfinite(b)]
    if len(pairs) < 3:
        return []
    points = " ".join(f"{sx(a):.1f},{sy(b):.1f}" for a, b in pairs)
    return [f'<polygon class="band" points="{points}" fill="{item["color"]}" '
            f'fill-opacity="{item["opacity"]}" stroke="{item["color"]}" stroke-opacity="0.3"/>']


def _draw_marks(item: dict[str, Any], sx: _Scale, sy: _Scale, box: _Box) -> list[str]:
    out = [f'<g class="{esc(item["role"])}">']
    for x, y, size in zip(item["x"], item["y"], item["size"], strict=True):
        attrs = f' data-x="{sx.datum(x)}" data-y="{sy.datum(y)}" data-size="{size:g}"'
        out.append(_marker(item["shape"], sx(x), sy(y), size, item["color"], item["filled"],
                           attrs))
    return [*out, "</g>"]


def _draw_vline(item: dict[str, Any], sx: _Scale, sy: _Scale, box: _Box) -> list[str]:
    px = sx(item["x"])
    return [f'<line class="{esc(item["role"])}" data-x="{sx.datum(item["x"])}" x1="{px:.1f}" '
            f'y1="{box.top:.1f}" x2="{px:.1f}" y2="{box.bottom:.1f}" stroke="{item["color"]}" '
            f'stroke-width="{item["width"]}" stroke-opacity="{item["opacity"]}"'
            f'{_dash(item["dash"])}/>']


def _draw_vspan(item: dict[str, Any], sx: _Scale, sy: _Scale, box: _Box) -> list[str]:
    a, b = sorted((sx(item["x0"]), sx(item["x1"])))
    return [f'<rect class="{esc(item["role"])}" x="{a:.1f}" y="{box.top:.1f}" '
            f'width="{max(b - a, 1.0):.1f}" height="{box.bottom - box.top:.1f}" '
            f'fill="{item["color"]}" fill-opacity="{item["opacity"]}"/>']


def _draw_cell(item: dict[str, Any], sx: _Scale, sy: _Scale, box: _Box) -> list[str]:
    xa, xb = sorted((sx(item["x0"]), sx(item["x1"])))
    ya, yb = sorted((sy(item["y0"]), sy(item["y1"])))
    cx, cy = (item["x0"] + item["x1"]) / 2, (item["y0"] + item["y1"]) / 2
    out = [f'<rect class="{esc(item["role"])}" data-x="{sx.datum(cx)}" '
           f'data-y="{sy.datum(cy)}" x="{xa:.1f}" y="{ya:.1f}" '
           f'width="{max(xb - xa, 1.0):.1f}" height="{max(yb - ya, 1.0):.1f}" '
           f'fill="{item["fill"]}"/>']
    if item["text"]:
        out.append(f'<text class="cell-text" x="{(xa + xb) / 2:.1f}" '
                   f'y="{(ya + yb) / 2 + 3:.1f}" font-size="8" text-anchor="middle" '
                   f'fill="{item["text_color"]}">{esc(item["text"])}</text>')
    return out


def _draw_text(item: dict[str, Any], sx: _Scale, sy: _Scale, box: _Box) -> list[str]:
    x = box.left + item["fx"] * (box.right - box.left)
    y = box.bottom - item["fy"] * (box.bottom - box.top)
    lines = str(item["text"]).split("\n")
    spans = "".join(f'<tspan x="{x:.1f}" dy="{0 if i == 0 else item["size"] + 2}">{esc(s)}'
                    "</tspan>" for i, s in enumerate(lines))
    return [f'<text class="{esc(item["role"])}" x="{x:.1f}" y="{y + item["size"]:.1f}" '
            f'font-size="{item["size"]}" text-anchor="{item["anchor"]}" fill="{item["color"]}">'
            f"{spans}</text>"]


def _draw_note(item: dict[str, Any], sx: _Scale, sy: _Scale, box: _Box) -> list[str]:
    px, py = sx(item["x"]), sy(item["y"])
    below = py < (box.top + box.bottom) / 2
    tx, ty = px + 16, py + (30 if below else -30)
    width = text_width(item["text"], NOTE_SIZE)
    anchor = "start"
    if tx + width > box.right:
        tx, anchor = px - 16, "end"
    base = ty + (8 if below else 0)
    left = tx if anchor == "start" else tx - width
    return [f'<g class="{esc(item["role"])}" data-x="{sx.datum(item["x"])}" '
            f'data-y="{sy.datum(item["y"])}">'
            f'<line x1="{px:.1f}" y1="{py:.1f}" x2="{tx:.1f}" y2="{ty - 4:.1f}" '
            f'stroke="{item["color"]}" stroke-width="0.8"/>'
            f'<rect x="{left - 2:.1f}" y="{base - NOTE_SIZE:.1f}" width="{width + 4:.1f}" '
            f'height="{NOTE_SIZE + 4}" fill="white" fill-opacity="0.85"/>'
            f'<text x="{tx:.1f}" y="{base:.1f}" font-size="{NOTE_SIZE}" '
            f'text-anchor="{anchor}" fill="{item["color"]}">{esc(item["text"])}</text></g>']


def _draw_vnote(item: dict[str, Any], sx: _Scale, sy: _Scale, box: _Box) -> list[str]:
    px = sx(item["x"]) + item["side"] * 10
    ty = box.top + 4
    return [f'<text class="{esc(item["role"])}" data-x="{sx.datum(item["x"])}" x="{px:.1f}" '
            f'y="{ty:.1f}" font-size="{NOTE_SIZE - 1}" text-anchor="end" fill="{item["color"]}" '
            f'transform="rotate(-90 {px:.1f} {ty:.1f})">{esc(item["text"])}</text>']


_DRAW = {"line": _draw_line, "band": _draw_band, "marks": _draw_marks, "vline": _draw_vline,
         "vspan": _draw_vspan, "cell": _draw_cell, "text": _draw_text, "note": _draw_note,
         "vnote": _draw_vnote}
