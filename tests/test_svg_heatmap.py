"""The report's rows x steps heatmap as SVG (forensics.present.svg.heatmap): the picture of the
matplotlib heatmap (tests/test_pictures_and_suspects.py), read from the SVG's classes and data
attributes. Issue 29 point 3: a resolved finding is never coloured out of bounds; point 7: the
report's figures are drawn without matplotlib.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import numpy as np
import pytest

import forensics
from forensics.present.scene.heatmap import heatmap_data
from forensics.present.svg import views
from forensics.present.svg.heatmap import ramp
from forensics.records import Record
from tests.conftest import DATA, embedding_records

RAMP = {ramp(t / 100) for t in range(101)}


def _heatmap(result: Any, site: str, variant: str) -> ET.Element:
    return ET.fromstring(views.figure("heatmap", result, site=site, variant=variant).to_svg())


def _classed(root: ET.Element, *names: str) -> list[ET.Element]:
    return [e for e in root.iter() if set(names) <= set((e.get("class") or "").split())]


def _marks(root: ET.Element, state: str) -> list[tuple[float, float]]:
    """(step index, row index) of the markers of ``mark STATE``."""
    return [(float(m.get("data-x", "nan")), float(m.get("data-y", "nan")))
            for group in _classed(root, "mark", state) for m in group]


def _legend(root: ET.Element) -> list[str]:
    return ["".join(e.itertext()) for e in _classed(root, "legend-entry")]


def _ticks(root: ET.Element, axis: str) -> dict[str, float]:
    """Tick label -> its position (step or row index)."""
    return {"".join(e.itertext()): float(e.get(f"data-{axis}", "nan"))
            for e in _classed(root, f"{axis}tick")}


@pytest.fixture(scope="module")
def incident_b() -> Any:
    return forensics.replay(DATA / "incident-b-vocab-sentinel.capture", ["upstream", "patched"])


def test_upstream_colours_the_offending_cell_and_writes_its_value(incident_b: Any) -> None:
    root = _heatmap(incident_b, "embedding", "upstream")
    cells = _classed(root, "cell", "open")
    assert len(cells) == 1 and cells[0].get("fill") in RAMP
    assert float(cells[0].get("data-x")) == _ticks(root, "x")["14"]
    assert "248320" in "".join(t for e in _classed(root, "cell-text") for t in e.itertext())
    assert "out of bounds" in _legend(root)


def test_patched_draws_the_resolved_finding_as_resolved(incident_b: Any) -> None:
    assert incident_b.verdicts["patched"]["embedding"] == "ok"
    root = _heatmap(incident_b, "embedding", "patched")
    assert not _classed(root, "cell", "open"), "a resolved finding coloured out of bounds"
    assert [x for x, _ in _marks(root, "resolved")] == [_ticks(root, "x")["14"]]
    assert "resolved by patched" in _legend(root)


def test_side_by_side_panels_span_the_same_steps_and_rows(incident_b: Any) -> None:
    root = ET.fromstring(views.side_by_side(incident_b, "heatmap", site="embedding").to_svg())
    panels = _classed(root, "panel")
    assert len(panels) == 2
    spans = [(_ticks(p, "x"), _ticks(p, "y")) for p in panels]
    assert spans[0] == spans[1] and "14" in spans[0][0]


def test_misattributed_cells_are_marked() -> None:
    result = forensics.replay(DATA / "misattribution.capture", ["upstream"])
    root = _heatmap(result, "batch_change", "upstream")
    found = result.findings
    sus = found[(found["kind"] == "misattributed") & (found["site"] == "batch_change")]
    data = heatmap_data(result, "batch_change", "upstream")
    expected = {(float(data.steps.index(float(s))), float(data.rows.index(float(r))))
                for s, r in zip(sus["step"], sus["row"], strict=True)}
    assert set(_marks(root, "suspect")) == expected and expected
    assert "misattributed (another request's row)" in _legend(root)


def test_one_bad_cell_among_10000_steps_shows_in_a_small_svg() -> None:
    result = forensics.replay(embedding_records(bad_step=5000, steps=10_000), ["upstream"])
    svg = views.figure("heatmap", result, site="embedding", variant="upstream").to_svg()
    root = ET.fromstring(svg)
    cells = _classed(root, "cell", "open")
    assert len(cells) == 1 and abs(float(cells[0].get("data-x")) - 5000) < 1
    assert float(cells[0].get("width")) >= 2.5  # pixels: visible among 10,000 steps
    assert len(_classed(root, "checked")) == 1  # one run of checked steps, not 10,000 rects
    assert len(svg) < 20_000, len(svg)


def test_a_larger_distance_gets_a_darker_colour_and_a_key() -> None:
    records = [Record("embedding", step, 0, {"input_ids": np.array([1, 100 + extra]),
                                             "num_embeddings": 100})
               for step, extra in enumerate([0, 9])]
    result = forensics.replay(records, ["upstream"])
    root = _heatmap(result, "embedding", "upstream")
    data = heatmap_data(result, "embedding", "upstream")
    fills = {float(c.get("data-x")): c.get("fill") for c in _classed(root, "cell", "open")}
    assert data.shade(10.0) > data.shade(1.0)  # distances 1 and 10, as matplotlib normalises
    assert fills == {0.0: ramp(data.shade(1.0)), 1.0: ramp(data.shade(10.0))}
    assert "distance past the bound: 10" in _legend(root)


def test_capture_strings_stay_text() -> None:
    name = "a<script>&\x07b.capture"
    result = forensics.replay(embedding_records(bad_step=1, steps=2), ["upstream"])
    result.capture = name
    svg = views.figure("heatmap", result, site="embedding", variant="upstream").to_svg()
    root = ET.fromstring(svg)
    assert not [e for e in root.iter() if e.tag.endswith("script")]
    assert "a<script>&\\x07b" in "".join(root.itertext()) and "<script" not in svg
