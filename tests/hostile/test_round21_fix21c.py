"""Round 21's fix21c (issue 38): what was found and left in round 21.

- T129a: ``known --json`` of a capture whose crash verdict is unexplained gave the verdict and
  no word of why: only the text said "Not explained: ... comes after the last crash event
  (step 3) ...". The JSON now holds that lead sentence (``"lead"``) and the paragraph the text
  prints (``"text"``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.hostile import test_round21_attack21c as attack21c
from tests.hostile.test_round2 import run_cli

ROOT = Path(__file__).resolve().parents[2]


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
