"""Round 23 of hostile input, fix 23d: false sentences about summary records (a log's or a
dump's least and greatest values) that this round's helpers found."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.hostile.test_round2 import run_cli

TESTS_DATA = Path(__file__).resolve().parents[1] / "data"
INCIDENT_B = Path(__file__).resolve().parents[2] / "data" / "incident-b-vocab-sentinel.capture"


def _log_capture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A capture of a log's probe lines: summary records only."""
    capture = tmp_path / "s.capture"
    code, _, err = run_cli(capsys, "import", TESTS_DATA / "sm70_engine.log", "-o", capture)
    assert code == 0, err
    return capture


# ------------------------------ T145a: the histogram's legend of summary records' values


def test_the_histogram_legend_says_a_summary_record_s_value_is_its_min_or_max(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``plot --kind histogram`` and the report's histogram of a log's probe lines said their
    red bars were "out of bounds (every element)": a summary record holds its least and greatest
    values alone. The legend says what is drawn of them; a capture of tensors keeps its words."""
    import xml.etree.ElementTree as ET

    import matplotlib

    matplotlib.use("Agg")
    import forensics
    from forensics.present.plots import plot_value_histogram
    from forensics.present.scene.histogram import histogram_data
    from forensics.present.svg import views

    summary_only = ("out of bounds (summary records: min or max alone, other elements "
                    "unknown)")
    result = forensics.replay(_log_capture(tmp_path, capsys), ["upstream", "patched"])
    data = histogram_data(result, "embedding", "upstream")
    assert data.outside is not None and int(data.outside.sum()) == 2
    assert data.out_label() == summary_only
    root = ET.fromstring(views.figure("histogram", result, site="embedding",
                                      variant="upstream").to_svg())
    texts = {"".join(e.itertext()) for e in root.iter() if e.tag.endswith("text")}
    assert summary_only in texts and "out of bounds (every element)" not in texts
    ax = plot_value_histogram(result, "async_output", "upstream")
    assert summary_only in [t.get_text() for t in ax.get_legend().get_texts()]

    tensors = forensics.replay(INCIDENT_B, ["upstream", "patched"])
    plain = histogram_data(tensors, "embedding", "upstream")
    assert plain.summaries == 0 and plain.out_label() == "out of bounds (every element)"
    mixed = dataclasses.replace(plain, summaries=1, outside=plain.outside * 2)
    assert mixed.out_label() == ("out of bounds (every element; summary records: min or max "
                                 "alone)")


# ------------------------------ T145b: scan counts the summary records it leaves out


def test_scan_of_summary_records_counts_them_apart(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``forensics.scan`` of a log's capture (3 summary records, 248320 past the vocabulary)
    said ``records=0`` and nothing else: it leaves summary records out, unsaid. It counts them
    apart (``summary_records``, in its JSON too); a capture of tensors has none."""
    import forensics

    result = forensics.scan(_log_capture(tmp_path, capsys))
    assert (result.records, result.summary_records, result.checked) == (0, 3, 0)
    assert result.to_json()["summary_records"] == 3
    assert "summary_records=3" in repr(result)
    tensors = forensics.scan(INCIDENT_B)
    assert tensors.records > 0 and tensors.summary_records == 0
