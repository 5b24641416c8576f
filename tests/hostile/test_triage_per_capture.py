"""Triage and open_many are per-capture (issue 38.5): one hostile capture becomes its own row
with a one-line reason, never changes or stops another's; every output holds."""

from __future__ import annotations

import csv
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from forensics.fleet.dataset import open_many
from forensics.fleet.output import render, write_html, write_table
from forensics.fleet.triage import Triage, triage
from forensics.records import Record
from forensics.store.writer import write_capture

SUMMARY = {"min": 0, "max": 3, "num_embeddings": 10}
#: folders nested past what one path can name (PATH_MAX is 4096 on Linux)
DEPTH = 2100


def _records(steps: int = 3, extra: dict[str, Any] | None = None) -> list[Record]:
    records = [Record("embedding", s, 0, {"input_ids": np.arange(4, dtype=np.int32),
                                          "num_embeddings": 10}) for s in range(steps)]
    if extra is not None:
        records.append(Record("embedding", steps, 0, {**SUMMARY, **extra}, summary=True))
    return records


def _capture(root: Path | str, name: str, extra: dict[str, Any] | None = None,
             manifest: dict[str, Any] | None = None) -> str:
    path = write_capture(os.path.join(root, name), _records(extra=extra))
    if manifest is not None:
        entries = json.loads((path / "manifest.json").read_text())
        entries.update(manifest)
        (path / "manifest.json").write_text(json.dumps(entries))
    return str(path)


def _deep(root: Path) -> None:
    """``root/deep/d/d/...`` nested :data:`DEPTH` folders deep (made through descriptors)."""
    fd = os.open(root, os.O_RDONLY)
    try:
        for name in ["deep"] + ["d"] * DEPTH:
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)


def _remove_deep(root: Path) -> None:
    """Remove what :func:`_deep` made, deepest first (shutil.rmtree recurses too deep)."""
    fds = [os.open(root, os.O_RDONLY)]
    for name in ["deep"] + ["d"] * (DEPTH - 1):
        fds.append(os.open(name, os.O_RDONLY, dir_fd=fds[-1]))
    for fd, name in zip(reversed(fds), reversed(["deep"] + ["d"] * DEPTH), strict=True):
        os.rmdir(name, dir_fd=fd)
        os.close(fd)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    root = tmp_path_factory.mktemp("hostile-fleet")
    made = {"good": _capture(root, "good.capture", manifest={"process": {"host": "h1",
                                                                          "pid": 7}})}
    undecodable = os.fsdecode(os.fsencode(str(root)) + b"/bad\xff\xfe.capture")
    shutil.copytree(made["good"], undecodable)
    made["undecodable"] = undecodable
    made["surrogate"] = _capture(root, "surrogate.capture", manifest={
        "process": {"host": "\udc80h\ud800", "pid": 8}, "runner": "\udfff"})
    made["reserved"] = _capture(root, "reserved.capture",
                                extra={"capture": "/etc/passwd", "host": 5, "pid": "p"})
    made["mixed_int"] = _capture(root, "mixed-a.capture", extra={"foo": 5})
    made["mixed_str"] = _capture(root, "mixed-b.capture", extra={"foo": "text"})
    made["big_pid"] = _capture(root, "big-pid.capture", manifest={
        "process": {"host": "h2", "pid": 2**70}})
    made["noncharacter"] = _capture(root, "non\ufffe\ufdd0\u202e.capture")
    zero = write_capture(root / "zero.capture", [])
    made["zero"] = str(zero)
    unreadable = _capture(root, "unreadable.capture")
    segment = next(Path(unreadable).glob("*.arrows"))
    segment.unlink()
    segment.mkdir()  # a folder where a segment file should be: cannot be read
    made["unreadable"] = unreadable
    _deep(root)
    made["root"] = str(root)
    yield made
    _remove_deep(root)


@pytest.fixture(scope="module")
def result(fleet: dict[str, str]) -> Triage:
    return triage([fleet["root"]], workers=1)


def _row(result: Triage, path: str) -> dict[str, Any]:
    (row,) = [r for r in result.rows if r["capture"] == os.path.abspath(path)]
    return row


def test_every_capture_is_a_row_and_the_good_one_is_unchanged(fleet: dict[str, str],
                                                              result: Triage) -> None:
    captures = {k: v for k, v in fleet.items() if k != "root"}
    assert sorted(r["capture"] for r in result.rows) == sorted(map(os.path.abspath,
                                                                   captures.values()))
    alone = triage([fleet["good"]], workers=1).rows[0]
    assert _row(result, fleet["good"]) == alone
    assert alone["conclusion"] == "clean" and alone["host"] == "h1" and alone["pid"] == 7


def test_hostile_facts_become_readable_rows(fleet: dict[str, str], result: Triage) -> None:
    assert _row(result, fleet["undecodable"])["conclusion"] == "clean"
    surrogate = _row(result, fleet["surrogate"])
    assert surrogate["host"] == "\\udc80h\\ud800" and surrogate["runner"] == "\\udfff"
    big = _row(result, fleet["big_pid"])
    assert big["pid"] is None and big["host"] == "h2" and big["conclusion"] == "clean"
    for key in ("reserved", "mixed_int", "mixed_str", "noncharacter"):
        assert _row(result, fleet[key])["conclusion"] == "clean", key


def test_a_capture_that_fails_is_its_row_with_one_line(fleet: dict[str, str],
                                                       result: Triage) -> None:
    zero = _row(result, fleet["zero"])
    assert zero["conclusion"] == "empty" and "holds no records" in zero["error"]
    assert "1 capture: capture of no records" in [g.title() for g in result.groups]
    unreadable = _row(result, fleet["unreadable"])
    assert unreadable["conclusion"] == "unreadable" and unreadable["error"]
    assert all("\n" not in (r.get("error") or "") for r in result.rows)


def test_every_output_holds(result: Triage, tmp_path: Path) -> None:
    n = len(result.rows)
    for fmt in ("text", "markdown"):
        out = render(result, fmt)
        assert "\udcff" not in out and "\ufffe" not in out and "\u202e" not in out
        assert "bad\\udcff\\udcfe.capture" in out
        out.encode("utf-8")
    assert json.loads(render(result, "json"))["captures"] == n
    assert pq.read_table(write_table(result, tmp_path / "t.parquet")).num_rows == n
    with open(write_table(result, tmp_path / "t.csv"), newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == n and all("\u202e" not in cell for r in rows for cell in r.values())
    reports: list[str] = []
    page = write_html(result, tmp_path / "html", report=lambda c, out: reports.append(c))
    text = page.read_text(encoding="utf-8")
    assert "bad\\udcff\\udcfe.capture" in text and "\ufffe" not in text
    assert reports and all(not _row(result, c)["error"] for c in reports)


def test_open_many_reads_every_capture_and_namespaces_what_is_ours(
        fleet: dict[str, str]) -> None:
    paths = [fleet[k] for k in ("good", "undecodable", "surrogate", "reserved", "mixed_int",
                                "mixed_str", "big_pid", "noncharacter", "zero")]
    table = open_many(paths)["embedding"].to_table()
    names = set(table.column_names)
    assert {"extra.capture", "extra.host", "extra.pid", "foo.int", "foo.str"} <= names
    assert "foo" not in names
    rows = table.to_pylist()
    reserved = [r for r in rows if r["capture"].endswith("reserved.capture")]
    assert len(reserved) == 4 and all(r["capture"] == fleet["reserved"] for r in reserved)
    assert [r["extra.capture"] for r in reserved if r["summary"]] == ["/etc/passwd"]
    assert {r["pid"] for r in rows if r["capture"].endswith("big-pid.capture")} == {None}
    assert {r["host"] for r in rows if r["capture"].endswith("surrogate.capture")} == \
        {"\\udc80h\\ud800"}
    assert {r["foo.int"] for r in rows if r["summary"] and r["foo.int"] is not None} == {5}
    assert {r["foo.str"] for r in rows if r["summary"] and r["foo.str"] is not None} == {"text"}


def test_open_many_skips_what_cannot_be_read(fleet: dict[str, str]) -> None:
    from forensics.errors import ForensicsError

    paths = [fleet["good"], fleet["unreadable"], fleet["reserved"]]
    with pytest.raises(ForensicsError):
        open_many(paths)
    table = open_many(paths, on_error="skip")["embedding"].to_table()
    assert sorted({c.rsplit("/", 1)[1] for c in table["capture"].to_pylist()}) == \
        ["good.capture", "reserved.capture"]


def test_a_folder_nested_past_path_max_is_walked(fleet: dict[str, str]) -> None:
    from forensics.fleet.paths import find_captures

    found = find_captures([fleet["root"]])
    assert os.path.abspath(fleet["good"]) in map(os.path.abspath, found)


def test_a_capture_of_no_records_has_a_report_saying_so(fleet: dict[str, str],
                                                        tmp_path: Path) -> None:
    from forensics.cli import main
    from forensics.present.report import write_report

    page = write_report(fleet["zero"], tmp_path / "zero.html").read_text(encoding="utf-8")
    assert "holds no records" in page
    assert main(["triage", fleet["zero"], "--workers", "1", "--html",
                 str(tmp_path / "html")]) == 0
    assert "holds no records" in (tmp_path / "html" / "index.html").read_text(encoding="utf-8")
