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


# ------------------------------ T145c: redact keeps a guard event's row, value and bound


def test_redact_keeps_a_guard_event_s_row_and_bound_and_maps_its_value_as_the_records(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``redact`` dropped the ``row``, ``value`` and ``bound`` of the probe's guard events
    ("dropped: events.*"): a row and a bound are no token ids, and a value is one only in a
    token tensor, where the records' permutation maps it. They are kept, the value of a token
    tensor mapped as the records' ids are; a value of a tensor its site does not name, and what
    is no integer, go, named."""
    import json

    from test_round23_fix23a import _guarded

    def guard(tensor: str, row: object, value: int, bound: object) -> dict[str, object]:
        return {"kind": "guard_violation", "process": "w0", "rank": 0, "step": 8,
                "site": "embedding", "row": row, "tensor": tensor, "value": value,
                "bound": bound, "message": "m"}

    capture = _guarded(tmp_path, guard("input_ids[2]", 2, 5, 4), guard("nope", "r", 5, True))
    shared = tmp_path / "shared.capture"
    code, out, err = run_cli(capsys, "redact", capture, "-o", shared)
    assert code == 0, err
    events = [json.loads(line) for line in (shared / "events-w0.jsonl").read_text().splitlines()]
    passed, raised, token, unknown = (e for e in events if e["kind"].startswith("guard"))
    assert {k: passed[k] for k in ("row", "value", "bound")} == \
        {"row": 1, "value": 32000, "bound": 32000}  # out of the vocabulary: no id mapped
    assert {k: raised[k] for k in ("row", "value", "bound")} == \
        {"row": 3, "value": 9, "bound": 8}  # a row index of batch_change: kept
    assert (token["row"], token["bound"]) == (2, 4) and token["value"] not in (5, None)
    assert 1 <= token["value"] < 32000  # an id in the vocabulary, mapped as the records' are
    assert not {"row", "value", "bound"} & set(unknown)
    dropped = json.loads((shared / "manifest.json").read_text())["redaction"]["dropped"]
    assert {"events.row", "events.value", "events.bound"} <= set(dropped)
    assert "events.*" not in dropped
