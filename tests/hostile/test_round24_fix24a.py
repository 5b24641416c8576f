"""Round 24 of hostile input, fix 24a: round 23's leftovers: the draft title beside several
guard events, ``redact`` of a guard event's message, runs of combining marks, and the pytest
plugin's item of an empty ``--forensics-captures``."""

from __future__ import annotations

import json
import unicodedata
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
from test_round23_fix23a import _guarded, _title

from forensics import escaping

pytest_plugins = ["pytester"]

# ------------------------------ T146a: the draft's title names every guard event's count


def _forged(step: int, tensor: str, value: int, site: str) -> dict[str, object]:
    """A forged ``guard_violation`` of ``tensor`` = ``value`` at ``site``, step ``step``."""
    return {"kind": "guard_violation", "process": "w0", "rank": 0, "step": step,
            "site": site, "row": 0, "tensor": tensor, "value": value, "bound": 4}


def _events(capture: Path, *events: dict[str, object]) -> None:
    """``capture``'s events: ``events`` alone, then the probe's stop."""
    stop = {"kind": "probe_stop", "process": "w0", "pid": 5, "rank": 0, "step": 12}
    (capture / "events-w0.jsonl").write_text(
        "".join(json.dumps(e) + "\n" for e in [*events, stop]))


def test_the_draft_title_counts_the_guard_events_and_names_the_first_two(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Of a capture whose (clean) records show no value out of range and whose events hold
    two guard events naming different tensors and values, the draft's title named the first
    alone ("its guard_violation event names prev_positions = 9 ..."), as if it were the only
    claim. It counts them and names the first two (the guard that raised first), the rest
    counted; of one event, it names that one as before."""
    capture = _guarded(tmp_path)
    head = "**Title**: [Bug]: engine crash with no captured index value out of range, though "
    _events(capture, _forged(3, "input_ids", 70000, "embedding"))
    assert _title(capsys, capture) == (
        f"{head}its guard_violation event names input_ids = 70000 out of range at embedding")
    _events(capture, _forged(3, "input_ids", 70000, "embedding"),
            _forged(2, "prev_positions", 9, "batch_change"))
    assert _title(capsys, capture) == (
        f"{head}its 2 guard events name values out of range: prev_positions = 9 at batch_change "
        "(guard_violation), input_ids = 70000 at embedding (guard_violation)")
    _events(capture, _forged(3, "input_ids", 70000, "embedding"),
            _forged(2, "prev_positions", 9, "batch_change"),
            _forged(4, "out.output_token_ids", 32001, "async_output"))
    assert _title(capsys, capture) == (
        f"{head}its 3 guard events name values out of range: prev_positions = 9 at batch_change "
        "(guard_violation), input_ids = 70000 at embedding (guard_violation) and 1 more")


# ------------------------------ T146b: redact's guard message says the value as its field


def test_redact_says_a_guard_event_s_value_in_its_message_as_its_field_does(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``redact`` mapped a guard event's ``value`` (of a token tensor) as the records' ids are,
    but its kept message still said the real id ("input_ids[2] value 1234 is outside ..."),
    beside the mapped one in the field. The message says the mapped value after ``value``; a
    number that is the event's row or bound after its word is kept; the id anywhere else, and
    the value of a tensor its site does not name (its field dropped), read ``<value>``."""
    from forensics.probe.guard import bounds_error
    from forensics.sites import Violation
    from tests.hostile.test_round2 import run_cli

    def guard(tensor: str, row: int, value: int, message: str = "") -> dict[str, object]:
        raised = Violation("embedding", row, tensor, value, 0, 4)
        return {"kind": "guard_violation", "process": "w0", "rank": 0, "step": 8,
                "site": "embedding", "row": row, "tensor": tensor, "value": value, "bound": 4,
                "message": message or str(bounds_error(raised, 8, 0, None))}

    capture = _guarded(tmp_path, guard("input_ids[2]", 2, 1234),
                       guard("input_ids", 1234, 1234, "row 1234 read token 1234 (bound 4)"),
                       guard("nope", 2, 1234))
    shared = tmp_path / "shared.capture"
    code, out, err = run_cli(capsys, "redact", capture, "-o", shared)
    assert code == 0, err
    events = [json.loads(line) for line in (shared / "events-w0.jsonl").read_text().splitlines()]
    probe, forged, unknown = [e for e in events if e["kind"].startswith("guard")][2:]
    mapped = probe["value"]
    assert mapped != 1234 and forged["value"] == mapped and "value" not in unknown
    assert probe["message"].startswith(
        f"forensics guard: site 'embedding' step 8 rank 0 row 2: input_ids[2] value {mapped} is "
        "outside [0, 4) (bound 4)"), probe
    assert forged["message"] == "row 1234 read token <value> (bound 4)", forged
    assert unknown["message"].startswith(
        "forensics guard: site 'embedding' step 8 rank 0 row 2: nope value <value> is outside"), \
        unknown
    assert "1234" not in json.dumps([probe, unknown]) and forged["row"] == 1234


# ------------------------------ T146c: the pytest plugin's item of an empty root says ''


def test_the_plugin_s_item_of_an_empty_root_is_named_as_given(
        pytester: pytest.Pytester) -> None:
    """``pytest --forensics-captures ""`` failed an item whose id was ``.`` (the working
    directory, which the root is not) while its line said the path '' is empty. Its id is
    ``forensics-captures['']``; an empty root and ``.`` given together are two items."""
    pytester.makepyfile(test_other="def test_other():\n    assert True\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rA",
                                          "--forensics-captures", "")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "FAILED forensics-captures[''] - --forensics-captures" in out and "FAILED . " not in out
    both = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rA",
                                        "--forensics-captures", "", "--forensics-captures", ".")
    both.assert_outcomes(passed=1, failed=2)
    assert "FAILED forensics-captures[''] - " in both.stdout.str()
    assert "FAILED . - '.' (--forensics-captures" in both.stdout.str()


# ------------------------------ T146d: a run of combining marks is escaped in every output

#: Zalgo text: runs of combining marks past MOST_MARKS on one letter (NFC or not)
ZALGO = ["a" + "\u0334" * 3 + "b", "a" + "\u0301" * 200, "x" + "\u0489" * 40 + "y",
         "\u0334" * 5 + "z", "\\" + "\u0334" * 3]
#: ordinary accented text (NFC): a letter with one or two marks is written as it is
ACCENTED = ["caf\u00e9", "Vi\u1ec7t Nam", "a\u0334\u0335", "\u0e17\u0e35\u0e48"]
#: every output a capture string may land in, each taking the string
OUTPUTS = {
    "terminal": escaping.terminal, "inert": escaping.inert, "spanless": escaping.spanless,
    "quoted": escaping.quoted, "html": escaping.html,
    "html_raw": lambda text: escaping.html(text, raw=True), "markdown": escaping.markdown,
    "markdown_raw": lambda text: escaping.markdown(text, raw=True),
    "markdown_table": lambda text: escaping.markdown(text, table=True),
    "markdown_code": escaping.markdown_code, "csv": escaping.csv_cell,
    "python": escaping.python_string, "shell": escaping.shell_word}


def _runs(text: str) -> list[str]:
    """The runs of combining marks longer than MOST_MARKS standing raw in ``text``."""
    run, found = "", []
    for char in f"{text}.":
        if unicodedata.category(char) in ("Mn", "Mc", "Me"):
            run += char
            continue
        found += [run] if len(run) > escaping.MOST_MARKS else []
        run = ""
    return found


@pytest.mark.parametrize("output", OUTPUTS)
def test_a_run_of_combining_marks_is_escaped_in_every_output(output: str) -> None:
    """``a`` and 3 U+0334 (NFC: nothing escaped it) stood raw in every output, drawn over the
    rows above and below it in the triage HTML and the report (Zalgo text). A run past
    MOST_MARKS is escaped whole (``\\u0334``) in every output; a letter with one or two marks
    (an accent, Vietnamese's two, Thai's vowel and tone) is written as it is."""
    write = OUTPUTS[output]
    for text in ZALGO:
        out = write(text)
        assert _runs(out) == [], (output, out)
    assert "a\\u0334\\u0334\\u0334b" in escaping.terminal(ZALGO[0])
    for text in ACCENTED:
        assert text in write(text) or output in ("python", "shell"), (output, write(text))
    svg = f'<svg a="{escaping.html(ZALGO[1])}"><text>{escaping.html(ZALGO[2])}</text></svg>'
    ET.fromstring(svg)


def test_two_mark_runs_and_the_run_escaped_never_print_alike() -> None:
    """A backslash before an escaped run is doubled, as before any escape: ``\\`` and three
    U+0334 never prints as the text ``\\u0334`` and two of them; a shell word of a run reads
    back as the text."""
    import subprocess

    for text in ZALGO:
        word = escaping.shell_word(text)
        said = subprocess.run(["sh", "-c", f"printf %s {word}"], capture_output=True, check=True)
        assert said.stdout.decode() == text
    assert escaping.terminal("\\" + "\u0334" * 3) == "\\\\\\u0334\\u0334\\u0334"
    assert escaping.terminal("\\u0334" + "\u0334" * 2) == "\\\\u0334\u0334\u0334"


def test_triage_s_html_and_table_escape_a_capture_name_s_run_of_marks(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A capture folder named ``a`` and 40 U+0334 stood raw in ``simulate``'s line, and in
    ``triage``'s table and HTML pages (its index and its group's report), drawn over the rows
    around it; it is escaped in each."""
    from tests.hostile.test_round2 import run_cli

    name = "a" + "\u0334" * 40
    code, wrote, err = run_cli(capsys, "simulate", "clean", "-o", tmp_path / f"{name}.capture")
    assert code == 0, err
    pages = tmp_path / "html"
    code, out, err = run_cli(capsys, "triage", tmp_path / f"{name}.capture", "--html", pages)
    assert code in (0, 1), err
    for text in (wrote, out, *(page.read_text(encoding="utf-8") for page in pages.glob("*.html"))):
        assert _runs(text) == [] and "a" + "\\u0334" * 40 in text


def make_work(case: str, size: int, scratch: Path) -> Callable[[], object]:
    """Every escaping of ``MARKED[case](size)`` (run by :mod:`tests.instructions`)."""
    text = MARKED[case](size)
    return lambda: [write(text) for write in (escaping.terminal, escaping.inert,
                                              escaping.markdown, escaping.shell_word)]


#: texts of marks a run's pattern could retry at each mark: one long run, runs of two (kept)
MARKED: dict[str, Callable[[int], str]] = {
    "one run": lambda n: "a" + "\u0334" * n, "pairs": lambda n: "a\u0334\u0334" * n}


@pytest.mark.parametrize("case", list(MARKED))
def test_escaping_runs_of_marks_is_linear(case: str, tmp_path: Path) -> None:
    """4x such a text costs under 6x the instructions (callgrind; 4x the base is 4,000 marks
    or runs, under :data:`~forensics.escaping.LIMIT`)."""
    from tests.instructions import assert_linear, scaling

    assert_linear(scaling(__file__, dict.fromkeys(MARKED, 1000), tmp_path)[case])
