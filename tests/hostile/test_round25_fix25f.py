"""Round 25 of hostile input, fix 25f: fix25b's leftovers: a guard event that contradicts its own
bound quoted as a crash, and ids read in an embedding's padded rows that ``summary`` drafted no
issue for and ``findings`` did not list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.hostile.test_round2 import run_cli
from tests.hostile.test_round25_fix25b import _self_contradicting

# ------------------------------ T166a: a guard event inside its own bound is no crash event

FORGED = "prev_positions value 2 is outside [0, 4)"


def _stopped(capture: Path) -> Path:
    """``capture`` with its probe's stop after step 6 (its engine did not die)."""
    stop = {"kind": "probe_stop", "process": "w0", "pid": 5, "rank": 0, "step": 6}
    with (capture / "events-w0.jsonl").open("a") as events:
        events.write(json.dumps(stop) + "\n")
    return capture


def test_the_capture_facts_do_not_quote_a_self_contradicting_guard_event_as_a_crash(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The capture-facts line said "1 crash event(s), the first guard_violation at step 4 rank 0:
    forensics guard: ... prev_positions value 2 is outside [0, 4)" beside T157a's sentence: the
    event is said as contradicting itself, no crash event; inspect says so in its message's
    place."""
    capture = _self_contradicting(tmp_path)
    code, out, err = run_cli(capsys, "summary", capture)
    assert code == 0, err
    said = " ".join(out.split())
    assert FORGED not in said, said
    assert "0 crash event(s); 1 guard event(s) contradicting their own bounds (no crash event), " \
           "the first guard_violation at step 4 rank 0: value 2 is inside its own bound 4: the " \
           "event contradicts itself and names no value out of range (not judged)" in said, said
    code, out, err = run_cli(capsys, "inspect", capture)
    assert code == 0, err
    assert FORGED not in out
    assert "value 2 is inside its own bound 4: the event contradicts itself" in out
    code, out, err = run_cli(capsys, "known", capture)
    assert code == 0, err
    assert "1 crash event(s)" not in out and "no crash event in the capture" in out, out


def test_a_self_contradicting_guard_event_makes_no_crash(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Of a capture whose probe stopped, the event alone made a crash: known's verdict
    "unexplained", triage's row "guard_violation x1"; now no crash, and the report's events
    table says the event contradicts itself in place of its message."""
    capture = _stopped(_self_contradicting(tmp_path))
    code, out, err = run_cli(capsys, "known", capture)
    assert code == 0, err
    assert "crash verdict no crash" in " ".join(out.split()), out
    code, out, err = run_cli(capsys, "triage", capture)
    assert code == 0, err
    assert "guard_violation" not in out and "crash" not in out, out
    report = tmp_path / "r.html"
    code, out, err = run_cli(capsys, "report", capture, "-o", report)
    assert code == 0, err
    html = report.read_text()
    assert "is outside [0, 4)" not in html
    assert "value 2 is inside its own bound 4: the event contradicts itself" in html


# ------------------------------ T166b: ids read in padded rows make the capture failing


def test_summary_drafts_an_issue_of_ids_read_in_padded_rows(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Of a capture whose embedding read id 900 in padded rows (vocabulary 900, 1,000 rows), no
    crash, known said "a failure to report" yet summary drafted no issue (its own "failing" was
    false), and next_steps said "nothing to fix at these sites": all read one "failing" now, the
    draft's title names the padded ids and the next step says where to look."""
    from tests.hostile.test_round25_fix25b import _padded

    capture = _padded(tmp_path, capsys, 900)
    code, out, err = run_cli(capsys, "summary", capture, "--format", "markdown")
    assert code == 0, err
    said = " ".join(out.split())
    assert "### Draft: a new vLLM issue" in out, out
    assert ("**Title**: [Bug]: no crash, findings with no captured index value out of range, "
            "though the embedding read 1 id(s) in padded rows past the vocabulary") in said, said
    code, out, err = run_cli(capsys, "known", capture)
    assert code == 0, err
    assert ("the embedding read 1 id(s) in padded rows past the vocabulary (a wrong input, not a "
            "crash): a reason to file a new issue") in " ".join(out.split()), out
    from forensics import conclude, next_steps, replay

    assert next_steps(conclude(replay(capture))) == [
        "No index left its valid range, yet the embedding read 1 id(s) in padded rows past the "
        "vocabulary (a wrong input, not a crash): look for the site that wrote them."]


def test_findings_lists_the_ids_read_in_padded_rows(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """findings said "no findings" of the same capture, nothing more: it lists the slot as
    replay's "fed silently" does; steps that hold none list none."""
    from tests.hostile.test_round25_fix25b import _padded

    capture = _padded(tmp_path, capsys, 900)
    code, out, err = run_cli(capsys, "findings", capture)
    assert code == 0, err
    assert "fed silently: 1 slot(s) (kind padded_row, no variant's finding)" in out, out
    assert ("step 13 rank 0: the embedding received id 900 at input_ids[1], the vocab_size "
            "rejection sentinel of the manifest's vocabulary of 900") in out
    code, out, err = run_cli(capsys, "findings", capture, "--steps", "1:5")
    assert code == 0, err
    assert "fed silently" not in out


# ------------------------------ T166c: a summary record's greatest id in the padded rows


def _padded_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str], high: int) -> Path:
    """A log's SM70-TEMB line of 1,000 rows, ids 7 to ``high``, imported with a vocabulary of
    900."""
    log = tmp_path / "temb.log"
    log.write_text(f"SM70-TEMB: rows=1000 input=(3,) dtype=torch.int64 min=7 max={high}\n")
    capture = tmp_path / f"temb{high}.capture"
    code, _, err = run_cli(capsys, "import", log, "-o", capture, "--set", "model.vocab_size=900")
    assert code == 0, err
    return capture


def test_a_summary_record_whose_greatest_id_is_in_padded_rows_is_said(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A log's line "rows=1000 ... max=900" of a vocabulary of 900: the known issues said "the
    capture shows no failure to report" and summary drafted nothing; a padded row was read, said
    as values nothing replays; a greatest id 899 says nothing of padded rows."""
    capture = _padded_summary(tmp_path, capsys, 900)
    code, out, err = run_cli(capsys, "summary", capture, "--format", "markdown")
    assert code == 0, err
    said = " ".join(out.split())
    assert "no failure to report" not in said, said
    assert ("though 1 summary record(s) of the embedding name a greatest id in padded rows past "
            "the vocabulary (a padded row was read: values nothing replays)") in said, said
    assert "### Draft: a new vLLM issue" in out
    code, out, err = run_cli(capsys, "findings", capture)
    assert code == 0, err
    assert ("the embedding's summary record names its greatest id 900, at or past the manifest's "
            "vocabulary of 900, inside its 1000 rows: a padded row was read") in out, out
    from forensics import conclude, next_steps, replay

    assert next_steps(conclude(replay(capture))) == [
        "No index left its valid range, yet 1 summary record(s) of the embedding name a greatest "
        "id in padded rows past the vocabulary (a padded row was read: values nothing replays): "
        "look for the site that wrote them."]
    code, out, err = run_cli(capsys, "summary", _padded_summary(tmp_path, capsys, 899))
    assert code == 0, err
    assert "padded rows" not in out and "no failure to report" in " ".join(out.split())
