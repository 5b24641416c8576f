"""Hostile input, round 11 (T50g-T50k): capture strings the last review found raw.

- T50g: the token continuity check's and the suspect row's sentences held a request id as it
  was, so a request holding a backtick opened a code span in the summary's Markdown, and one
  holding ESC read like one holding the text ``\\x1b``: now every finding's sentence quotes it
  (``escaping.quoted``), as the first violation's did.
- T50h: an exception's text (which may quote a file's name or a field's value) stood raw in our
  messages, which the CLI writes through ``inert``: now through ``errors.reason``.
- T50i: a capture's value in the summary's Markdown (a model name, a host, an event's message,
  a variant's name) made code spans of its backticks: now they are escaped.
- T50j: a name spelled in NFD (``e`` and U+0301) printed as its NFC spelling (``é``).
- T50k: a suggested command naming a file whose name ends in a line break ran on two lines.
"""

from __future__ import annotations

import csv
import html as html_lib
import io
import itertools
import json
import os
import re
import shutil
import subprocess
import unicodedata
from pathlib import Path
from typing import Any

import mistune
import pytest

from forensics import escaping
from tests.hostile.test_round9_left9 import SHELLS, _words

ROOT = Path(__file__).resolve().parents[2]
INCIDENT = ROOT / "data" / "incident-b-vocab-sentinel.capture"

#: request ids that would forge a line, drive a terminal, turn a sentence around, or make
#: markup in one of the outputs
HOSTILE_IDS = ["a\nb", "esc\x1b[31mred", "rtl\u202eoverride", "<script>alert(1)</script>",
               "a|b|c", "tick`x`tock", "``", "a', position 9) was fed", "x\\x1b", "\x1b",
               "\\`", "- item", "[link](http://x)"]


def _sentences(req: Any) -> dict[str, str]:
    """Every finding's sentence naming the request ``req``."""
    from forensics.judge.continuity import SUBSTITUTED, VERIFIED, describe
    from forensics.judge.suspects import describe_suspect
    from forensics.present.conclusion import describe_finding

    suspect = {"site": "batch_change", "step": 2, "rank": 0, "row": 0, "req_id": req,
               "read_req_id": req, "read_row": 1, "index_tensor": "prev_positions",
               "index_at": 0, "held": True, "value": 1}
    return {
        "continuity": describe({
            "tensor": "input_ids", "element": 0, "value": 78, "step": 2, "req_id": req,
            "position": 7, "kind": SUBSTITUTED, "expected": 77, "effect": VERIFIED,
            "expected_step": 1, "expected_at": "prepare_input_ids step 2 prev_sampled[0, 0]"}),
        "suspect": describe_suspect(suspect),
        "claimed": describe_suspect({**suspect, "read_req_id": None,
                                     "read_req_ids": [req, "b"]}),
        "finding": describe_finding({
            "site": "async_output", "step": 13, "rank": 0, "row": 1, "req_id": req,
            "kind": "out_of_bounds", "tensor": "out.output_tail", "element": 21,
            "value": 248320, "lower": 0, "upper": 248320, "index_tensor": "out.output_tail",
            "index_at": 21, "held": True, "indexed": "embedding rows"})}


def _render(markdown: str) -> str:
    return str(mistune.create_markdown(escape=False, plugins=["table", "strikethrough"])(
        markdown))


def _codes(page: str) -> list[str]:
    return re.findall(r"<code>(.*?)</code>", page, flags=re.S)


def _text(page: str) -> str:
    return html_lib.unescape(re.sub(r"<[^>]+>", "", page)).strip()


def _raw_controls(text: str) -> list[str]:
    return [c for c in text if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")]


# --------------------------------------- T50g: a request id in a finding's sentence, each output

@pytest.mark.parametrize("req", HOSTILE_IDS)
def test_a_request_id_forges_nothing_in_a_finding_sentence_in_any_output(req: str) -> None:
    """Each sentence as the terminal (``inert``), HTML, Markdown (a paragraph and a table
    cell) and CSV write it: one line, no raw control, no markup of its own, the code spans
    those of the same sentence naming an ordinary request, and the rendered Markdown is the
    text the terminal shows (less the code spans' backticks)."""
    plain = _sentences("req-1")
    for kind, sentence in _sentences(req).items():
        shown = escaping.inert(sentence)
        assert "\n" not in shown and _raw_controls(shown) == [], (kind, shown)
        assert escaping.quoted(req) in shown, (kind, shown)
        page = escaping.html(sentence)
        assert "<" not in page and _raw_controls(page) == [], (kind, page)
        rendered = _render(escaping.markdown(sentence))
        # a URL of the id is a code span of its own (GitHub links a bare URL: T77e)
        assert [c for c in _codes(rendered) if not re.match(r"(?i)https?://", c)] == \
            _codes(_render(escaping.markdown(plain[kind]))), (kind, rendered)
        assert re.findall(r"<(\w+)", rendered) == ["p"] + ["code"] * len(_codes(rendered))
        assert _text(rendered) == shown.replace("`", ""), (kind, rendered)  # spans' fences
        table = _render(f"| a | b |\n|---|---|\n| {escaping.markdown(sentence, True)} | x |\n")
        assert len(re.findall(r"<td>", table)) == 2, (kind, table)
        out = io.StringIO()
        csv.writer(out).writerow([escaping.csv_cell(sentence, raw=False), "x"])
        assert list(csv.reader(io.StringIO(out.getvalue()))) == [[shown, "x"]], kind


def test_two_request_ids_that_would_print_alike_read_apart() -> None:
    """ESC and the text ``\\x1b``, a quote and its escape's text: different sentences."""
    for one, other in (("\x1b", "\\x1b"), ("'", "\\x27"), ("`", "\\x60"), ("a\nb", "a\\x0ab")):
        for kind, sentence in _sentences(one).items():
            assert escaping.inert(sentence) != escaping.inert(_sentences(other)[kind]), kind


@pytest.mark.parametrize("name", ["k\x1b", "k\\x1b"])
def test_a_kernel_finding_sentence_names_the_kernel_escaped(name: str) -> None:
    """``forensics kernels`` prints each finding's sentence through ``inert``: the kernel's and
    the argument's names in it are escaped (ESC and the text ``\\x1b`` read apart)."""
    from forensics.kernels.sanitizer import describe

    finding = {"kind": "kernel_contract", "kernel": name, "step": 1, "rank": 0, "launch": 0,
               "argument": name, "elements": [3], "contract": "token ids", "values": [9],
               "lower": 0, "upper": 8, "bound": "vocab"}
    assert escaping.inert(describe(finding)).count(escaping.terminal(name)) == 2


# ------------------------------------------------------- T50h: an exception's text in a message

@pytest.mark.parametrize("kind", [ValueError, RuntimeError, OSError])
def test_an_exception_quoting_a_capture_string_is_escaped_in_its_line(kind: type) -> None:
    """The CLI's line of an exception not ours (an internal error, an OSError without a
    reason) holds its text through ``terminal``: ESC and the text ``\\x1b`` read apart, a line
    break never starts a line."""
    from forensics.errors import one_line

    esc, text = one_line(kind("field 'a\x1b'")), one_line(kind("field 'a\\x1b'"))
    assert esc != text and "\n" not in one_line(kind("a\nb")), (esc, text)
    assert _raw_controls(esc) == [] and "a\\x1b" in esc and "a\\\\x1b" in text


def test_our_own_message_is_not_escaped_twice() -> None:
    from forensics.errors import CaptureFormatError, one_line, reason

    message = f"'{escaping.terminal('a' + chr(27))}': unreadable"
    assert one_line(CaptureFormatError(message)) == message
    assert reason(CaptureFormatError(message)) == message
    assert reason(ValueError("x" * 500), 200).endswith("… [300 more characters]")


def test_a_notebook_that_cannot_be_run_is_named_escaped(tmp_path: Path) -> None:
    """``report --notebook`` of a file that is no notebook: two files named alike but for ESC
    and the text ``\\x1b`` are named apart in the one line."""
    from forensics.errors import ConfigurationError, one_line
    from forensics.present.notebook_exec import read_notebook

    lines = []
    for name in ("nb\x1b.ipynb", "nb\\x1b.ipynb"):
        (tmp_path / name).write_text("[1, 2]")
        with pytest.raises(ConfigurationError) as caught:
            read_notebook(tmp_path / name)
        lines.append(one_line(caught.value))
    assert lines[0] != lines[1] and all(_raw_controls(line) == [] for line in lines), lines


# ------------------------------------------------------ T50i: backticks in the summary's Markdown

@pytest.mark.parametrize("value", ["a`b`c", "``x``", "`", "run `rm -rf` now", "a\\`b`"])
def test_a_raw_value_with_backticks_renders_as_itself_in_markdown(value: str) -> None:
    """A capture's value (``raw``) never makes a code span of its backticks: it renders as
    the text itself, in a paragraph and in a table cell."""
    assert _codes(_render(escaping.markdown(value, raw=True))) == []
    assert _text(_render(escaping.markdown(value, raw=True))) == value
    cell = _render(f"| a | b |\n|---|---|\n| {escaping.markdown(value, True, raw=True)} | x |\n")
    assert re.findall(r"<td>(.*?)</td>", cell)[0] == html_lib.escape(value, quote=False)


def _summary(capture: Path) -> str:
    from forensics.present.writeup import render
    from forensics.replaying import replay

    return render(replay(str(capture), variants=["upstream"]), "markdown")


def test_capture_values_with_backticks_open_no_code_span_in_the_summary(
        tmp_path: Path) -> None:
    """A capture whose model name, hardware and notes hold backticks: the summary's
    conclusion paragraph has the very code spans of the capture without them, and each value
    reads whole."""
    capture = tmp_path / "ticks.capture"
    shutil.copytree(INCIDENT, capture)
    manifest = json.loads((capture / "manifest.json").read_text())
    manifest["model"]["name"] = "model`one"
    manifest["model"]["hardware"] = "gpu` and `two"
    manifest["notes"] = "see `this"
    (capture / "manifest.json").write_text(json.dumps(manifest))
    before, after = (_summary(path).split("\n")[2] for path in (INCIDENT, capture))
    assert _codes(_render(after)) == _codes(_render(before)), after
    shown = _text(_render(after))
    for value in ("model`one", "gpu` and `two"):
        assert escaping.spanless(value) in shown, shown
    assert escaping.quoted("see `this") in shown, shown


# ---------------------------------------------------------- T50j: NFC and NFD spellings apart

#: a letter and its accent apart and composed, the Angstrom sign and the letter it is
#: canonically, a Hangul syllable and its jamo, a backslash and the letters of an escape
NFC_ALPHABET = ["e", "\u0301", "\u00e9", "\u212b", "\u00c5", "\ud55c", "\u1112", "\u1161",
                "\u11ab", "\\", "u"]


def test_no_two_spellings_of_a_name_print_alike() -> None:
    """Every string of up to three characters of :data:`NFC_ALPHABET` through ``terminal``:
    no two alike as a reader sees them (texts canonically equivalent are drawn alike: compared
    in NFC), so a name spelled in NFD never reads as its NFC spelling."""
    seen: dict[str, str] = {}
    for size in range(4):
        for chars in itertools.product(NFC_ALPHABET, repeat=size):
            value = "".join(chars)
            shown = unicodedata.normalize("NFC", escaping.terminal(value))
            assert seen.setdefault(shown, value) == value, (ascii(value), ascii(seen[shown]))


@pytest.mark.parametrize("name", ["café.capture", "한국어.capture", "हिन्दी.capture",
                                  "x\u0301.capture", "Åström.capture"])
def test_a_name_in_nfc_prints_as_it_is(name: str) -> None:
    assert unicodedata.is_normalized("NFC", name)
    assert escaping.terminal(name) == name


@pytest.mark.parametrize(("nfc", "marked"), [("café", "cafe\\u0301"), ("Å", "\\u212b"),
                                              ("한", "\u1112\\u1161\\u11ab")])
def test_a_name_not_in_nfc_shows_what_nfc_would_change(nfc: str, marked: str) -> None:
    other = {"café": "cafe\u0301", "Å": "\u212b", "한": "\u1112\u1161\u11ab"}[nfc]
    assert escaping.terminal(other) == marked
    for escape in (escaping.html, escaping.markdown, escaping.markdown_code, escaping.csv_cell):
        assert escape(nfc, raw=True) != escape(other, raw=True), escape  # type: ignore[operator]


@pytest.mark.parametrize("shell", SHELLS)
def test_a_suggested_command_names_an_nfd_file_apart_and_whole(shell: str,
                                                               tmp_path: Path) -> None:
    assert shutil.which(shell), f"{shell} is needed (apt-get install {shell})"
    nfd, nfc = "cafe\u0301.capture", "café.capture"
    assert escaping.shell_word(nfd) != escaping.shell_word(nfc)
    assert escaping.inert(escaping.shell_word(nfd)) == escaping.shell_word(nfd)
    assert "\u0301" not in escaping.shell_word(nfd)
    for name in (nfd, nfc, "\u212b\\\u0301%'\n"):
        (got,) = _words(shell, escaping.shell_word(name), tmp_path)
        assert got == name.encode(), ascii(escaping.shell_word(name))


def test_the_repro_refuses_a_word_not_in_nfc(tmp_path: Path) -> None:
    """The generated repro (which imports no forensics) prints a data file's word only as
    ``forensics repro`` writes it: one not in NFC is refused, as one holding ESC is."""
    from tests.hostile.test_round9_attack9c import _repro_module

    data = {"format": 1, "vllm": {"needed": "0.33", "capture": None}, "deadline_s": 5,
            "cases": []}
    for needed, why in (("0.33e\u0301", "begins with a combining mark or is not in NFC"),
                        ("\u03010.33", "begins with a combining mark or is not in NFC"),
                        ("0.33\u212b", "holds '\\u212b'")):
        data["vllm"]["needed"] = needed
        with pytest.raises(Exception, match=f"vllm.needed: {re.escape(why)}") as caught:
            _repro_module(tmp_path, data)
        assert type(caught.value).__name__ == "BadData"


# ------------------------------------------------ T50k: a name ending in a line break, one line

ENDING = ["x\n", "\n", "\n\n\n", "esc\x1b\n\n", "a b\n", "cafe\u0301\n", "it's\n", "-\n",
          "\udcff\n", "${IFS#??}\n"]


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("name", ENDING)
def test_a_suggested_command_for_a_name_ending_in_a_line_break_is_one_line(
        shell: str, name: str, tmp_path: Path) -> None:
    assert shutil.which(shell), f"{shell} is needed (apt-get install {shell})"
    (tmp_path / name).write_bytes(b"")
    word = escaping.shell_path(name)
    assert "\n" not in word and escaping.inert(word) == word, ascii(word)
    (got,) = _words(shell, word, tmp_path)
    assert got == os.fsencode(("./" if name.startswith("-") else "") + name), ascii(word)
    assert subprocess.run([shell, "-c", f"test -f {word}"], cwd=tmp_path,
                          check=False).returncode == 0, ascii(word)
