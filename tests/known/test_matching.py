"""The catalogue's schema, the value classes, the matcher's three-valued facts, and the race
check (unwritten_input)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import forensics
from forensics.errors import CaptureFormatError
from forensics.known.evidence import Evidence, value_class
from forensics.known.matching import match_entry
from forensics.known.schema import CATALOGUE_PATH, load_catalogue
from forensics.records import Record

ROOT = Path(__file__).resolve().parents[2]
CLEAN = ROOT / "data" / "clean.capture"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "catalogue.toml"
    path.write_text(text)
    return path


ENTRY = """format = 1
[[entry]]
id = "x"
title = "t"
runner = "v1"
methods = ["mtp"]
versions = "unknown"
workaround = "unknown"
refs = [{ number = 1, kind = "issue", state = "open", verified = true }]
fix = { pr = "none", release = "none" }
[entry.signature]
require = [ CLAUSE ]
"""


def test_the_bundled_catalogue_validates() -> None:
    catalogue = load_catalogue(CATALOGUE_PATH)
    assert len(catalogue.entries) == 10
    assert catalogue.race_reader == {"site": "embedding", "field": "input_ids"}


@pytest.mark.parametrize(("clause", "field"), [
    ('{ finding = { site = "embedding", value_class = "huge" } }', "value_class"),
    ('{ finding = { code = "import os" } }', "finding"),
    ('{ python = "os.system()" }', "clause 0"),
    ('{ spec_tokens = "some" }', "spec_tokens"),
    ('{ finding = { site = "e" }, fact = { name = "a", equals = 1 } }', "clause 0"),
    ('{ fact = { name = "runner" } }', "fact"),
])
def test_a_bad_clause_names_the_entry_and_field(tmp_path: Path, clause: str,
                                                field: str) -> None:
    path = _write(tmp_path, ENTRY.replace("CLAUSE", clause))
    with pytest.raises(CaptureFormatError, match=f"entry 'x'.*{field}") as info:
        load_catalogue(path)
    assert str(path) in str(info.value) and "fix the entry" in str(info.value)


def test_a_missing_fact_must_be_written_unknown(tmp_path: Path) -> None:
    path = _write(tmp_path, ENTRY.replace('workaround = "unknown"\n', "").replace(
        "CLAUSE", '{ crash_without_findings = true }'))
    with pytest.raises(CaptureFormatError, match=r"entry 'x'\.workaround.*\"unknown\""):
        load_catalogue(path)


def _row(value: int, upper: int | None, **extra: object) -> pd.Series:
    return pd.Series({"kind": "out_of_bounds", "value": value, "lower": 0, "upper": upper,
                      **extra})


@pytest.mark.parametrize(("row", "expected"), [
    (_row(-1, 32000), "placeholder"),
    (_row(-5, 8), "negative"),
    (_row(32000, 32000), "vocab_size"),
    (_row(32007, 32000), "past_end"),
    (_row(8, 8), "stale_row"),
    (_row(8, 8, indexed="vocabulary"), "vocab_size"),
    (_row(-1, 32000, value_class="stale_row"), "stale_row"),  # the column wins
    (pd.Series({"kind": "misattributed", "value": 3, "lower": None, "upper": None}), None),
])
def test_value_class(row: pd.Series, expected: str | None) -> None:
    assert value_class(row, {32000}) == expected


def _evidence(facts: dict[str, object]) -> Evidence:
    findings = pd.DataFrame([{"variant": "upstream", "site": "embedding", "step": 3, "rank": 0,
                              "row": 1, "element": 5, "tensor": "input_ids",
                              "kind": "out_of_bounds", "value": -1, "lower": 0,
                              "upper": 32000, "origin": "prepare_input_ids",
                              "resolved": False}])
    return Evidence(findings=findings, baseline="upstream", facts=facts)


def _placeholder_entry():  # noqa: ANN202
    return next(e for e in load_catalogue().entries if e.id == "placeholder-reaches-input-ids")


def test_a_contradicting_fact_excludes_an_entry() -> None:
    match = match_entry(_placeholder_entry(), _evidence({"runner": "v2",
                                                         "async_scheduling": True}))
    assert not match.matched
    assert match.contradicted == ["runner is v2, not v1"]


def test_an_unknown_fact_is_reported_not_held_against() -> None:
    match = match_entry(_placeholder_entry(), _evidence({}))
    assert match.matched
    assert match.unknown == ["async_scheduling not recorded", "runner not recorded"]
    # the hand-made finding says nothing of what holds the value: no `T[i] = v` claimed
    assert match.evidence == ["upstream finds embedding step 3: value -1 used at input_ids "
                              "element 5 (placeholder), origin prepare_input_ids"]


def _step_one(capture: Path) -> list[Record]:
    """The prepare_input_ids and embedding records of step 1, as writable copies."""
    cap = forensics.load(capture)
    chosen = [r for r in cap.records() if r.step == 1 and r.site in ("prepare_input_ids",
                                                                     "embedding")]
    return [Record(r.site, r.step, r.rank, {k: np.array(v) if isinstance(v, np.ndarray) else v
                                            for k, v in r.fields.items()}) for r in chosen]


def test_a_disagreement_is_an_unwritten_input_with_both_values() -> None:
    records = _step_one(CLEAN)
    embedding = next(r for r in records if r.site == "embedding")
    written = int(embedding["input_ids"][7])
    embedding.fields["input_ids"][7] = 31999 if written != 31999 else 1
    check = forensics.replay(records).race
    assert check.compared == 1 and not check.missing
    row = check.findings.iloc[0].to_dict()
    assert len(check.findings) == 1
    assert {k: row[k] for k in ("site", "step", "element", "tensor", "kind", "value",
                                "written", "origin", "source")} == {
        "site": "embedding", "step": 1, "element": 7, "tensor": "input_ids",
        "kind": "unwritten_input", "value": embedding["input_ids"][7], "written": written,
        "origin": "prepare_input_ids", "source": "upstream replay"}
    assert "1 element(s) disagree" in check.summary()


def test_the_race_check_reads_the_baseline_outputs_the_result_holds() -> None:
    from forensics.judge.race import race_check

    records = _step_one(CLEAN)
    embedding = next(r for r in records if r.site == "embedding")
    embedding.fields["input_ids"][7] += 1
    result = forensics.replay(records)
    writer = next(i for i, r in enumerate(result.records) if r.site == "prepare_input_ids")
    assert list(result.baseline_outputs) == [writer]
    again = race_check(result)
    assert len(again.findings) == 1 and again.findings.iloc[0]["source"] == "upstream replay"
    assert again.findings.to_dict("records") == result.race.findings.to_dict("records")
    result.baseline_outputs.clear()  # the judge runs nothing: without them nothing is written
    unknown = race_check(result)  # what was written is unknown: not compared (T88a)
    assert unknown.compared == 0 and unknown.findings.empty
    assert unknown.unproduced == [(1, 0, "prepare_input_ids", "upstream")]
    assert "they agree" not in unknown.summary()


def test_agreeing_records_give_no_finding() -> None:
    check = forensics.replay(_step_one(CLEAN)).race
    assert check.compared == 1 and check.findings.empty
    assert check.summary().endswith("at 1 step(s): they agree.")


def test_a_missing_record_is_named() -> None:
    records = [r for r in _step_one(CLEAN) if r.site != "embedding"]
    check = forensics.replay(records).race
    assert check.compared == 0
    assert check.missing == [(1, 0, "embedding")]
    assert check.missing_at({1}) == ["step 1 rank 0 has no embedding record"]
    assert "missing: embedding" in check.summary()
