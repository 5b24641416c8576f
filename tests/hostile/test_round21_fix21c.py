"""Round 21's fix21c (issue 38): what was found and left in round 21.

- T129a: ``known --json`` of a capture whose crash verdict is unexplained gave the verdict and
  no word of why: only the text said "Not explained: ... comes after the last crash event
  (step 3) ...". The JSON now holds that lead sentence (``"lead"``) and the paragraph the text
  prints (``"text"``).
- T129b: the pytest plugin skipped a capture folder inside another capture's folders without a
  word, where ``triage`` and ``open_many`` name it (T127c); it now warns with their line. A
  nested capture that is itself named (collected) is read, and no note names it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.hostile import test_round21_attack21c as attack21c
from tests.hostile import test_round21_fix21b as fix21b
from tests.hostile.test_round2 import run_cli

ROOT = Path(__file__).resolve().parents[2]

pytest_plugins = ["pytester"]


# ------------------------ T129a: known --json says why a crash is not explained


def test_known_json_says_why_the_crash_is_not_explained(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Incident B with its crash moved to step 3: ``--json`` gives the lead sentence the text
    prints, word for word, and the paragraph."""
    capture = attack21c._crash_moved(tmp_path, 3)
    code, out, err = run_cli(capsys, "known", capture)
    assert code in (0, 1), err
    said = " ".join(out.split())
    code, out, err = run_cli(capsys, "known", capture, "--json")
    assert code in (0, 1), err
    data = json.loads(out)
    assert data["crash_verdict"] == "unexplained"
    assert data["lead"].startswith(
        "Not explained: the capture holds a crash, yet every value out of range that the "
        "engine's code finds comes after the last crash event (step 3)"), data["lead"]
    assert data["lead"].split(" Next: ")[0] in said
    assert data["text"].startswith(data["lead"]) and " ".join(data["text"].split()) in said


def test_known_json_lead_is_empty_when_explained(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The bundled incident (crash at step 14, explained) has no lead: ``""``, never a
    sentence of a verdict it does not hold."""
    capture = attack21c._crash_moved(tmp_path, 14)
    code, out, err = run_cli(capsys, "known", capture, "--json")
    assert code in (0, 1), err
    data = json.loads(out)
    assert data["crash_verdict"] == "explained" and data["lead"] == ""


# ------------------------ T129b: the pytest plugin names a capture inside another


def test_the_plugin_warns_of_a_capture_inside_another(
        tmp_path: Path, pytester: pytest.Pytester) -> None:
    """``--forensics-captures DIR`` collects ``a.capture`` and warns, in triage's words, that
    ``a.capture/old/b.capture`` was not read (it dropped out unsaid)."""
    fleet, inner = fix21b._nested(tmp_path)
    run = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--forensics-captures",
                                       str(fleet))
    run.assert_outcomes(passed=1, warnings=1)
    said = " ".join(run.stdout.str().split())
    assert (f"not read: 1 capture folder(s) inside another capture ({inner}): a capture's own "
            "folders are not searched; name them to read them") in said, said


def test_a_nested_capture_named_itself_is_read_and_not_noted(
        tmp_path: Path, pytester: pytest.Pytester) -> None:
    """Naming the inner capture too collects both, and nothing is said to be not read (nor by
    ``unread_note`` of both, as ``triage a.capture a.capture/old/b.capture`` reads both)."""
    from forensics.fleet.paths import find_captures, unread_note

    fleet, inner = fix21b._nested(tmp_path)
    run = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--forensics-captures",
                                       str(fleet), "--forensics-captures", str(inner))
    run.assert_outcomes(passed=2)
    assert "not read" not in run.stdout.str()
    assert unread_note(find_captures([fleet / "a.capture", inner])) is None
