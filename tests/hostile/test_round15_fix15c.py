"""Hostile input, round 15, fixes of what the attacker found and left (fix15c): an incident
notebook told of another capture; an error line that named no capture; a plugin's site asked
for where the plugin is not installed; a kernel counted as graph-only for one captured launch.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from test_round14_fix14 import plugin_captures  # noqa: F401  (a fixture: a site not installed)

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


# ------------------------------------------------------------------ T81b: a line naming the capture


def _uint64_capture(path: Path) -> Path:
    """A capture whose embedding ``input_ids`` are uint64, one of them past int64."""
    import numpy as np

    from forensics.records import Record
    from forensics.store.writer import write_capture

    records = [Record("embedding", step, 0, {
        "input_ids": np.array([1, 2, 2**63 + 5 if step == 1 else 3], dtype=np.uint64),
        "num_embeddings": 248320}) for step in range(3)]
    return write_capture(path, records, manifest={"notes": "uint64 input_ids"})


@pytest.mark.parametrize("command", [["plot", "-o", "PLOT.svg"], ["findings"], ["summary"],
                                     ["replay"], ["shrink", "-o", "SMALL.capture"],
                                     ["redact", "-o", "RED.capture"]])
def test_a_value_past_int64_names_the_capture_and_its_segment(
        command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``plot``, ``findings``, ``summary`` (and every command replaying the capture) on uint64
    ``input_ids`` past 2**63 said "embedding records of steps 0-2: 'input_ids' holds values past
    int64 ..." naming the field and the fix but no file; the line now names the segment file
    and the capture, as every other bad-input line does."""
    capture = _uint64_capture(tmp_path / "wide-ids.capture")
    args = [command[0], str(capture),
            *(str(tmp_path / a) if a.isupper() else a for a in command[1:])]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert ("segment 'embedding.r0.w0.0000.arrows' of 'wide-ids.capture', batch 0: embedding "
            "records of steps 0-2: 'input_ids' holds values past int64") in err, err
    assert "capture that field as a signed integer tensor" in err


# ------------------------------------------------------------------ T81c: a plugin's site, absent


@pytest.mark.parametrize("kind", ["only", "both"])
@pytest.mark.parametrize("command", [["plot", "-o", "PLOT.svg"], ["findings"]])
def test_a_site_of_a_plugin_not_installed_is_said_so_with_its_records(
        command: list[str], kind: str, plugin_captures: dict[str, Path],  # noqa: F811
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``plot``/``findings --site toy_gather`` on a capture holding 3 records of that site (a
    plugin's, not installed here) said "unknown site 'toy_gather'" and listed the built-in
    sites, as if the capture held none; the one line now says the capture holds its 3 records
    and that the plugin declaring it is not installed."""
    capture = plugin_captures[kind]
    args = [command[0], str(capture), "--site", "toy_gather",
            *(str(tmp_path / a) if a.isupper() else a for a in command[1:])]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert (f"site 'toy_gather' is not known to this install, and capture '{capture}' holds 3 "
            "record(s) of it: the plugin that declares it is not installed") in err, err
    assert not (tmp_path / "PLOT.svg").exists()


def test_a_site_neither_installed_nor_held_is_still_unknown(
        plugin_captures: dict[str, Path],  # noqa: F811
        capsys: pytest.CaptureFixture[str]) -> None:
    """A site the capture holds no record of stays an unknown site, the valid ones listed."""
    assert main(["findings", str(plugin_captures["both"]), "--site", "toy_scatter"]) == 2
    err = capsys.readouterr().err
    assert "toy_scatter" in err and "embedding" in err and "holds" not in err
