"""Round 13's held-out attack (B): a hostile capture author and a hostile local user against
``report``, ``triage``, ``check``, ``shrink``, ``plot`` and ``repro``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from forensics.cli import main

ROOT = Path(__file__).resolve().parents[2]
INCIDENT_B = ROOT / "data" / "incident-b-vocab-sentinel.capture"


def _copy(source: Path, to: Path) -> Path:
    shutil.copytree(source, to)
    return to


def _nest_first_event(capture: Path, depth: int) -> None:
    """Give the first event of ``capture`` a value nested so that the line is ``depth`` deep
    (written as text: this test's own stack is too deep to parse it)."""
    path = capture / "events-w0.jsonl"
    first, rest = path.read_text().split("\n", 1)
    nested = "[" * (depth - 1) + "]" * (depth - 1)
    path.write_text(first[:-1] + f', "extra": {nested}}}\n' + rest)


def test_json_nested_deep_is_refused_alike_by_every_command(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An event (or manifest) nested ~990 deep was read by ``inspect``, ``replay``, ``shrink``
    and ``summary``, but was "not valid JSON: maximum recursion depth exceeded" in a triage
    worker and a report's notebook, whose stacks are deeper: whether a capture read depended
    on the caller's stack. Now one depth (``json_in.MAX_DEPTH``) holds for every reader: past
    it, one line naming the file and how deep; at it, every command reads it."""
    from forensics.fleet.triage import triage
    from forensics.store.json_in import MAX_DEPTH

    deep = _copy(INCIDENT_B, tmp_path / "deep.capture")
    _nest_first_event(deep, 990)
    assert main(["inspect", str(deep)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "events-w0.jsonl' line 1" in err and "nested 990 deep" in err
    row = triage([deep], workers=1).rows[0]
    assert "nested 990 deep" in row["error"] and "not JSON" not in row["error"], row["error"]

    at_cap = _copy(INCIDENT_B, tmp_path / "at-cap.capture")
    _nest_first_event(at_cap, MAX_DEPTH)
    assert main(["inspect", str(at_cap)]) == 0
    assert not triage([at_cap], workers=1).rows[0]["error"]


def _expect_first_finding(capture: Path, first: object) -> None:
    path = capture / "expected.json"
    expected = json.loads(path.read_text())
    expected["first_finding"]["upstream"] = first
    path.write_text(json.dumps(expected))


@pytest.mark.parametrize("source", ["clean.capture", "incident-b-vocab-sentinel.capture"])
def test_an_empty_expected_first_finding_is_refused(
        tmp_path: Path, source: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``"first_finding": {"upstream": {}}`` in ``expected.json`` is compared on no key: it
    made ``check`` say "matches expected.json" for a capture with any finding, and, for one
    with none, "first finding changed: expected none, got none". It is one line naming the
    field."""
    capture = _copy(ROOT / "data" / source, tmp_path / "c.capture")
    _expect_first_finding(capture, {})
    assert main(["check", str(capture)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, (out, err)
    assert "expected.json: field 'first_finding.upstream' is an empty object" in err, err


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


@pytest.mark.parametrize("argv", [["check", "{capture}", "--json"],
                                  ["replay", "{capture}", "--json"]])
def test_json_output_holds_no_lone_surrogate(
        tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """A capture whose folder name is not UTF-8 (``q\\xff.capture``): ``check --json`` and
    ``replay --json`` wrote its name with the escape ``\\udcff``, a lone surrogate no UTF-8
    text holds, which strict JSON readers (RFC 7493; Rust's serde_json) refuse and a Python
    reader cannot encode again. It is written as text (``q\\\\udcff``), as ``triage`` and
    ``summary`` write it."""
    name = "q\udcff.capture"  # the byte 0xff, as Python decodes a file name
    capture = _copy(ROOT / "data" / "clean.capture", tmp_path / name)
    assert main([word.format(capture=capture) for word in argv]) == 0
    data = json.loads(capsys.readouterr().out)
    for text in _strings(data):
        text.encode("utf-8")  # raises on a lone surrogate
    assert "q\\udcff.capture" in data["capture"]


def test_a_group_title_counts_no_unknown_host_as_one_of_its_hosts(tmp_path: Path) -> None:
    """Three clean captures, two on host ``h`` and one whose manifest names no host: the
    group's title said "3 captures on 1 host", of a capture whose host nobody knows. It says
    how many are on a host unknown; every output (text, Markdown, HTML, JSON) takes it."""
    from forensics.fleet.triage import triage

    for name in ("a", "b", "c"):
        capture = _copy(ROOT / "data" / "clean.capture", tmp_path / f"{name}.capture")
        if name != "c":
            manifest = json.loads((capture / "manifest.json").read_text())
            manifest["process"] = {"host": "h", "pid": 100}
            (capture / "manifest.json").write_text(json.dumps(manifest))
    (group,) = triage([tmp_path], workers=1).groups
    assert group.title().startswith("3 captures on 1 host (1 on a host unknown), "), group.title()


def test_check_of_the_fix_alone_says_nothing_of_the_crash(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A capture whose crash the engine's values explain (a stale previous row, then a CUDA
    assert), accepted with ``upstream`` and ``patched``, checked with ``--variant patched``
    alone: the fix finds nothing, and ``check`` said "crash verdict: expected 'explained', got
    'unexplained' (a crash no captured value explains)", exit 1. The engine's code was not
    replayed: the crash verdict is not known, and not compared."""
    capture = _copy(ROOT / "data" / "stale-prev-row.capture", tmp_path / "s.capture")
    (capture / "events-w0.jsonl").write_text(json.dumps(
        {"kind": "cuda_assert", "message": "Assertion failed", "rank": 0, "step": 10}) + "\n")
    assert main(["check", str(capture), "--accept"]) == 0
    assert json.loads((capture / "expected.json").read_text())["crash_verdict"] == "explained"
    capsys.readouterr()
    assert main(["check", str(capture), "--variant", "patched"]) == 0
    out = capsys.readouterr().out
    assert "crash verdict: expected" not in out and "matches expected.json" in out, out
    assert "not checked: its crash verdict 'explained'" in out, out  # said unchecked (T116h)


def test_the_conclusion_of_the_fix_alone_judges_no_crash(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same capture replayed with ``--variant patched`` alone: the conclusion led with "Not
    explained: ... no variant finds a captured value out of range, so the captured values do
    not explain the crash" and the summary said "crash verdict: unexplained", though the
    engine's own code (``upstream``) finds the stale row behind it. It says the crash is not
    judged and why."""
    capture = _copy(ROOT / "data" / "stale-prev-row.capture", tmp_path / "s.capture")
    (capture / "events-w0.jsonl").write_text(json.dumps(
        {"kind": "cuda_assert", "message": "Assertion failed", "rank": 0, "step": 10}) + "\n")
    assert main(["replay", str(capture), "--variant", "patched"]) in (0, 1)
    replayed = capsys.readouterr().out
    assert main(["summary", str(capture), "--format", "text", "--variant", "patched"]) in (0, 1)
    summary = capsys.readouterr().out
    for text in (replayed, summary):
        assert "Not explained" not in text and "unexplained" not in text, text
    assert "Not judged: the capture holds a crash, but no variant of the engine's code" \
        in " ".join(replayed.split())
    assert "crash verdict: not judged" in summary, summary
