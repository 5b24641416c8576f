"""One story per capture (issue 42, point 3): "no failure" never stands beside a
disagreement, and the crash verdict names what it saw."""

from __future__ import annotations

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
