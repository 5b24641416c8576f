"""Round 25's held-out attack (attack25a): an engine's start inside a report's traceback, a
worker's lines after its own traceback, a triage row's conclusion read from its error's words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_round14_fix14 import plugin_captures  # noqa: F401  (a fixture)


def _prefixed(tag: str, lines: list[str], level: str = "ERROR 12-02 10:46:44 [x.py:9] "
              ) -> list[str]:
    """``lines`` as the process ``tag`` logs them, each with its prefix."""
    return [f"({tag}) {level}{line}" for line in lines]


def _traceback(exception: str) -> list[str]:
    """A traceback of one frame ending in ``exception``."""
    return ["Traceback (most recent call last):", '  File "/v/vllm/a.py", line 9, in run',
            "    run()", exception]


#: the API server's report of the engine's death, each line with its prefix
REPORT = _prefixed("APIServer pid=1", _traceback(
    "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue."))
#: the engine core's line at its start (a restarted engine)
START = ("(EngineCore_DP0 pid=7) INFO 12-02 10:46:50 [core.py:1] Initializing a V1 LLM engine "
         "(v0.33.0) with config: model='m'")


def _crash(pid: int, exception: str) -> list[str]:
    """A worker's traceback, each line with its prefix."""
    return _prefixed(f"Worker_TP0 pid={pid}", _traceback(exception))


def _events(tmp_path: Path, lines: list[str]) -> list[dict[str, Any]]:
    """The events ``import`` reads of a log of ``lines``."""
    from forensics.importers import read_source

    log = tmp_path / "engine.log"
    log.write_text("\n".join(lines) + "\n")
    return read_source(log).events


# ------ T158a: an engine's start inside a report's traceback leaves no later crash unreported


def test_an_engine_start_inside_a_report_leaves_a_later_crash_its_report(
        tmp_path: Path) -> None:
    """A worker's crash, the API server's report of it with the restarted engine's first line
    between its lines, then a second crash and its report: two crash events, each with its
    report. The second report stood as a crash of its own ('3 crash event(s)' of 2): the
    first report's event, removed as it joined its crash, had been marked closed by the
    engine's start, and the second crash's event took its freed id."""
    lines = [*_crash(100, "RuntimeError: first"), *REPORT[:2], START, *REPORT[2:],
             *_crash(101, "RuntimeError: second"), *REPORT]
    events = _events(tmp_path, lines)
    assert [(e["kind"], e.get("exception"), "engine_dead" in e) for e in events] == [
        ("engine_exception", "RuntimeError: first", True),
        ("engine_exception", "RuntimeError: second", True)], events


def test_an_engine_start_inside_a_report_closes_the_crash_it_reports(tmp_path: Path) -> None:
    """The engine that started while the first crash's report was written ran on: a report of
    a death after it, with no crash between, is not that first crash's (as when the start is
    written after the report); it joined the first crash, its death counted twice."""
    after = _events(tmp_path, [*_crash(100, "RuntimeError: first"), *REPORT, START, *REPORT])
    inside = _events(tmp_path, [*_crash(100, "RuntimeError: first"), *REPORT[:2], START,
                                *REPORT[2:], *REPORT])
    assert [e["kind"] for e in after] == ["engine_exception", "engine_dead"], after
    assert [(e["kind"], e["line"]) for e in inside] == [(e["kind"], e["line"]) for e in after]


# ------ T158b: a worker's probe lines and its device's assert after its own traceback are read

#: a worker's probe line (the embedding's summary) and its device's assert, as it prints them
PROBE = "SM70-TEMB: rows=1000 input=(4,) dtype=torch.int32 min=-1 max=7 step=40 rank=0"
ASSERT = ("/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1515: indexSelectSmallIndex: block: "
          "[0,0,0], thread: [0,0,0] Assertion `srcIndex < srcSelectDimSize` failed.")


def _read(tmp_path: Path, lines: list[str]) -> tuple[list[tuple[str, int, Any]], int]:
    """The events (kind, line, exception) and the number of records ``import`` reads of a log
    of ``lines``."""
    from forensics.importers import read_source

    log = tmp_path / "engine.log"
    log.write_text("\n".join(lines) + "\n")
    imported = read_source(log)
    return ([(e["kind"], e["line"], e.get("exception")) for e in imported.events],
            len(imported.records))


def test_a_worker_s_lines_after_its_own_traceback_are_read(tmp_path: Path) -> None:
    """A worker's traceback on its stderr (each line with its process's prefix), then its probe
    line and its device's assert: the traceback's event, a record and the assert's event, as of
    the same lines without a prefix. Both were read as further lines of the exception's
    message: the record and the crash's assert gone (1 event, 0 records)."""
    lines = [*_traceback("ValueError: printed and caught"), PROBE, ASSERT]
    plain = _read(tmp_path, lines)
    assert [kind for kind, _, _ in plain[0]] == ["engine_exception", "cuda_assert"]
    assert plain[1] == 1
    assert _read(tmp_path, _prefixed("Worker_TP0 pid=100", lines, level="")) == plain
    # a probe line between its frames is a record, its exception still the chain's
    inside = [*lines[:2], PROBE, *lines[2:]]
    assert _read(tmp_path, _prefixed("Worker_TP0 pid=100", inside, level="")) == (
        [(kind, line + (line > 2), exception) for kind, line, exception in plain[0]], 2)
    # a chain of no prefix still ends at another process's probe line, as at any of its lines
    tagged = _prefixed("Worker_TP0 pid=100", [PROBE], level="")
    assert _events(tmp_path, [*lines[:4], *tagged, "a plain line"])[0]["last_line"] == 4


def test_a_dropped_chain_s_worker_s_probe_lines_are_read(tmp_path: Path) -> None:
    """300 workers' tracebacks interleaved line by line (more than the 256 chains kept open),
    then the first worker's probe lines: three records. A dropped chain's later lines were read
    as no one's, its worker's records among them."""
    tags = [f"Worker_TP{i} pid={1000 + i}" for i in range(300)]
    chains = [_prefixed(tag, _traceback(f"RuntimeError: boom {i}"), level="")
              for i, tag in enumerate(tags)]
    lines = [chain[j] for j in range(4) for chain in chains]
    lines += _prefixed(tags[0], [PROBE.replace("step=40", f"step={s}") for s in (40, 41, 42)],
                       level="")
    events, records = _read(tmp_path, lines)
    assert (len(events), records) == (300, 3)


# ------ T158c: a triage row's conclusion is not read from the words its error quotes


def test_a_capture_s_name_cannot_make_an_unreadable_capture_empty(tmp_path: Path) -> None:
    """``triage``: captures whose manifest is not JSON, named so that their error (which quotes
    the path) holds the words of a capture of no records, or of only sites not known: each is
    ``unreadable``. They were 'empty' ('1 capture: capture of no records') and 'not judged'."""
    from forensics.fleet.piece import NO_RECORDS, ONLY_NOT_KNOWN
    from forensics.fleet.triage import triage

    names = [f"it {NO_RECORDS}.capture", f"it {ONLY_NOT_KNOWN}.capture", "plain.capture"]
    for name in names:
        (tmp_path / name).mkdir()
        (tmp_path / name / "manifest.json").write_text('{"format": 1, "model": ')
    rows = triage([tmp_path], workers=1).rows
    assert {row["name"]: row["conclusion"] for row in rows} == dict.fromkeys(names,
                                                                           "unreadable"), rows


def test_a_capture_s_name_cannot_add_a_reason_to_its_group_s_title(
        plugin_captures: dict[str, Path], tmp_path: Path) -> None:  # noqa: F811
    """``triage``: a capture holding only records of a site not known, named after the words
    of files cut short: its group's title names the sites not known alone. It said "records
    not judged (sites not known to this install, files cut short)", of no file cut short."""
    import shutil

    from forensics.fleet.output import flat_rows
    from forensics.fleet.triage import triage
    from forensics.store.paths import CUT_SHORT

    capture = Path(shutil.copytree(plugin_captures["only"], tmp_path / f"{CUT_SHORT}.capture"))
    (flat,) = flat_rows(triage([capture], workers=1))
    assert flat["conclusion"] == "not judged", flat
    assert flat["group"].endswith("records not judged (sites not known to this install)"), flat


# ------ T158d: an event's counts of the reports of a death past int64 are no internal error


def test_inspect_counts_no_report_past_int64(tmp_path: Path) -> None:
    """``inspect``: an event whose `engine_dead` and `died` each claim 4,300 digits of lines
    (each one Python can print) ended the command in an internal error (their sum, 4,301
    digits, cannot be printed: a ValueError); a count that is no non-negative int64 is one
    line, as a count that is no integer was."""
    from forensics.commands.inspect import render
    from forensics.store.reader import load

    capture = tmp_path / "c.capture"
    capture.mkdir()
    (capture / "manifest.json").write_text('{"format": 1}')
    many = "9" * 4300
    (capture / "events-w0.jsonl").write_text(
        '{"kind": "engine_exception", "step": 3, "rank": 0, "message": "boom", '
        f'"engine_dead": {{"line": 1, "count": {many}}}, "died": {{"line": 2, "count": {many}}}}}'
        '\n')
    text = render(load(capture).summary())
    assert "boom [2 lines report a death (lines, not deaths)]" in text, text


# ------ T158e: the prefixes of dropped chains do not hold the log in memory


def test_dropped_chains_prefixes_hold_no_copy_of_the_log(
        tmp_path: Path, monkeypatch: Any) -> None:
    """``import``: a log of 400 tracebacks of 400 prefixes of 50,000 characters each (20 MB),
    interleaved, the chains kept open 2 (:data:`MAX_PAUSED` made small): its peak is not the
    log's size. Each dropped chain's prefix was kept whole to tell its later lines by (about
    the log's size in memory: 1 GiB of a 1 GiB log); it keeps 16 bytes of each."""
    import tracemalloc

    from forensics.importers import read_source, tracebacks

    monkeypatch.setattr(tracebacks, "MAX_PAUSED", 2)
    log = tmp_path / "engine.log"
    with log.open("w") as out:
        for i in range(400):
            out.write(f"({i:08d}{'A' * 50_000}) ERROR 12-02 10:46:44 [x.py:9] "
                      "Traceback (most recent call last):\n")
    tracemalloc.start()
    try:
        events = read_source(log).events
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(events) == 400
    assert peak < 8_000_000, peak  # 23 MB before; 3 MB
