"""The report's timeline and verdict matrix as SVG (forensics.present.svg): the same pictures as
the matplotlib views (tests/test_pictures_and_suspects.py, tests/test_plots.py), read from the
SVG's classes and data attributes; drawn without importing matplotlib.

Issue 29: pictures follow verdicts (point 3: a resolved finding drawn as resolved, integer
ticks and a visible bound on tiny captures, one bad step among 10,000 still visible, suspect
steps marked) and the report's figures without matplotlib's cost (point 7).
"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import forensics
from forensics.present.selection import result_sites, variant_names
from forensics.present.style import (
    NO_VERDICT_COLOR,
    RESOLVED_COLOR,
    SUSPECT_COLOR,
    SUSPECT_LABEL,
    TIMELINE_BINS,
    UNSEEN_COLOR,
    VERDICT_COLORS,
    VIOLATION_COLOR,
)
from forensics.present.svg import views
from forensics.present.svg.timeline import timeline_panel
from forensics.present.svg.verdicts import verdict_figure
from tests.conftest import DATA, embedding_records
from tests.test_plots import FakeResult

ROOT = Path(__file__).resolve().parents[1]
VOCAB = 248320


def _svg(figure: Any) -> ET.Element:
    return ET.fromstring(figure.to_svg())


def _timeline(result: Any, site: str, variant: str, **kwargs: Any) -> ET.Element:
    return _svg(views.figure("timeline", result, site=site, variant=variant, **kwargs))


def _classed(root: ET.Element, *names: str) -> list[ET.Element]:
    """Elements whose class holds every one of ``names``."""
    return [e for e in root.iter() if set(names) <= set((e.get("class") or "").split())]


def _marks(root: ET.Element, state: str) -> list[ET.Element]:
    """The markers (each with data-x, data-y, data-size) of the ``mark STATE`` groups."""
    return [m for group in _classed(root, "mark", state) for m in group if m.get("data-x")]


def _text(element: ET.Element) -> str:
    return "".join(element.itertext())


def _legend(root: ET.Element) -> list[str]:
    return [_text(e) for e in _classed(root, "legend-entry")]


def _painted(root: ET.Element, color: str) -> list[ET.Element]:
    """Elements filled or stroked in ``color``."""
    return [e for e in root.iter() if color in (e.get("fill"), e.get("stroke"))]


def _texts(root: ET.Element) -> str:
    return "\n".join(_text(e) for e in root.iter() if e.tag.endswith("}text"))


@pytest.fixture(scope="module")
def incident_b() -> Any:
    return forensics.replay(DATA / "incident-b-vocab-sentinel.capture", ["upstream", "patched"])


def test_a_resolved_finding_is_drawn_as_resolved(incident_b: Any) -> None:
    assert incident_b.verdicts["patched"]["embedding"] == "ok"
    root = _timeline(incident_b, "embedding", "patched")
    resolved = _marks(root, "resolved")
    assert [float(m.get("data-x")) for m in resolved] == [14.0]
    assert all(m.get("stroke") == RESOLVED_COLOR for m in resolved)
    assert not _painted(root, VIOLATION_COLOR), "a resolved finding drawn out of bounds"
    assert not _marks(root, "open")
    assert "first:" not in _texts(root)
    assert "resolved by patched" in _legend(root)
    assert "out of bounds" not in _legend(root)


def test_upstream_still_draws_its_violation(incident_b: Any) -> None:
    root = _timeline(incident_b, "embedding", "upstream")
    bad = _marks(root, "open")
    assert [(float(m.get("data-x")), float(m.get("data-y"))) for m in bad] == [(14.0, VOCAB)]
    assert all(m.get("fill") == VIOLATION_COLOR for m in bad)
    assert "out of bounds" in _legend(root)
    assert [_text(n) for n in _classed(root, "note", "first")] == [
        f"first: step 14, largest value {VOCAB}"]
    title = " ".join(_text(t) for t in _classed(root, "title"))
    assert "incident-b-vocab-sentinel · embedding · upstream" in title
    assert any("valid bound (dashed): < 248320" == t for t in _legend(root))
    assert "lower bound = 0" in _legend(root)


def test_side_by_side_panels_follow_each_variants_verdicts(incident_b: Any) -> None:
    root = _svg(views.side_by_side(incident_b, "timeline", site="embedding"))
    panels = _classed(root, "panel")
    assert len(panels) == 2
    upstream, patched = panels
    assert _marks(upstream, "open") and not _marks(upstream, "resolved")
    assert _marks(patched, "resolved") and not _marks(patched, "open")
    assert not _painted(patched, VIOLATION_COLOR)
    yticks = [[t.get("data-y") for t in _classed(p, "ytick")] for p in panels]
    assert yticks[0] == yticks[1] and yticks[0], "one value axis for both panels"


def test_a_tiny_capture_has_integer_ticks_and_a_visible_bound() -> None:
    result = forensics.replay(embedding_records(bad_step=1, steps=2), ["upstream"])
    root = _timeline(result, "embedding", "upstream")
    ticks = [float(t.get("data-x")) for t in _classed(root, "xtick")]
    assert ticks == [0.0, 1.0], ticks
    assert all(_text(t) in ("0", "1") for t in _classed(root, "xtick"))
    bound = _classed(root, "bound", "upper")
    xs = [float(x) for x in bound[0].get("data-x").split(",")]
    assert max(xs) - min(xs) >= 1.0  # a segment, not a point


def test_one_bound_of_one_step_is_a_segment() -> None:
    result = forensics.replay(embedding_records(bad_step=0, steps=1), ["upstream"])
    root = _timeline(result, "embedding", "upstream")
    xs = [float(x) for x in _classed(root, "bound", "upper")[0].get("data-x").split(",")]
    assert (min(xs), max(xs)) == (-0.5, 0.5)
    assert [float(t.get("data-x")) for t in _classed(root, "xtick")] == [0.0]


def test_one_bad_step_among_10000_still_shows() -> None:
    result = forensics.replay(embedding_records(bad_step=5000, steps=10_000), ["upstream"])
    root = _timeline(result, "embedding", "upstream")
    lines = [e for e in _classed(root, "vline", "open")
             if e.get("stroke") == VIOLATION_COLOR]
    assert any(abs(float(e.get("data-x")) - 5000) < 200 for e in lines)
    bars = _classed(root, "bar", "open")  # counts per bin (issue 42), at least 1 px tall
    assert [abs(float(b.get("data-x")) - 5000) < 200 for b in bars] == [True]
    assert float(bars[0].get("height")) >= 1
    assert "out of bounds (input_ids)" in _legend(root)
    title = " ".join(_text(t) for t in _classed(root, "title"))
    assert "values out of bounds per 200-step bin" in title
    assert all(float(t.get("data-x")).is_integer() for t in _classed(root, "xtick"))
    assert not _classed(root, "band")  # no min..max band to saturate


def test_the_x_axis_spans_the_steps_and_half_a_bin() -> None:
    result = forensics.replay(embedding_records(bad_step=5000, steps=10_000), ["upstream"])
    panel = timeline_panel(result, "embedding", "upstream")
    assert panel.xlim == (-0.5, 9999.5)
    tiny = timeline_panel(forensics.replay(embedding_records(bad_step=1, steps=2)),
                          "embedding", "upstream")
    assert tiny.xlim == (-0.5, 1.5)


def test_tensors_on_another_scale_are_named_not_drawn() -> None:
    result = forensics.replay(DATA / "stale-prev-row.capture", ["upstream", "patched"])
    root = _timeline(result, "prepare_input_ids", "upstream")
    notes = " ".join(_text(n) for n in _classed(root, "note", "omitted"))
    assert "not drawn (on another scale): out.input_ids_device" in notes
    assert "tensor=" not in _texts(root)
    assert not any(t.startswith("out.input_ids_device") for t in _legend(root))


def test_the_timeline_marks_suspect_steps() -> None:
    result = forensics.replay(DATA / "misattribution.capture", ["upstream"])
    root = _timeline(result, "batch_change", "upstream")
    marks = _marks(root, "suspect")
    found = result.findings
    expected = set(found.loc[(found["kind"] == "misattributed")
                             & (found["site"] == "batch_change"), "step"].astype(float))
    assert expected and {float(m.get("data-x")) for m in marks} == expected
    assert all(m.get("stroke") == SUSPECT_COLOR for m in marks)
    assert SUSPECT_LABEL in _legend(root) and any("suspect" in t for t in _legend(root))


# ------------------------------------------------------------------ results built directly


def fake_result(capture: str = "fake", tensor: str = "input_ids") -> FakeResult:
    """Embedding over 4 steps; upstream reads the vocab sentinel at step 2, patched resolves it."""
    bounds, findings = [], []
    for variant in ("upstream", "patched"):
        for step in range(4):
            bad = step == 2 and variant == "upstream"
            bounds.append(dict(variant=variant, site="embedding", step=step, rank=0,
                               record=step, tensor=tensor, min=0,
                               max=VOCAB if bad else VOCAB - 5, lower=0, upper=VOCAB))
        findings.append(dict(variant=variant, site="embedding", step=2, rank=0, row=0,
                             element=1, tensor=tensor, kind="out_of_bounds", value=VOCAB,
                             lower=0, upper=VOCAB, resolved=variant == "patched",
                             req_id="r", record=2))
    return FakeResult(capture=capture, findings=pd.DataFrame(findings),
                      bounds=pd.DataFrame(bounds),
                      verdicts={"upstream": {"embedding": "violation"},
                                "patched": {"embedding": "ok"}})


HOSTILE = "<script>alert(1)</script> & \x1b[31m"


def test_capture_strings_stay_escaped(tmp_path: Path) -> None:
    result = fake_result(capture=HOSTILE, tensor="ids<script>&\x07")
    for figure in (views.figure("timeline", result, site="embedding", variant="upstream"),
                   views.side_by_side(result, "timeline", site="embedding"),
                   verdict_figure(result)):
        svg = figure.to_svg()
        root = ET.fromstring(svg)  # well-formed XML: no raw control character, no raw markup
        assert "<script" not in svg and "\x1b" not in svg and "\x07" not in svg
        assert not [e for e in root.iter() if e.tag.lower().endswith("script")]
        texts = _texts(root)
        assert "<script>alert(1)</script> & \\x1b[31m" in texts  # shown as text, visible
    assert "ids<script>&\\x07 (min..max)" in _legend(_timeline(result, "embedding", "upstream"))


def test_a_capture_file_name_stays_escaped(tmp_path: Path) -> None:
    from forensics.store.writer import write_capture

    path = write_capture(tmp_path / "a&<b>\x1b.capture", embedding_records(bad_step=1),
                         manifest={})
    result = forensics.replay(path, ["upstream"])
    svg = views.figure("timeline", result, site="embedding").to_svg()
    assert "a&<b>\\x1b · embedding · upstream" in _texts(ET.fromstring(svg))


def test_the_fallback_note_and_the_empty_panel() -> None:
    result = fake_result()
    result.bounds = None
    root = _timeline(result, "embedding", "upstream")
    notes = " ".join(_text(n) for n in _classed(root, "note", "omitted"))
    assert "offending values only (the result has no bounds)" in notes
    assert _marks(root, "open")
    empty = _timeline(fake_result(), "embedding", "upstream", tensor="not_checked")
    assert [_text(e) for e in _classed(empty, "empty")] == [
        "no checked values for embedding under upstream"]


def test_not_judged_findings_are_drawn_as_not_judged() -> None:
    result = fake_result()
    result.findings = result.findings.assign(judged=[True, False], resolved=[False, False])
    root = _timeline(result, "embedding", "patched")
    # patched's bounds are in range at step 2: nothing of patched is drawn out of bounds
    assert not _marks(root, "open") and not _marks(root, "unseen")
    patched_step_2 = (result.bounds["variant"] == "patched") & (result.bounds["step"] == 2)
    result.bounds.loc[patched_step_2, "max"] = VOCAB  # seen by the model, not by patched
    root = _timeline(result, "embedding", "patched")
    unseen = _marks(root, "unseen")
    assert [float(m.get("data-x")) for m in unseen] == [2.0]
    assert all(m.get("stroke") == UNSEEN_COLOR for m in unseen)
    assert not _marks(root, "open") and not _painted(root, VIOLATION_COLOR)
    assert "not judged by patched" in _legend(root)


def test_unknown_site_and_variant_raise() -> None:
    from forensics.errors import UnknownSiteError, UnknownVariantError

    with pytest.raises(UnknownSiteError):
        timeline_panel(fake_result(), site="bogus")
    with pytest.raises(UnknownVariantError, match="vllm"):
        timeline_panel(fake_result(), variant="vllm")


# ------------------------------------------------------------------ verdict matrix


def _cells(root: ET.Element) -> dict[tuple[str, str], tuple[str, str]]:
    """(site, variant) -> (fill, text) of each verdict cell, through the tick labels."""
    variants = {float(t.get("data-x")): _text(t) for t in _classed(root, "xtick")}
    sites = {float(t.get("data-y")): _text(t) for t in _classed(root, "ytick")}
    cells = {}
    for parent in root.iter():
        children = list(parent)
        for rect, text in zip(children, children[1:], strict=False):
            if "cell" in (rect.get("class") or "").split():
                assert "cell-text" in (text.get("class") or "")
                key = (sites[float(rect.get("data-y"))], variants[float(rect.get("data-x"))])
                assert key not in cells
                cells[key] = (rect.get("fill"), _text(text))
    return cells


def test_the_verdict_matrix_has_one_cell_per_site_and_variant(incident_b: Any) -> None:
    root = _svg(verdict_figure(incident_b))
    cells = _cells(root)
    sites, variants = result_sites(incident_b), variant_names(incident_b)
    assert set(cells) == {(s, v) for s in sites for v in variants}
    for (site, variant), (fill, text) in cells.items():
        verdict = incident_b.verdicts[variant][site]
        assert (fill, text) == (VERDICT_COLORS[verdict], verdict)
    assert cells[("embedding", "upstream")] == (VIOLATION_COLOR, "violation")
    assert [_text(t) for t in _classed(root, "xtick")] == variants
    assert [_text(t) for t in _classed(root, "ytick")] == sites
    assert "incident-b-vocab-sentinel · all sites · all variants" in _texts(root)


def test_a_missing_verdict_is_a_grey_dash() -> None:
    result = fake_result()
    result.verdicts = {"upstream": {"embedding": "violation"}}
    cells = _cells(_svg(verdict_figure(result)))
    assert cells[("embedding", "patched")] == (NO_VERDICT_COLOR, "-")
    assert cells[("embedding", "upstream")] == (VIOLATION_COLOR, "violation")


# ------------------------------------------------------------------ without matplotlib


def test_the_svg_views_never_import_matplotlib() -> None:
    """Every SVG view (timeline, heatmap, histogram, verdicts) draws without matplotlib."""
    code = (
        "import sys\n"
        "import forensics\n"
        "from forensics.present.svg import timeline, verdicts, views\n"
        "from forensics.present import plots\n"
        f"r = forensics.replay({str(DATA / 'incident-b-vocab-sentinel.capture')!r},"
        " ['upstream', 'patched'])\n"
        "svg = verdicts.verdict_figure(r).to_svg()\n"
        "for kind in ('timeline', 'heatmap', 'histogram'):\n"
        "    svg += views.side_by_side(r, kind, site='embedding').to_svg()\n"
        "assert 'resolved by patched' in svg\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib')\n"
        "assert not bad, bad\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr


def test_figures_inlined_in_one_page_clip_by_their_own_rectangles(incident_b: Any) -> None:
    ids = []
    for variant in ("upstream", "patched"):
        root = _timeline(incident_b, "embedding", variant)
        own = {e.get("id") for e in root.iter() if e.tag.endswith("}clipPath")}
        used = {e.get("clip-path") for e in root.iter() if e.get("clip-path")}
        assert used == {f"url(#{i})" for i in own}
        ids.append(own)
    assert not ids[0] & ids[1]


def wide_result(steps: int = 10_000, every: int = 7) -> FakeResult:
    """10,000 steps: upstream reads the vocab sentinel at every ``every``-th step; patched
    stays in range (as tests/test_plots.py's ``wide_result``)."""
    import numpy as np

    step = np.arange(steps)
    bad = step % every == 3
    bounds = [pd.DataFrame(dict(variant=variant, site="embedding", step=step, rank=0,
                                record=step, tensor="input_ids", min=0,
                                max=np.where(bad & (variant == "upstream"), VOCAB, VOCAB - 10),
                                lower=0, upper=VOCAB))
              for variant in ("upstream", "patched")]
    hit = step[bad]
    findings = pd.DataFrame(dict(variant="upstream", site="embedding", step=hit, rank=0,
                                 row=hit % 256, element=0, tensor="input_ids",
                                 kind="out_of_bounds", value=VOCAB, lower=0, upper=VOCAB,
                                 resolved=False, req_id="r", record=hit))
    return FakeResult(capture="wide", findings=findings,
                      bounds=pd.concat(bounds, ignore_index=True),
                      verdicts={"upstream": {"embedding": "violation"},
                                "patched": {"embedding": "ok"}})


def test_a_dense_timeline_marks_every_bad_bin_and_only_those() -> None:
    from forensics.present.svg.canvas import TICK_SIZE, text_width

    result = wide_result()
    root = _timeline(result, "embedding", "upstream")
    width = 200  # 10,000 steps in at most TIMELINE_BINS bins of a round width
    assert "per 200-step bin" in " ".join(_text(t) for t in _classed(root, "title"))
    bounds = result.bounds[result.bounds["variant"] == "upstream"]
    bad = bounds.loc[bounds["max"] >= bounds["upper"], "step"]
    bars = _classed(root, "bar", "open")  # one bar of counts per bin (issue 42)
    assert {int(float(b.get("data-x")) // width) for b in bars} == set(bad // width)
    assert len(bars) <= TIMELINE_BINS and len(bars) < len(bad)  # aggregated
    ticks = sorted((float(t.get("x")), text_width(_text(t), TICK_SIZE))
                   for t in _classed(root, "xtick"))
    assert len(ticks) >= 4 and all(a + wa / 2 < b - wb / 2
                                   for (a, wa), (b, wb) in zip(ticks, ticks[1:], strict=False))
    patched = _timeline(result, "embedding", "patched")
    assert not _painted(patched, VIOLATION_COLOR)
