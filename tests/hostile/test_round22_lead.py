"""Round 22's defects found by the lead (issue 38): each test fails on the code before its fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile.test_round2 import run_cli
from tests.hostile.test_round22_attack22c import DUMP, IMPORTED

# --------------------------- T125g: triage's row says why an imported capture holds no record


def test_triage_says_an_imported_capture_of_no_record_was_imported(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """T134f's sibling: triage's error row for a capture ``forensics import`` made of a crash
    dump alone said it held no records because "the probe saw no call, or its segments were
    removed"; it says the reason its manifest tells."""
    capture = tmp_path / "d.capture"
    code, _, err = run_cli(capsys, "import", DUMP, "-o", capture)
    assert code == 0, err
    code, out, err = run_cli(capsys, "triage", tmp_path, "--workers", 1, "--format", "json")
    text = " ".join((out + err).split())
    assert IMPORTED in text and "the probe saw no call" not in text, text


# --------------------- T125h: the report's notebook says no capture's events are crash lines


def test_the_report_notebook_does_not_call_every_event_a_crash_line() -> None:
    """The report's notebook (``03_triage``) said "Events are the crash lines the probe or the
    importer saw" of every capture, one of no crash included (attack22c), and named V1's sites
    alone as the sites; it says what events are and that a crash's lines are among them where
    the engine crashed."""
    import json

    notebook = json.loads((Path(__file__).resolve().parents[2] / "notebooks" /
                           "03_triage.ipynb").read_text(encoding="utf-8"))
    text = " ".join(" ".join("".join(cell["source"]).split()) for cell in notebook["cells"]
                    if cell["cell_type"] == "markdown")
    assert "Events are the crash lines" not in text
    assert "where the engine crashed, its crash lines" in text and "V2's `post_update`" in text


# ------------------- T125i: a capture of no record: no variant "leaves no site in violation"


def test_the_paragraph_of_a_capture_of_no_record_says_no_record_was_judged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``summary`` of a capture of no record opened "upstream leaves no site in violation.", as
    of a capture whose every value was judged in range, before saying that no variant judged
    anything (attack22c); each variant's sentence says it judged no record."""
    from forensics.store.writer import write_capture

    path = write_capture(tmp_path / "e.capture", [])
    code, out, _ = run_cli(capsys, "summary", path)
    text = " ".join(out.split())
    assert code == 0 and "upstream judged no record." in text, text
    assert "leaves no site in violation" not in text, text


# --------------- T125j: redact's line says its permutation is of its records' token ids only


def test_redact_says_the_numbers_of_kept_event_text_are_not_permuted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``redact`` said "token ids in [1, 248320) permuted" of a capture whose kept error text
    still held an in-range id ("index 12345"), which it keeps as it is (T37e; attack22c): the
    line says the permutation is of its records' ids and that a number in kept text is not."""
    import shutil

    from tests.hostile.test_round22_attack22c import DATA

    capture = tmp_path / "b.capture"
    shutil.copytree(DATA / "incident-b-vocab-sentinel.capture", capture)
    with (capture / "events-w0.jsonl").open("a", encoding="utf-8") as events:
        events.write('{"kind": "engine_exception", "step": 12, "rank": 0, "message": '
                     '"IndexError: index 12345 is out of bounds for dimension 0 with size 4"}\n')
    code, out, err = run_cli(capsys, "redact", capture, "-o", tmp_path / "r.capture")
    assert code == 0, err
    assert ("permuted in its records and its guard events' values (another number in the "
            "events' kept text is not)") in out, out
    kept = (tmp_path / "r.capture" / "events-w0.jsonl").read_text(encoding="utf-8")
    assert "index 12345" in kept  # as the line says
