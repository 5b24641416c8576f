"""Pictures follow verdicts (issue 29, point 3) and every suspect verdict says where (point 5).

- a resolved finding is drawn as resolved (its own marker and legend entry), never in the
  violation colour; tiny captures get integer step ticks and a visible bound; one bad step
  among 10,000 still shows; the figure names no Python-only argument;
- a ``suspect`` verdict names its first step, row, request and the request whose row it read,
  in the conclusion, the summary (text, markdown, JSON) and ``replay --json``; the timeline
  marks the suspect steps.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from incident_records import by_site, clean_step  # noqa: E402
from matplotlib.colors import same_color  # noqa: E402

import forensics  # noqa: E402
from forensics import plots  # noqa: E402
from forensics.cli import main  # noqa: E402
from forensics.present.conclusion import conclude, next_steps  # noqa: E402
from forensics.present.style import RESOLVED_COLOR, SUSPECT_COLOR, VIOLATION_COLOR
from forensics.present.writeup import render  # noqa: E402
from tests.conftest import DATA, embedding_records  # noqa: E402


def _coloured(ax: Any, color: str) -> list[Any]:
    """The markers (collections) of ``ax`` filled or edged in ``color``."""
    found = []
    for artist in ax.collections:
        colors = [*np.atleast_2d(artist.get_facecolor()), *np.atleast_2d(artist.get_edgecolor())]
        if any(len(c) and same_color(c[:3], color) for c in colors):
            found.append(artist)
    return found


def _legend(ax: Any) -> list[str]:
    legend = ax.get_legend()
    return [] if legend is None else [t.get_text() for t in legend.get_texts()]


@pytest.fixture(scope="module")
def incident_b() -> Any:
    return forensics.replay(DATA / "incident-b-vocab-sentinel.capture", ["upstream", "patched"])


def test_a_resolved_finding_is_drawn_as_resolved(incident_b: Any) -> None:
    assert incident_b.verdicts["patched"]["embedding"] == "ok"
    ax = plots.plot_bounds_timeline(incident_b, "embedding", "patched")
    assert not _coloured(ax, VIOLATION_COLOR), "a resolved finding drawn out of bounds"
    assert not any("first:" in t.get_text() for t in ax.texts)
    assert "resolved by patched" in _legend(ax)
    marks = _coloured(ax, RESOLVED_COLOR)
    assert [float(x) for m in marks for x, _ in m.get_offsets()] == [14.0]
    heat = plots.plot_row_heatmap(incident_b, "embedding", "patched")
    assert "resolved by patched" in _legend(heat)
    assert not np.isfinite(heat.images[1].get_array()).any(), "no cell coloured out of bounds"


def test_upstream_still_draws_its_violation(incident_b: Any) -> None:
    ax = plots.plot_bounds_timeline(incident_b, "embedding", "upstream")
    assert _coloured(ax, VIOLATION_COLOR) and "out of bounds" in _legend(ax)


def test_a_tiny_capture_has_integer_ticks_and_a_visible_bound() -> None:
    result = forensics.replay(embedding_records(bad_step=1, steps=2), ["upstream"])
    ax = plots.plot_bounds_timeline(result, "embedding", "upstream")
    ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks), ticks
    bound = [line for line in ax.lines if line.get_linestyle() == "--"]
    assert bound and np.ptp(bound[0].get_xdata()) >= 1.0  # a segment, not a point


def test_one_bad_step_among_10000_still_shows() -> None:
    result = forensics.replay(embedding_records(bad_step=5000, steps=10_000), ["upstream"])
    ax = plots.plot_bounds_timeline(result, "embedding", "upstream")
    lines = [line for line in ax.lines
             if same_color(line.get_color(), VIOLATION_COLOR)]
    assert any(abs(float(np.mean(line.get_xdata())) - 5000) < 200 for line in lines)
    # counts per bin (issue 42): the one bad value is a bar of 1 in its bin, a visible one
    bars = [p for p in ax.patches if same_color(p.get_facecolor()[:3], VIOLATION_COLOR)]
    assert [(abs(p.get_x() + p.get_width() / 2 - 5000) < 200, p.get_height()) for p in bars] \
        == [(True, 1.0)]
    assert ax.get_ylim()[1] < 2  # on the counts' scale, not the ids'


def test_no_python_only_hint_in_a_figure() -> None:
    result = forensics.replay(DATA / "stale-prev-row.capture", ["upstream", "patched"])
    ax = plots.plot_bounds_timeline(result, "prepare_input_ids", "upstream")
    notes = " ".join(t.get_text() for t in ax.texts)
    assert "not drawn" in notes and "tensor=" not in notes


def swapped_rows() -> list[Any]:
    """Step 2: rows a and b read each other's previous row (in range: suspect)."""
    bc = by_site(clean_step(2, ["a", "b"]), "batch_change", 2)
    bc.fields["prev_positions"] = np.array([1, 0], np.int32)
    return [bc]


WHERE = ("batch_change at step 2, rank 0, row 0: request 'a' read previous row 1, held by "
         "request 'b'")


def test_a_suspect_verdict_says_where(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = forensics.replay(swapped_rows(), ["upstream", "patched"])
    assert result.verdicts["upstream"] == {"batch_change": "suspect"}
    conclusion = conclude(result)
    assert WHERE in conclusion.paragraph()
    assert any(WHERE in step for step in next_steps(conclusion))
    for fmt in ("text", "markdown"):
        assert WHERE in render(result, fmt), fmt
    first = json.loads(render(result, "json"))["suspect_first"]["upstream"]
    assert (first["step"], first["row"], first["req_id"], first["read_req_id"]) == (2, 0, "a", "b")
    from forensics.store.writer import write_capture

    path = write_capture(tmp_path / "swap.capture", swapped_rows(), manifest={})
    assert main(["replay", str(path), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["first_suspect"]["upstream"]
    assert (got["read_row"], got["read_req_id"]) == (1, "b")


def test_the_timeline_marks_suspect_steps() -> None:
    result = forensics.replay(DATA / "misattribution.capture", ["upstream"])
    ax = plots.plot_bounds_timeline(result, "batch_change", "upstream")
    marks = _coloured(ax, SUSPECT_COLOR)
    steps = {float(x) for m in marks for x, _ in m.get_offsets()}
    found = result.findings
    expected = set(found.loc[(found["kind"] == "misattributed")
                             & (found["site"] == "batch_change"), "step"].astype(float))
    assert steps == expected and any("suspect" in t for t in _legend(ax))
