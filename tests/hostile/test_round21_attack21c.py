"""Round 21 of hostile input, attack 21c: the crash verdict and the catalogue (``forensics
known``, ``check``, ``summary``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.hostile.test_round2 import run_cli

DATA = Path(__file__).resolve().parents[2] / "data"


def _crash_moved(tmp_path: Path, step: int | None, known: bool = True) -> Path:
    """Incident B (its cuda_assert and engine_dead at step 14, the vocab_size sentinel read at
    steps 13 and 14) with its crash events moved to ``step`` (None: no step; ``known`` false:
    events of an imported log's lines, whose step is the probe line's before them)."""
    capture = tmp_path / "b.capture"
    shutil.copytree(DATA / "incident-b-vocab-sentinel.capture", capture)
    (capture / "expected.json").unlink()
    events = capture / "events-w0.jsonl"
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    for event in lines:
        event["step"] = step
        if not known:
            event["line"] = 2
    events.write_text("".join(json.dumps(event) + "\n" for event in lines))
    return capture


# ------------------------------ T126a: a crash before every value out of range


def test_a_crash_before_every_value_out_of_range_is_not_explained_by_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An engine that crashed at step 3 read the vocab_size sentinel of steps 13 and 14 (if
    ever) after it crashed: those values explain nothing of the crash. ``known`` said "crash
    verdict explained (..., the first cuda_assert at step 3; the upstream replay raises
    IndexError at step 14 ...)"; ``check --accept`` wrote "explained" and ``summary`` led with
    no word of it."""
    capture = _crash_moved(tmp_path, 3)
    code, out, err = run_cli(capsys, "known", capture)
    text = " ".join(out.split())
    assert code in (0, 1), err
    assert "crash verdict unexplained" in text, text
    assert ("every value out of range that the engine's code finds comes after the last crash "
            "event (step 3): the first at step 13") in text, text
    assert "vocab-size-sentinel-counted: matches" in text, text  # the finding still stands
    code, out, err = run_cli(capsys, "check", capture, "--accept")
    assert code == 0, err
    assert json.loads((capture / "expected.json").read_text())["crash_verdict"] == "unexplained"
    code, out, err = run_cli(capsys, "summary", capture)
    assert code in (0, 1), err
    assert ("Not explained: the capture holds a crash, yet every value out of range that the "
            "engine's code finds comes after the last crash event (step 3)") in out, out


def test_a_crash_at_or_after_the_value_or_of_no_known_step_stays_explained(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The bound is the last crash event's step, and only a step the probe stated: a crash at
    step 14 (the bundled incident), at step 13, one of no step and one of an imported log's
    line (its step the probe line's before it, an order buffered output may change) are
    explained by the values out of range, as before."""
    for step, known in ((14, True), (13, True), (None, True), (3, False)):
        folder = tmp_path / f"{step}-{known}"
        folder.mkdir()
        capture = _crash_moved(folder, step, known)
        code, out, err = run_cli(capsys, "known", capture)
        assert code in (0, 1), err
        assert "crash verdict explained" in " ".join(out.split()), (step, known, out)


# ------------------------------ T126b: a shrink count fewer than the records held


def test_a_shrink_count_fewer_than_the_records_held_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A manifest whose ``shrink.records_before`` (3) is fewer than the records the capture
    holds (240): ``replay`` said "It was shrunk from a capture of 3 record(s)" of 240 records
    and ``inspect`` "records before shrinking: 3". The count is refused, said so, never said as
    the capture's; a true one (240, of the 4 that ``shrink`` kept) is said as before."""
    capture = tmp_path / "c.capture"
    code, _, err = run_cli(capsys, "simulate", "vocab-sentinel", "-o", capture, "--steps", "60")
    assert code == 0, err
    manifest = json.loads((capture / "manifest.json").read_text())
    manifest["shrink"] = {"records_before": 3, "records_kept": 240}
    (capture / "manifest.json").write_text(json.dumps(manifest))
    refused = ("Manifest field shrink.records_before is 3, fewer than the 240 record(s) the "
               "capture holds: read as unknown")
    code, out, err = run_cli(capsys, "replay", capture)
    text = " ".join(out.split())
    assert code in (0, 1) and refused in text and "shrunk from" not in text, text
    code, out, err = run_cli(capsys, "inspect", capture)
    assert code == 0 and "records before shrinking" not in out, out
    part = tmp_path / "part.capture"
    manifest.pop("shrink")
    (capture / "manifest.json").write_text(json.dumps(manifest))
    code, _, err = run_cli(capsys, "shrink", capture, "-o", part)
    assert code == 0, err
    code, out, err = run_cli(capsys, "replay", part)
    text = " ".join(out.split())
    assert "It was shrunk from a capture of 240 record(s)" in text, text
    assert "shrink.records_before" not in text, text


# ------------------------------ T126c: a clamp without a speculative config


def test_a_clamped_placeholder_run_without_drafts_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """vLLM's V1 runner clamps the input ids only with a speculative config (0.32 and 0.33):
    ``simulate clamped-placeholder --spec-tokens 0`` wrote a capture whose embedding received
    token 0 for each -1 (its notes: "vLLM's clamp turns it into token 0") with "speculative
    tokens 0", a run no vLLM makes, and ``replay`` said the model was fed token 0. It is refused
    in one line, nothing written; one draft token is enough."""
    out = tmp_path / "c.capture"
    code, _, err = run_cli(capsys, "simulate", "clamped-placeholder", "-o", out,
                           "--spec-tokens", "0")
    assert code == 2 and not out.exists(), err
    assert err.count("\n") == 1 and "only with a speculative config" in err, err
    assert "give --spec-tokens 1 or more" in err, err
    code, _, err = run_cli(capsys, "simulate", "clamped-placeholder", "-o", out,
                           "--spec-tokens", "1", "--steps", "20")
    assert code == 0 and out.exists(), err
