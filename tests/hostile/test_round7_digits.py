"""Hostile input, round 7 (T38e): a number read from text with ``str.isdigit`` and then
``int()`` failed on a digit ``int()`` does not take ('²'): ``forensics import --set
model.vocab_size=²`` was an internal error, and a build folder named ``.NAME.tmp-²`` planted
beside a capture in a shared folder stopped a writer's clean-up of dead builds with a warning
about a "replacement journal" that was none. ASCII digits only, now."""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

import pytest

from forensics.errors import ConfigurationError
from forensics.importers.facts import parse_settings
from forensics.store.replace import recover

DEAD = 2**22 + 12345  # past pid_max on most machines: no process has it


@pytest.mark.parametrize("value", ["²", "٣", "1²"])
def test_a_set_number_of_other_digits_is_one_line(value: str) -> None:
    with pytest.raises(ConfigurationError, match=r"vocab_size is not a vocabulary size \(1 to "):
        parse_settings([f"model.vocab_size={value}"])


def test_a_planted_build_of_other_digits_stops_no_clean_up(tmp_path: Path) -> None:
    out = tmp_path / "x.capture"
    planted, dead = tmp_path / ".x.capture.tmp-²", tmp_path / f".x.capture.tmp-{DEAD}"
    planted.mkdir()
    dead.mkdir()
    assert not os.path.exists(f"/proc/{DEAD}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        recover(out, clean=True)
    assert planted.is_dir() and not dead.exists()
    shutil.rmtree(planted)
