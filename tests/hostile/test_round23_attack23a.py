"""Round 23 (attack23a): a held-out attack on hostile input (issue 38, round 3).

1. ``forensics simulate SCENARIO -o "$OUT"`` with ``OUT`` unset (and the Python API's
   ``simulate(..., out="")``) took the empty path for the working directory: "output '<cwd>'
   exists; pass --force (force=True) to replace it", and with ``--force`` it replaced an empty
   working directory (or a capture one worked in) by the new capture. It is refused in one
   line now, nothing written (T140a).
2. ``triage -o "" / --html ""`` wrote nothing and said nothing (exit 0), and ``findings -o ""``
   printed its table where a file was asked for: an empty output is refused in one line
   before any replay now (T140b).
3. The pytest plugin's ``--forensics-captures ""`` collected the working directory's captures
   (and wrote their ``expected.json``): an empty root names no capture now (T140c).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_round2 import run_cli

# ------------------------------------------------- T140a: simulate -o "" is no working directory


@pytest.mark.parametrize("force", [False, True])
def test_simulate_refuses_an_empty_output(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch, force: bool) -> None:
    """``simulate clean -o ""`` (``--force`` too) is one line naming the empty path, exit 2;
    the working directory is left as it was (it was replaced by the capture)."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    code, out, err = run_cli(capsys, "simulate", "clean", "-o", "", "--steps", 3,
                             *(["--force"] if force else []))
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert "the path '' is empty" in err, err
    assert list(work.iterdir()) == [] and (work.stat().st_mode & 0o777) != 0o700


@pytest.mark.parametrize("scenario", ["clean", "v2-clean"])
def test_the_api_simulate_refuses_an_empty_output(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  scenario: str) -> None:
    """``forensics.simulate(..., out="", force=True)`` raises a ConfigurationError of one line;
    nothing is written in the working directory."""
    from forensics import simulate
    from forensics.errors import ConfigurationError

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError, match="the path '' is empty"):
        simulate(scenario, steps=3, out="", force=True)
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------- T140b: triage's and findings' empty outputs refused


@pytest.mark.parametrize("option", ["-o", "--html"])
def test_triage_refuses_an_empty_output(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        option: str) -> None:
    """``triage CAPTURE -o ""`` (``--html ""``) is one line, exit 2, nothing replayed: it
    printed the table and wrote nothing, unsaid, exit 0."""
    from cases import capture

    path = capture(tmp_path, 2, "x")
    code, out, err = run_cli(capsys, "triage", path, option, "", "--workers", 1)
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert "the path '' is empty" in err, err


def test_findings_refuses_an_empty_output(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """``findings CAPTURE -o ""`` is one line, exit 2: it printed the findings' table."""
    from cases import capture

    path = capture(tmp_path, 2, "x")
    code, out, err = run_cli(capsys, "findings", path, "-o", "")
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert "the path '' is empty" in err, err


# --------------------------------------- T140c: the pytest plugin's empty root names no capture


class _Config:
    """The two settings :func:`forensics.pytest_plugin._collected` reads: ``--forensics-captures``
    as given, and no ini roots."""

    def __init__(self, *roots: str) -> None:
        self.roots = list(roots)

    def getoption(self, name: str) -> list[str]:
        return self.roots

    def getini(self, name: str) -> list[Path]:
        return []


def test_the_pytest_plugin_refuses_an_empty_root(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``pytest --forensics-captures ""`` (an unset variable) collects no capture of the
    working directory (it collected them, and wrote each one's expected.json): the root is
    said to name no file, as ``triage ""`` says."""
    from cases import capture

    from forensics.pytest_plugin import _collected

    capture(tmp_path, 2, "x")
    monkeypatch.chdir(tmp_path)
    found, empty = _collected(_Config(""))  # type: ignore[arg-type]
    assert found == [] and len(empty) == 1, (found, empty)
    assert "--forensics-captures" in empty[0][1] and "the path '' is empty" in empty[0][1]
    found, empty = _collected(_Config("x.capture"))  # type: ignore[arg-type]
    assert [p.name for p in found] == ["x.capture"] and empty == []


# ------------------------- T140d: two processes' tracebacks interleaved line by line: 2 crashes

#: a tensor-parallel worker's traceback as vLLM logs it, each line with the worker's prefix
WORKER = ["Traceback (most recent call last):",
          '  File "/v/vllm/v1/worker/gpu_model_runner.py", line 3575, in execute_model',
          "    self.prepare_inputs_event.synchronize()",
          "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"]


def _worker(rank: int) -> list[str]:
    """Worker ``rank``'s traceback lines, each with its log prefix."""
    return [f"(Worker_TP{rank} pid={100 + rank}) ERROR 12-02 10:46:44 [multiproc.py:9] {line}"
            for line in WORKER]


def _crashes(tmp_path: Path, lines: list[str]) -> list[tuple[str, str | None, str | None]]:
    """The events ``import`` reads of a log of ``lines``: (kind, exception, location)."""
    from forensics.importers import read_source

    log = tmp_path / "engine.log"
    log.write_text("\n".join(lines) + "\n")
    return [(e["kind"], e.get("exception"), e.get("location"))
            for e in read_source(log).events]


def test_two_workers_tracebacks_interleaved_are_two_crashes(tmp_path: Path) -> None:
    """Two workers' tracebacks written line by line at once (vLLM prefixes and writes each
    line by itself) are two crash events, each with its exception and frame, as written one
    after the other: they were 3 events of their lines, 2 "engine_exception" of a "Traceback"
    line and no exception, and "3 crash event(s)" said of 2 crashes."""
    one, two = _worker(0), _worker(1)
    apart = _crashes(tmp_path, one + two)
    assert len(apart) == 2 and apart[0][1] == WORKER[-1] and apart[0][2] == WORKER[1].strip()
    mixed = [line for pair in zip(one, two, strict=True) for line in pair]
    assert _crashes(tmp_path, mixed) == apart
    # a chain cut by another process's line that is no chain's (an INFO line) goes on too
    info = "(APIServer pid=1) INFO 12-02 10:46:44 [loggers.py:271] Engine 000: Running: 2 reqs"
    assert _crashes(tmp_path, [x for line in one for x in (line, info)]) == apart[:1]


# --------------------- T140e: an escape past Unicode is no request id repr prints


def test_an_id_escaped_past_unicode_is_no_printed_id() -> None:
    """``'\\U00110000'`` (no code point: ``repr`` writes no such escape) makes the list no list
    of printed ids, so the dump's batch is unknown: it was read as the empty id, and two such
    ids as one request."""
    from forensics.errors import CaptureFormatError
    from forensics.importers.crash_dump import parse_scheduler_output
    from forensics.importers.quoted import quoted_list

    assert quoted_list(r"'\U00110000', 'b']", 0) is None
    assert quoted_list(r"'\U0010ffff', '\ud800', 'b']", 0) == ["\U0010ffff", "\ud800", "b"]
    with pytest.raises(CaptureFormatError, match="not a list of quoted request ids"):
        parse_scheduler_output(r"CachedRequestData(req_ids=['\U00110000', '\U00110001'])")


# ------------------------------ T140f: open_many(on_error="skip") names what it leaves out


def test_open_many_skip_names_the_captures_it_leaves_out(tmp_path: Path) -> None:
    """``open_many(FOLDER, on_error="skip")`` of a readable capture and one whose manifest is
    no JSON reads the first and warns, naming the second and why: it was left out unsaid."""
    import json

    from cases import capture

    from forensics import open_many

    good, bad = capture(tmp_path, 2, "a"), capture(tmp_path, 2, "b")
    (bad / "manifest.json").write_text("{")
    with pytest.warns(UserWarning) as said:
        datasets = open_many(tmp_path, on_error="skip")
    assert set(datasets["embedding"].to_table().column("capture").to_pylist()) == {str(good)}
    lines = [str(w.message) for w in said if "left out" in str(w.message)]
    assert len(lines) == 1 and "1 capture(s)" in lines[0], lines
    assert f"'{bad}': manifest" in lines[0] and "not valid JSON" in lines[0], lines
    json.loads((good / "manifest.json").read_text())  # the good one untouched


def test_two_engines_dumps_and_tracebacks_interleaved_each_take_their_own(
        tmp_path: Path) -> None:
    """Two engines' crash dumps and tracebacks interleaved line by line: each dump takes its
    own exception (they took none, and three more crash events were counted of their
    lines: "5 crash event(s)" of 2)."""
    from forensics.importers import read_source

    data = Path(__file__).resolve().parents[1] / "data" / "vllm_dump_some_placeholder.log"
    one = [line for line in data.read_text().splitlines()
           if line.startswith("(EngineCore pid=196)")]
    two = [line.replace("pid=196", "pid=197").replace("an illegal memory access",
                                                       "a misaligned address")
           for line in one]
    log = tmp_path / "engine.log"
    log.write_text("\n".join(x for pair in zip(one, two, strict=True) for x in pair) + "\n")
    events = read_source(log).events
    assert [(e["kind"], e.get("exception")) for e in events] == [
        ("crash_dump", one[-1].split("] ", 1)[1]), ("crash_dump", two[-1].split("] ", 1)[1])]


# ---------------------------- T140g: characters drawn as a space that are not one escaped

#: Unicode's space separators (category Zs) but U+0020, and the Braille pattern blank
SPACES = [0x00A0, 0x1680, *range(0x2000, 0x200B), 0x202F, 0x205F, 0x3000, 0x2800]


def test_every_space_that_is_not_one_is_escaped() -> None:
    """``a b.capture`` and ``a<U+00A0>b.capture`` (or any other space separator, or the
    Braille blank) print apart in every output: each such character is its escape
    (``terminal``, and ``html``, ``markdown``, ``csv_cell``, ``shell_word`` through it); they
    were written raw, drawn as the space they are not."""
    import sys
    import unicodedata

    from forensics.escaping import csv_cell, html, markdown, shell_word, terminal

    separators = {c for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Zs"}
    assert separators - {0x20} <= set(SPACES)
    for code in SPACES:
        name = f"a{chr(code)}b.capture"
        escape = f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
        for out in (terminal(name), html(name, True), markdown(name, True), csv_cell(name)):
            assert escape in out and chr(code) not in out, (hex(code), out)
        assert chr(code) not in shell_word(name), hex(code)
    assert terminal("a b.capture") == "a b.capture"
