"""Hostile input, round 5, on what shows results (issue 38's standard): a capture whose every
string (its folder's name, manifest fields, facts the known-issue catalogue reads, event texts,
request ids) holds control sequences, markup, noncharacters and mathtext, and whose manifest
holds ``NaN`` and ``Infinity`` (JSON's parser takes them), through ``plot`` (SVG), every
``--json``, ``known``, ``check`` and its ``expected.json``, the pytest plugin and the report.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from test_round2 import records, run_cli

from forensics.store.writer import write_capture
from tests.instructions import assert_linear, scaling

pytest_plugins = ["pytester"]

#: clear screen, a title change (OSC), a bell, a noncharacter, a bidi override, what ends an
#: XML comment or CDATA, an entity, mathtext, a formula
HOSTILE = "\x1b[2J\x1b]0;pwn\x07\ufdd0\ufffe\u202e<!--x-->]]>&amp;$x^2$=1+1"
#: what no terminal or XML output may hold raw (newlines and tabs aside)
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ufdd0-\ufdef\ufffe\uffff]")
#: manifest fields set to ``NaN`` / ``Infinity`` after the capture is written
NON_FINITE = {"NOTES": "NaN", "HOST": "Infinity", "MODEL": "NaN", "VLLM": "-Infinity"}


def _strict(text: str) -> Any:
    """``text`` parsed as strict JSON (``NaN`` and the infinities refused)."""
    def refuse(constant: str) -> Any:
        raise AssertionError(f"not strict JSON: {constant}")
    return json.loads(text, parse_constant=refuse)


def _clean(text: str) -> None:
    """No control character, bidi control or noncharacter stands raw in ``text``."""
    found = RAW.search(text)
    assert found is None, repr(text[max(0, found.start() - 80):found.start() + 40])


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A capture named, described and timed by :data:`HOSTILE` (facts the catalogue reads
    included)."""
    root = tmp_path_factory.mktemp("round5")
    manifest = {"notes": HOSTILE, "host": HOSTILE, "runner": HOSTILE,
                "model": {"name": HOSTILE, "async_scheduling": HOSTILE, "speculative": HOSTILE},
                "versions": {"vllm": HOSTILE}}
    events = [{"kind": "cuda_assert", "step": 1, "rank": 0, "message": HOSTILE,
               "detail": HOSTILE},
              {"kind": "crash_dump", "step": 1, "rank": 0, "config": {"speculative": HOSTILE}}]
    return write_capture(root / f"n{HOSTILE}.capture", records([HOSTILE, "q" + HOSTILE]),
                         manifest=manifest, events=events)


@pytest.fixture(scope="module")
def non_finite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A capture whose manifest holds ``NaN``, ``Infinity`` and ``-Infinity`` as values (the
    store reads them: Python's JSON parser takes them)."""
    root = tmp_path_factory.mktemp("round5nan")
    capture = write_capture(root / "nan.capture", records(["a", "b"]), manifest={
        "notes": "NOTES", "host": "HOST", "model": {"name": "MODEL"},
        "versions": {"vllm": "VLLM"}})
    path = capture / "manifest.json"
    text = path.read_text(encoding="utf-8")
    for marker, constant in NON_FINITE.items():
        text = text.replace(f'"{marker}"', constant)
    path.write_text(text, encoding="utf-8")
    return capture


# ------------------------------------------------------------------ plot: SVG is XML


def test_plot_svgs_of_a_hostile_capture_are_well_formed(hostile: Path, tmp_path: Path) -> None:
    from forensics.present import plots
    from forensics.replaying import replay

    result = replay(hostile, variants=["upstream", "patched"])
    for kind in ("timeline", "verdicts"):  # titled by the capture's name
        path = tmp_path / f"{kind}.svg"
        plots.save(plots.plot(result, kind), path)
        text = path.read_text(encoding="utf-8")
        ET.fromstring(text)  # well-formed XML: no control character, no "--" in a comment
        _clean(text)


def test_plot_of_a_capture_of_no_records_draws_every_kind(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = write_capture(tmp_path / "empty.capture", [], manifest={"notes": "none"},
                          events=[{"kind": "cuda_assert", "step": 1, "rank": 0}])
    code, out, err = run_cli(capsys, "plot", empty, "-o", tmp_path / "fig.svg", "--kind", "all")
    assert code == 0, err
    for kind in ("timeline", "heatmap", "histogram", "verdicts"):
        ET.fromstring((tmp_path / f"fig-{kind}.svg").read_text(encoding="utf-8"))


# ------------------------------------------------------------------ Markdown in linear time


PIECES = ["`", "["]


@pytest.mark.parametrize("piece", PIECES)
def test_markdown_of_a_string_of_backticks_or_brackets_is_linear(piece: str,
                                                                 tmp_path: Path) -> None:
    """4x the text costs under 6x the instructions (:mod:`tests.instructions`)."""
    assert_linear(scaling(__file__, dict.fromkeys(PIECES, 4_000), tmp_path)[piece])


def make_work(piece: str, size: int, scratch: Path) -> Any:
    """Escaping ``size`` characters of ``piece`` for Markdown, in text and in a table."""
    from forensics.escaping import markdown

    text = piece * (size // len(piece))
    return lambda: (markdown(text), markdown(text, table=True))


# ------------------------------------------------------------------ --json is strict JSON


@pytest.mark.parametrize("argv", [["inspect", "--json"], ["summary", "--format", "json"]])
def test_json_outputs_of_a_non_finite_manifest_are_strict(
        non_finite: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, out, err = run_cli(capsys, *argv, non_finite)
    assert code == 0, err
    _strict(out)
    assert '"nan"' in out and '"inf"' in out  # the manifest's values, as their text


# ------------------------------------------------------------------ terminal text


def test_known_text_holds_no_control_character(hostile: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "known", hostile)
    assert code == 0, err
    # a speculative method spelled as no name is unknown (T34j): never "speculative is ..."
    assert "speculative is" not in " ".join(out.split())
    _clean(out + err)


@pytest.mark.parametrize("recorded", ["true", "false", 1, 0])
def test_a_fact_that_is_no_boolean_neither_matches_nor_contradicts(recorded: object) -> None:
    import pandas as pd

    from forensics.known import load_catalogue
    from forensics.known.evidence import Evidence
    from forensics.known.matching import match_entry

    entry = next(e for e in load_catalogue().entries if e.id == "placeholder-reaches-input-ids")
    finding = {"variant": "upstream", "site": "embedding", "step": 3, "rank": 0, "row": 1,
               "element": 5, "tensor": "input_ids", "kind": "out_of_bounds", "value": -1,
               "lower": 0, "upper": 32000, "origin": "prepare_input_ids", "resolved": False}
    match = match_entry(entry, Evidence(findings=pd.DataFrame([finding]), baseline="upstream",
                                        facts={"runner": "v1", "async_scheduling": recorded}))
    assert match.matched and match.contradicted == []  # the entry's evidence is the finding
    assert match.unknown == [f"async_scheduling recorded as {recorded!r}, not as true or false"]


def _forge_expected(capture: Path, hostile_key: bool = False) -> None:
    """An ``expected.json`` whose site names and first-finding values are hostile, and with
    ``hostile_key`` a first-finding key too (refused as a key no finding holds, T72d)."""
    first = {"site": HOSTILE[:60], "step": 1, "rank": 0, "row": 0, "element": 2,
             "tensor": HOSTILE, "kind": HOSTILE, "value": 1,
             **({HOSTILE[:40]: HOSTILE} if hostile_key else {})}
    data = {"format": 1, "verdicts": {"upstream": {HOSTILE[:60]: HOSTILE[:60]}},
            "first_finding": {"upstream": first},
            "crash_verdict": "unexplained"}  # a verdict of other text is refused (T39a)
    (capture / "expected.json").write_text(json.dumps(data), encoding="utf-8")


def test_check_text_of_a_forged_expected_holds_no_control_character(
        hostile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "check", hostile, "--accept")
    assert code == 0, err
    _clean(out + err)
    code, out, err = run_cli(capsys, "check", hostile)
    assert code == 0 and "matches expected.json" in out, err
    _clean(out + err)
    _forge_expected(hostile)
    try:
        code, out, err = run_cli(capsys, "check", hostile)
        assert code == 1 and "expected verdict" in out, (out, err)
        _clean(out + err)
        code, out, err = run_cli(capsys, "check", hostile, "--json")
        assert code == 1
        _strict(out)
        _forge_expected(hostile, hostile_key=True)
        code, out, err = run_cli(capsys, "check", hostile)
        assert code == 2 and "is no key of a finding" in err, (out, err)
        _clean(out + err)
    finally:
        (hostile / "expected.json").unlink()
        (hostile / "expected.obtained.json").unlink(missing_ok=True)


def _run_plugin(pytester: pytest.Pytester, capture: Path) -> pytest.RunResult:
    """pytest (in this process, verbose, every outcome listed) on ``capture`` alone."""
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rA", "-v",
                                        "-o", "forensics_captures=",
                                        "--forensics-captures", str(capture))


def test_the_pytest_plugin_shows_a_hostile_capture_as_inert_text(
        hostile: Path, pytester: pytest.Pytester) -> None:
    result = _run_plugin(pytester, hostile)
    result.assert_outcomes(failed=1)  # no expected.json yet: written, and the item fails
    text = "\n".join(result.outlines + result.errlines)
    assert "no expected.json yet" in text
    _clean(text)
    _forge_expected(hostile)
    try:
        result = _run_plugin(pytester, hostile)
        result.assert_outcomes(failed=1)
        text = "\n".join(result.outlines + result.errlines)
        assert "expected verdict" in text
        _clean(text)
        _forge_expected(hostile, hostile_key=True)
        result = _run_plugin(pytester, hostile)
        result.assert_outcomes(failed=1)
        _clean("\n".join(result.outlines + result.errlines))
    finally:
        (hostile / "expected.json").unlink()
        (hostile / "expected.obtained.json").unlink(missing_ok=True)


def test_the_pytest_plugin_shows_an_unexpected_error_quoting_a_capture_as_inert_text(
        hostile: Path, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    from forensics.share import expectations

    def fails(capture: Path, variants: object, folder: object = None) -> object:
        raise RuntimeError(f"cannot judge {capture.name}")  # unforeseen, quoting the capture

    monkeypatch.setattr(expectations, "regenerate", fails)
    result = _run_plugin(pytester, hostile)
    result.assert_outcomes(failed=1)
    text = "\n".join(result.outlines + result.errlines)
    assert "RuntimeError: cannot judge" in text
    _clean(text)


def test_the_pytest_plugin_collects_beside_a_folder_nested_past_pythons_recursion(
        tmp_path: Path, pytester: pytest.Pytester) -> None:
    write_capture(tmp_path / "a.capture", records(["a", "b"]), manifest={})
    made = [tmp_path / "d"]
    for _ in range(1_100):  # deeper than Python's recursion limit (pathlib's rglob recursed)
        made.append(made[-1] / "d")
    try:
        for folder in made:
            folder.mkdir()
        result = pytester.runpytest_inprocess("-p", "no:cacheprovider",
                                              "-o", "forensics_captures=",
                                              "--forensics-captures", str(tmp_path))
        assert "INTERNALERROR" not in "\n".join(result.outlines + result.errlines)
        result.assert_outcomes(failed=1)  # a.capture, collected: no expected.json yet
    finally:  # bottom up: pytest's own clean-up of tmp_path recurses (shutil.rmtree)
        for folder in reversed(made):
            if folder.is_dir():
                folder.rmdir()


#: a notebook of two cells: the parameters, then one printing the capture's manifest notes
TINY_NOTEBOOK = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
    {"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": "capture = None",
     "outputs": [], "execution_count": None},
    {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
     "source": "import forensics\nprint(capture)\n"
               "print(forensics.load(capture).manifest['notes'])"}]}


def test_the_report_of_a_hostile_capture_shows_its_text_inert(
        hostile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from forensics.present.report import write_report

    notebook = tmp_path / "tiny.ipynb"
    notebook.write_text(json.dumps(TINY_NOTEBOOK), encoding="utf-8")
    page = write_report(hostile, tmp_path / "r.html", notebook=notebook, progress=True)
    err = capsys.readouterr().err
    assert "running notebook tiny on n\\x1b[2J" in err  # the stage line names it as escapes
    _clean(err)
    html = page.read_text(encoding="utf-8")
    assert "\\x1b[2J\\x1b]0;pwn\\x07" in html and "<!--x-->" not in html
    _clean(html)
