"""Round 19 of hostile input, the lead's own findings (T111a-)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_round2 import run_cli

INCIDENT = Path(__file__).resolve().parents[2] / "data" / "incident-b-vocab-sentinel.capture"


# ------------------------------------- T111a: redact --keep-manifest of a field that is not there


@pytest.mark.parametrize("field", ["model.nme", "model.name.x", "../../etc", "", "events.nothing"])
def test_redact_refuses_a_kept_field_the_capture_does_not_hold(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str) -> None:
    """``redact --keep-manifest model.nme`` (a typo) wrote the capture, dropped ``model.name``
    and stated ``"kept_on_request": ["model.nme"]`` in its manifest: a field said to be kept
    that nothing kept. Now one line, exit 2, naming the option's value, the capture and a
    field it may name; nothing is written."""
    out = tmp_path / "out.capture"
    code, said, err = run_cli(capsys, "redact", INCIDENT, "-o", out, "--keep-manifest", field)
    assert code == 2, (said, err)
    assert err.count("\n") == 1, err
    assert f"--keep-manifest '{field}' names no field of the manifest or events of capture " \
        f"'{INCIDENT}'" in err, err
    assert "'model.name'" in err and "'events.message'" in err, err
    assert not out.exists()


def test_redact_keeps_a_field_the_capture_holds(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The fields that are there are kept, and said to be."""
    out = tmp_path / "out.capture"
    code, said, err = run_cli(capsys, "redact", INCIDENT, "-o", out, "--keep-manifest",
                              "model.name", "--keep-manifest", "events.message")
    assert code == 0, err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["redaction"]["kept_on_request"] == ["events.message", "model.name"]
    assert manifest["model"]["name"] == json.loads(
        (INCIDENT / "manifest.json").read_text())["model"]["name"]


# ------------------------------------------------ T111b: findings of steps the capture lacks


@pytest.mark.parametrize(("argv", "said"), [
    (["--steps", "1000:2000"], "the capture holds no record at steps 1000..2000 (its records "
                               "are at steps 1..14): nothing there was judged"),
    (["--steps", "20:"], "the capture holds no record at a step from 20 (its records are at "
                         "steps 1..14): nothing there was judged"),
    (["--site", "rejection_drafts"], "the capture holds no record of site rejection_drafts "
                                     "(its records are at steps 1..14, of sites batch_change, "
                                     "prepare_input_ids, async_output, embedding)"),
])
def test_findings_says_the_capture_holds_no_record_where_it_was_asked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], said: str) -> None:
    """``findings --steps 1000:2000`` of a capture of steps 1..14 said "0 findings" (or "no
    findings"), read as those steps judged clean; it now says no record is there."""
    for output in ([], ["-o", str(tmp_path / "f.csv")]):
        code, out, err = run_cli(capsys, "findings", INCIDENT, *argv, *output)
        assert code == 0, err
        assert said in out, out


def test_findings_says_nothing_more_where_records_are_clean(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Steps the capture holds, with no finding: "no findings" alone, no extra line."""
    code, out, err = run_cli(capsys, "findings", INCIDENT, "--steps", "3")
    assert code == 0, err
    assert out == "no findings\n", out
