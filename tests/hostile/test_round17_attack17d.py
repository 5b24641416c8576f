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
