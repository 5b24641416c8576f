"""One escaping module (forensics.escaping) over every class of code point (issue 38.7, 43.4):
C0/C1 controls, bidi controls, noncharacters, lone surrogates of undecodable file names, very
long strings; each output (terminal, HTML/SVG/XML, Markdown, CSV, Python source) holds.
"""

from __future__ import annotations

import ast
import csv
import html as html_lib
import io
import os
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import mistune
import pytest

from forensics import escaping

ROOT = Path(__file__).resolve().parents[2]
C0 = [chr(c) for c in range(0x20)] + ["\x7f"]
C1 = [chr(c) for c in range(0x80, 0xA0)]
BIDI = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068",
        "\u2069", "\u200e", "\u200f", "\u061c", "\u2028", "\u2029", "\ufeff"]
NONCHARACTERS = ([chr(c) for c in range(0xFDD0, 0xFDF0)]
                 + [chr(p * 0x10000 + low) for p in range(17) for low in (0xFFFE, 0xFFFF)])
SURROGATES = [os.fsdecode(b"\xff"), os.fsdecode(b"\x80"), "\ud800", "\udfff"]
CLASSES = {"c0": C0, "c1": C1, "bidi": BIDI, "noncharacter": NONCHARACTERS,
           "surrogate": SURROGATES}
EVERY = [(name, ch) for name, chars in CLASSES.items() for ch in chars]


def _raw(text: str) -> list[str]:
    """The characters of every class that stand raw in ``text``."""
    return [ch for chars in CLASSES.values() for ch in chars if ch in text]


@pytest.mark.parametrize(("kind", "ch"), EVERY, ids=[f"{k}-{ord(c):x}" for k, c in EVERY])
def test_every_output_shows_the_character_as_an_escape(kind: str, ch: str) -> None:
    text = f"name{ch}!end"
    shown = escaping.terminal(text)
    assert _raw(shown) == [] and shown.startswith("name\\") and shown.endswith("!end")
    assert int(shown[6:-4], 16) == ord(ch)
    for out in (escaping.html(text), escaping.markdown(text), escaping.csv_cell(text),
                escaping.markdown_code(text), escaping.python_string(text)):
        assert _raw(out) == [], out
        out.encode("utf-8")  # never a lone surrogate
    ET.fromstring(f'<svg a="{escaping.html(text)}"><text>{escaping.html(text)}</text></svg>')
    assert ast.literal_eval(escaping.python_string(text)) == shown
    assert escaping.python_string(text).isascii()


def test_unicode_keeps_text_and_shows_only_surrogates() -> None:
    name = os.fsdecode(b"caf\xc3\xa9-\xff") + "\u202e.capture"
    assert escaping.unicode(name) == "café-\\udcff\u202e.capture"
    escaping.unicode(name).encode("utf-8")


def test_very_long_strings_are_capped_with_a_marker() -> None:
    text = "x" * (escaping.LIMIT + 12345)
    for out in (escaping.terminal(text), escaping.html(text), escaping.markdown(text),
                escaping.csv_cell(text), escaping.markdown_code(text)):
        assert len(out) < escaping.LIMIT + 100
        assert "… [12345 more characters]" in out
    assert escaping.terminal("x" * escaping.LIMIT) == "x" * escaping.LIMIT


def test_csv_cells_never_start_a_formula_and_read_back_as_one_line() -> None:
    hostile = ["=1+1", "+cmd", "-2", "@SUM(A1)", "\t=x", "\r=x", "\u202e=x", "a\nb", "a\x1bb"]
    out = io.StringIO()
    csv.writer(out).writerow([escaping.csv_cell(v) for v in hostile])
    (row,) = list(csv.reader(io.StringIO(out.getvalue())))
    assert all(not cell.startswith(escaping.FORMULA_STARTS) for cell in row)
    assert all(_raw(cell) == [] and "\n" not in cell for cell in row)


def _rendered_text(markdown: str) -> str:
    """The text GitHub-like Markdown rendering shows for ``markdown`` (tags dropped)."""
    render = mistune.create_markdown(escape=False, plugins=["table", "strikethrough"])
    page = str(render(markdown))
    return html_lib.unescape(re.sub(r"<[^>]+>", "", page)).strip()


MARKDOWN_TEXTS = [
    "plain text", "a_b_c snake_case and _emphasis_", "*bold* **strong**", "~~gone~~ ~x~",
    "<script>alert(1)</script>", "<b>bold</b>", "a < b > c -> d", "AT&T &amp; &lt;",
    "[link](http://x) ![img](y) [ref][1] [^note]", "out[1][2] = 5", "# heading", "- item",
    "1. item", "> quote", "| cell | cell |", "back\\slash \\* \\n", "$x^2$", "title ##",
    "=cmd", "+ plus", ":smile: a:b", "1CatAI/1Cat-vLLM#625", "a  b", "single ` tick",
]


@pytest.mark.parametrize("text", MARKDOWN_TEXTS)
def test_markdown_renders_to_the_text_itself(text: str) -> None:
    assert _rendered_text(escaping.markdown(text)) == text


@pytest.mark.parametrize("text", MARKDOWN_TEXTS)
def test_markdown_in_a_table_cell_renders_to_the_text(text: str) -> None:
    page = f"| a | b |\n|---|---|\n| {escaping.markdown(text)} | x |\n"
    render = mistune.create_markdown(escape=False, plugins=["table", "strikethrough"])
    cells = re.findall(r"<td>(.*?)</td>", str(render(page)))
    assert len(cells) == 2
    assert html_lib.unescape(re.sub(r"<[^>]+>", "", cells[0])).strip() == text.strip()


def test_backticked_spans_become_code_spans_not_escaped_backticks() -> None:
    text = "value `out.output_tail[1][2] = 248320` and ``a`b`` here"
    shown = escaping.markdown(text)
    assert "\\`" not in shown and "\\[" not in shown
    assert _rendered_text(shown) == "value out.output_tail[1][2] = 248320 and a`b here"
    assert "<code>out.output_tail[1][2] = 248320</code>" in str(mistune.html(shown))
    assert escaping.markdown_code("a``b") == "```a``b```"
    assert escaping.markdown_code("|", table=True) == "`\\|`"


def test_the_summary_shows_no_escaped_backticks(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from forensics.cli import main

    assert main(["summary", str(ROOT / "data" / "incident-b-vocab-sentinel.capture")]) == 0
    out = capsys.readouterr().out
    assert "\\`" not in out and "-\\>" not in out
    assert "`out.output_tail[1][2] = 248320`" in out


def test_a_noncharacter_in_a_capture_name_keeps_the_svgs_well_formed(tmp_path: Path) -> None:
    from forensics.present.svg import views
    from forensics.replaying import replay
    from forensics.store.reader import load

    path = tmp_path / "bad\ufffe\ufdd0\U0010ffff\u202e.capture"
    shutil.copytree(ROOT / "data" / "incident-b-vocab-sentinel.capture", path)
    result = replay(load(path), ["upstream", "patched"])
    for kind in ("timeline", "heatmap", "histogram", "verdicts"):
        svg = views.figure(kind, result).to_svg()
        ET.fromstring(svg)  # well-formed XML
        assert "bad\\ufffe\\ufdd0" in svg or "bad" not in svg
        assert [ch for ch in _raw(svg) if ch not in "\n\t"] == []


def test_there_is_one_escaping_module() -> None:
    assert not (ROOT / "forensics" / "fleet" / "escape.py").exists()
    sources = [p for p in (ROOT / "forensics").rglob("*.py") if p.name != "escaping.py"]
    for path in sources:
        text = path.read_text(encoding="utf-8")
        assert "html.escape(" not in text and "saxutils" not in text, path
        assert "def atomic_write" not in text, path
