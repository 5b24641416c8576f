"""Round 15's held-out attacks on the commands earlier rounds touched least (``findings``,
``report``, ``kernels``, ``summary``, the pytest plugin): a table padded to one capture
string's width (T77a), records of a site this install does not know said to be "no records" or
left out of a report (T77b), a kernel the probe saw launched said to be "never launched"
(T77c), a capture named twice collected twice (T77d), a capture's bare URL linked by GitHub
(T77e), and a capture of no records (or of kernel launches only) said to show "no violation"
or a probe that "saw no call" (T77f)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from test_round2 import run_cli
from test_round14_fix14 import plugin_captures  # noqa: F401  (a fixture: a site not installed)

from forensics.records import Record
from forensics.store.writer import write_capture

pytest_plugins = ["pytester"]

# ------------------------------------------- 1. findings: a table as wide as its longest cell


def _padded_capture(root: Path, request: str, findings: int) -> Path:
    """A capture of one finding made by request ``request`` and ``findings`` more by none."""
    return write_capture(root / f"pad{len(request)}.capture", [
        Record("embedding", 1, 0, {"input_ids": np.array([50], np.int64), "num_embeddings": 10,
                                   "req_ids": [request],
                                   "cu_num_tokens": np.array([1], np.int32)}),
        Record("embedding", 2, 0, {"input_ids": np.full(findings, 50, np.int64),
                                   "num_embeddings": 10})])


def test_one_long_request_id_pads_no_other_row_of_the_findings_table(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``findings CAPTURE`` printed the table through pandas' ``to_string``, which pads every
    row of a column to its widest cell: a 76 KB capture of 5,000 findings and one request id
    of 20,000 characters printed 200 MB (and held 1 GB), the rows times the longest cell. A
    column is padded to at most 40 characters now (a longer cell runs past it): the long id
    adds its own length to the table, once."""
    rows = 400
    sizes = {}
    for request in ("r", "L" * 20_000):
        code, out, _ = run_cli(capsys, "findings", _padded_capture(tmp_path, request, rows))
        assert code == 0 and len(out.splitlines()) == 1 + 2 * (rows + 1)  # upstream, patched
        sizes[len(request)] = len(out)
    assert sizes[20_000] - sizes[1] < 2 * 20_000 + 2 * (rows + 1) * 40, sizes


def test_the_findings_table_still_lines_up_and_escapes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The short columns line up under their header as before, and a request id's control
    characters are escaped."""
    path = _padded_capture(tmp_path, "=cmd\x1b[2J\u202e", 1)
    code, out, _ = run_cli(capsys, "findings", path)
    lines = out.splitlines()
    assert code == 0 and "\x1b" not in out and "\u202e" not in out
    assert "=cmd\\x1b[2J\\u202e" in out
    for name, value in (("site", "embedding"), ("kind", "out_of_bounds")):
        at = lines[0].index(name)
        assert {line[at:].split()[0] for line in lines} == {name, value}
    at = lines[0].index("req_id")
    assert [line[at:].split()[0] for line in lines if "=cmd" in line] == \
        ["=cmd\\x1b[2J\\u202e"] * 2
    assert lines[0].split()[:4] == ["variant", "site", "step", "rank"]


# ---------------------- 2. records of a site this install does not know: neither none nor judged


def test_a_report_of_only_such_records_does_not_say_it_holds_none(
        plugin_captures: dict[str, Path], tmp_path: Path,  # noqa: F811
        capsys: pytest.CaptureFixture[str]) -> None:
    """``report`` of a capture whose three records are of a site not installed here wrote
    "The capture holds no records: no value to replay (the probe saw no call, or its segments
    were removed)" (``triage`` and ``replay`` say what it holds). It says it holds them and that
    no variant judged them."""
    code, _, _ = run_cli(capsys, "report", plugin_captures["only"], "-o", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    assert code == 0 and "holds no records" not in page
    assert ("The capture holds 3 record(s) of site &#x27;toy_gather&#x27; (not known to this "
            "install) and no other record: no variant judged them") in page


def test_a_reports_header_says_which_records_no_variant_judged(
        plugin_captures: dict[str, Path], tmp_path: Path,  # noqa: F811
        capsys: pytest.CaptureFixture[str]) -> None:
    """The report of such records beside an embedding record opened with "upstream leaves no
    site in violation", "the capture shows no failure to report", and named the three records
    nowhere: its header carried the verdicts but not the paragraph's sentence on what no
    variant judged. The header says it after the verdicts, as ``summary`` does."""
    import re

    code, _, _ = run_cli(capsys, "report", plugin_captures["both"], "-o", tmp_path / "b.html")
    page = (tmp_path / "b.html").read_text()
    header = re.search(r'<ul class="forensics-conclusion" id="conclusion">(.*?)</ul>', page)
    assert code == 0 and header is not None
    lines = re.findall(r"<li>(.*?)</li>", header.group(1))
    assert lines[:3] == ["upstream leaves no site in violation.",
                         "patched leaves no site in violation.",
                         "No variant judged 3 record(s) of site &#x27;toy_gather&#x27; (not known "
                         "to this install): install the plugin that declares each and replay "
                         "again."]


@pytest.mark.parametrize("kind", ["only", "both"])
def test_findings_says_which_records_no_variant_judged(
        plugin_captures: dict[str, Path], tmp_path: Path,  # noqa: F811
        capsys: pytest.CaptureFixture[str],
        kind: str) -> None:
    """``findings`` of those captures printed "no findings" alone, as of a capture whose
    every record was judged in range. A line says which records no variant judged, on the
    table's output and on ``-o``'s."""
    said = ("not judged: 3 record(s) of site 'toy_gather' (not known to this install); install "
            "the plugin that declares each and run findings again")
    code, out, _ = run_cli(capsys, "findings", plugin_captures[kind])
    assert code == 0 and out.splitlines() == ["no findings", said]
    code, out, _ = run_cli(capsys, "findings", plugin_captures[kind], "-o", tmp_path / "f.csv")
    assert code == 0 and out.splitlines() == ["0 findings -> " + str(tmp_path / "f.csv"), said]


def test_findings_of_known_sites_only_names_no_record_not_judged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The line is the unknown sites' only: a capture of known sites prints its table alone."""
    code, out, _ = run_cli(capsys, "findings", _padded_capture(tmp_path, "r", 1))
    assert code == 0 and "not judged" not in out and len(out.splitlines()) == 5


# ------------------------------- 3. kernels --coverage: a kernel the probe saw launched, dropped


def _kernel_capture(root: Path) -> Path:
    """A capture of one launch of a kernel no vLLM has (not replayable) and the probe's
    ``kernel_summary``: ``vllm.x._seen`` launched 5 times, none kept; ``vllm.x._never`` not
    launched."""
    import json

    from test_round4_kernels import launch

    root.mkdir(parents=True)
    (root / "manifest.json").write_text(json.dumps({
        "format": 1, "creator": "test", "engine_id": "e" * 32, "model": {},
        "process": {"host": "h", "pid": 1, "rank": 0, "tag": "h-1"}, "versions": {}}))
    events = [{**launch(step=40), "kernel": {"module": "vllm.x", "name": "_kept",
                                             "source_sha256": ""}},
              {"kind": "kernel_summary", "format": 1, "step": 40, "rank": 0, "graph_only": [],
               "dropped_steps": 8, "kernels_seen": {"vllm.x._seen": 5, "vllm.x._kept": 1},
               "selection": ["*"]}]  # FORENSICS_KERNELS=all: every kernel counted (T110c)
    (root / "events-h-1.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return root


@pytest.fixture
def three_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """The installed vLLM's kernels, as the sanitizer reads them: three of module vllm.x."""
    from forensics.kernels import sanitizer

    monkeypatch.setattr(sanitizer, "installed_kernels",
                        lambda: [("vllm.x", "_kept"), ("vllm.x", "_never"), ("vllm.x", "_seen")])


def test_a_kernel_the_probe_saw_launched_is_never_said_never_launched(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], three_kernels: None) -> None:
    """``kernels --coverage`` listed a kernel whose launches the probe counted (its
    ``kernel_summary``'s ``kernels_seen``: 5) but the capture does not hold (the recorder keeps
    the last 32 steps by default: a kernel launched in the first steps only is dropped) as
    ``never_launched``, its JSON row ``"seen": 5`` beside it. It is ``not_recorded``, with
    why; a kernel neither seen nor recorded is still ``never_launched``."""
    import json

    capture = _kernel_capture(tmp_path / "k.capture")
    code, out, _ = run_cli(capsys, "kernels", capture, "--coverage", "--json")
    rows = {r["kernel"]: r for r in json.loads(out)["coverage"]}
    assert code == 2  # the one launch recorded is not replayable: nothing judged
    assert rows["_seen"]["status"] == "not_recorded" and rows["_seen"]["seen"] == 5
    assert rows["_seen"]["why"].startswith("launched 5 time(s) by the probe's count")
    assert rows["_never"]["status"] == "never_launched" and rows["_never"]["why"] == ""
    assert rows["_kept"]["status"] == "not_replayable"
    code, out, _ = run_cli(capsys, "kernels", capture, "--coverage")
    (line,) = [row for row in out.splitlines() if "vllm.x._seen" in row]
    assert line.split()[0] == "not_recorded" and "0 recorded (launched 5 time(s)" in line


# ------------------------------------------ 4. the pytest plugin: a folder of captures named twice


@pytest.mark.parametrize("twice", [
    ["--forensics-captures", "{fleet}", "--forensics-captures", "{fleet}"],
    ["--forensics-captures", "{fleet}", "-o", "forensics_captures={fleet}"],
    ["--forensics-captures", "{fleet}", "--forensics-captures", "{fleet}/a.capture"],
])
def test_a_capture_named_twice_is_one_item(tmp_path: Path, pytester: pytest.Pytester,
                                           twice: list[str]) -> None:
    """``--forensics-captures DIR`` beside the ``forensics_captures`` ini option naming DIR (or
    the option given twice, or DIR and one of its captures) collected each capture once per
    root: two items of one id (``--deselect`` takes both), the capture replayed twice and
    counted twice ("2 passed" of one capture). Each capture is one item."""
    from forensics.share import expectations

    fleet = tmp_path / "fleet"
    fleet.mkdir()
    expectations.regenerate(_padded_capture(fleet, "r", 1).rename(fleet / "a.capture"))
    args = [a.format(fleet=fleet) for a in twice]
    if "-o" not in args:
        args += ["-o", "forensics_captures="]
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", *args)
    result.assert_outcomes(passed=1)


# ------------------------------------------- 5. Markdown: a capture's URL is no link on GitHub

LINKS = ("https://evil.example/fix.diff", "www.evil.example", "ftp://evil.example/x",
         "HTTP://EVIL.EXAMPLE")


def _rendered(markdown_text: str) -> str:
    """``markdown_text`` as HTML, rendered with autolinks on (as GitHub links a bare URL)."""
    import mistune

    return str(mistune.create_markdown(escape=False, plugins=["url", "table",
                                                              "strikethrough"])(markdown_text))


def _linked(markdown_text: str) -> list[str]:
    """The links the rendering of ``markdown_text`` holds."""
    return re.findall(r"<a [^>]*>", _rendered(markdown_text))


def _shown(markdown_text: str) -> str:
    """The text the rendering of ``markdown_text`` shows (tags dropped)."""
    import html

    return html.unescape(re.sub(r"<[^>]+>", "", _rendered(markdown_text))).strip()


@pytest.mark.parametrize("text", [f"see {LINKS[0]} now", *LINKS[1:],
                                  f"[a {LINKS[0]} ](javascript:alert(1))",
                                  f"a\\{LINKS[0]}", f"x|{LINKS[0]}|y", f"{LINKS[0]}#123"])
def test_a_url_in_markdown_is_a_code_span_and_renders_as_the_text(text: str) -> None:
    """``markdown`` escaped a capture's ``[text](url)`` but left a bare ``https://...``
    (``www.``, ``ftp://``) as it was: GitHub links it by itself, so a capture's model name or
    request id put a link in the bug thread a ``summary`` is pasted into. It is a code span:
    linked nowhere, the rendered text the text; a ``[`` before it and a ``](`` after it make
    no link, a backslash before it no escaped backtick, a ``|`` no table cell."""
    from forensics.escaping import markdown

    for raw in (False, True):
        shown = markdown(text, raw=raw)
        assert _linked(shown) == [], shown
        assert _shown(shown) == text, shown
    cell = f"| a | b |\n|---|---|\n| {markdown(text, table=True, raw=True)} | x |\n"
    assert _linked(cell) == [] and len(re.findall(r"<td>", _rendered(cell))) == 2


def test_a_summary_of_a_capture_holding_urls_links_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``summary`` (Markdown, made to paste into a bug thread) of a capture whose model name,
    notes, request ids and events hold URLs links none of them; the URLs are there."""
    from test_round2 import hostile_capture

    path = hostile_capture(tmp_path / "u.capture", " ".join(LINKS))
    code, out, _ = run_cli(capsys, "summary", path)
    assert code == 0 and LINKS[0] in out and _linked(out) == [], _linked(out)


# ------------------------------ 6. a capture of no records: nothing judged, and what it holds


def test_the_summary_of_a_capture_of_no_records_says_nothing_was_judged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``summary`` of a capture of no records (and no crash) said "upstream: no violation"
    and "upstream leaves no site in violation ... the capture shows no failure to report", as
    of a capture whose every value was judged in range (``replay`` said "0 records" first,
    ``triage`` and ``report`` "holds no records"). Each variant's line and the paragraph say
    that nothing was judged."""
    path = write_capture(tmp_path / "e.capture", [])
    code, out, _ = run_cli(capsys, "summary", path, "--format", "text")
    lines = out.splitlines()
    assert code == 0 and lines[0] == ("upstream: no violation; nothing judged: the capture "
                                      "holds no records")
    code, out, _ = run_cli(capsys, "summary", path)
    assert ("The capture holds no records: no variant judged anything (the probe saw no call, "
            "or its segments were removed).") in " ".join(out.split())


def test_a_capture_of_kernel_launches_only_is_not_said_to_be_a_probe_that_saw_no_call(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], three_kernels: None) -> None:
    """A capture of recorded kernel launches and no site record (the recorder's events alone):
    ``report`` and ``triage`` said it "holds no records: ... (the probe saw no call, or its
    segments were removed)", ``summary`` "no violation"; the probe saw a launch, which only
    ``forensics kernels`` judges. Each says it holds the launches and names the command."""
    import html

    capture = _kernel_capture(tmp_path / "fleet" / "k.capture")
    said = "holds no records of a site, only 1 recorded kernel launch(es)"
    code, _, _ = run_cli(capsys, "report", capture, "-o", tmp_path / "k.html")
    page = html.unescape((tmp_path / "k.html").read_text())
    assert code == 0 and "saw no call" not in page and page.count(said) == 1
    assert "`forensics kernels` replays and judges the launches" in page
    code, out, _ = run_cli(capsys, "triage", tmp_path / "fleet")
    assert code == 0 and "saw no call" not in out and said in out, out
    assert "capture of no records" in out  # its group: still the empty captures'
    code, out, _ = run_cli(capsys, "summary", capture, "--format", "text")
    assert code == 0 and all(said in line for line in out.splitlines()[:2]), out
