"""The report's value histogram as SVG (forensics.present.svg.histogram): the picture of the
matplotlib histogram (tests/test_plots.py), read from the SVG's classes and data attributes,
drawn without matplotlib (issue 29, points 3 and 7)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import numpy as np
import pytest

import forensics
from forensics.present.scene.histogram import histogram_data
from forensics.present.style import VIOLATION_COLOR
from forensics.present.svg import views
from forensics.records import Record
from tests.conftest import DATA, embedding_records

VOCAB = 248320


def _histogram(result: Any, site: str = "embedding", variant: str = "upstream") -> ET.Element:
    return ET.fromstring(views.figure("histogram", result, site=site,
                                      variant=variant).to_svg())


def _classed(root: ET.Element, *names: str) -> list[ET.Element]:
    return [e for e in root.iter() if set(names) <= set((e.get("class") or "").split())]


def _text(root: ET.Element) -> str:
    return "\n".join("".join(e.itertext()) for e in root.iter() if e.tag.endswith("}text"))


def _legend(root: ET.Element) -> list[str]:
    return ["".join(e.itertext()) for e in _classed(root, "legend-entry")]


@pytest.fixture(scope="module")
def incident_b() -> Any:
    return forensics.replay(DATA / "incident-b-vocab-sentinel.capture", ["upstream", "patched"])


def test_the_vocab_sentinel_is_named_and_its_bar_is_out_of_bounds(incident_b: Any) -> None:
    root = _histogram(incident_b)
    notes = ["".join(e.itertext()) for e in _classed(root, "note", "sentinel")]
    assert f"vocab_size = {VOCAB}: rejection sentinel" in notes
    data = histogram_data(incident_b, "embedding", "upstream")
    at = float(data.axis.pos(np.array([VOCAB]))[0])
    bars = _classed(root, "bar", "open")
    assert bars and all(abs(float(b.get("data-x")) - at) <= 0.5 for b in bars)
    assert bars[0].get("fill") == VIOLATION_COLOR
    lines = [e for e in root.iter() if e.get("class") == "sentinel"]
    assert [float(s.get("data-x")) for s in lines] == [
        float(data.axis.pos(np.array([v]))[0]) for v, _, _ in data.sentinels]


def test_a_wide_range_is_a_broken_axis_with_plain_count_ticks(incident_b: Any) -> None:
    root = _histogram(incident_b)
    assert "broken axis" in _text(root) and _classed(root, "break")
    assert "≈" in "".join(t for e in _classed(root, "note", "break") for t in e.itertext())
    counts = ["".join(e.itertext()) for e in _classed(root, "ytick")]
    assert counts and all(c.replace(",", "").isdigit() for c in counts), counts
    xticks = ["".join(e.itertext()) for e in _classed(root, "xtick")]
    assert str(VOCAB) in xticks and "0" in xticks
    assert {"valid range [0, 248320)", "valid bound: upper = 248320 (exclusive)",
            "out of bounds (every element)"} <= set(_legend(root))


def test_a_tiny_capture_draws_its_in_range_and_offending_values() -> None:
    result = forensics.replay(embedding_records(bad_step=1, steps=2), ["upstream"])
    root = _histogram(result)
    assert _classed(root, "bar", "in-range") and _classed(root, "bar", "open")
    assert not _classed(root, "empty")


def test_a_narrow_range_is_one_linear_axis() -> None:
    records = [Record("embedding", step, 0, {"input_ids": np.array([1, 2, 9 + step]),
                                             "num_embeddings": 10}) for step in range(2)]
    root = _histogram(forensics.replay(records, ["upstream"]))
    assert not _classed(root, "break") and "broken axis" not in _text(root)
    assert [float(b.get("data-x")) for b in _classed(root, "bar", "open")] == [10.0]


def test_side_by_side_panels_share_the_count_axis(incident_b: Any) -> None:
    root = ET.fromstring(views.side_by_side(incident_b, "histogram", site="embedding").to_svg())
    panels = _classed(root, "panel")
    ticks = [["".join(e.itertext()) for e in _classed(p, "ytick")] for p in panels]
    assert len(panels) == 2 and ticks[0] == ticks[1]


def test_capture_strings_stay_text() -> None:
    result = forensics.replay(embedding_records(bad_step=1, steps=2), ["upstream"])
    result.capture = "a<script>&\x07b.capture"
    svg = views.figure("histogram", result, site="embedding", variant="upstream").to_svg()
    root = ET.fromstring(svg)
    assert not [e for e in root.iter() if e.tag.endswith("script")] and "<script" not in svg
    assert "a<script>&\\x07b" in _text(root)
