"""Round 22, fix22d: what fix22b found and left.

T137a: a probe's ``probe_stop`` says how many records a signal cut out of their hand-off
(``lost_to_signal``, T131f); the readers said only "counted in its probe_stop's records, yet
neither written nor dropped", not why, and a redacted capture lost the count.
"""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

import pytest
from test_round2 import run_cli

DATA = Path(__file__).resolve().parents[2] / "data"

# ------------------------------ T137a: the records lost to a signal are said


def _stopped(tmp_path: Path, counts: str) -> Path:
    """The bundled clean capture in a folder of its own, its probe's stop holding ``counts``."""
    folder = tmp_path / "fleet"
    folder.mkdir()
    capture = folder / "stopped.capture"
    shutil.copytree(DATA / "clean.capture", capture)
    (capture / "events-w0.jsonl").write_text(
        '{"kind": "probe_stop", "step": 200, "rank": 0, ' + counts + '}\n')
    return capture



@pytest.mark.parametrize("command", ["replay", "summary", "report"])
def test_the_records_lost_to_a_signal_are_said(
        tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """900 records counted, 897 written, none dropped, 2 lost to a signal (the probe's
    ``lost_to_signal``): the readers say why 2 of the 3 were never written; they said only
    "counted in its probe_stop's records, yet neither written nor dropped"."""
    capture = _stopped(tmp_path, '"records": 900, "written": 897, "dropped": 0, '
                                 '"lost_to_signal": 2')
    args = [command, capture] + (["-o", str(tmp_path / "r.md")] if command == "report" else [])
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    if command == "report":
        out = html.unescape((tmp_path / "r.md").read_text())
    said = " ".join(out.split())
    assert ("3 record(s) were recorded by the probe and never written (3 counted in its "
            "probe_stop's records, yet neither written nor dropped, 2 of these lost to a "
            "signal, its probe_stop says (a handler raised, as KeyboardInterrupt or SystemExit,"
            " while they were handed to the writer process))") in said, said


def test_inspect_lists_the_records_lost_to_a_signal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``inspect`` lists the count apart, and says why in its not-judged line."""
    capture = _stopped(tmp_path, '"records": 900, "written": 897, "dropped": 0, '
                                 '"lost_to_signal": 2')
    code, out, err = run_cli(capsys, "inspect", capture)
    assert code == 0 and "  records lost to signal: 2" in out.splitlines(), out
    assert "2 of these lost to a signal, its probe_stop says" in out, out


@pytest.mark.parametrize("lost", ['"2"', "true", "-1", "1e3", str(2**63), "[1]"])
def test_a_lost_count_that_is_no_count_is_ignored(
        tmp_path: Path, lost: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A ``lost_to_signal`` that is no non-negative int64 is ignored, as the other counts are:
    the unaccounted records are said as before, with no reason."""
    capture = _stopped(tmp_path, '"records": 900, "written": 897, "dropped": 0, '
                                 f'"lost_to_signal": {lost}')
    code, out, err = run_cli(capsys, "summary", capture)
    said = " ".join(out.split())
    assert code == 0, err
    assert ("(3 counted in its probe_stop's records, yet neither written nor dropped)"
            in said), said
    assert "lost to a signal" not in said, said


def test_a_lost_count_says_no_more_than_the_records_unaccounted() -> None:
    """A stop claiming more lost than it counts beyond written and dropped says only those;
    a stop that adds up loses none; each stop is read apart."""
    from forensics.store.events import lost_by_probe

    stops = [{"kind": "probe_stop", "records": 10, "written": 9, "dropped": 0,
              "lost_to_signal": 5},
             {"kind": "probe_stop", "records": 10, "written": 10, "dropped": 0,
              "lost_to_signal": 5},
             {"kind": "probe_stop", "records": 10, "written": 5, "dropped": 0,
              "lost_to_signal": 2},
             {"kind": "probe_start", "records": 10, "written": 0, "dropped": 0,
              "lost_to_signal": 2}]
    assert lost_by_probe(stops) == 3


def test_redact_keeps_the_records_lost_to_a_signal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A redacted capture's ``probe_stop`` keeps ``lost_to_signal``: its readers say why as
    the original's do; the redaction dropped the key."""
    capture = _stopped(tmp_path, '"records": 900, "written": 897, "dropped": 0, '
                                 '"lost_to_signal": 2')
    out = tmp_path / "red.capture"
    code, _, err = run_cli(capsys, "redact", capture, "-o", str(out))
    assert code == 0, err
    stops = [json.loads(line) for path in out.glob("events-*.jsonl")
             for line in path.read_text().splitlines()]
    assert [e.get("lost_to_signal") for e in stops if e["kind"] == "probe_stop"] == [2], stops
    code, said, err = run_cli(capsys, "summary", out)
    assert code == 0 and "2 of these lost to a signal" in " ".join(said.split()), said
