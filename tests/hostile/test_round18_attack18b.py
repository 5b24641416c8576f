"""Round 18's attack18b (issue 38, "Hostile input, round 3"): what a capture's reader and the
commands built on it said or did of inputs the earlier rounds did not cover (T102a.. of
docs/threat-model.md)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
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


def _cut_capture(tmp_path: Path) -> Path:
    """A capture of 100 embedding records in batches of 40, 40 and 20, the id at step 90 past
    the rows; the last batch cut in half (its writer killed while writing it) and its index
    entry gone, as a flush cut short leaves them."""
    import os

    from forensics.store.index import ENTRY, MAGIC
    from forensics.store.writer import new_capture

    records = [Record("embedding", step, 0, {
        "input_ids": np.array([50 if step == 90 else 1, 2], np.int64), "num_embeddings": 10})
        for step in range(100)]
    path = tmp_path / "cut.capture"
    with new_capture(path, {"versions": {"vllm": "0.33.0"}}) as writer:
        writer.extend(records, flush_every=40)
    segment = path / "embedding.r0.w0.0000.arrows"
    index = segment.with_name(segment.name + ".idx")
    entries = np.fromfile(index, dtype=ENTRY, offset=len(MAGIC))
    assert len(entries) == 3
    os.truncate(segment, int(entries[-1]["offset"] + entries[-1]["length"] // 2))
    os.truncate(index, len(MAGIC) + ENTRY.itemsize * 2)
    return path


CUT = ("the end of segment 'embedding.r0.w0.0000.arrows', a batch or line cut short as its "
       "writer stopped while writing it")


def _said(text: str) -> str:
    """``text`` on one line (a paragraph wrapped for the terminal)."""
    return " ".join(text.split())


@pytest.mark.parametrize("command", ["replay", "summary", "known"])
def test_a_batch_cut_short_is_said_not_read(tmp_path: Path, command: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A capture whose last batch was cut short (the writer killed mid-flush: here the batch
    holding the only id out of range): only ``inspect`` said its tail was ignored; ``replay``,
    ``summary`` and ``known`` said "the capture shows no failure to report", judging 80 of its
    records and not a word of the rest. They say what was not read, and that whether the
    capture shows a failure is not known."""
    capture = _cut_capture(tmp_path)
    code, said, err = run_cli(capsys, command, capture)
    assert code == 0, err
    said = _said(said)
    assert "shows no failure to report" not in said, said
    assert "whether the capture shows a failure to report is not known (not judged: " \
        f"{CUT})" in said, said
    if command != "known":
        assert f"Not read: {CUT}; no variant judged the records or events it held" in said, said


def test_an_event_line_cut_short_is_said_not_read(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """An events file whose last line was cut short (an ``engine_exception`` event whose
    writer stopped before its closing brace and newline): it is not read, and ``replay`` said
    "the capture shows no failure to report" and "0 crash event(s)" without a word of it. It
    says the end of the events file was not read. (A last line lacking only its newline, a
    whole event, is read since T107b.)"""
    capture = tmp_path / "c.capture"
    shutil.copytree(Path(__file__).parents[2] / "data" / "clean.capture", capture)
    (capture / "events-w0.jsonl").write_text(
        '{"kind": "engine_exception", "step": 5, "rank": 0, "message": "IndexError"')
    code, said, err = run_cli(capsys, "replay", capture)
    assert code == 0, err
    said = _said(said)
    assert "shows no failure to report" not in said, said
    assert "Not read: the end of events file 'events-w0.jsonl', a batch or line cut short" \
        in said, said


def _triaged(tmp_path: Path, capsys: pytest.CaptureFixture[str],
             make: Callable[[Path], Path]) -> str:
    """What ``triage`` of a folder holding the capture ``make`` writes into it says (exit 0)."""
    folder = tmp_path / "fleet"
    folder.mkdir()
    make(folder)
    code, said, err = run_cli(capsys, "triage", folder)
    assert code == 0, err
    return _said(said)


def test_triage_does_not_call_a_capture_cut_short_clean(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    """``triage`` of the capture of a batch cut short called it ``clean``; it is ``not
    judged``, naming the file cut short."""
    said = _triaged(tmp_path, capsys, _cut_capture)
    assert "records not judged (files cut short)" in said, said
    assert f"not judged: {CUT}" in said, said
    assert ": clean" not in said, said


def test_findings_says_what_a_cut_tail_left_unread(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """``findings`` of the capture whose cut batch held its one id out of range said "no
    findings" and nothing more; it says the end of the segment was not read."""
    code, said, err = run_cli(capsys, "findings", _cut_capture(tmp_path))
    assert code == 0, err
    assert said.splitlines()[0] == "no findings", said
    assert f"not read: {CUT}; what it held holds no finding" in said, said


def _dropped_capture(tmp_path: Path) -> Path:
    """The bundled clean capture, its process's events those of a probe whose events file
    filled: its ``probe_stop`` says it left out 1,200 events (T69a)."""
    return _clean_with_stop(tmp_path / "full.capture", '"events_dropped": 1200')


def _clean_with_stop(capture: Path, stop_fields: str) -> Path:
    """The bundled clean capture copied to ``capture``, its process's events a probe's start
    and a stop holding ``stop_fields`` (JSON members, comma-separated)."""
    shutil.copytree(Path(__file__).parents[2] / "data" / "clean.capture", capture)
    (capture / "events-w0.jsonl").write_text(
        '{"kind": "probe_start", "step": 0, "rank": 0}\n'
        '{"kind": "probe_stop", "step": 200, "rank": 0, ' + stop_fields + '}\n')
    return capture


@pytest.mark.parametrize("command", ["replay", "summary"])
def test_the_events_the_probe_left_out_are_said(tmp_path: Path, command: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A capture whose probe left 1,200 events out of its full events file (its
    ``probe_stop`` says so: guard_passed_on events and kernel launches are among the kinds it
    drops): no reader read the count, and ``replay`` said "0 crash event(s)" and "the capture
    shows no failure to report". It says how many were left out and that whether the capture
    shows a failure is not known."""
    code, said, err = run_cli(capsys, command, _dropped_capture(tmp_path))
    assert code == 0, err
    said = _said(said)
    assert "The probe left out 1200 event(s) when its events file was full" in said, said
    assert "guard_passed_on events, kernel launches and probe errors may be missing" in said
    assert "shows no failure to report" not in said, said
    assert "whether the capture shows a failure to report is not known (not judged: 1200 " \
        "event(s) left out by the probe, its events file full)" in said, said


def test_inspect_and_kernels_say_the_events_the_probe_left_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``inspect`` lists the count among the capture's facts; ``kernels`` of the capture (no
    launch kept) said it "holds no kernel_launch event ... record with FORENSICS_KERNELS=all",
    though the launches may have been recorded and left out: it says so."""
    capture = _dropped_capture(tmp_path)
    code, said, err = run_cli(capsys, "inspect", capture)
    assert code == 0 and "  events dropped: 1200" in said.splitlines(), said
    code, said, err = run_cli(capsys, "kernels", capture)
    assert code == 2, err
    assert "holds no kernel_launch event (the probe left out 1200 event(s) when its events " \
        "file was full: kernel launches among them were not recorded" in err, err


def test_triage_does_not_call_a_capture_missing_events_clean(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``triage`` called the capture whose probe left 1,200 events out ``clean``; it is ``not
    judged``, saying how many events were left out."""
    said = _triaged(tmp_path, capsys, _dropped_capture)
    assert "records not judged (events left out)" in said, said
    assert "not judged: 1200 event(s) left out by the probe, its events file full" in said, said
    assert ": clean" not in said, said


def _lost_records_capture(tmp_path: Path) -> Path:
    """The bundled clean capture, its process's events those of a probe that recorded 900
    records and wrote 800: its ``probe_stop`` says it dropped 100 (its ring full)."""
    return _clean_with_stop(tmp_path / "lost.capture",
                            '"records": 900, "written": 800, "dropped": 100')


@pytest.mark.parametrize("command", ["replay", "summary"])
def test_the_records_the_probe_never_wrote_are_said(tmp_path: Path, command: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A capture whose probe recorded 100 records it never wrote (its ``probe_stop``'s
    ``dropped``: a ring that overflowed, a writer that stalled or was lost): no reader read
    the count, and ``replay`` said "the capture shows no failure to report" of the records it
    had. It says how many were never written and that whether it shows a failure is not
    known."""
    code, said, err = run_cli(capsys, command, _lost_records_capture(tmp_path))
    assert code == 0, err
    said = _said(said)
    assert "100 record(s) were recorded by the probe and never written (its ring full, or its " \
        "writer stalled or failing): no variant judged them" in said, said
    assert "shows no failure to report" not in said, said
    assert "is not known (not judged: 100 record(s) recorded by the probe and never written " \
        "(its ring full, or its writer stalled or failing))" in said, said


def test_inspect_and_triage_say_the_records_the_probe_never_wrote(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``inspect`` lists the count among the capture's facts; ``triage`` called the capture
    ``clean``; it is ``not judged (records never written)``."""
    folder = tmp_path / "fleet"
    folder.mkdir()
    capture = _lost_records_capture(folder)
    code, said, err = run_cli(capsys, "inspect", capture)
    assert code == 0 and "  records dropped: 100" in said.splitlines(), said
    code, said, err = run_cli(capsys, "triage", folder)
    assert code == 0, err
    said = _said(said)
    assert "records not judged (records never written)" in said, said
    assert ": clean" not in said, said
