"""Round 13: steps, values and bounds past 2**53 in the pictures (issue 38, hostile input).

The views read a capture's steps, values and bounds as float64, which holds no integer past
2**53: a finding at step 2**62 + 1 was named "first: step 4611686018427387904" (its neighbour),
the per-step verdicts were looked up by the rounded step (neighbouring steps took each other's
state), and every label printing a value or a bound near 2**63 or -2**62 printed another
number. They are exact integers now, floats only for the coordinates drawn.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from matplotlib.text import Text

from forensics import plots
from forensics.present.scene.heatmap import heatmap_data
from forensics.present.scene.histogram import histogram_data
from forensics.present.scene.timeline import step_verdicts, timeline_data
from forensics.present.style import OPEN, RESOLVED
from forensics.present.svg import views
from forensics.records import Record
from forensics.replaying import replay
from forensics.store.writer import write_capture
from tests.test_plots import BOUNDS_COLUMNS, FINDING_COLUMNS, FakeResult

BASE = 2**62
INT64_MAX = 2**63 - 1


def _svg_texts(kind: str, result: Any) -> str:
    """Every text of the report's SVG view ``kind`` of (embedding, upstream)."""
    figure = views.figure(kind, result, site="embedding", variant="upstream")
    return "\n".join(ET.fromstring(figure.to_svg()).itertext())


def _plot_texts(kind: str, result: Any) -> str:
    """Every text of the matplotlib view ``kind`` of (embedding, upstream), legend included."""
    ax = plots.plot(result, kind, site="embedding", variant="upstream")
    ax.figure.canvas.draw()
    texts = [t.get_text() for t in ax.figure.findobj(Text)]
    plots.close(ax)
    return "\n".join(texts)


def _result(rows: list[tuple[int, int, int, int, bool]]) -> FakeResult:
    """One tensor of the embedding, a bounds row and an out-of-bounds finding per (step,
    value, lower, upper, resolved)."""
    bounds = [dict(variant="upstream", site="embedding", step=step, rank=0, record=i,
                   tensor="input_ids", min=value, max=value, lower=lower, upper=upper)
              for i, (step, value, lower, upper, _) in enumerate(rows)]
    findings = [dict(variant="upstream", site="embedding", step=step, rank=0, row=0, element=0,
                     tensor="input_ids", kind="out_of_bounds", value=value, lower=lower,
                     upper=upper, origin=None, resolved=resolved, req_id=None, record=i)
                for i, (step, value, lower, upper, resolved) in enumerate(rows)]
    return FakeResult(capture="huge", variants=["upstream"],
                      findings=pd.DataFrame(findings, columns=FINDING_COLUMNS),
                      bounds=pd.DataFrame(bounds, columns=BOUNDS_COLUMNS),
                      verdicts={"upstream": {"embedding": "violation"}})


@pytest.fixture(scope="module")
def past_2_53(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The attacker's capture: embedding records at steps 2**62 + 0..3, the one at 2**62 + 1
    holding id 50 with num_embeddings 10, replayed."""
    records = [Record("embedding", BASE + i, 0,
                      {"input_ids": np.array([50 if i == 1 else 3], dtype=np.int64),
                       "num_embeddings": 10}) for i in range(4)]
    folder: Path = tmp_path_factory.mktemp("steps")
    return replay(write_capture(folder / "huge.capture", records))


def test_the_timeline_names_the_first_violation_at_its_exact_step(past_2_53: Any) -> None:
    """The note said "first: step 4611686018427387904" for the finding at ...905."""
    data = timeline_data(past_2_53, "embedding", "upstream")
    assert data.first == (BASE + 1, 50)
    note = "first: step 4611686018427387905, largest value 50"
    assert data.first_note() == note
    assert note in _svg_texts("timeline", past_2_53)
    assert note in _plot_texts("timeline", past_2_53)


@pytest.mark.parametrize("open_at", [1, 2])
def test_each_step_gets_its_own_verdict(open_at: int) -> None:
    """Neighbouring steps past 2**53, one finding unresolved and the other resolved: looked up
    by the rounded step, both took the first state found (the resolved one drawn as out of
    bounds, or the first violation named at the resolved step)."""
    steps = (BASE + 1, BASE + 2)
    result = _result([(step, 50, 0, 10, step != BASE + open_at) for step in steps])
    expected = {step: OPEN if step == BASE + open_at else RESOLVED for step in steps}
    assert step_verdicts(result, "embedding", "upstream") == expected
    data = timeline_data(result, "embedding", "upstream")
    (line,) = data.lines
    assert {int(s) + data.origin: state for s, state in
            zip(line.binned["step"], line.binned["state"], strict=True)} == expected
    assert data.first == (BASE + open_at, 50)


def test_the_timeline_draws_each_step_at_its_own_x_under_its_own_label(past_2_53: Any
                                                                         ) -> None:
    """Drawn at float(step), the four steps shared one x (floats are 1,024 apart there) under
    one tick labelled 4611686018427387904; now x is relative to the first step and each tick
    is labelled with its exact step."""
    figure = views.figure("timeline", past_2_53, site="embedding", variant="upstream")
    root = ET.fromstring(figure.to_svg())
    ticks = {"".join(e.itertext()): float(e.get("data-x", "nan"))
             for e in root.iter() if e.get("class") == "xtick"}
    assert ticks and {int(label) for label in ticks} <= {BASE + i for i in range(4)}
    (mark,) = [m for g in root.iter() if g.get("class") == "mark open" for m in g
               if m.get("data-x")]
    assert float(mark.get("data-x", "nan")) == ticks[str(BASE + 1)]
    series = next(e for e in root.iter() if e.get("class") == "series max")
    assert len(set(series.get("data-x", "").split(","))) == 4
    ax = plots.plot_bounds_timeline(past_2_53, site="embedding", variant="upstream")
    ax.figure.canvas.draw()
    labels = {t.get_text(): t.get_position()[0] for t in ax.get_xticklabels()
              if t.get_text()}
    plots.close(ax)
    assert str(BASE + 1) in labels  # each tick labelled with the step at its place
    assert all(int(label) == BASE + round(x) for label, x in labels.items())


#: a value 9 past a bound near int64's largest, at a step past 2**62, and one 2 below a
#: bound near -2**62: every number float64 rounds
NEAR_MAX = (BASE + 1, INT64_MAX, BASE + 1, INT64_MAX - 8, False)
NEGATIVE = (BASE + 3, -BASE - 1, -BASE + 1, -BASE + 5, False)


@pytest.mark.parametrize("row", [NEAR_MAX, NEGATIVE], ids=["near-2**63", "near--2**62"])
def test_the_timeline_labels_are_exact(row: tuple[int, int, int, int, bool]) -> None:
    step, value, lower, upper, _ = row
    result = _result([row])
    data = timeline_data(result, "embedding", "upstream")
    (line,) = data.lines
    assert data.first == (step, value)
    assert (line.bound_label(), line.lower_label()) == (
        f"valid bound (dashed): < {upper}", f"lower bound = {lower}")
    for texts in (_svg_texts("timeline", result), _plot_texts("timeline", result)):
        extreme = "largest" if value >= upper else "smallest"
        assert f"first: step {step}, {extreme} value {value}" in texts
        assert f"valid bound (dashed): < {upper}" in texts
        assert f"lower bound = {lower}" in texts


@pytest.mark.parametrize("row", [NEAR_MAX, NEGATIVE], ids=["near-2**63", "near--2**62"])
def test_the_heatmap_labels_are_exact(row: tuple[int, int, int, int, bool]) -> None:
    """The step under the cell, the value written in it and the largest distance past the
    bound in the key."""
    step, value, lower, upper, _ = row
    result = _result([row, (step + 1, lower, lower, upper, False)])
    assert result.findings is not None  # the second step checked, in range: no finding
    result.findings = result.findings[result.findings["step"] == step]
    data = heatmap_data(result, "embedding", "upstream")
    distance = value - upper + 1 if value >= upper else lower - value
    assert data.steps == [step, step + 1]
    assert [label for _, label in data.xticks()] == [str(step), str(step + 1)]
    assert data.written == [(0, 0, value)] and data.farthest == distance
    assert int(data.grid[0, 0]) > 0 and data.grid[0, 1] == 0  # the cell of its own step
    svg = _svg_texts("heatmap", result)
    assert str(value) in svg and str(step) in svg and str(step + 1) in svg
    assert f"distance past the bound: {distance}" in svg
    shown = _plot_texts("heatmap", result)
    assert str(value) in shown and str(step) in shown and str(step + 1) in shown


@pytest.mark.parametrize("row", [NEAR_MAX, NEGATIVE], ids=["near-2**63", "near--2**62"])
def test_the_histogram_labels_and_bars_are_exact(row: tuple[int, int, int, int, bool]
                                                 ) -> None:
    """The valid range, the bound lines, the axis' tick labels and the bar of the value."""
    step, value, lower, upper, _ = row
    result = _result([row])
    data = histogram_data(result, "embedding", "upstream")
    assert (data.lower, data.upper) == (lower, upper)
    assert data.range_label() == f"valid range [{lower}, {upper})"
    assert data.bound_labels() == (f"valid bound: upper = {upper} (exclusive)",
                                   f"valid bound: lower = {lower}")
    positions, labels = data.axis.ticks()
    assert labels and all(data.axis.pos([int(t)])[0] == p
                          for p, t in zip(positions, labels, strict=True))
    assert data.outside is not None and data.edges is not None
    (bar,) = np.flatnonzero(data.outside)
    assert data.edges[bar] < data.axis.pos([value])[0] < data.edges[bar + 1]
    assert data.axis.pos([value])[0] != data.axis.pos([value + 1])[0]
    for texts in (_svg_texts("histogram", result), _plot_texts("histogram", result)):
        assert data.range_label() in texts and all(b in texts for b in data.bound_labels())
        assert all(label in texts for label in labels)
