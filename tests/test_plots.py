"""forensics.present.plots: one view per Axes, labelled, bound named, violations in one colour."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import same_color  # noqa: E402

from forensics import plots  # noqa: E402
from forensics.errors import UnknownSiteError, UnknownVariantError  # noqa: E402
from forensics.present.scene import KINDS
from forensics.present.scene.heatmap import distance_past_bound
from forensics.present.selection import pick_tensors
from forensics.present.style import (
    STEP_LABELS,
    SUSPECT_COLOR,
    TIMELINE_BINS,
    VERDICT_COLORS,
    VIOLATION_COLOR,
)
from tests.conftest import embedding_records  # noqa: E402

FINDING_COLUMNS = ["variant", "site", "step", "rank", "row", "element", "tensor", "kind", "value",
                   "lower", "upper", "origin", "resolved", "req_id", "record"]
BOUNDS_COLUMNS = ["variant", "site", "step", "rank", "record", "tensor", "min", "max", "lower",
                  "upper"]
VOCAB = 248320
BAD_STEPS = (7, 8)


@dataclass
class FakeResult:
    """The attributes of a ReplayResult that the plots read (bounds as the lead specified)."""

    capture: str = "incident-b"
    variants: list[str] = field(default_factory=lambda: ["upstream", "patched"])
    findings: pd.DataFrame | None = None
    bounds: pd.DataFrame | None = None
    verdicts: dict[str, dict[str, str]] = field(default_factory=dict)


def _bounds_row(variant: str, site: str, tensor: str, step: int, record: int) -> dict[str, Any]:
    bad = variant == "upstream" and step in BAD_STEPS
    return dict(variant=variant, site=site, step=step, rank=0, record=record, tensor=tensor,
                min=0, max=VOCAB if bad else VOCAB - 10 - step, lower=0, upper=VOCAB)


def _finding(variant: str, site: str, tensor: str, step: int, record: int) -> dict[str, Any]:
    sink = site == "embedding"
    return dict(variant=variant, site=site, step=step, rank=0, row=1, element=3, tensor=tensor,
                kind="out_of_bounds", value=VOCAB, lower=0, upper=VOCAB,
                origin="async_output" if sink else None, resolved=False if sink else None,
                req_id="req-1", record=record)


def fake_result(steps: int = 12) -> FakeResult:
    """Two sites, upstream out of bounds at BAD_STEPS (the vocab sentinel), patched clean."""
    bounds, findings, record = [], [], 0
    for variant in ("upstream", "patched"):
        for step in range(steps):
            for site, tensor in (("async_output", "out.output_tail"), ("embedding", "input_ids")):
                bounds.append(_bounds_row(variant, site, tensor, step, record))
                if variant == "upstream" and step in BAD_STEPS:
                    findings.append(_finding(variant, site, tensor, step, record))
                record += 1
    findings.append(dict(_finding("upstream", "async_output", "prev_req_id_to_index", 3, 6),
                         kind="misattributed", row=0, value=1, upper=2))
    verdicts = {"upstream": {"async_output": "violation", "embedding": "violation"},
                "patched": {"async_output": "ok", "embedding": "ok"}}
    return FakeResult(findings=pd.DataFrame(findings, columns=FINDING_COLUMNS),
                      bounds=pd.DataFrame(bounds, columns=BOUNDS_COLUMNS), verdicts=verdicts)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _violation_artists(ax: Any) -> list[Any]:
    found = []
    for artist in [*ax.collections, *ax.patches, *ax.images]:
        colors = []
        if hasattr(artist, "get_facecolor"):
            colors = np.atleast_2d(artist.get_facecolor())
        if any(len(c) and same_color(c[:3], VIOLATION_COLOR) for c in colors):
            found.append(artist)
    return found


def _legend_texts(ax: Any) -> list[str]:
    legend = ax.get_legend()
    return [t.get_text() for t in legend.get_texts()] if legend else []


VIEWS = [plots.plot_bounds_timeline, plots.plot_row_heatmap, plots.plot_value_histogram]


@pytest.mark.parametrize("view", VIEWS)
def test_view_is_labelled_and_titled(view: Any) -> None:
    ax = view(fake_result(), site="embedding", variant="upstream")
    assert ax.get_xlabel() and ax.get_ylabel()
    assert "(" in ax.get_xlabel() + ax.get_ylabel(), "an axis names its unit"
    title = ax.get_title()
    assert "incident-b" in title and "embedding" in title and "upstream" in title


@pytest.mark.parametrize("view", VIEWS)
def test_view_draws_on_the_given_axes(view: Any) -> None:
    fig, (left, right) = plt.subplots(1, 2)
    assert view(fake_result(), site="embedding", variant="patched", ax=right) is right
    assert not left.has_data()


def test_timeline_names_the_bound_and_marks_violations() -> None:
    ax = plots.plot_bounds_timeline(fake_result(), site="embedding", variant="upstream")
    texts = _legend_texts(ax)
    assert any("valid bound" in t and str(VOCAB) in t for t in texts), texts
    marks = [c for c in ax.collections if c in _violation_artists(ax)]
    assert marks, "violations drawn in VIOLATION_COLOR"
    xs = sorted(float(x) for c in marks for x, _ in c.get_offsets())
    assert xs == [float(s) for s in BAD_STEPS]


def test_timeline_without_violation_has_no_violation_colour() -> None:
    ax = plots.plot_bounds_timeline(fake_result(), site="embedding", variant="patched")
    assert not _violation_artists(ax)
    assert any("valid bound" in t for t in _legend_texts(ax))


def test_timeline_defaults_to_the_first_violating_site() -> None:
    ax = plots.plot_bounds_timeline(fake_result())
    assert "async_output" in ax.get_title() and "upstream" in ax.get_title()


def test_timeline_falls_back_to_findings_without_bounds() -> None:
    result = fake_result()
    result.bounds = None
    ax = plots.plot_bounds_timeline(result, site="embedding")
    assert any("offending values only" in t.get_text() for t in ax.texts)
    assert _violation_artists(ax)


def test_distance_past_bound() -> None:
    got = distance_past_bound([-3, -1, 0, 5, 9, 10, 12], 0, 10)
    assert list(got) == [3, 1, 0, 0, 0, 1, 3]


def test_heatmap_colours_offending_cells() -> None:
    ax = plots.plot_row_heatmap(fake_result(), site="embedding", variant="upstream")
    image = ax.images[-1]
    grid = np.ma.filled(image.get_array(), np.nan)
    bad = np.argwhere(np.isfinite(grid))
    assert sorted((int(r), int(c)) for r, c in bad) == [(1, s) for s in BAD_STEPS]
    assert same_color(image.get_cmap()(image.norm(1.0))[:3], VIOLATION_COLOR) or \
        image.get_cmap().name == "forensics_violation"
    assert any("valid bound" in ax.figure.axes[-1].get_ylabel() for _ in [0])


def test_heatmap_marks_misattributed_rows() -> None:
    ax = plots.plot_row_heatmap(fake_result(), site="async_output", variant="upstream")
    suspects = [c for c in ax.collections if len(c.get_offsets())]
    assert any(same_color(c.get_edgecolor()[0][:3], SUSPECT_COLOR) for c in suspects)
    assert any(t.startswith("misattributed") for t in _legend_texts(ax)), _legend_texts(ax)
    clean = plots.plot_row_heatmap(fake_result(), site="embedding", variant="upstream")
    assert not any(t.startswith("misattributed") for t in _legend_texts(clean))


def test_default_site_is_a_suspect_one_when_nothing_is_out_of_bounds() -> None:
    """A soak whose only finding is misattributed: the plots draw that site, not the sink."""
    result = fake_result()
    result.findings = result.findings[result.findings["kind"] == "misattributed"]
    for view in VIEWS:
        ax = view(result, variant="upstream")
        assert "async_output" in ax.get_title(), ax.get_title()
    assert "async_output" in plots.plot_row_heatmap(fake_result()).get_title()  # first OOB


def test_histogram_annotates_sentinels_on_a_log_axis() -> None:
    ax = plots.plot_value_histogram(fake_result(), site="embedding", variant="upstream")
    assert ax.get_yscale() == "log"
    notes = [t.get_text() for t in ax.texts]
    assert any(f"vocab_size = {VOCAB}" in t for t in notes), notes
    assert any(t.startswith("−1") for t in notes), notes
    assert any("valid bound" in t for t in _legend_texts(ax))
    assert _violation_artists(ax)


def test_histogram_of_a_small_range_is_not_broken() -> None:
    result = fake_result()
    frame = result.bounds
    frame["upper"], frame["max"] = 8, np.where(frame["max"] >= VOCAB, 9, 5)
    result.findings["upper"], result.findings["value"] = 8, 9
    ax = plots.plot_value_histogram(result, site="async_output", variant="upstream")
    assert "broken" not in ax.get_xlabel()


def test_verdict_matrix_colours_each_cell() -> None:
    result = fake_result()
    ax = plots.plot_verdict_matrix(result)
    cells = {t.get_text() for t in ax.texts}
    assert cells == {"violation", "ok"}
    rgb = ax.images[0].get_array()
    assert same_color(rgb[0, 0], VIOLATION_COLOR)
    assert same_color(rgb[1, 1], VERDICT_COLORS["ok"])
    assert [t.get_text() for t in ax.get_yticklabels()] == ["async_output", "embedding"]
    assert "incident-b" in ax.get_title()


def test_side_by_side_has_one_panel_per_variant() -> None:
    fig = plots.plot_side_by_side(fake_result(), kind="timeline", site="embedding")
    titles = [ax.get_title() for ax in fig.axes]
    assert len(titles) == 2 and "upstream" in titles[0] and "patched" in titles[1]


def test_side_by_side_heatmaps_keep_their_own_rows() -> None:
    fig = plots.plot_side_by_side(fake_result(), kind="heatmap", site="embedding")
    upstream = fig.axes[0]
    assert [t.get_text() for t in upstream.get_yticklabels()] == ["0", "1"]


def test_unknown_site_and_variant_raise() -> None:
    with pytest.raises(UnknownSiteError, match="embedding"):
        plots.plot_bounds_timeline(fake_result(), site="bogus")
    with pytest.raises(UnknownSiteError, match="no records"):
        plots.plot_row_heatmap(fake_result(), site="batch_change")
    with pytest.raises(UnknownVariantError, match="patched"):
        plots.plot_value_histogram(fake_result(), variant="vllm")


def test_capture_strings_do_not_switch_on_mathtext(tmp_path: Path) -> None:
    result = fake_result()
    result.capture = "a$b_{x}$ <script>"
    ax = plots.plot_bounds_timeline(result, site="embedding")
    ax.figure.savefig(tmp_path / "f.png")
    assert "a$b_{x}$" in ax.get_title().replace("\\$", "$")


# ------------------------------------------------------------------ against the real replay


@pytest.fixture
def replayed(make_capture) -> Any:
    import forensics

    return forensics.replay(make_capture("emb", embedding_records(bad_step=2, steps=5)))


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_draws_a_real_replay(replayed: Any, kind: str, tmp_path: Path) -> None:
    ax = plots.plot(replayed, kind)
    assert "emb" in ax.get_title()
    ax.figure.savefig(tmp_path / f"{kind}.png")
    assert (tmp_path / f"{kind}.png").stat().st_size > 1000


def test_real_replay_marks_the_bad_step(replayed: Any) -> None:
    ax = plots.plot_bounds_timeline(replayed, site="embedding", variant="upstream")
    xs = [float(x) for c in _violation_artists(ax) for x, _ in c.get_offsets()]
    assert xs == [2.0]


def test_cli_plot_writes_a_png(make_capture, tmp_path: Path) -> None:
    from forensics.cli import main

    path = make_capture("emb", embedding_records(bad_step=1, steps=3))
    for kind in KINDS:
        out = tmp_path / f"{kind}.png"
        assert main(["plot", str(path), "-o", str(out), "--kind", kind]) == 0
        assert out.read_bytes()[:4] == b"\x89PNG"


def test_cli_plot_rejects_an_unknown_kind(make_capture, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    from forensics.cli import main

    path = make_capture("emb", embedding_records())
    with pytest.raises(SystemExit) as exit_:
        main(["plot", str(path), "-o", str(tmp_path / "f.png"), "--kind", "timeline,pie"])
    assert exit_.value.code == 2
    assert "unknown kind 'pie'" in capsys.readouterr().err


def test_cli_plot_rejects_an_unknown_suffix(make_capture, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    from forensics.cli import main

    path = make_capture("emb", embedding_records())
    assert main(["plot", str(path), "-o", str(tmp_path / "f.gif")]) == 2
    assert ".png" in capsys.readouterr().err


def test_tensors_on_another_scale_are_not_squeezed_together() -> None:
    frame = pd.DataFrame({"tensor": ["prev_sampled_token_ids", "out.input_ids_device",
                                     "draft_token_ids"], "step": [3, 3, 3],
                          "min": [0, 5, 0], "max": [4, 200, 7], "lower": [0, 0, 0],
                          "upper": [4, 248320, 8]})
    assert pick_tensors(frame) == (["draft_token_ids", "prev_sampled_token_ids"],
                                         ["out.input_ids_device"])
    clean = frame.assign(max=[1, 200, 7])
    assert pick_tensors(clean) == (["out.input_ids_device"],
                                         ["draft_token_ids", "prev_sampled_token_ids"])


def test_side_by_side_draws_the_same_tensors_in_every_panel() -> None:
    result = fake_result()
    extra = result.bounds[result.bounds["site"] == "embedding"].assign(
        tensor="row_index", max=2, upper=3)
    result.bounds = pd.concat([result.bounds, extra], ignore_index=True)
    fig = plots.plot_side_by_side(result, kind="timeline", site="embedding")
    for ax in fig.axes:
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert any(t.startswith("input_ids") for t in labels), labels
        assert not any(t.startswith("row_index") for t in labels), labels


@pytest.mark.parametrize(("kinds", "drawn"), [
    (["--kind", "all"], ["timeline", "heatmap", "histogram", "verdicts"]),
    (["--kind", "heatmap", "--kind", "timeline"], ["heatmap", "timeline"]),
    (["--kind", "histogram,verdicts"], ["histogram", "verdicts"])])
def test_cli_plot_several_kinds_from_one_replay(make_capture, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch,
                                                kinds: list[str], drawn: list[str]) -> None:
    import forensics
    from forensics.cli import main

    calls = []
    real = forensics.replay
    monkeypatch.setattr(forensics, "replay", lambda *a, **k: calls.append(1) or real(*a, **k))
    path = make_capture("emb", embedding_records(bad_step=1, steps=3))
    assert main(["plot", str(path), "-o", str(tmp_path / "figs" / "e.png"), *kinds]) == 0
    written = capsys.readouterr().out.split()
    assert written == [str(tmp_path / "figs" / f"e-{k}.png") for k in drawn]
    assert all(Path(p).read_bytes()[:4] == b"\x89PNG" for p in written) and calls == [1]


def test_third_party_warnings_hidden_unless_verbose(capsys: pytest.CaptureFixture[str]) -> None:
    import warnings

    from forensics.quiet import third_party_quiet

    def noise() -> None:
        warnings.warn_explicit("torch says hi", UserWarning, "torch/x.py", 1, module="torch.x")
        warnings.warn_explicit("ours", UserWarning, "forensics/x.py", 1, module="forensics.x")

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with third_party_quiet(verbose=False):
            noise()
        assert [str(w.message) for w in seen] == ["ours"]
        with third_party_quiet(verbose=True):
            noise()
        assert [str(w.message) for w in seen][1:] == ["torch says hi", "ours"]


@pytest.fixture(scope="module")
def long_replay(tmp_path_factory: pytest.TempPathFactory) -> Any:
    import forensics

    path = forensics.simulate("placeholder-leak", steps=3000, seed=0,
                              out=tmp_path_factory.mktemp("long") / "leak3k.capture")
    return forensics.replay(path)


def _overlapping(labels: list[Any], renderer: Any) -> list[str]:
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in labels if t.get_text()]
    pairs = zip(boxes, boxes[1:], strict=False)
    return [f"{a} / {b}" for (a, x), (b, y) in pairs if x.overlaps(y)]


def _round_step_labels(ax: Any, multiple: int) -> int:
    """How many step labels the heatmap has, each asserted a multiple of ``multiple``."""
    labels = [int(t.get_text()) for t in ax.get_xticklabels() if t.get_text()]
    assert labels and all(x % multiple == 0 for x in labels), labels
    assert len(labels) <= STEP_LABELS
    return len(labels)


def test_plots_stay_readable_at_3000_steps(long_replay: Any) -> None:
    heat = plots.plot_row_heatmap(long_replay, site="prepare_input_ids")
    renderer = heat.figure.canvas.get_renderer()
    assert not _overlapping(heat.get_xticklabels(), renderer)
    assert _round_step_labels(heat, 100) >= 4
    line = plots.plot_bounds_timeline(long_replay, site="prepare_input_ids")
    _check_binned_timeline(line, long_replay.bounds, "prepare_input_ids")


def _bad_steps(bounds: pd.DataFrame, site: str, tensors: list[str]) -> np.ndarray:
    mine = bounds[(bounds["variant"] == "upstream") & (bounds["site"] == site)
                  & bounds["tensor"].isin(tensors)]
    bad = (mine["max"] >= mine["upper"]) | (mine["min"] < mine["lower"])
    return np.unique(mine.loc[bad, "step"].to_numpy())


def _check_binned_timeline(ax: Any, bounds: pd.DataFrame, site: str) -> None:
    """A dense timeline: counts per bin (issue 42), one bar per bin holding a bad step (every
    such bin, no other), few bars, tick labels apart, the bin named."""
    from matplotlib.patches import Rectangle

    width = int(re.search(r"per (\d+)-step bin", ax.get_title()).group(1))
    assert ax.get_title().endswith(f"\nvalues out of bounds per {width}-step bin")
    drawn = [t.get_text()[len("out of bounds ("):-1].split(", ")
             for t in ax.get_legend().get_texts()
             if t.get_text().startswith("out of bounds (")][0]
    bad = _bad_steps(bounds, site, drawn)
    bars = [p for p in _violation_artists(ax) if isinstance(p, Rectangle)]
    bins = {int((bar.get_x() + bar.get_width() / 2) // width) for bar in bars}
    assert bins == {int(s // width) for s in bad}, "every bad bin counted, only those"
    assert len(bars) <= TIMELINE_BINS and len(bars) < len(bad)  # aggregated
    renderer = ax.figure.canvas.get_renderer()
    assert not _overlapping(ax.get_xticklabels(), renderer)
    assert not _overlapping(ax.get_yticklabels(), renderer)


def test_side_by_side_heatmaps_share_steps_and_rows() -> None:
    import forensics

    # patched has no finding at batch_change: its panel must not collapse to row 0
    result = forensics.replay(Path(__file__).resolve().parents[1] / "data"
                              / "incident-a-stale-prev-rows-confirmed.capture")
    fig = plots.plot_side_by_side(result, "heatmap", site="batch_change",
                                  variants=["upstream", "patched"])
    panels = [ax for ax in fig.axes if ax.get_xlabel() == "engine step"]
    spans = [(ax.get_xlim(), ax.get_ylim()) for ax in panels]
    ticks = [[t.get_text() for t in ax.get_yticklabels()] for ax in panels]
    assert len(spans) == 2 and spans[0] == spans[1] and ticks[0] == ticks[1]
    assert len(ticks[0]) > 1  # not collapsed to row 0
    plots.close(fig)


def _bars(ax: Any) -> list[Any]:
    """The display box of every non-empty bin of the histogram's stacked steps (each
    ``StepPatch`` is one kind of value: its bins from its baseline to its top)."""
    from matplotlib.patches import StepPatch
    from matplotlib.transforms import Bbox

    floor = ax.get_ylim()[0]
    boxes = []
    for patch in ax.patches:
        if not isinstance(patch, StepPatch):
            continue
        values, edges, baseline = patch.get_data()
        base = np.broadcast_to(0 if baseline is None else baseline, values.shape)
        for i in np.flatnonzero(values > base):
            corners = [(edges[i], max(base[i], floor)), (edges[i + 1], values[i])]
            boxes.append(Bbox(ax.transData.transform(corners)))
    return boxes


def test_sentinel_labels_sit_clear_of_their_bars(long_replay: Any) -> None:
    ax = plots.plot_value_histogram(long_replay, site="prepare_input_ids")
    renderer = ax.figure.canvas.get_renderer()
    label = next(t for t in ax.texts if t.get_text().startswith("−1"))
    box = label.get_window_extent(renderer)
    bars = _bars(ax)  # red and blue bars alike
    assert len(bars) > 10 and not [b for b in bars if b.overlaps(box)]
    plots.close(ax)


def wide_result(steps: int = 10_000, rows: int = 256, every: int = 7) -> FakeResult:
    """A 10,000-step, 256-row capture built directly (no replay): upstream reads the vocab
    sentinel at every ``every``-th step, in row ``step % rows``; patched stays in range."""
    step = np.arange(steps)
    bad = step % every == 3
    bounds = []
    for variant in ("upstream", "patched"):
        high = np.where(bad & (variant == "upstream"), VOCAB, VOCAB - 10)
        bounds.append(pd.DataFrame(dict(variant=variant, site="embedding", step=step, rank=0,
                                        record=step, tensor="input_ids", min=0, max=high,
                                        lower=0, upper=VOCAB)))
    hit = step[bad]
    findings = pd.DataFrame(dict(variant="upstream", site="embedding", step=hit, rank=0,
                                 row=hit % rows, element=0, tensor="input_ids",
                                 kind="out_of_bounds", value=VOCAB, lower=0, upper=VOCAB,
                                 origin="async_output", resolved=False, req_id="r",
                                 record=hit), columns=FINDING_COLUMNS)
    verdicts = {"upstream": {"embedding": "violation"}, "patched": {"embedding": "ok"}}
    return FakeResult(capture="wide", findings=findings,
                      bounds=pd.concat(bounds, ignore_index=True), verdicts=verdicts)


@pytest.fixture(scope="module")
def wide() -> FakeResult:
    return wide_result()


def test_plots_stay_readable_at_10000_steps_and_256_rows(wide: FakeResult,
                                                         tmp_path: Path) -> None:
    fig = plots.plot_side_by_side(wide, "heatmap", site="embedding")
    fig.savefig(tmp_path / "heat.png")
    renderer = fig.canvas.get_renderer()
    panels = [ax for ax in fig.axes if ax.get_xlabel() == "engine step"]
    for ax in panels:
        assert not _overlapping(ax.get_xticklabels(), renderer)
        assert not _overlapping(ax.get_yticklabels(), renderer)
        assert _round_step_labels(ax, 1000) >= 4
    assert len({(ax.get_xlim(), ax.get_ylim()) for ax in panels}) == 1
    assert len({(round(ax.bbox.y0), round(ax.bbox.height)) for ax in panels}) == 1
    line = plots.plot_bounds_timeline(wide, site="embedding")
    line.figure.savefig(tmp_path / "line.png")
    _check_binned_timeline(line, wide.bounds, "embedding")
    note = next(t for t in line.texts if t.get_text().startswith("first: step"))
    box = note.get_window_extent(line.figure.canvas.get_renderer())
    assert line.bbox.x0 <= box.x0 and box.x1 <= line.bbox.x1, "note inside the axes"
    assert line.bbox.y0 <= box.y0 and box.y1 <= line.bbox.y1, "note clear of the title"
    fig = plots.plot_side_by_side(wide, "timeline", site="embedding")
    fig.savefig(tmp_path / "lines.png")
    assert len({(round(ax.bbox.y0), round(ax.bbox.height)) for ax in fig.axes}) == 1
    assert len({ax.get_ylim() for ax in fig.axes}) == 1


def _red_pixels_at(ax: Any, cells: np.ndarray) -> np.ndarray:
    """For each (column, row) cell of a heatmap, whether a reddish pixel is drawn within a
    pixel of its centre."""
    fig = ax.figure
    fig.canvas.draw()
    pixels = np.asarray(fig.canvas.buffer_rgba())[..., :3].astype(int)
    red = (pixels[..., 0] > 120) & (pixels[..., 0] - pixels[..., 1] > 60)
    height = pixels.shape[0]
    found = []
    for x, y in ax.transData.transform(cells):
        col, row = int(round(x)), int(round(height - y))
        found.append(red[row - 1:row + 2, col - 1:col + 2].any())
    return np.array(found)


def test_heatmap_shows_every_violation_at_10000_steps(wide: FakeResult) -> None:
    ax = plots.plot_row_heatmap(wide, site="embedding", variant="upstream")
    bad = wide.findings
    cells = np.column_stack([bad["step"], bad["row"]]).astype(float)  # steps 0.. are columns
    shown = _red_pixels_at(ax, cells)
    assert shown.all(), f"{(~shown).sum()} of {len(shown)} out-of-bounds cells not drawn"


@pytest.mark.parametrize("variant", ["upstream", "patched"])
def test_heatmap_legend_covers_no_cell(variant: str) -> None:
    ax = plots.plot_row_heatmap(fake_result(), site="embedding", variant=variant)
    legend = ax.get_legend()
    assert legend is not None and "out of bounds" in _legend_texts(ax)
    box = legend.get_window_extent(ax.figure.canvas.get_renderer())
    assert not box.overlaps(ax.bbox), "the legend sits on the grid's cells"


def test_a_plot_given_no_axes_draws_its_svg_view_with_its_other_arguments_while_collecting(
        ) -> None:
    """Inside ``svg.collecting`` each single plot called without ``ax`` hands its view and
    every other argument (defaults included) to the drawer, as the report's notebook needs."""
    from types import SimpleNamespace

    from forensics.present import plots, svg

    calls: list[tuple[str, object, dict[str, object]]] = []

    def drawer(view: str, result: object, **kwargs: object) -> SimpleNamespace:
        calls.append((view, result, kwargs))
        return SimpleNamespace()

    with svg.collecting(drawer):
        plots.plot_row_heatmap("R", "site_a", variant="v")
        plots.plot_bounds_timeline("R", tensor="t")
        plots.plot_value_histogram("R", None, "v", None, 7)
        plots.plot_verdict_matrix("R")
    assert calls == [
        ("heatmap", "R", {"site": "site_a", "variant": "v", "align": None}),
        ("timeline", "R", {"site": None, "variant": None, "tensor": "t"}),
        ("histogram", "R", {"site": None, "variant": "v", "vocab_size": 7, "window": 32,
                            "tensor": None}),
        ("verdicts", "R", {})]
