"""The conclusion (forensics.present.conclusion), the write-up (forensics summary), the findings
export (forensics findings) and the cleaned tables, on the bundled incident B capture."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

import forensics
from forensics.cli import main
from forensics.judge.findings import COLUMNS
from forensics.present.conclusion import conclude, patch_effect
from forensics.present.tables import display_frame, grouped_findings

DATA = Path(__file__).resolve().parents[1] / "data"
INCIDENT_B = DATA / "incident-b-vocab-sentinel.capture"


@pytest.fixture(scope="module")
def result_b():
    return forensics.replay(INCIDENT_B)


def test_conclusion_of_incident_b(result_b) -> None:
    c = conclude(result_b)
    assert c.violations == {"upstream": ["async_output", "embedding"], "patched": []}
    assert [(p.variant, p.resolved, p.total, p.added) for p in c.patches] == [
        ("patched", 2, 2, 0)]
    first = c.first["upstream"]
    assert (first["site"], first["step"], first["rank"], first["row"], first["req_id"],
            first["tensor"], first["value"], first["upper"]) == (
        "async_output", 13, 0, 1, "req-1", "out.output_tail", 248320, 248320)
    assert [(x["site"], x["step"]) for x in c.chains["upstream"]] == [
        ("async_output", 13), ("embedding", 14)]
    # patched's only finding is resolved: never counted as a violation
    assert c.first["patched"] is None
    assert c.facts["model"] == "Qwen3.8-27B INT4 + MTP" and len(c.facts["events"]) == 2
    assert c.facts["vllm"] == "0.33.0" and c.facts["steps"] == [1, 14]
    text = c.paragraph()
    assert text.startswith("upstream leaves async_output, embedding in violation.")
    assert "patched leaves no site in violation and resolves 2 of 2 upstream" in text
    assert "async_output step 13 (rank 0) -> embedding step 14 (rank 0)" in text
    assert "Qwen3.8-27B" in text
    assert [x["rank"] for x in c.chains["upstream"]] == [0, 0]  # issue 42: chains name the rank


def test_a_first_violation_shared_with_the_baseline_is_said_once() -> None:
    result = forensics.replay(INCIDENT_B, variants={"upstream": None, "again": "upstream"})
    c = conclude(result)
    assert c.first["again"] is not None
    text = c.paragraph()
    assert text.count("First violation") == 1 and "First violation (upstream)" in text
    assert "again leaves async_output, embedding in violation" in text


def _finding(variant: str, step: int, resolved: object) -> dict:
    return {"variant": variant, "site": "embedding", "step": step, "rank": 0, "row": 0,
            "element": 0, "tensor": "input_ids", "kind": "out_of_bounds", "value": 9,
            "lower": 0, "upper": 9, "origin": None, "resolved": resolved}


def test_patch_counts_resolved_unresolved_and_new_findings() -> None:
    frame = pd.DataFrame([_finding("upstream", 1, False), _finding("upstream", 2, False),
                          _finding("fix", 1, True), _finding("fix", 2, False),
                          _finding("fix", 3, None)])
    patch = patch_effect(frame, "upstream", "fix")
    assert (patch.resolved, patch.total, patch.added) == (1, 2, 1)


def test_summary_formats(capsys) -> None:
    assert main(["summary", str(INCIDENT_B)]) == 0
    markdown = capsys.readouterr().out
    assert markdown.splitlines()[2].startswith("upstream leaves async_output")
    assert "| async_output | violation | ok |" in markdown
    assert "forensics replay" in markdown and "- model: `Qwen3.8-27B INT4 + MTP`" in markdown
    assert main(["summary", str(INCIDENT_B), "--format", "text"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3 and lines[0].startswith("upstream: violation at async_output")
    assert lines[1] == "patched: no violation; resolves 2 of 2, adds 0"
    assert lines[2] == (  # the verdict names what it saw, as `forensics known` does
        "crash verdict: explained (2 crash event(s) in the capture, the first cuda_assert at "
        "step 14; the upstream replay raises IndexError at step 14 (embedding, rank 0)); known "
        "issues: vocab-size-sentinel-counted")
    assert main(["summary", str(INCIDENT_B), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["violations"]["upstream"] == ["async_output", "embedding"]
    assert data["verdicts"]["patched"]["embedding"] == "ok" and data["reproduce"]


def test_findings_export_by_suffix(tmp_path, capsys) -> None:
    for suffix in (".csv", ".jsonl", ".parquet"):
        out = tmp_path / f"f{suffix}"
        assert main(["findings", str(INCIDENT_B), "-o", str(out)]) == 0
        if suffix == ".csv":
            frame = pd.read_csv(out)
            # the async_output write, the sink (upstream, then patched) and the sink's
            # unwritten_input row (the race check: prepare_input_ids' replay wrote another id)
            assert frame["value"].tolist() == [248320] * 4
            assert frame["kind"].tolist() == ["out_of_bounds", "out_of_bounds",
                                              "unwritten_input", "out_of_bounds"]
            assert frame["resolved"].isna().tolist() == [True, False, True, False]
        elif suffix == ".jsonl":
            rows = [json.loads(line) for line in out.read_text().splitlines()]
            assert [r["resolved"] for r in rows] == [None, False, None, True]
            assert all(list(r) == list(COLUMNS) for r in rows)
        else:
            table = pq.read_table(out)
            assert table.column("resolved").to_pylist() == [None, False, None, True]
            assert str(table.schema.field("value").type) == "int64"
    capsys.readouterr()
    assert main(["findings", str(INCIDENT_B), "--variant", "patched", "--steps", "14:"]) == 0
    out = capsys.readouterr().out
    assert "True" in out and "async_output" in out  # origin column
    assert not any(bad in out for bad in ("NaN", "<NA>", "None", "14.0"))


def test_findings_filters_and_bad_input(capsys) -> None:
    assert main(["findings", str(INCIDENT_B), "--site", "async_output", "--request",
                 "req-1"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 2 and "out.output_tail" in out[1]
    assert main(["findings", str(INCIDENT_B), "--steps", "1:12"]) == 0
    assert capsys.readouterr().out.strip() == "no findings"
    assert main(["findings", str(INCIDENT_B), "--steps", "a:b"]) == 2
    assert "--steps 'a:b'" in capsys.readouterr().err
    assert main(["findings", str(INCIDENT_B), "-o", "f.xlsx"]) == 2
    assert ".parquet" in capsys.readouterr().err
    assert main(["findings", str(INCIDENT_B), "--site", "nowhere"]) == 2


def test_replay_json_has_the_conclusion(capsys) -> None:
    assert main(["replay", str(INCIDENT_B), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["conclusion"]["first"]["patched"] is None
    assert data["conclusion"]["first"]["upstream"]["resolved"] is None


def test_clean_and_grouped_tables(result_b) -> None:
    grouped = grouped_findings(result_b)
    assert grouped["findings"].sum() == len(result_b.findings)
    text = display_frame(forensics.findings_table(result_b)).to_string(index=False)
    assert not any(bad in text for bad in ("NaN", "<NA>", "None", ".0 "))
    assert display_frame(pd.DataFrame({"a": [1.0, None]}))["a"].tolist() == ["1", ""]


def test_summary_by_site_counts_a_resolved_finding_as_not_unresolved(result_b) -> None:
    table = forensics.summary_by_site(result_b)
    row = table[(table["variant"] == "patched") & (table["site"] == "embedding")].iloc[0]
    assert (row["out_of_bounds"], row["unresolved"], row["verdict"]) == (1, 0, "ok")


def test_next_steps_follow_the_capture() -> None:
    from forensics.present.conclusion import next_steps

    b = next_steps(conclude(forensics.replay(INCIDENT_B)))
    refuted = next_steps(conclude(forensics.replay(
        DATA / "incident-a-stale-prev-rows-refuted.capture")))
    assert b != refuted
    assert b[0].startswith("Start at the first violation: async_output at step 13")
    assert any("refutes the hypotheses" in step for step in refuted), refuted


def test_styled_tables_align_text_left_and_numbers_right() -> None:
    from forensics.present.tables import styled, text_columns

    frame = pd.DataFrame({"fact": ["model", "steps"], "value": ["Qwen", 14],
                          "count": [1, None], "resolved": [True, None]})
    assert text_columns(frame) == ["fact", "value"]
    html = styled(frame).to_html()
    left = set(re.findall(r"(?:th|td)\.(col\d+) \{\s*text-align: left", html))
    assert left == {"col0", "col1"}


def test_a_summary_finding_reads_without_none() -> None:
    from forensics.present.conclusion import describe_finding

    text = describe_finding({"site": "embedding", "step": 7, "rank": 1, "row": None,
                             "element": None, "tensor": "input_ids", "value": 248320,
                             "lower": 0, "upper": 248320, "req_id": None, "resolved": None})
    assert text == "embedding at step 7, rank 1: input_ids = 248320, outside [0, 248320)"


def test_an_imported_log_reads_without_unknown_parts(tmp_path, capsys) -> None:
    """Replaying an imported engine log: summary findings and rank-less events read without
    None or '?' (issue 16, point 6)."""
    log = Path(__file__).parent / "data" / "sm70_engine.log"
    assert main(["import", str(log), "-o", str(tmp_path / "log.capture")]) == 0
    assert main(["replay", str(tmp_path / "log.capture")]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the conclusion is wrapped
    assert "First violation (upstream): async_output at step 0, rank 0:" in out
    assert not any(bad in out for bad in ("None", "rank ?", "step ?", "[None]", "nan"))
    # its step only the lines' order: said unknown, with its line (T119b)
    assert "cuda_assert at an unknown step (line 4 of the log): " in out


def test_inspect_text_shows_the_manifest_facts(capsys) -> None:
    assert main(["inspect", str(INCIDENT_B)]) == 0
    out = capsys.readouterr().out
    for line in ("  model: Qwen3.8-27B INT4 + MTP", "  vocabulary: 248320",
                 "  speculative tokens: 4", "  async scheduling: on", "  vllm: 0.33.0",
                 "  torch: 2.14.0", "  hardware: 1x V100-PCIE-32GB (SM70)"):
        assert line in out.splitlines(), line


def test_summary_by_site_steps_are_integers(result_b) -> None:
    frame = forensics.summary_by_site(result_b)
    assert str(frame["first_step"].dtype) == "Int64"
    shown = display_frame(frame).to_string(index=False)
    assert "14.0" not in shown and "NaN" not in shown and " 14 " in f" {shown} "


@pytest.mark.parametrize("text", ["٣:٥", "+3:5", "1_0:20", "3:", ":5", "3", " 3 : 5 ", ":"])
def test_steps_are_ascii_integers(text: str) -> None:
    """``int`` reads Arabic-Indic digits, a plus sign and underscores: ``--steps ٣:٥`` kept steps
    3 to 5; only ASCII digits (with a minus sign) are steps now."""
    from forensics.errors import ConfigurationError
    from forensics.present.export import parse_steps

    expected = {"3:": (3, None), ":5": (None, 5), "3": (3, 3), " 3 : 5 ": (3, 5),
                ":": (None, None)}
    if text in expected:
        assert parse_steps(text) == expected[text]
    else:
        with pytest.raises(ConfigurationError, match="is not A:B"):
            parse_steps(text)
