"""Round 14 (tri14): defects the last attack round found and left.

``check`` after a replay, when the capture holds something else at ``expected.obtained.json``
(a folder, a link, a FIFO): it exited 2 ("Is a directory") and never said whether the replay
matched.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from forensics.cli import main

ROOT = Path(__file__).resolve().parents[2]
INCIDENT = ROOT / "data" / "incident-b-vocab-sentinel.capture"
OBTAINED = "expected.obtained.json"


def _capture(tmp_path: Path, differs: bool) -> Path:
    """A copy of incident B; with ``differs`` its expected.json says patched's batch_change
    is a violation (the replay finds it ok)."""
    capture = tmp_path / "b.capture"
    shutil.copytree(INCIDENT, capture)
    if differs:
        expected = json.loads((capture / "expected.json").read_text())
        expected["verdicts"]["patched"]["batch_change"] = "violation"
        (capture / "expected.json").write_text(json.dumps(expected))
    return capture


def _check(capture: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    code = main(["check", str(capture), *extra])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("differs", [False, True])
def test_check_states_its_verdict_past_a_folder_at_the_obtained_path(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], differs: bool) -> None:
    capture = _capture(tmp_path, differs)
    (capture / OBTAINED / "inner").mkdir(parents=True)
    code, out, err = _check(capture, capsys)
    assert code == (1 if differs else 0), (out, err)
    if differs:
        assert "replay differs from expected.json" in out and "batch_change" in out, out
        note = [line for line in out.splitlines() if "obtained result not written" in line]
    else:
        assert out.strip() == "b.capture: matches expected.json", out
        note = err.strip().splitlines()
    assert len(note) == 1 and str(capture / OBTAINED) in note[0], (out, err)
    assert "remove" in note[0] and "written to" not in out, note
    assert (capture / OBTAINED / "inner").is_dir()  # left as it was


def test_check_json_states_its_verdict_past_a_folder_at_the_obtained_path(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capture = _capture(tmp_path, differs=True)
    (capture / OBTAINED).mkdir()
    code, out, err = _check(capture, capsys, "--json")
    assert code == 1, (out, err)
    assert json.loads(out)["ok"] is False
    assert len(err.strip().splitlines()) == 1 and str(capture / OBTAINED) in err, err


@pytest.mark.parametrize("differs", [False, True])
@pytest.mark.parametrize("planted", ["link", "fifo"])
def test_check_replaces_a_link_or_fifo_at_the_obtained_path_never_through_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], differs: bool, planted: str) -> None:
    """A link or FIFO there is replaced (on a difference) or removed (on a match), never
    followed or opened: check does not hang on the FIFO nor write where the link points."""
    capture = _capture(tmp_path, differs)
    outside = tmp_path / "outside.txt"
    outside.write_text("theirs")
    if planted == "link":
        (capture / OBTAINED).symlink_to(outside)
    else:
        os.mkfifo(capture / OBTAINED)
    code, out, err = _check(capture, capsys)
    assert code == (1 if differs else 0) and not err, (out, err)
    assert outside.read_text() == "theirs"
    where = capture / OBTAINED
    if differs:
        assert where.is_file() and not where.is_symlink(), out
        assert json.loads(where.read_text())["verdicts"]["patched"]["batch_change"] == "ok"
    else:
        assert not where.exists() and not where.is_symlink()


def test_check_accept_says_what_it_wrote_past_a_folder_at_the_obtained_path(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capture = _capture(tmp_path, differs=True)
    (capture / OBTAINED).mkdir()
    code, out, err = _check(capture, capsys, "--accept")
    assert code == 0, (out, err)
    assert out.strip() == f"wrote {capture / 'expected.json'}", out
    assert len(err.strip().splitlines()) == 1 and str(capture / OBTAINED) in err, err
    expected = json.loads((capture / "expected.json").read_text())
    assert expected["verdicts"]["patched"]["batch_change"] == "ok"
