"""Hostile input, round 8 (leftovers D): ``forensics kernels`` exits 0 only when it judged.

It exited 0 ("done, no finding") for a capture of no kernel launch and for one whose every
launch was left unreplayed (not replayable, or not run within the overall deadline): a CI job
read "clean" where nothing had been judged. Now: 1 for a finding, 2 with one line when nothing
was judged, 0 otherwise, the text's last line counting the launches not replayed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_round4_kernels import KERNEL, MODULE, launch, write_capture

from forensics.cli import main


@pytest.fixture
def replies(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The replay worker answers each launch with the next status of this list."""
    from forensics.kernels import sanitizer

    statuses: list[str] = []
    monkeypatch.setattr(sanitizer, "installed_kernels", lambda: [(MODULE, KERNEL)])
    monkeypatch.setattr(sanitizer.Worker, "ask", lambda self, event, most=0.0: {
        "status": statuses.pop(0), "reason": "stand-in", "accesses": [], "overflows": [],
        "differs": []})
    return statuses


@pytest.mark.parametrize("json_output", [False, True])
def test_no_launch_replayed_is_exit_2_with_one_line(
        tmp_path: Path, replies: list[str], capsys: pytest.CaptureFixture[str],
        json_output: bool) -> None:
    capture = write_capture(tmp_path / "unjudged.capture", [launch(0), launch(1)])
    replies += ["not_replayable", "not_replayable"]
    assert main(["kernels", str(capture), *(["--json"] if json_output else [])]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "none of its 2 launch(es) was replayed" in err, err
    if json_output:
        assert [r["status"] for r in json.loads(out)["launches"]] == ["not_replayable"] * 2
    else:
        assert out.splitlines()[-1].startswith("2 of 2 launch(es) not replayed: not judged"), out


def test_a_capture_of_no_launch_is_exit_2(tmp_path: Path, replies: list[str],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    capture = write_capture(tmp_path / "none.capture", [])
    assert main(["kernels", str(capture)]) == 2
    err = capsys.readouterr().err
    assert "holds no kernel_launch event" in err and "FORENSICS_KERNELS=all" in err, err


def test_some_launches_replayed_is_exit_0_and_says_how_many_were_not(
        tmp_path: Path, replies: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    capture = write_capture(tmp_path / "some.capture", [launch(0), launch(1), launch(2)])
    replies += ["replayed", "not_replayable", "replayed"]
    assert main(["kernels", str(capture)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1].startswith("1 of 3 launch(es) not replayed: not judged"), out
    replies += ["replayed"]
    assert main(["kernels", str(write_capture(tmp_path / "all.capture", [launch(0)]))]) == 0
    assert "not replayed" not in capsys.readouterr().out
