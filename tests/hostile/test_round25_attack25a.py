"""Round 25's held-out attack (attack25a): an engine's start inside a report's traceback, a
worker's lines after its own traceback, a triage row's conclusion read from its error's words."""

from __future__ import annotations

from pathlib import Path
from typing import Any


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
