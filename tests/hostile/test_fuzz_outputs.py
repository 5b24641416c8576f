"""Fuzz (issue 27): generated strings (control characters, markup, formulas, newlines, an
unclosed ``<!--``) as a capture's notes, model name, request ids and events, through inspect,
replay, summary (every format), findings (every format) and the report: no output holds a
control byte or an element of the capture's making."""

from __future__ import annotations

import csv
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_round2 import records, run_cli

from forensics.store.writer import write_capture

#: pieces the generator joins: every foreign element carries ``evil`` in its tag or its id
PIECES = ("<evil-tag>", "<img src=x id=evil onerror=alert(1)>", "<a id=evil href=http://e/>",
          "<style id=evil>*{display:none}</style>", "<meta id=evil http-equiv=refresh>",
          "<!--", "-->", "\n", "\r\n", "\x1b[2J", "\x1b]52;c;eA==\x07", "\x00", "\x9b", "\u202e",
          "=HYPERLINK(1)", "+1", "-2", "@SUM(1)", "\t", "|", "`", "```", "*", "_", "[x](y)",
          "# h", "- li", "1. ol", "&amp;", "\\", "'", '"')
TEXT = st.lists(st.one_of(st.sampled_from(PIECES),
                          st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]),
                                  max_size=4)),
                min_size=1, max_size=6).map("".join)
CONTROL_BYTE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]")
#: elements the Markdown write-up may hold once rendered
MARKDOWN_TAGS = {"h2", "h3", "p", "table", "thead", "tbody", "tr", "th", "td", "ul", "li",
                 "strong", "code", "pre"}


class Elements(HTMLParser):
    """The start tags of an HTML text, with their attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.comments = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_comment(self, data: str) -> None:
        self.comments += 1


def elements(html: str) -> Elements:
    """The parsed elements of ``html``."""
    parser = Elements()
    parser.feed(html)
    parser.close()
    return parser


def foreign(parsed: Elements) -> list[Any]:
    """Elements of the capture's making: a tag or an id holding ``evil``."""
    return [(tag, attrs) for tag, attrs in parsed.tags
            if "evil" in tag or "evil" in str(attrs.get("id") or "")]


def capture_of(root: Path, notes: str, model: str, req: str, message: str) -> Path:
    """A capture holding the generated strings, in a fresh folder under ``root``."""
    index = len(list(root.iterdir()))
    event = {"kind": message, "step": 1, "rank": 0, "message": message, message: notes}
    return write_capture(root / f"f{index}.capture", records([req + "a", "b" + req]),
                         manifest={"notes": notes, "model": {"name": model}}, events=[event])


def check_text(text: str) -> None:
    """A terminal or file output: no control byte (newlines aside)."""
    assert not CONTROL_BYTE.search(text), repr(text[:400])


def check_markdown(text: str) -> None:
    """The write-up rendered as GitHub would (raw HTML passed through): only our elements."""
    import mistune

    check_text(text)
    html = str(mistune.create_markdown(escape=False, plugins=["table", "strikethrough"])(text))
    parsed = elements(html)
    assert {tag for tag, _ in parsed.tags} <= MARKDOWN_TAGS, html[:2000]
    assert parsed.comments == 0 and html.count("<table>") == 1, html[:2000]


def check_csv(text: str) -> None:
    """No control byte, and no cell that a spreadsheet would evaluate."""
    check_text(text)
    for row in csv.reader(io.StringIO(text)):
        for cell in row:
            assert not cell.startswith(("=", "+", "@", "\t", "\r")), cell
            assert not cell.startswith("-") or re.fullmatch(r"-\d+", cell), cell


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(notes=TEXT, model=TEXT, req=TEXT, message=TEXT)
def test_cli_outputs_hold_no_control_byte_and_no_foreign_markup(
        tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str],
        notes: str, model: str, req: str, message: str) -> None:
    root = tmp_path_factory.mktemp("fuzz")
    path = capture_of(root, notes, model, req, message)
    for argv, check in ((["inspect"], check_text), (["inspect", "--json"], check_text),
                        (["replay"], check_text), (["replay", "--json"], check_text),
                        (["summary"], check_markdown),
                        (["summary", "--format", "text"], check_text),
                        (["summary", "--format", "json"], check_text),
                        (["findings"], check_text)):
        code, out, err = run_cli(capsys, argv[0], path, *argv[1:])
        assert code == 0, (argv, err)
        check(out)
        if "--json" in argv or "json" in argv:
            json.loads(out)
    for suffix, check in ((".csv", check_csv), (".jsonl", check_text), (".parquet", None)):
        target = root / f"findings{suffix}"
        code, out, err = run_cli(capsys, "findings", path, "-o", target)
        assert code == 0, err
        check_text(out)
        if check is not None:
            check(target.read_text(encoding="utf-8"))


@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck))
@given(notes=TEXT, model=TEXT, req=TEXT, message=TEXT)
def test_the_report_holds_no_control_byte_and_no_foreign_element(
        tmp_path_factory: pytest.TempPathFactory, notes: str, model: str, req: str,
        message: str) -> None:
    from forensics.present.report import write_report

    root = tmp_path_factory.mktemp("fuzz-report")
    path = capture_of(root, notes + "<evil-tag>", model, req, message + "\x1b[2J")
    html = write_report(path, root / "r.html").read_text(encoding="utf-8")
    check_text(html)
    assert foreign(elements(html)) == []
    assert 'class="forensics-conclusion" id="conclusion"' in html
