"""Round 13, what the steps helper left (issue 38, hostile input): the timeline's value axis
past 2**53, ``findings --steps`` past the largest step, and a bound that is not known.

The timeline's y axis placed values near 2**63 as floats and took its tick labels from those
floats: the SVG printed "10000000000000000000" (past int64, a value nothing holds) and
matplotlib "4", "5"... under an offset "1e18", never the values the axis spans.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from forensics import plots
from forensics.cli import main
from forensics.present.export import parse_steps
from forensics.present.scene.histogram import histogram_data
from forensics.present.svg import views
from tests.hostile.test_round13_steps import (
    BASE,
    INT64_MAX,
    NEAR_MAX,
    NEGATIVE,
    _plot_texts,
    _result,
    _svg_texts,
)

INT64_MIN = -INT64_MAX - 1
#: a capture of the project's own (the steps are read before it is replayed)
CAPTURE = Path(__file__).resolve().parents[2] / "data" / "clean.capture"
#: (step, value, lower, upper, resolved) rows of one tensor, each set read by the timeline:
#: values a few apart just under 2**63 (float64 holds them all as 2**63), a few apart near
#: -2**62, and both at once (a span wider than int64)
ROWS = {
    "near-2**63": [(BASE + i, INT64_MAX - 3 + i, INT64_MAX - 20, INT64_MAX - 8, False)
                   for i in range(4)],
    "near--2**62": [(BASE + i, -BASE - 2 + i, -BASE + 1, -BASE + 5, False) for i in range(4)],
    "both": [NEAR_MAX, NEGATIVE],
}


def _spanned(rows: list[tuple[int, int, int, int, bool]]) -> tuple[int, int]:
    """The exact values the timeline draws, smallest and largest, widened by the axis' margin
    (12% of the span each side, and one more)."""
    values = [v for _, value, lower, upper, _ in rows for v in (value, lower, upper)]
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 12 // 100 + 1
    return max(lo - pad, INT64_MIN), min(hi + pad, INT64_MAX)


def _check_ticks(ticks: list[tuple[str, float]], marks: list[tuple[int, float]],
                 spanned: tuple[int, int]) -> None:
    """Each tick label (text, pixel) is an exact integer within ``spanned`` (int64 included),
    and the labels agree with where the values of ``marks`` (value, pixel) are drawn."""
    assert len(ticks) >= 2, ticks
    labels = [(int(text.replace("\N{MINUS SIGN}", "-")), at) for text, at in ticks
              if re.fullmatch(r"[-\N{MINUS SIGN}]?[0-9]+", text)]
    assert len(labels) == len(ticks), f"labels that are not integers: {ticks}"
    assert all(spanned[0] <= value <= spanned[1] for value, _ in labels), (labels, spanned)
    (low, low_at), (high, high_at) = min(labels), max(labels)
    for value, at in marks:
        expected = low_at + (value - low) / (high - low) * (high_at - low_at)
        assert abs(expected - at) < 1.0, (value, at, expected)


@pytest.mark.parametrize("name", list(ROWS))
def test_the_timeline_labels_its_value_axis_exactly(name: str) -> None:
    """SVG and matplotlib: every y tick label is an integer the axis spans, placed where
    that value is drawn."""
    rows = ROWS[name]
    result = _result(rows)
    values = [value for _, value, *_ in sorted(rows)]
    figure = views.figure("timeline", result, site="embedding", variant="upstream")
    root = ET.fromstring(figure.to_svg())
    ticks = [("".join(e.itertext()), float(e.get("y", "nan")) - 3.5)
             for e in root.iter() if e.get("class") == "ytick"]
    # every run's polyline (steps BASE+1 and BASE+3 of "both" are two: no record between)
    pixels = [float(p.split(",")[1]) for e in root.iter() if e.get("class") == "series max"
              for p in e.get("points", "").split()]
    _check_ticks(ticks, list(zip(values, pixels, strict=True)), _spanned(rows))
    _check_ticks(*_plotted(result, values), _spanned(rows))


def _plotted(result: Any, values: list[int]) -> tuple[list[tuple[str, float]],
                                                      list[tuple[int, float]]]:
    """matplotlib's timeline: the y tick labels in view (text, display y) and the largest
    value of each step (value, display y)."""
    ax = plots.plot_bounds_timeline(result, site="embedding", variant="upstream")
    ax.figure.canvas.draw()
    lo, hi = sorted(ax.get_ylim())
    ticks = [(t.get_text(), float(ax.transData.transform((0, t.get_position()[1]))[1]))
             for t in ax.get_yticklabels() if lo <= t.get_position()[1] <= hi]
    offset = ax.yaxis.get_offset_text().get_text()
    ys = [y for line in ax.get_lines()  # each run's line ("_" after the first: no legend)
          if str(line.get_label()).lstrip("_").startswith("input_ids") for y in line.get_ydata()]
    marks = [(value, float(ax.transData.transform((0, y))[1]))
             for value, y in zip(values, ys, strict=True)]
    plots.close(ax)
    assert offset == "", f"an offset {offset!r}: the labels are not the values"
    return ticks, marks


#: ends of ``--steps`` that are integers, only past the steps a capture holds: 20 digits, 19
#: digits past 2**63 - 1, thousands of digits (``int`` refuses them), and below int64
PAST_STEPS = ["1:99999999999999999999", "1:9223372036854775808", "1:" + "9" * 5000,
              "-99999999999999999999:3"]


@pytest.mark.parametrize("text", PAST_STEPS, ids=["20-digits", "2**63", "5000-digits",
                                                  "below-int64"])
def test_a_step_past_the_largest_is_said_to_be_so(text: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """``--steps 1:99999999999999999999`` is A:B, only too long: it was told "is not A:B;
    give two integers" (and 19 digits past 2**63 - 1 were taken as a step); the line now says
    the end is past the steps a capture holds, the largest, and the fix."""
    code = main(["findings", str(CAPTURE), f"--steps={text}"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and len(err.splitlines()) == 1, (code, out, err)
    assert "is not A:B" not in err
    assert str(INT64_MAX) in err and "give each end from 0 to" in err
    assert ("below" if text.startswith("-") else "past the largest step a capture can hold") in err
    assert len(err) < 400  # thousands of digits are counted, not printed
    assert parse_steps("1:9223372036854775807") == (1, INT64_MAX)


#: (lower, upper) of a record whose bound is not known: no lower, and neither
UNKNOWN = [(None, 10), (None, None)]


@pytest.mark.parametrize("bounds", UNKNOWN, ids=["no-lower", "no-bounds"])
def test_a_bound_not_known_is_said_unknown(bounds: tuple[int | None, int | None]) -> None:
    """The histogram took an unknown lower bound for 0 (and, with no bound at all, the
    largest offending value for the upper one): its legend said "lower = 0" of a bound
    nothing states. Every label of the histogram and the timeline now says unknown."""
    lower, upper = bounds
    result = _result([(7, 50, lower, upper, False)])  # type: ignore[list-item]
    data = histogram_data(result, "embedding", "upstream")
    assert (data.lower, data.upper) == bounds
    texts = [_svg_texts(kind, result) + _plot_texts(kind, result)
             for kind in ("histogram", "timeline")]
    for text in texts:
        assert "lower = 0" not in text and "lower bound = 0" not in text
        assert "[0," not in text and "= ?" not in text and "< ?" not in text
        assert "valid range [unknown," in text or "lower bound = unknown" in text
    if upper is None:
        assert all("upper = 50" not in t and "< 50" not in t for t in texts)
