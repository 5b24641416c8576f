"""Round 15, attack C: what one capture (or one folder) can do to a triage and to every reader
of a capture's JSON.

- The nesting check every reader of a capture's JSON runs first (manifest, events lines,
  ``expected.json``, segment metadata, imported headers) was quadratic in an unclosed string of
  escaped quotes (``"\\"\\"\\"...``): a manifest of 80 KB took 25 s of a triage, most of it in
  the triage's own process (its plan, which has no deadline), and one of 16 MiB days (T82a).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from forensics.cli import main
from forensics.store.json_in import check_nesting
from tests.instructions import assert_linear, scaling

ROOT = Path(__file__).resolve().parents[2]
CLEAN = ROOT / "data" / "clean.capture"


def _unclosed(quotes: int) -> str:
    """JSON text of more than 100 brackets (the check then scans it), none nested deep, then a
    string never closed holding ``quotes`` escaped quotes."""
    return '{"a": [' + "[]," * 120 + '"' + '\\"' * quotes


# ---------------------------------- T82a: the nesting check is linear in every JSON text


CASES = {"escaped quotes": _unclosed}


def make_work(case: str, size: int, scratch: Path) -> Callable[[], object]:
    """The nesting check of ``CASES[case](size)`` (run by :mod:`tests.instructions`)."""
    text = CASES[case](size)
    return lambda: check_nesting(text)


@pytest.mark.parametrize("case", list(CASES))
def test_the_nesting_check_is_linear_in_an_unclosed_string(case: str, tmp_path: Path) -> None:
    """4x the escaped quotes of an unclosed string cost under 6x the instructions (each quote
    started a scan to the end of the text: 16x)."""
    assert_linear(scaling(__file__, dict.fromkeys(CASES, 2000), tmp_path)[case])


def test_a_manifest_of_an_unclosed_string_is_one_row_of_a_triage(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A capture whose manifest is such a text (200 KB: about three minutes before, in the
    triage's own process) is its row with the parser's one line; the other capture's row is
    its own."""
    fleet = tmp_path / "fleet"
    shutil.copytree(CLEAN, fleet / "ok.capture")
    shutil.copytree(CLEAN, fleet / "bad.capture")
    (fleet / "bad.capture" / "manifest.json").write_text(_unclosed(100_000))
    assert main(["triage", str(fleet), "--workers", "1", "--format", "json"]) == 0
    import json

    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert rows["ok.capture"]["conclusion"] == "clean", rows["ok.capture"]
    assert "is not valid JSON" in rows["bad.capture"]["error"], rows["bad.capture"]
