"""Round 14 (lead): the data coordinates and the ticks of the report's SVG figures, exact and
round (issue 38, hostile input).

Each element that carries meaning in an SVG view holds its data coordinates in ``data-x`` /
``data-y`` so tests and readers find what a picture says without reading pixels. They were
written with ``:g``: six significant digits, so a finding at step 1,234,567 read
``1.23457e+06`` (a step that does not exist), and past 2**53 they were positions relative to
an origin the reader never saw. Past 2**53 the ticks were the origin plus round offsets: exact
but never round (4611686018427387905, ...907).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from forensics import plots
from forensics.present.selection import round_ticks
from forensics.present.svg import views
from forensics.records import Record
from forensics.replaying import replay
from forensics.store.writer import write_capture

BASE = 2**62


def _replayed(folder: Path, steps: list[int], bad: int) -> Any:
    """Embedding records at ``steps``, the one at ``bad`` holding id 50 of 10, replayed."""
    records = [Record("embedding", step, 0,
                      {"input_ids": np.array([50 if step == bad else 3], dtype=np.int64),
                       "num_embeddings": 10}) for step in steps]
    return replay(write_capture(folder / "steps.capture", records))


def _root(result: Any) -> ET.Element:
    return ET.fromstring(views.figure("timeline", result, site="embedding",
                                      variant="upstream").to_svg())


def _open_marks(root: ET.Element) -> list[ET.Element]:
    return [m for g in root.iter() if g.get("class") == "mark open" for m in g
            if m.get("data-x")]


@pytest.mark.parametrize("base", [1_234_560, BASE])
def test_a_marks_data_x_is_its_exact_step(tmp_path: Path, base: int) -> None:
    """T68a: the open mark of the finding at ``base + 7`` says that step in ``data-x`` (it
    said 1.23457e+06, or 7 past 2**53), and every series point is a step of the capture."""
    steps = [base + i for i in range(12)]
    root = _root(_replayed(tmp_path, steps, base + 7))
    (mark,) = _open_marks(root)
    assert mark.get("data-x") == str(base + 7)
    assert mark.get("data-y") == "50"
    series = next(e for e in root.iter() if e.get("class") == "series max")
    assert {int(x) for x in series.get("data-x", "").split(",")} <= set(steps)
    for tick in (e for e in root.iter() if e.get("class") == "xtick"):
        assert tick.get("data-x") == "".join(tick.itertext())


def test_ticks_past_2_53_are_round_steps(tmp_path: Path) -> None:
    """T68b: past 2**53 the x ticks stand at round steps (multiples of 1, 2 or 5 x 10^k, as
    below 2**53), each labelled exactly, in the SVG and the matplotlib views alike; they were
    the first step plus round offsets (4611686018427387905, ...)."""
    start = BASE + 3
    steps = [start + i for i in range(40)]
    result = _replayed(tmp_path, steps, start + 7)
    labels = [int("".join(e.itertext())) for e in _root(result).iter()
              if e.get("class") == "xtick"]
    assert len(labels) >= 3
    assert all(label % 10 == 0 for label in labels), labels
    ax = plots.plot_bounds_timeline(result, site="embedding", variant="upstream")
    ax.figure.canvas.draw()
    drawn = [int(t.get_text()) for t in ax.get_xticklabels() if t.get_text()]
    plots.close(ax)
    assert len(drawn) >= 3 and all(label % 10 == 0 for label in drawn), drawn


@pytest.mark.parametrize(("lo", "hi", "origin"), [(-0.5, 39.5, BASE + 3), (0.0, 7.0, 0),
                                                   (-3.2, 1e6, -(2**63)), (0, 5, 2**63 - 3)])
def test_round_ticks_are_round_exact_and_within(lo: float, hi: float, origin: int) -> None:
    """T68b: each tick lies within the axis, within int64, labelled with origin + position,
    all one round step apart."""
    ticks = round_ticks(lo, hi, origin)
    assert ticks and len(ticks) <= 6
    values = [int(label) for _, label in ticks]
    assert all(lo <= pos <= hi and int(label) == origin + int(pos) for pos, label in ticks)
    assert all(-(2**63) <= v < 2**63 for v in values)
    gaps = {b - a for a, b in zip(values, values[1:], strict=False)}
    assert len(gaps) <= 1 and all(str(g).strip("0") in ("1", "2", "5") for g in gaps)
    assert all(v % gap == 0 for gap in gaps for v in values)


@pytest.mark.parametrize("manifest", [{"runner": "V2"}, {"model": {"runner": "v2"}}])
def test_every_reader_deciding_by_the_runner_reads_it_alike(tmp_path: Path,
                                                            manifest: dict[str, Any]) -> None:
    """T68c: the known-issue evidence read ``V2`` (or ``model.runner``) as runner v2, while the
    continuity check judged the capture as V1's, its summary and triage row said ``V2`` or
    nothing, and repro wrote V1's chain: all read the runner through one reader now."""
    from forensics.fleet.facts import manifest_facts
    from forensics.judge.streams import continuity_of
    from forensics.known.evidence import facts_of
    from forensics.store.reader import load

    assert facts_of(manifest)["runner"] == "v2"
    assert manifest_facts(manifest)[0]["runner"] == "v2"
    records = [Record("embedding", 1, 0, {"input_ids": np.array([3], dtype=np.int64),
                                          "num_embeddings": 10})]
    capture = load(write_capture(tmp_path / "runner.capture", records, manifest))
    assert capture.summary()["runner"] == "v2"
    assert continuity_of(lambda site: [], capture.sites, capture.manifest).runner == "v2"


def test_the_facts_of_a_capture_of_no_records_say_none(tmp_path: Path) -> None:
    """T68d: the conclusion's facts of a capture of no records (an imported crash dump alone)
    read "ranks ; steps None": its ranks and steps are "none", a fact not stated "unknown"."""
    from forensics.present.capture_facts import fact_text, facts_sentence, summary_facts
    from forensics.store.reader import load

    capture = load(write_capture(tmp_path / "empty.capture", [], {"host": "h"}))
    sentence = facts_sentence(summary_facts(capture.summary()))
    assert "ranks none" in sentence and "steps none" in sentence, sentence
    assert "None" not in sentence and "ranks ;" not in sentence, sentence
    assert fact_text("vllm", None) == "unknown"
    assert fact_text("steps", [3, 9]) == "3-9" and fact_text("ranks", [0, 1]) == "0, 1"
