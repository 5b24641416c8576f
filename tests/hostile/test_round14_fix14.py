"""Round 14's fixes of what an attacker left open: a log line past the line bound read as if
whole (a crash dump's "0 of 0 spec-decode token(s) -1"), a capture's records of a site this
install does not know dropped in silence ("0 records", "no violation"), and a capture's
``@user`` or ``#123`` landing in a Markdown write-up as a GitHub mention or issue link."""

from __future__ import annotations

import html as html_lib
import os
import re
import subprocess
import sys
from pathlib import Path

import mistune
import pytest
from test_round2 import hostile_capture, run_cli

from forensics.errors import CaptureFormatError

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "ERROR 12-06 10:00:00 [dump_input.py:79] "
CHAIN = ("ERROR 12-06 10:00:00 [core.py:1] EngineCore encountered a fatal error.\n"
         "Traceback (most recent call last):\n"
         '  File "/x/vllm/v1/worker/gpu_model_runner.py", line 10, in execute_model\n'
         "    assert x\nAssertionError\n")


def _dump_line(ids: int) -> str:
    """A scheduler output line whose request r1 has ``ids`` draft ids, all ``-1``."""
    drafts = ", ".join(["-1"] * ids)
    return (f"{PREFIX}Dumping scheduler output for model execution: SchedulerOutput("
            "num_scheduled_tokens={r1: 2, r2: 3}, total_num_scheduled_tokens=5, "
            f"scheduled_spec_decode_tokens={{r1: [{drafts}]}})\n")


# ------------------------------------------------------------ 1. a long log line is cut


def test_iter_lines_says_which_lines_it_cut(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """``iter_lines`` cut a line past ``max_line`` and gave no sign of it: a reader took the
    part for the line. Each line now says whether it was cut, across pieces read too."""
    from forensics.store import guarded

    monkeypatch.setattr(guarded, "CHUNK", 3)
    path = tmp_path / "f.log"
    path.write_bytes(b"abcdefgh\nabcd\nabcde\nxyz")
    assert list(guarded.iter_lines(path, "log", max_line=4)) == [
        (1, b"abcd", True, True), (2, b"abcd", True, False), (3, b"abcd", True, True),
        (4, b"xyz", False, False)]


def test_a_crash_dump_line_past_the_line_bound_is_said_cut_not_counted(tmp_path: Path) -> None:
    """A dump line of 70,000 ``-1`` drafts was cut at 64 KiB, its dict of drafts left open,
    and imported as "2 request(s) scheduled, 0 of 0 spec-decode token(s) -1": a false
    sentence. The event now says the line was cut and its batch is unknown."""
    from forensics.importers import crash_dump
    from forensics.importers.logs import MAX_LINE

    log = tmp_path / "engine.log"
    log.write_text(_dump_line(70_000) + CHAIN)
    assert len(_dump_line(70_000)) > MAX_LINE
    (dump,) = [e for e in crash_dump.read(log).events if e["kind"] == "crash_dump"]
    assert "0 of 0" not in dump["message"] and "request(s) scheduled," not in dump["message"]
    assert "spec-decode tokens unknown" in dump["message"]
    assert f"longer than {MAX_LINE} bytes" in dump["message"]
    assert dump["scheduled_spec_decode_tokens"] == dump["num_scheduled_tokens"] == "unknown"
    assert dump["cut"] and dump["exception"]  # the chain after it is still its own


def test_a_crash_dump_line_within_the_bound_is_read_whole(tmp_path: Path) -> None:
    """The bound is the line's: 10,000 drafts (a line under 64 KiB) are all counted."""
    from forensics.importers import crash_dump

    log = tmp_path / "engine.log"
    log.write_text(_dump_line(10_000) + CHAIN)
    (dump,) = [e for e in crash_dump.read(log).events if e["kind"] == "crash_dump"]
    assert "cut" not in dump
    assert "2 request(s) scheduled, 10000 of 10000 spec-decode token(s) -1" in dump["message"]


def test_the_import_says_in_one_line_that_a_line_was_cut(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``forensics import`` of such a log says, in one line, which line was cut."""
    log = tmp_path / "engine.log"
    log.write_text(_dump_line(70_000) + CHAIN)
    code, out, _ = run_cli(capsys, "import", log, "-o", tmp_path / "c.capture")
    assert code == 0
    notes = [line for line in out.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "'engine.log' line 1" in notes[0], out
    assert "batch there is unknown" in notes[0]
    code, out, _ = run_cli(capsys, "inspect", tmp_path / "c.capture")
    assert "spec-decode tokens unknown" in out and "0 of 0" not in out


def test_a_cut_config_line_keeps_no_number_the_cut_may_have_shortened(tmp_path: Path) -> None:
    """A config line cut right after ``tensor_parallel_size=1`` of ``=16`` gave a TP size of
    1; a number that reaches the cut is left out (the ones before it are kept)."""
    from forensics.importers import crash_dump
    from forensics.importers.logs import MAX_LINE

    head = (f"{PREFIX}Dumping input data for V1 LLM engine (v0.33.0) with config: model='m', "
            "speculative_config=SpeculativeConfig(method='eagle', num_spec_tokens=4), ")
    line = head + " " * (MAX_LINE - len(head) - len("tensor_parallel_size=1")) + \
        "tensor_parallel_size=16\n"
    log = tmp_path / "engine.log"
    log.write_text(line + _dump_line(2) + CHAIN)
    (dump,) = [e for e in crash_dump.read(log).events if e["kind"] == "crash_dump"]
    assert dump["config"] == {"vllm": "0.33.0", "model": "m", "speculative": "eagle",
                              "num_speculative_tokens": 4}


def test_a_cut_probe_line_is_refused(tmp_path: Path) -> None:
    """A probe line cut right after ``max=1`` of ``max=12345`` became a summary record of
    max 1 (an out-of-range value read as in range). It is refused in one line."""
    from forensics.importers import logs

    head = "SM70-TEMB: rows=10 input=(4,)"
    tail = "dtype=int64 min=0 max=1"
    line = head + " " * (logs.MAX_LINE - len(head) - len(tail)) + tail + "2345\n"
    log = tmp_path / "probe.log"
    log.write_text(line)
    with pytest.raises(CaptureFormatError, match=r"probe.log' line 1: a probe line of site "
                                                 r"embedding longer than 65536 bytes"):
        logs.read(log)


def test_a_crash_event_of_a_cut_line_says_so(tmp_path: Path) -> None:
    """A crash line past the bound is still the crash it begins with; its event says that
    only its first part was read."""
    from forensics.importers import logs

    log = tmp_path / "engine.log"
    log.write_text("RuntimeError: CUDA error: an illegal memory access was encountered "
                   + "x" * 70_000 + "\n")
    (event,) = logs.read(log).events
    assert event["kind"] == "illegal_memory_access" and "65536" in event["cut"]


# ---------------------------------------------- 2. records of a site not installed here

SCRIPT = r'''
import sys
import numpy as np
from forensics.records import Record
from forensics.store.writer import write_capture
records = [Record("toy_gather", step, fields={"index": np.array([0, 9], np.int32), "size": 4})
           for step in range(3)]
if sys.argv[2] == "both":
    records.append(Record("embedding", 1, fields={"input_ids": np.array([5], np.int64),
                                                  "num_embeddings": 10}))
write_capture(sys.argv[1], records)
'''


@pytest.fixture(scope="module")
def plugin_captures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Captures written where the toy plugin site is installed (``tests/plugins``): one of its
    records only, one beside an embedding record; this process does not know the site."""
    root = tmp_path_factory.mktemp("unknown-site")
    info = root / "dist" / "toy_forensics_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-forensics-plugin\n"
                                   "Version: 1.0\n")
    (info / "entry_points.txt").write_text("[forensics.sites]\ntoy = toy_site:SITE\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(root / "dist"), str(ROOT / "tests" / "plugins"), str(ROOT)]))
    out = {}
    for kind in ("only", "both"):
        out[kind] = root / f"{kind}.capture"
        subprocess.run([sys.executable, "-c", SCRIPT, str(out[kind]), kind], check=True,
                       env=env, timeout=300)
    return out


def test_the_site_is_not_known_here() -> None:
    from forensics.sites import SITES

    assert "toy_gather" not in SITES


@pytest.mark.parametrize("kind", ["only", "both"])
def test_inspect_lists_the_records_of_a_site_not_installed(
        plugin_captures: dict[str, Path], capsys: pytest.CaptureFixture[str],
        kind: str) -> None:
    """``inspect`` said "0 records" of a capture holding three records of a plugin's site
    this install lacks; it lists them now, as not known to this install."""
    import json

    code, out, _ = run_cli(capsys, "inspect", plugin_captures[kind])
    assert code == 0
    (line,) = [row for row in out.splitlines() if "toy_gather" in row]
    assert re.search(r"toy_gather\s+3\s+not known to this install", line), out
    assert "(and 3 of sites not known to this install)" in out.splitlines()[0]
    code, out, _ = run_cli(capsys, "inspect", plugin_captures[kind], "--json")
    assert json.loads(out)["unknown_sites"] == {"toy_gather": 3}


@pytest.mark.parametrize("kind", ["only", "both"])
def test_replay_says_the_records_of_a_site_not_installed_were_not_judged(
        plugin_captures: dict[str, Path], capsys: pytest.CaptureFixture[str],
        kind: str) -> None:
    """``replay`` said "no violation" of a capture whose only records (one index off its
    table each) were of a site this install lacks, as if it had judged them. It names the
    site and its records as not judged: in the text, each variant's line and the JSON."""
    import json

    from forensics.present.conclusion import conclude
    from forensics.replaying import replay

    said = "3 record(s) of site 'toy_gather' (not known to this install)"
    code, out, _ = run_cli(capsys, "replay", plugin_captures[kind])
    assert code == 0
    assert f"not judged: {said}" in out.splitlines()[0]
    assert f"No variant judged {said}" in " ".join(out.split())
    conclusion = conclude(replay(plugin_captures[kind]))
    assert conclusion.not_known == {"toy_gather": 3}
    assert all(f"not judged: {said}" in conclusion.line(v) for v in conclusion.variants)
    code, out, _ = run_cli(capsys, "summary", plugin_captures[kind], "--format", "text")
    assert all("not judged: 3 record(s) of site" in line
               for line in out.splitlines() if line.startswith(("upstream", "patched")))
    code, out, _ = run_cli(capsys, "replay", plugin_captures[kind], "--json")
    assert json.loads(out)["conclusion"]["not_known"] == {"toy_gather": 3}


def test_a_capture_of_known_sites_names_no_site_not_known(tmp_path: Path) -> None:
    """The sentence is the unknown sites' only: a capture of known sites has none."""
    from test_round2 import records

    from forensics.present.conclusion import conclude
    from forensics.replaying import replay
    from forensics.store.reader import load
    from forensics.store.writer import write_capture

    path = write_capture(tmp_path / "k.capture", records(["a", "b"]))
    assert load(path).unknown_sites == {}
    conclusion = conclude(replay(path))
    assert conclusion.not_known == {} and "not known" not in conclusion.paragraph()


# ------------------------------------------------ 3. mentions and references in Markdown

PINGS = ("@octocat", "#1234", "GH-77")


def _outside_code(markdown_text: str) -> str:
    """The text GitHub-like rendering of ``markdown_text`` shows outside code elements."""
    render = mistune.create_markdown(escape=False, plugins=["table", "strikethrough"])
    page = re.sub(r"<code>.*?</code>", " ", str(render(markdown_text)), flags=re.S)
    return html_lib.unescape(re.sub(r"<[^>]+>", "", page))


def _unpinged(markdown_text: str) -> None:
    """No mention or issue reference of :data:`PINGS` outside a code span (an ``@`` after a
    letter, digit or ``_`` is no mention on GitHub: ``r@octocat`` pings no one)."""
    shown = _outside_code(markdown_text)
    assert not re.search(r"(?<![A-Za-z0-9_])@octocat|#1234|GH-77", shown), shown[:2000]


@pytest.mark.parametrize("text", ["@octocat", "hi @octocat!", "see #1234", "org/repo#1234",
                                  "GH-77", "'@octocat'", "\\@octocat", "\\GH-77 and \\#1234"])
def test_markdown_leaves_no_mention_or_reference_and_renders_the_text(text: str) -> None:
    """``markdown`` escaped Markdown's markup but let ``@user`` and ``#123`` through: pasted
    into GitHub, a capture's request id pinged a user or linked an issue (a backslash before
    ``@`` does not stop GitHub's mention). Each is a code span now: linked nowhere, and the
    rendered text is still the text."""
    from test_escaping import _rendered_text

    from forensics.escaping import markdown

    for raw in (False, True):
        shown = markdown(text, raw=raw)
        _unpinged(shown)
        assert _rendered_text(shown) == text


@pytest.fixture(scope="module")
def pinging_capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A capture whose request ids, model name, notes and events hold mentions and refs."""
    root = tmp_path_factory.mktemp("pings")
    return hostile_capture(root / "p.capture", " ".join(PINGS))


def test_every_markdown_output_leaves_no_mention_or_reference(
        pinging_capture: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``summary --format markdown`` (the write-up of :mod:`forensics.present.writeup`) and
    ``triage --format markdown`` hold the capture's ``@octocat``, ``#1234`` and ``GH-77``
    only in code spans."""
    from forensics.present.writeup import to_markdown
    from forensics.replaying import replay

    code, out, _ = run_cli(capsys, "summary", pinging_capture)
    assert code == 0 and "octocat" in out  # the request id is there, in a code span
    _unpinged(out)
    _unpinged(to_markdown(replay(pinging_capture)))
    code, out, _ = run_cli(capsys, "triage", pinging_capture.parent, "--format", "markdown")
    assert code == 0 and "octocat" in out
    _unpinged(out)


@pytest.mark.parametrize("text", ["vllm+fix.diff@bdea3073", "alice@example.com", "x_@y"])
def test_an_at_after_a_word_is_no_mention_and_stays_as_it_is(text: str) -> None:
    """GitHub reads ``@`` as a mention only after no letter, digit or ``_``: a diff named by
    its digest (``vllm+fix.diff@bdea3073``, the report's and summary's column) or an address
    is no mention, and stays plain text (it became ``fix.diff`@bdea3073```); an address, which
    GitHub autolinks, is one code span whole since T84b (never a mention's)."""
    from forensics.escaping import markdown

    for raw in (False, True):
        shown = markdown(text, raw=raw)
        assert shown == f"`{text}`" if text == "alice@example.com" else "`" not in shown, shown
