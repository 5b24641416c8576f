"""Round 17, attack E: what the outputs of one capture (``replay``, ``summary``, ``report``,
``findings``, ``known``, ``inspect``, ``triage``) say of it, held against each other."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from forensics.cli import main

DATA = Path(__file__).resolve().parents[2] / "data"


def _two_processes(tmp_path: Path) -> Path:
    """The clean capture with two processes' events files: the first file (by name) holds a
    ``cuda_assert`` at step 150, the second one at step 20 (the earliest of the capture)."""
    capture = tmp_path / "two.capture"
    shutil.copytree(DATA / "clean.capture", capture)
    (capture / "events-a.jsonl").write_text(
        '{"kind": "probe_start", "rank": 0, "step": null}\n'
        '{"kind": "cuda_assert", "rank": 0, "step": 150, "message": "late"}\n'
        '{"kind": "probe_stop", "rank": 0, "step": null}\n', encoding="utf-8")
    (capture / "events-b.jsonl").write_text(
        '{"kind": "probe_start", "rank": 0, "step": null}\n'
        '{"kind": "engine_exception", "rank": 0, "step": 120, "message": "B"}\n'
        '{"kind": "cuda_assert", "rank": 0, "step": 20, "message": "early"}\n',
        encoding="utf-8")
    return capture


def test_triage_row_names_the_earliest_crash_event_of_a_kind(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """T99a: a capture whose events files (one per process) hold a ``cuda_assert`` at step 150
    in the first file and one at step 20 in the second: ``replay``, ``summary`` and ``known``
    say the first cuda_assert is at step 20, while triage's row said "cuda_assert x2 (first at
    step 150)", the first in file-name order, a step the other outputs contradict."""
    capture = _two_processes(tmp_path)
    assert main(["known", str(capture)]) == 0
    assert "the first cuda_assert at step 20" in capture_text(capsys)
    assert main(["triage", "--workers", "1", "--format", "markdown", str(capture)]) == 0
    row = capture_text(capsys)
    assert "cuda_assert x2 (first at step 20)" in row
    assert "engine_exception x1 (first at step 120)" in row
    assert "step 150" not in row


def capture_text(capsys: pytest.CaptureFixture[str]) -> str:
    """What the command printed on stdout, its wrapped lines joined."""
    return " ".join(capsys.readouterr().out.split())


def test_a_clamped_placeholder_explains_no_crash(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """T99b: the clamped-placeholder scenario (vLLM 0.33.0 clamps each leaked ``-1`` to token 0:
    the replay says "a wrong token, silently, not a crash") of an engine that then died (a
    ``probe_start`` with no ``probe_stop``): ``known`` said "crash verdict explained", the
    death explained by values the same replay says were read as token 0 and crashed nothing; and
    had the crash been unexplained, the lead would have said "no variant finds a captured value
    out of range" of a capture whose every variant finds a ``-1``."""
    capture = tmp_path / "died.capture"
    assert main(["simulate", "clamped-placeholder", "-o", str(capture), "--steps", "60"]) == 0
    (capture / "events-h-1.jsonl").write_text(
        '{"kind": "probe_start", "rank": 0, "step": null}\n', encoding="utf-8")
    capsys.readouterr()
    assert main(["replay", str(capture)]) in (0, 1)
    replayed = capture_text(capsys)
    assert "a wrong token, silently, not a crash" in replayed
    assert ("Not explained: the engine died without the probe's stop (killed or crashed: the "
            "capture does not say which), yet no variant finds a captured value "
            "out of range that the engine read as it was (each -1 it finds was clamped to "
            "token 0 before the embedding") in replayed
    assert main(["known", str(capture)]) == 0
    said = capture_text(capsys)
    assert "crash verdict unexplained" in said
    assert "crash verdict explained" not in said
