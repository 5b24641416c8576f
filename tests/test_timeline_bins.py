"""Issue 42 point 6: a timeline of more steps than bins shows counts per bin (how many values
out of bounds each bin holds, stacked by verdict), not a min..max band a long capture saturates.
Results built directly (no replay), drawn as the report's SVG."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import numpy as np
import pandas as pd

from forensics.present import plots
from forensics.present.scene.timeline import timeline_data
from forensics.present.style import MARK_STYLES, OPEN, TIMELINE_BINS, VIOLATION_COLOR
from forensics.present.svg import views
from forensics.present.svg.timeline import timeline_panel
from forensics.present.timeline_bins import STEPS, VALUES, bin_density
from tests.test_plots import FINDING_COLUMNS, FakeResult

VOCAB = 32000


def burst_result(steps: int = 10_000, burst: range = range(6000, 6400),
                 lone: int = 137) -> FakeResult:
    """Embedding over ``steps`` steps: upstream reads the sentinel at every step of ``burst``
    (two elements each) and at step ``lone`` (one); patched resolves the burst and cannot
    judge the lone one."""
    step = np.arange(steps)
    bad = np.isin(step, list(burst)) | (step == lone)
    bounds = pd.DataFrame(dict(variant="upstream", site="embedding", step=step, rank=0,
                               record=step, tensor="input_ids", min=0,
                               max=np.where(bad, VOCAB, VOCAB - 10), lower=0, upper=VOCAB))
    bounds = pd.concat([bounds, bounds.assign(variant="patched")], ignore_index=True)
    rows = [dict(variant=variant, site="embedding", step=s, rank=0, row=0, element=e,
                 tensor="input_ids", kind="out_of_bounds", value=VOCAB, lower=0, upper=VOCAB,
                 origin=None, resolved=variant == "patched" and s != lone, req_id="r",
                 record=s)
            for variant in ("upstream", "patched") for s in burst for e in (0, 1)]
    rows += [dict(variant=variant, site="embedding", step=lone, rank=0, row=0, element=0,
                  tensor="input_ids", kind="out_of_bounds", value=VOCAB, lower=0,
                  upper=VOCAB, origin=None, resolved=False, req_id="r", record=lone)
             for variant in ("upstream", "patched")]
    findings = pd.DataFrame(rows, columns=FINDING_COLUMNS)
    findings["judged"] = ~((findings["variant"] == "patched") & (findings["step"] == lone))
    return FakeResult(capture="burst", findings=findings, bounds=bounds,
                      verdicts={"upstream": {"embedding": "violation"},
                                "patched": {"embedding": "ok"}})


def _bars(panel: Any, state: str) -> dict[float, float]:
    """{bin start + half its width: count} of the panel's bars of ``state`` (class)."""
    return {(item["x0"] + item["x1"]) / 2: item["y1"] - item["y0"]
            for kind, item in panel.items if kind == "cell" and item["role"] == f"bar {state}"}


def _classed(root: ET.Element, *names: str) -> list[ET.Element]:
    return [e for e in root.iter() if set(names) <= set((e.get("class") or "").split())]


def test_a_long_timeline_counts_values_per_bin_instead_of_a_band() -> None:
    result = burst_result()
    panel = timeline_panel(result, "embedding", "upstream")
    bars = _bars(panel, "open")
    assert sum(bars.values()) == 2 * 400 + 1  # every value out of bounds, counted once
    assert len(bars) <= TIMELINE_BINS
    assert {round(x) for x, c in bars.items() if c == 1} == {100}  # the bin of step 137
    assert max(bars.values()) == 2 * 200  # a 200-step bin wholly inside the burst
    assert "values out of bounds per 200-step bin" in panel.title
    assert panel.ylabel == "values out of bounds per 200-step bin"
    assert panel.ylim is not None and panel.ylim[1] < 2 * 200 * 1.5  # the counts' scale
    root = ET.fromstring(views.figure("timeline", result, site="embedding",
                                      variant="upstream").to_svg())
    assert not _classed(root, "band") and not _classed(root, "series", "max")
    lines = {round(float(e.get("data-x"))) for e in _classed(root, "vline", "open")}
    assert any(abs(x - 137) < 200 for x in lines), "the lone bad step still shows"
    assert len(_classed(root, "bar", "open")) == len(bars)
    assert [("".join(n.itertext())) for n in _classed(root, "note", "first")] == [
        f"first: step 137, largest value {VOCAB}"]


def test_bars_stack_by_verdict() -> None:
    panel = timeline_panel(burst_result(), "embedding", "patched")
    assert sum(_bars(panel, "resolved").values()) == 800
    assert sum(_bars(panel, "unseen").values()) == 1
    assert not _bars(panel, "open")
    legend = [entry.label for entry in panel.legend]
    assert "resolved by patched" in legend and "not judged by patched" in legend


def test_a_short_timeline_keeps_its_band() -> None:
    result = burst_result(steps=150, burst=range(60, 70), lone=3)
    data = timeline_data(result, "embedding", "upstream")
    assert data.width == 1 and data.density is None
    root = ET.fromstring(views.figure("timeline", result, site="embedding",
                                      variant="upstream").to_svg())
    assert _classed(root, "band") and not _classed(root, "bar", "open")


def test_without_findings_the_bad_steps_are_counted() -> None:
    result = burst_result()
    result.findings = None
    data = timeline_data(result, "embedding", "upstream")
    assert data.density is not None and data.density.unit == STEPS
    assert sum(data.density.totals()) == 400 + 1
    assert data.density.ylabel() == "steps with a value out of bounds per 200-step bin"


def test_the_density_counts_only_the_drawn_tensors_out_of_bounds() -> None:
    found = pd.DataFrame(dict(step=[5, 5, 250, 260], kind=["out_of_bounds", "misattributed",
                                                          "out_of_bounds", "out_of_bounds"],
                              tensor=["a", "a", "a", "b"], resolved=False))
    density = bin_density(found, ["a"], 200, [], MARK_STYLES, "upstream")
    assert (density.starts, density.totals(), density.unit) == ([0, 200], [1, 1], VALUES)
    assert density.stacked() == [(OPEN, 0, 0, 1), (OPEN, 200, 0, 1)]
    assert density.label(OPEN) == "out of bounds (a)"
    assert density.colors[OPEN] == VIOLATION_COLOR


def test_the_notebook_draws_the_same_counts() -> None:
    """plot_bounds_timeline (matplotlib) draws the bars the report's SVG does."""
    from matplotlib.patches import Rectangle

    result = burst_result()
    ax = plots.plot_bounds_timeline(result, site="embedding", variant="upstream")
    heights = {round(p.get_x() + p.get_width() / 2): p.get_height() for p in ax.patches
               if isinstance(p, Rectangle) and p.get_height() > 0}
    panel = timeline_panel(result, "embedding", "upstream")
    assert heights == {round(x + 0.5): c for x, c in _bars(panel, "open").items()}
    assert ax.get_ylabel() == "values out of bounds per 200-step bin"
    assert ax.get_xlim() == (-0.5, 9999.5)  # the whole capture, not only its bad bins
    plots.close(ax)
