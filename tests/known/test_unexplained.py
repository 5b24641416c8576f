"""A crashed capture whose values are all in range concludes "not explained", never ok: in the
conclusion, the write-ups, ``check`` and the pytest plugin."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import forensics
from forensics.cli import main
from forensics.present.conclusion import conclude, next_steps
from forensics.share.expectations import check

ROOT = Path(__file__).resolve().parents[2]
pytest_plugins = ["pytester"]

REFUTED = ROOT / "data" / "incident-a-stale-prev-rows-refuted.capture"
CONFIRMED = ROOT / "data" / "incident-a-stale-prev-rows-confirmed.capture"


@pytest.fixture(scope="module")
def refuted():  # noqa: ANN201
    return conclude(forensics.replay(REFUTED))


def test_the_conclusion_says_not_explained_first(refuted) -> None:  # noqa: ANN001
    text = refuted.paragraph()
    assert text.startswith("Not explained: the capture holds a crash, yet no variant finds a "
                           "captured value out of range")
    assert "--no-async-scheduling" in text and "CUDA_LAUNCH_BLOCKING=1" in text
    assert "guard mode" in text and "A site that was not recorded" in text
    assert refuted.known.crash_verdict == "unexplained"
    assert refuted.to_json()["known"]["crash_verdict"] == "unexplained"


def test_next_steps_are_the_experiments(refuted) -> None:  # noqa: ANN001
    steps = next_steps(refuted)
    assert steps[0].startswith("Not explained: ")
    assert any("--no-async-scheduling" in s for s in steps)
    assert not any("nothing to fix" in s for s in steps)


def test_a_crash_with_violations_is_explained() -> None:
    incident_b = ROOT / "data" / "incident-b-vocab-sentinel.capture"
    known = conclude(forensics.replay(incident_b)).known
    assert known.crash_verdict == "explained" and known.lead() == ""


def test_a_capture_without_crash_is_no_crash() -> None:
    conclusion = conclude(forensics.replay(CONFIRMED))
    assert conclusion.known.crash_verdict == "no crash"
    assert not conclusion.paragraph().startswith("Not explained")


def test_summary_formats_carry_the_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", str(REFUTED), "--format", "text"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "crash verdict: unexplained (2 crash event(s) in the capture, the first "
        "illegal_memory_access at step 48; the upstream replay raises nothing); known issues: "
        "none")
    assert main(["summary", str(REFUTED), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["known"]["crash_verdict"] == "unexplained"
    assert data["text"].startswith("Not explained: ")
    assert main(["summary", str(REFUTED)]) == 0
    markdown = capsys.readouterr().out
    assert "### Draft: a new vLLM issue" in markdown
    assert "**Title**: [Bug]: engine crash with every captured index value in range" in markdown


def test_check_compares_the_crash_verdict(tmp_path: Path) -> None:
    copy = Path(shutil.copytree(REFUTED, tmp_path / REFUTED.name))
    assert json.loads((copy / "expected.json").read_text())["crash_verdict"] == "unexplained"
    assert check(copy).ok
    expected = json.loads((copy / "expected.json").read_text())
    (copy / "expected.json").write_text(json.dumps({**expected, "crash_verdict": "no crash"}))
    result = check(copy)
    assert result.differences == [
        "crash verdict: expected 'no crash', got 'unexplained' (a crash no captured value "
        "explains)"]


def test_the_pytest_plugin_fails_on_a_changed_crash_verdict(
        tmp_path: Path, pytester: pytest.Pytester) -> None:
    copy = Path(shutil.copytree(REFUTED, tmp_path / REFUTED.name))
    expected = json.loads((copy / "expected.json").read_text())
    (copy / "expected.json").write_text(json.dumps({**expected, "crash_verdict": "no crash"}))
    run = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--forensics-captures",
                                       str(copy))
    run.assert_outcomes(failed=1)
    run.stdout.fnmatch_lines(["*crash verdict: expected 'no crash', got 'unexplained'*"])
