"""Round 18's attack18b (issue 38, "Hostile input, round 3"): what a capture's reader and the
commands built on it said or did of inputs the earlier rounds did not cover (T102a.. of
docs/threat-model.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from test_round2 import run_cli
from test_round14_fix14 import plugin_captures  # noqa: F401  (a fixture)

from forensics.records import Record
from forensics.store.writer import write_capture

NOT_KNOWN = "3 record(s) of site 'toy_gather' (not known to this install)"


def _with_plugin_records(plugin_captures: dict[str, Path], tmp_path: Path  # noqa: F811
                         ) -> Path:
    """A capture of one embedding record whose id is past its rows (a finding to keep),
    beside the three records of a plugin's site this install does not know."""
    capture = write_capture(tmp_path / "both.capture", [
        Record("embedding", 1, 0, {"input_ids": np.array([50], np.int64),
                                   "num_embeddings": 10})])
    for path in plugin_captures["only"].glob("toy_gather.*"):
        shutil.copy(path, capture / path.name)
    return capture


def test_shrink_says_it_left_out_the_records_of_a_site_not_installed(
        plugin_captures: dict[str, Path], tmp_path: Path,  # noqa: F811
        capsys: pytest.CaptureFixture[str]) -> None:
    """``shrink`` of a capture holding three records of a plugin's site this install does not
    know, beside an embedding record with a finding, said "kept 1 of 1 records (100%)": the
    three were lost in silence, and neither the line nor the manifest's ``shrink`` entry
    counted them (``records_before`` 1 of a capture of 4). No replay here judges them, so
    whether the evidence needs them is not known: they are counted, and named where they go
    (as ``redact`` names them, T95f)."""
    capture = _with_plugin_records(plugin_captures, tmp_path)
    out = tmp_path / "small.capture"
    code, said, err = run_cli(capsys, "shrink", capture, "-o", out)
    assert code == 0, err
    assert "kept 1 of 4 records (25%)" in said, said
    assert f"note: left out {NOT_KNOWN}" in said, said
    entry = json.loads((out / "manifest.json").read_text())["shrink"]
    assert entry["records_before"] == 4 and entry["records_kept"] == 1, entry
    assert entry["dropped"] == NOT_KNOWN, entry
