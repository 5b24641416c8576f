"""Hostile input, round 15, fixes of what the attacker found and left (fix15c): an incident
notebook told of another capture; an error line that named no capture; a plugin's site asked
for where the plugin is not installed; a kernel counted as graph-only for one captured launch.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from forensics.cli import main
from tests.conftest import DATA

# ------------------------------------------------------------------ T81a: incident notebooks


@pytest.mark.parametrize("notebook,incident", [("01_stale_prev_rows", "incident A"),
                                               ("02_vocab_sentinel", "incident B")])
def test_an_incident_notebook_refuses_a_capture_not_its_incidents(
        notebook: str, incident: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``report data/clean.capture --notebook 01_stale_prev_rows`` wrote incident A's text
    ("the engine died...", "both ranks", "the hypothesis is refuted for this crash") and the
    bundled confirming capture's tables under the user's capture's name (02: incident B's
    hard-coded log and a real-vLLM replay with a bundled diff); it now refuses in one line
    naming the notebook, the capture and the fix, and writes nothing."""
    out = tmp_path / "r.html"
    assert main(["report", str(DATA / "clean.capture"), "-o", str(out),
                 "--notebook", notebook]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"notebook '{notebook}' tells {incident}'s story" in err
    assert f"capture '{DATA / 'clean.capture'}' is not {incident}'s" in err
    assert "--notebook 03_triage" in err and "incident-" in err
    assert not out.exists()


def test_a_copy_of_an_incident_capture_is_another_capture(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The incident is the capture the notebook names, not one that looks like it."""
    import shutil

    copy = tmp_path / "mine.capture"
    shutil.copytree(DATA / "incident-a-stale-prev-rows-refuted.capture", copy)
    assert main(["report", str(copy), "-o", str(tmp_path / "r.html"),
                 "--notebook", "01_stale_prev_rows"]) == 2
    assert f"capture '{copy}' is not incident A's" in capsys.readouterr().err


def test_an_incident_notebook_runs_on_its_own_capture_and_leaves_nothing_in_tmp(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """02_vocab_sentinel on incident B's capture made ``/tmp/incident-b-*`` (its log, the
    capture imported from it) and left it there; a report's cells now make their temporary
    files in a private folder removed after."""
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setenv("TMPDIR", str(private))
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    out = tmp_path / "b.html"
    assert main(["report", str(DATA / "incident-b-vocab-sentinel.capture"), "-o", str(out),
                 "--notebook", "02_vocab_sentinel"]) == 0
    assert "Incident B" in out.read_text(encoding="utf-8")
    assert list(private.iterdir()) == []
