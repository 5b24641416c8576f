"""Round 22 (attack22a): a held-out attack on hostile input (issue 38, round 3).

1. Every output escapes the characters drawn as nothing (T50c), but the list left out most of
   Unicode's default-ignorable code points: plane 14's tags (``U+E0041``), the variation
   selectors supplement, the deprecated format characters after the invisible operators
   (``U+206A``-``U+206F``), the interlinear annotation marks, the shorthand format and the
   musical beam controls. ``run.capture`` and ``ru<U+E0041>n.capture`` printed alike in
   every table and message; each is its escape now (T132a).
2. ``triage --split-records``: a piece that kept only its latest ``MAX_KEYS`` origin
   candidates left a key's later step out, and the walk gave a later piece looking for that
   key an earlier piece's older step as its origin: its finding named an origin the whole
   replay does not. A carried step before the step from which the carried keys are complete
   is no origin found now; the piece says its origins were not searched before that step
   (T132b).
3. ``forensics triage ""`` (an unset ``$DIR``) and ``open_many([""])`` read the working
   directory's captures: an empty path (or one holding NUL) names no capture now (T132c).
4. ``triage --format markdown``: a speculative method's backticks made a code span of its
   group's title (facts through ``terminal``): ``spanless`` now, as every sentence (T132d).
5. The same of a rank divergence's and a contested rank's words: a host, capture name, rank or
   engine id holding backticks made a code span of the Markdown cell (T132e).
6. An unreadable capture's error in the Markdown table: its path's backticks made a code span
   (``a`x`b.capture`` rendered as ``axb.capture``); an error's cell makes none now (T132f).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_round2 import run_cli

from forensics.escaping import html, markdown, shell_word, terminal
from forensics.fleet.carry import reruns as _reruns
from forensics.fleet.tasks import Task
from forensics.fleet.triage import decoded


def reruns(tasks: list[Task], results: list[bytes]) -> Any:
    """:func:`~forensics.fleet.carry.reruns` of the pieces' results, decoded as triage does."""
    return _reruns(tasks, decoded(tasks, results))

# ------------------------------------------- T132a: every character drawn as nothing escaped

#: Unicode's Default_Ignorable_Code_Point ranges (DerivedCoreProperties.txt) and the
#: interlinear annotation marks: a terminal, a browser and GitHub draw each as nothing
DRAWN_AS_NOTHING = [(0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
                    (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
                    (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
                    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFFB), (0x1BCA0, 0x1BCA3),
                    (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF)]


def _escape(code: int) -> str:
    """The escape :func:`terminal` writes for the code point ``code``."""
    return f"\\x{code:02x}" if code < 0x100 else \
        f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def test_every_character_drawn_as_nothing_is_its_escape() -> None:
    """A name holding a default-ignorable code point (a tag, a variation selector of the
    supplement, a deprecated format character) reads apart from the name without it, in
    the terminal, HTML and Markdown: each is written as its escape."""
    left = [hex(code) for low, high in DRAWN_AS_NOTHING for code in range(low, high + 1)
            if terminal(f"ru{chr(code)}n.capture") != f"ru{_escape(code)}n.capture"]
    assert left == [], left
    name = "ru\U000e0041n\U000e0100.capture"
    for out in (terminal, lambda v: html(v, raw=True), lambda v: markdown(v, raw=True)):
        assert "\U000e0041" not in out(name) and "\U000e0100" not in out(name), out(name)
        assert out(name) != out("run.capture")


@pytest.mark.parametrize("program", ["dash", "bash"])
def test_a_suggested_command_gives_a_tagged_name_back_whole(program: str) -> None:
    """A suggested command line holds a tag character as an escape, and a shell reads the
    very name back."""
    name = "ru\U000e0041n\u206a.capture"
    word = shell_word(name)
    assert "\U000e0041" not in word and "\u206a" not in word, word
    done = subprocess.run([program, "-c", f"printf %s {word}"], capture_output=True,
                          check=True, timeout=30)
    assert done.stdout == name.encode()


def test_triage_names_a_tagged_capture_apart(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """``triage`` of ``run.capture`` and ``ru<U+E0041>n.capture``: two rows that read apart."""
    from cases import capture

    capture(tmp_path, 2, "run")
    capture(tmp_path, 2, "ru\U000e0041n")
    code, out, _err = run_cli(capsys, "triage", tmp_path, "--workers", 1)
    assert code == 0 and "\U000e0041" not in out, out
    assert "ru\\U000e0041n.capture" in out and "run.capture" in out, out


# ------------------------------------ T132b: a carried origin older than the carried keys' cut


def _piece(start: int, wanted: list[list[Any]], keys: list[list[Any]],
           since: int | None) -> bytes:
    """A piece's result of steps from ``start`` that looked for ``wanted`` and holds the
    candidates ``keys``, complete from step ``since``."""
    from forensics.fleet.piece import to_ipc

    return to_ipc([{"capture": "c", "name": "c", "start": start, "stop": start + 10,
                    "error": "", "origin_wanted": json.dumps({"keys": wanted, "cut": False}),
                    "origin_candidates": json.dumps({"keys": keys, "from": since})}])


def test_an_origin_a_later_piece_left_out_is_never_an_older_one() -> None:
    """Piece 0 holds key ``(0, -1, 'a')`` at step 2; piece 1 kept only its latest keys
    (complete from step 13), so the key's write at step 12, say, may be left out; piece 2
    looks for the key. It was replayed again with step 2 as its origin, which the whole
    replay does not name; it is said not searched before step 13 now."""
    tasks = [Task("c", 0, 10), Task("c", 10, 20), Task("c", 20, 30)]
    results = [_piece(0, [], [[0, -1, "a", 2]], None),
               _piece(10, [], [[0, -7, "b", 15]], 13),
               _piece(20, [[0, -1, "a"]], [], None)]
    assert reruns(tasks, results) == ({}, {2: 13})
    results[1] = _piece(10, [], [[0, -1, "a", 14]], 13)
    again, unsearched = reruns(tasks, results)
    assert again[2].origins == (14,) and unsearched == {}
    results[1] = _piece(10, [], [[0, -7, "b", 15]], None)
    again, unsearched = reruns(tasks, results)
    assert again[2].origins == (2,) and unsearched == {}


# ------------------------------------------------ T132c: an empty path names no capture


@pytest.mark.parametrize("path", ["", "x.capture\x00y"])
def test_open_many_refuses_an_empty_path(path: str, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``open_many("")`` read the captures of the working directory (``Path("")`` is
    ``.``), and a path holding NUL was a ValueError: each names no capture now."""
    from cases import capture

    from forensics import open_many
    from forensics.errors import ConfigurationError

    capture(tmp_path, 2, "x")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError, match="names no capture directory"):
        open_many([path])


def test_triage_of_an_empty_path_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """``forensics triage "$DIR"`` with ``DIR`` unset triaged the working directory: it is
    one line now, exit 2, nothing replayed."""
    from cases import capture

    capture(tmp_path, 2, "x")
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "triage", "", "--workers", 1)
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert "'' names no capture directory" in err, err


# ------------------------- T132d: a fact's backticks in a Markdown group title make no code span


def _with_method(root: Path, name: str, method: str) -> Path:
    """A small capture whose manifest names the speculative method ``method``."""
    from cases import capture

    path = capture(root, 2, name)
    manifest = json.loads((path / "manifest.json").read_text())
    manifest.setdefault("model", {})["speculative_config"] = {"method": method}
    (path / "manifest.json").write_text(json.dumps(manifest))
    return path


def _rendered(source: str) -> str:
    """The text of ``source`` as CommonMark renders it (markdown-it): tags dropped."""
    import html
    import re

    from markdown_it import MarkdownIt

    return html.unescape(re.sub(r"<[^>]+>", "", MarkdownIt("commonmark").render(source)))


def test_a_speculative_method_makes_no_code_span_of_a_markdown_title(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A speculative method ``e`, runner `x`` made the Markdown group title's ``e`, runner `x``
    a code span: it rendered ``speculation e, runner x``, the title of a capture whose method
    is ``e, runner x``. Its backticks are ``\\x60`` now, as in every sentence (T50i)."""
    _with_method(tmp_path, "v", "e`, runner `x")
    _with_method(tmp_path, "w", "e, runner x")
    code, out, _err = run_cli(capsys, "triage", tmp_path, "--workers", 1, "--format",
                              "markdown")
    titles = [_rendered(line).strip() for line in out.splitlines() if line.startswith("## ")]
    assert code == 0 and len(titles) == 2 and len(set(titles)) == 2, out
    assert any("speculation e\\x60, runner \\x60x" in t for t in titles), titles


# ---------------- T132e: a host's or capture's backticks in a divergence make no code span


def _divergence(host: str, name: str) -> str:
    """The Markdown cell of a rank divergence between ``name`` (on ``host``) and ``b.capture``."""
    from forensics.fleet.stitch import divergence_text

    hit = {"step": 7, "site": "embedding", "tensor": "input_ids", "element": 3, "index": None,
           "ranks": [0, 1], "values": [17, 912], "captures": [f"/x/{name}", "/x/b.capture"]}
    return markdown(divergence_text(hit, {f"/x/{name}": host}), table=True)


def _contested(name: str, engine: str) -> str:
    """The Markdown cell saying rank 0 of ``engine`` is claimed by ``name`` too."""
    from forensics.fleet.stitch import contested_text

    return markdown(contested_text("/x/a.capture", ["0"], {"0": ["/x/a.capture", f"/x/{name}"]},
                                   engine, True), table=True)


def test_a_divergence_names_a_backticked_host_as_it_is() -> None:
    """A host ``a`b`c`` made the divergence's ``b`` a code span in the Markdown table
    (``triage --format markdown``): it rendered as host ``abc``'s divergence. A host, a
    capture's name and an engine id are written through ``spanless`` now."""
    assert _rendered(_divergence("a`b`c", "n.capture")) != _rendered(_divergence("abc",
                                                                                 "n.capture"))
    assert _rendered(_divergence("h", "a`b`c.capture")) != _rendered(_divergence(
        "h", "abc.capture"))
    assert _rendered(_contested("a`b`c.capture", "e")) != _rendered(_contested("abc.capture",
                                                                               "e"))
    assert _rendered(_contested("c.capture", "e`1`2")) != _rendered(_contested("c.capture",
                                                                               "e12"))
    assert "a\\x60b\\x60c" in _rendered(_divergence("a`b`c", "n.capture"))


# ---------------------- T132f: an error naming a backticked path makes no code span in Markdown


def test_an_error_row_names_a_backticked_path_as_it_is(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``triage --format markdown`` of the unreadable ``a`x`b.capture`` and ``axb.capture``:
    the error's path made ``x`` a code span, and both rows' "what it shows" rendered
    ``.../axb.capture' has no manifest.json``. An error's cell makes no code span now."""
    (tmp_path / "a`x`b.capture").mkdir()
    (tmp_path / "axb.capture").mkdir()
    code, out, _err = run_cli(capsys, "triage", tmp_path, "--workers", 1, "--format",
                              "markdown")
    cells = [_rendered(line).rsplit("|", 2)[-2].strip() for line in out.splitlines()
             if "has no manifest.json" in line]
    assert code == 0 and len(cells) == 2 and len(set(cells)) == 2, out
    assert any("a`x`b.capture' has no manifest.json" in c for c in cells), cells
