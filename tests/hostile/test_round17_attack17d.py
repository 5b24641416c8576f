"""Round 17, attack D: a hostile local user of the probe's shared ``FORENSICS_DIR``."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from forensics.probe import owned
from forensics.probe.settings import from_env


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The probe's lines saying other users may replace the capture folder's name."""
    return [r.getMessage() for r in caplog.records
            if r.levelno >= logging.WARNING and "other users may" in r.getMessage()]


def _claimed(directory: Path) -> Path:
    """The capture folder the probe makes for ``FORENSICS_DIR=directory``."""
    settings = from_env({"FORENSICS_DIR": str(directory)})
    assert settings is not None
    return owned.claim(settings).capture


@pytest.mark.parametrize("through", ["a folder", "a symlink", "a symlink's target"])
def test_a_capture_directory_whose_path_others_may_replace_is_said_in_one_line(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, through: str) -> None:
    """``FORENSICS_DIR`` private to this user, but reached through a folder others may write
    without the sticky bit (``/shared/caps``, ``/shared/link -> ~/caps``, ``~/link ->
    /shared/caps``): any of them may rename ``caps`` (or swap the link) and put a folder of
    their own, holding a forged capture, under the name the engine's log gives. The probe
    warned only of a capture directory itself open to others, never of its path: it said
    nothing, as if the name were the user's alone."""
    shared, mine = tmp_path / "shared", tmp_path / "mine"
    shared.mkdir()
    mine.mkdir()
    os.chmod(shared, 0o777)
    if through == "a folder":
        directory = shared / "caps"
    elif through == "a symlink":
        (shared / "link").symlink_to(mine, target_is_directory=True)
        directory = shared / "link"
    else:
        (shared / "caps").mkdir(mode=0o700)
        (mine / "link").symlink_to(shared / "caps", target_is_directory=True)
        directory = mine / "link"
    with caplog.at_level(logging.WARNING, logger="forensics.probe"):
        capture = _claimed(directory)
    assert capture.parent == directory and capture.is_dir()
    lines = _warnings(caplog)
    assert len(lines) == 1, lines
    assert str(directory) in lines[0] and "FORENSICS_DIR" in lines[0]
    assert str(shared) in lines[0]  # the folder others may write is named


def test_a_capture_directory_on_a_private_path_is_said_nothing_of(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A private path (a link of this user's in a private folder to a private folder) is not
    warned of: the warning is no noise."""
    mine, other = tmp_path / "mine", tmp_path / "other"
    mine.mkdir(mode=0o755)
    other.mkdir(mode=0o700)
    (mine / "link").symlink_to(other, target_is_directory=True)
    with caplog.at_level(logging.WARNING, logger="forensics.probe"):
        _claimed(mine / "link" / "caps")
    assert _warnings(caplog) == []


@pytest.mark.parametrize("swapped", ["a symlink", "a file", "an old capture of mine"])
def test_a_folder_swapped_between_its_mkdir_and_its_open_is_left_alone(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
        swapped: str) -> None:
    """In a ``FORENSICS_DIR`` others may write (the probe warns of it, and goes on), one of
    them renames the folder the probe just made and puts something in its place before the
    probe opens it by name: a symlink (the open refused, and the engine with it: "no capture
    folder can be made there"), a file, or an old capture of this user's (adopted: the new
    engine's records went into it, two engines in one capture). Now what is in the way is
    left untouched, one line says so, and the capture is a new folder under a fresh name."""
    shared, outside = tmp_path / "shared", tmp_path / "outside"
    shared.mkdir()
    outside.mkdir()
    os.chmod(shared, 0o777)
    old = outside / "old.capture"
    old.mkdir()
    (old / "manifest.json").write_text('{"format": 1}\n')
    real_mkdir, swaps = os.mkdir, []

    def racing_mkdir(path: object, mode: int = 0o777, **kwargs: object) -> None:
        real_mkdir(path, mode, **kwargs)  # type: ignore[arg-type]
        where = Path(str(path))
        if where.name.endswith(".capture") and not swaps:
            swaps.append(where)
            os.rename(where, outside / "renamed")
            if swapped == "a symlink":
                where.symlink_to(outside, target_is_directory=True)
            elif swapped == "a file":
                where.write_text("planted\n")
            else:
                os.rename(old, where)

    monkeypatch.setattr(os, "mkdir", racing_mkdir)
    with caplog.at_level(logging.WARNING, logger="forensics.probe"):
        capture = _claimed(shared / "caps")
    monkeypatch.undo()
    assert swaps and capture != swaps[0] and capture.parent == shared / "caps"
    assert capture.is_dir() and not capture.is_symlink() and os.listdir(capture) == []
    lines = [r.getMessage() for r in caplog.records if "is in the way" in r.getMessage()]
    assert len(lines) == 1 and str(swaps[0]) in lines[0] and str(capture) in lines[0]
    left = ["renamed"] if swapped == "an old capture of mine" else ["old.capture", "renamed"]
    assert sorted(os.listdir(outside)) == left  # the probe's first folder, renamed, untouched
    if swapped == "an old capture of mine":
        assert os.listdir(swaps[0]) == ["manifest.json"]  # left as it was
