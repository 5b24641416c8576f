"""Hostile input, round 8 (leftovers D): inert text that tells two captures apart.

The shared escaping wrote ESC as the four characters ``\\x1b`` and an undecodable byte (a lone
surrogate) as ``\\udcNN``, and left those characters themselves as they were: a folder holding
ESC and one named with the text ``\\x1b`` printed alike, so triage's text, Markdown and CSV
showed two captures as one. A backslash that would read as an escape's start is now doubled.
"""

from __future__ import annotations

import csv
import itertools
import os
from pathlib import Path

import numpy as np
import pytest

from forensics.records import Record
from forensics.store.writer import write_capture

#: pairs of folder names that printed alike: a control character and its escape's text, an
#: undecodable byte and the text of its lone surrogate's escape
PAIRS = {"esc": ("a\x1b.capture", "a\\x1b.capture"),
         "byte": (os.fsdecode(b"a\x80.capture"), "a\\udc80.capture")}


def _capture(root: Path, name: str, first: int) -> Path:
    path = Path(os.fsencode(root / name).decode("utf-8", "surrogateescape"))
    return write_capture(path, [Record("embedding", 0, 0, {
        "input_ids": np.array([first, 1], dtype=np.int64), "num_embeddings": 10})])


@pytest.fixture(params=sorted(PAIRS))
def fleet(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, list[Path]]:
    root = tmp_path / "fleet"
    root.mkdir()
    return root, [_capture(root, name, n) for n, name in enumerate(PAIRS[request.param])]


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_triage_shows_two_captures_that_escape_alike_as_two(
        fleet: tuple[Path, list[Path]], fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    from forensics.cli import main
    from forensics.escaping import markdown, terminal

    root, captures = fleet
    assert main(["triage", str(root), "--workers", "1", "--format", fmt]) == 0
    out = capsys.readouterr().out
    shown = [terminal(c.name) if fmt == "text" else markdown(c.name, table=True, raw=True)
             for c in captures]
    assert shown[0] != shown[1]
    lines = out.splitlines()
    for cell in shown:
        assert [line for line in lines if cell + " " in line], (cell, out)


def test_triage_csv_holds_two_captures_that_escape_alike_as_two(
        fleet: tuple[Path, list[Path]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    from forensics.cli import main

    root, captures = fleet
    table = tmp_path / "triage.csv"
    assert main(["triage", str(root), "--workers", "1", "-o", str(table)]) == 0
    with table.open(encoding="utf-8", newline="") as rows:
        read = list(csv.DictReader(rows))
    assert len(read) == 2
    assert len({row["capture"] for row in read}) == 2
    assert len({row["name"] for row in read}) == 2


#: the characters whose strings must never escape alike: a backslash, the letters of an
#: escape, a control, a lone surrogate, a quote, a formula start, Markdown's marks
ALPHABET = ["\\", "x", "u", "1", "\x1b", "\udc80", "'", "=", "`", " ", "|", "[", "]", "_",
            "&", "<"]


@pytest.mark.parametrize("name", ["terminal", "html", "markdown", "markdown_table", "csv_cell",
                                  "python_string", "markdown_code", "unicode_path"])
def test_no_two_values_escape_alike(name: str) -> None:
    """Every string of up to three characters of :data:`ALPHABET`, through each escaping of a
    capture's value: no two give the same text."""
    from forensics import escaping

    functions = {"html": lambda v: escaping.html(v, raw=True),
                 "markdown": lambda v: escaping.markdown(v, raw=True),
                 "markdown_table": lambda v: escaping.markdown(v, table=True, raw=True),
                 "markdown_code": lambda v: escaping.markdown_code(v, raw=True)}
    escape = functions.get(name) or getattr(escaping, name)
    seen: dict[str, str] = {}
    for size in range(4):
        for chars in itertools.product(ALPHABET, repeat=size):
            value = "".join(chars)
            assert seen.setdefault(escape(value), value) == value, (value, seen[escape(value)])


def test_ordinary_names_print_as_before() -> None:
    """A name without a control or a backslash before ``x``/``u``/``U``/``\\\\`` is unchanged;
    a message's escapes are not doubled (:func:`inert`)."""
    from forensics.escaping import csv_cell, inert, terminal

    for name in ("run-7.capture", "a\\b", "C:\\data", "naïve ✓"):
        assert terminal(name) == name
    assert csv_cell("=1") == "'=1" and csv_cell("'=1") == "''=1"
    assert inert(f"capture '{terminal('a' + chr(27))}' unreadable") == "capture 'a\\x1b' unreadable"


def test_report_figures_name_two_captures_that_escape_alike_apart(tmp_path: Path) -> None:
    """The SVG figures' titles (HTML entities over :func:`terminal`) of a capture holding ESC
    and of one named with the text ``\\x1b`` differ."""
    import shutil
    import xml.etree.ElementTree as ET

    from forensics.present.svg import views
    from forensics.replaying import replay
    from forensics.store.reader import load

    source = Path(__file__).parents[2] / "data" / "incident-b-vocab-sentinel.capture"
    texts = []
    for name in PAIRS["esc"]:
        path = tmp_path / name
        shutil.copytree(source, path)
        svg = views.figure("timeline", replay(load(path), ["upstream"])).to_svg()
        texts.append(sorted("".join(t.itertext()) for t in ET.fromstring(svg).iter()
                            if t.tag.endswith("text") and "a\\" in "".join(t.itertext())))
    assert texts[0] and texts[1] and texts[0] != texts[1], texts


def test_triage_json_and_parquet_hold_two_captures_that_escape_alike_as_two(
        fleet: tuple[Path, list[Path]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    import json

    import pyarrow.parquet as pq

    from forensics.cli import main

    root, _ = fleet
    assert main(["triage", str(root), "--workers", "1", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert len({row["capture"] for row in rows}) == len({row["name"] for row in rows}) == 2
    table = tmp_path / "triage.parquet"
    assert main(["triage", str(root), "--workers", "1", "-o", str(table)]) == 0
    read = pq.read_table(table).to_pylist()
    assert len({row["capture"] for row in read}) == len({row["name"] for row in read}) == 2
