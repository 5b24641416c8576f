"""Round 15, attack C: what one capture (or one folder) can do to a triage and to every reader
of a capture's JSON.

- The nesting check every reader of a capture's JSON runs first (manifest, events lines,
  ``expected.json``, segment metadata, imported headers) was quadratic in an unclosed string of
  escaped quotes (``"\\"\\"\\"...``): a manifest of 80 KB took 25 s of a triage, most of it in
  the triage's own process (its plan, which has no deadline), and one of 16 MiB days (T82a).
- A capture reached through ``..`` after a link (``x/link/../b.capture``, ``link`` leading
  elsewhere) was named ``x/b.capture``: another capture's name. Triaged beside that one, both
  were one row, an error ("changed while the triage ran"); alone, its row and its report named
  (and its ``--html`` report read) the other capture (T82b).
- Captures whose absolute path is past PATH_MAX, triaged from a folder near them: the stitch
  reopened each by its absolute path, failed, made the first an error row saying it "changed
  while the triage ran", and its rank's divergence with the other went unseen (T82c); the
  ``--html`` index's report of such a capture failed ("File name too long") (T82d).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from forensics.cli import main
from forensics.records import Record
from forensics.store.json_in import check_nesting
from forensics.store.writer import write_capture
from tests.instructions import assert_linear, scaling

ROOT = Path(__file__).resolve().parents[2]
CLEAN = ROOT / "data" / "clean.capture"
SENTINEL = ROOT / "data" / "incident-b-vocab-sentinel.capture"


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


# ------------------------- T82b: a capture reached through '..' after a link is named as itself


@pytest.fixture
def beside(tmp_path: Path) -> dict[str, Path]:
    """``x/b.capture`` (clean) and ``other/b.capture`` (the vocab-sentinel incident), and a
    link ``x/link`` to ``other/sub``: ``x/link/..`` is ``other``, though its text says ``x``."""
    (tmp_path / "x").mkdir()
    (tmp_path / "other" / "sub").mkdir(parents=True)
    shutil.copytree(CLEAN, tmp_path / "x" / "b.capture")
    shutil.copytree(SENTINEL, tmp_path / "other" / "b.capture")
    (tmp_path / "x" / "link").symlink_to(tmp_path / "other" / "sub")
    return {"x": tmp_path / "x", "through": tmp_path / "x" / "link" / "..",
            "clean": tmp_path / "x" / "b.capture", "sentinel": tmp_path / "other" / "b.capture"}


def test_a_capture_through_a_link_and_dotdot_is_a_row_of_its_own(beside: dict[str, Path]) -> None:
    """Triaged beside the capture its text names, each capture is its own row, named by its own
    path, with its own conclusion (it was one error row, "changed while the triage ran")."""
    from forensics.fleet.triage import triage

    rows = {r["capture"]: r for r in triage([beside["x"], beside["through"]], workers=1).rows}
    assert sorted(rows) == sorted([str(beside["clean"]), str(beside["sentinel"])])
    assert rows[str(beside["clean"])]["conclusion"] == "clean", rows
    assert rows[str(beside["sentinel"])]["conclusion"] == "known", rows


def test_a_capture_through_a_link_and_dotdot_names_its_own_folder(
        beside: dict[str, Path]) -> None:
    """Alone, its row names its own folder (it named the clean capture's, whose report the
    ``--html`` index would link), and ``open_many`` labels its records so."""
    from forensics.fleet.dataset import open_many
    from forensics.fleet.paths import find_captures
    from forensics.fleet.triage import triage

    assert find_captures([beside["through"]]) == [beside["sentinel"]]
    [row] = triage([beside["through"]], workers=1).rows
    assert (row["capture"], row["conclusion"]) == (str(beside["sentinel"]), "known"), row
    labels = open_many([beside["through"]])["embedding"].to_table(columns=["capture"])
    assert set(labels.column("capture").to_pylist()) == {str(beside["sentinel"])}


def test_a_capture_named_directly_keeps_its_name(beside: dict[str, Path]) -> None:
    """A path without ``..``, or whose ``..`` is only text (no link before it), is kept as
    given; a capture reached through a link is still named by its direct name."""
    from forensics.fleet.paths import find_captures

    plain = beside["x"] / "." / "sub" / ".." / "b.capture"
    (beside["x"] / "sub").mkdir()
    assert find_captures([plain]) == [plain]
    assert find_captures([beside["x"]]) == [beside["clean"]]


# ------------------ T82c: captures past PATH_MAX, reached from a folder near them, are stitched


def _deep_engine(root: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Go to a folder under ``root`` whose path is about 4,040 bytes long and write there, in
    ``F...`` (200 bytes), the two ranks of one engine (rank 1's third id differs at both
    steps): each capture's absolute path is past PATH_MAX (4,096), its relative one short."""
    monkeypatch.chdir(root)
    while len(os.getcwd()) < 3800:
        os.mkdir("d" * 250)
        os.chdir("d" * 250)
    last = "e" * (4040 - len(os.getcwd()))
    os.mkdir(last)
    os.chdir(last)
    folder = "f" * 200
    manifest = {"engine_id": "E1", "process": {"host": "h"}, "created": "2026-01-01T00:00:00Z"}
    for rank, ids in ((0, [1, 2, 3]), (1, [1, 2, 9])):
        write_capture(Path(folder) / f"r{rank}.capture", [
            Record("embedding", step, rank, {"input_ids": np.array(ids, dtype=np.int64),
                                              "num_embeddings": 1000}) for step in range(2)],
            manifest)
    return folder


def test_captures_past_path_max_are_stitched_not_said_changed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both rows say their rank divergence (element 2: 3 on rank 0, 9 on rank 1); neither is
    an error row."""
    from forensics.fleet.triage import triage

    folder = _deep_engine(tmp_path, monkeypatch)
    rows = triage([folder], workers=1).rows
    assert len(os.fsencode(rows[0]["capture"])) > 4096
    assert [(r["name"], r["error"], r["conclusion"]) for r in rows] == [
        ("r0.capture", "", "rank divergence"), ("r1.capture", "", "rank divergence")], rows
    assert rows[0]["divergence"]["values"] == [3, 9]


def test_a_path_within_path_max_is_opened_as_it_is(tmp_path: Path) -> None:
    """Only an absolute path past PATH_MAX is opened relative to the working directory."""
    from forensics.fleet.paths import openable

    assert openable(str(tmp_path)) == str(tmp_path)
    assert openable("relative/x.capture") == "relative/x.capture"
    far = os.path.join(os.getcwd(), "x" * 200, *["y" * 250] * 17)
    assert openable(far) == os.path.relpath(far)


def test_the_html_report_of_a_capture_past_path_max_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``--html`` index hands each group's report a path it can open (the report read the
    absolute one and failed: "File name too long")."""
    import forensics
    from forensics.fleet.output import write_html
    from forensics.fleet.triage import triage

    folder = _deep_engine(tmp_path, monkeypatch)
    result = triage([folder], workers=1)
    made: list[int] = []

    def report(capture: str, out: Path) -> None:
        made.append(len(forensics.load(capture)))
        out.write_text("<html><body>report</body></html>")

    index = write_html(result, "h", report=report)
    assert made == [2] and (index.parent / "group-000.html").exists()
