"""One story per capture (issue 42, point 3): "no failure" never stands beside a
disagreement, and the crash verdict names what it saw."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import forensics
from forensics.present.conclusion import conclude, next_steps
from forensics.records import Record

CLEAN = Path(__file__).resolve().parents[1] / "data" / "clean.capture"


def _step_one_with_a_disagreement() -> list[Record]:
    """Step 1 of the clean capture, the embedding receiving one id nobody wrote."""
    records = [Record(r.site, r.step, r.rank, {k: np.array(v) if isinstance(v, np.ndarray)
                                               else v for k, v in r.fields.items()})
               for r in forensics.load(CLEAN).records() if r.step == 1]
    embedding = next(r for r in records if r.site == "embedding")
    embedding.fields["input_ids"][7] = 31999 if embedding["input_ids"][7] != 31999 else 1
    return records


def test_a_disagreement_is_never_called_no_failure() -> None:
    conclusion = conclude(forensics.replay(_step_one_with_a_disagreement()))
    text = conclusion.paragraph()
    assert "1 element(s) disagree" in text
    assert "no failure to report" not in text
    assert "No known signature matches: a reason to file a new issue" in text
    steps = next_steps(conclusion)
    assert not any("nothing to fix" in s for s in steps)
    assert any("unwritten_input" in s for s in steps)


def test_the_crash_verdict_names_what_it_saw() -> None:
    known = conclude(forensics.replay(_step_one_with_a_disagreement())).known
    assert known.verdict_text() == (
        "crash verdict no crash (no crash event in the capture; the upstream replay raises "
        "nothing)")
    assert known.to_json()["seen"] == known.seen


def test_a_misattribution_does_not_get_the_stale_row_description() -> None:
    """Issue 42 point 3: a match's description fits the finding's kind."""
    result = forensics.replay(Path(__file__).resolve().parents[1] / "data"
                              / "misattribution.capture")
    text = conclude(result).paragraph()
    assert "Known issue stale-prev-positions-row (#47199 (pr, closed)), matched by a " \
           "misattributed row only" in text
    assert "outlives the previous-batch tensors" not in text
    assert "(misattributed: an in-range row another request held)" in text


def test_the_report_header_carries_the_known_issue_match() -> None:
    """Issue 42 point 6: the header names the match (no need to scroll to the table)."""
    from forensics.present.report import header_data

    result = forensics.replay(Path(__file__).resolve().parents[1] / "data"
                              / "incident-b-vocab-sentinel.capture")
    lines = header_data(result, conclude(result))["lines"]
    assert lines[0].startswith("upstream leaves async_output, embedding in violation")
    assert lines[2].startswith("Known issue vocab-size-sentinel-counted (")


DATA = Path(__file__).resolve().parents[1] / "data"


def _disagreements(text: str) -> int:
    """The count of "N element(s) disagree" in a conclusion's text (0 when absent)."""
    import re

    found = re.search(r"(\d+) element\(s\) disagree", text)
    return int(found.group(1)) if found else 0


def test_every_disagreement_the_text_counts_is_an_unwritten_input_row(tmp_path: Path) -> None:
    """Issue 42 point 3: the disagreements are finding rows, in the table and in exports; the
    count in the text is the number of rows; they leave the verdicts as they are."""
    from forensics.cli import main
    from forensics.judge.findings import _verdicts
    from forensics.store.writer import write_capture

    capture = write_capture(tmp_path / "one.capture", _step_one_with_a_disagreement(),
                            manifest=forensics.load(CLEAN).manifest)
    result = forensics.replay(capture)
    text = conclude(result).paragraph()
    rows = result.findings[result.findings["kind"] == "unwritten_input"]
    assert _disagreements(text) == len(rows) == 1
    assert set(rows["variant"]) == {"upstream"} and set(rows["tensor"]) == {"input_ids"}
    assert rows["req_id"].notna().all() and rows["row"].notna().all()
    first = rows.iloc[0]
    assert (first["step"], first["rank"], first["element"]) == (1, 0, 7)
    assert str(first["expected_at"]).startswith("prepare_input_ids step 1 ")
    out = tmp_path / "findings.jsonl"
    assert main(["findings", str(capture), "-o", str(out)]) == 0
    exported = [line for line in out.read_text().splitlines() if "unwritten_input" in line]
    assert len(exported) == len(rows)
    others = result.findings[result.findings["kind"] != "unwritten_input"]
    errors = {v: {s for s, verdict in result.verdicts[v].items() if verdict == "error"}
              for v in result.variants}
    assert _verdicts(list(result.verdicts["upstream"]), errors, others) == result.verdicts


def test_a_clamped_placeholder_is_its_own_finding_not_an_unwritten_input() -> None:
    """Where the capture's vLLM clamps, a -1 written and 0 fed is the clamp
    (``clamped_placeholder``), not input nobody wrote: one finding per element, not two."""
    result = forensics.replay(DATA / "placeholder-leak.capture")
    kinds = result.findings.groupby("kind").size().to_dict()
    assert "unwritten_input" not in kinds and kinds["clamped_placeholder"] >= 9
    assert _disagreements(conclude(result).paragraph()) == 0


def test_a_disagreement_in_a_clean_capture_is_one_row_and_the_site_stays_ok() -> None:
    records = _step_one_with_a_disagreement()
    result = forensics.replay(records)
    rows = result.findings[result.findings["kind"] == "unwritten_input"]
    embedding = next(r for r in records if r.site == "embedding")
    assert _disagreements(conclude(result).paragraph()) == len(rows) == 1
    assert (rows.iloc[0]["element"], rows.iloc[0]["value"]) == (7, embedding["input_ids"][7])
    assert rows.iloc[0]["expected_at"].endswith("(upstream replay)")
    assert result.verdicts["upstream"]["embedding"] == "ok"


def test_replay_json_first_finding_is_the_conclusions_first(capsys) -> None:
    """Issue 42 point 3: on every bundled capture and variant, ``first_finding`` is
    ``conclusion.first`` (incident B's patched: none, as the text says)."""
    import json

    from forensics.cli import main

    for capture in sorted(DATA.glob("*.capture")):
        assert main(["replay", str(capture), "--variant", "upstream", "--variant", "patched",
                     "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        for variant in ("upstream", "patched"):
            assert data["first_finding"][variant] == data["conclusion"]["first"][variant], (
                capture.name, variant)


def test_every_kind_of_finding_exports_to_parquet(tmp_path: Path) -> None:
    """The new kinds' integer columns (position, expected, expected_step) are typed in the
    Parquet schema: substituted, clamped_placeholder and unwritten_input rows export."""
    import pyarrow.parquet as pq

    from forensics.cli import main

    kinds: set[str] = set()
    for name in ("v2-wrong-last-token", "placeholder-leak", "incident-b-vocab-sentinel"):
        out = tmp_path / f"{name}.parquet"
        assert main(["findings", str(DATA / f"{name}.capture"), "-o", str(out)]) == 0
        table = pq.read_table(out)
        kinds |= set(table.column("kind").to_pylist())
        assert str(table.schema.field("expected").type) == "int64"
    assert {"substituted", "clamped_placeholder", "unwritten_input"} <= kinds


def test_replay_json_says_whether_token_continuity_was_judged() -> None:
    """The JSON carries the continuity check's verdict and what it judged: a V2 substitution is
    a violation over judged tokens; a V1 capture without the embedding's positions is "not
    judged", never ok."""
    answers = {name: json.loads(json.dumps(forensics.replay(
        DATA / f"{name}.capture", variants=["upstream"]).to_json()))["continuity"]
        for name in ("v2-wrong-last-token", "clean")}
    assert answers["v2-wrong-last-token"]["verdict"] == "violation"
    assert answers["v2-wrong-last-token"]["judged"] > 0
    assert answers["clean"] == {"verdict": "not judged: needs embedding.positions", "judged": 0,
                                "needs": ["embedding.positions"], "clamps": True,
                                "padding_notes": 0, "found": 0, "listed": 0}
