"""Round 20's fix20c (issue 38): what attack20a and attack20c found and left open.

- T120a: a bare ``EngineDeadError`` log line (no traceback) right after a crash line was a
  second crash event: ``import`` said "2 events" and ``known`` "2 crash event(s)" of one death.
- T120b: a second report of one crash's death (two ``Worker proc ... died unexpectedly`` lines
  an hour apart) was dropped: "1 events", and the second line appeared nowhere.
- T120c: dump DP0, dump DP1, traceback DP1, traceback DP0: DP0's dump got no exception and
  DP0's traceback stayed an ``engine_exception`` event of its own.
- T120d: ``simulate vocab-sentinel --steps 1`` printed "wrote ...: scenario vocab-sentinel, 1
  steps, ..." without saying that no fault fired (only the manifest's notes said so).
- T120e: ``$RANK`` was read with ``int()``: ``RANK=٣`` (an Arabic-Indic three) was rank 3.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from test_round2 import run_cli
from test_round19_attack19b import import_log

from forensics.probe import rank as probe_rank
from tests.instructions import assert_scales_linearly

STEP1 = ("(EngineCore_DP0 pid=4242) SM70-TEMB: rows=1000 input=(4,) dtype=torch.int32 "
         "min=0 max=7 step=1\n")
ILLEGAL = ("(EngineCore_DP0 pid=4242) ERROR 12-02 10:40:00 [core.py:1] RuntimeError: CUDA "
           "error: an illegal memory access was encountered\n")
DEAD_LINE = ("(APIServer pid=1) ERROR 12-02 10:46:45 [async_llm.py:480] "
             "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See "
             "stack trace (above) for the root cause.\n")
START = ("(EngineCore_DP0 pid=99) INFO 12-02 11:00:00 [core.py:140] Initializing a V1 LLM engine "
         "(v0.33.0) with config: model='m'\n")


def died(worker: int, hour: int) -> str:
    """vLLM's multiproc executor's report of worker ``worker``'s death at ``hour``."""
    return (f"(EngineCore_DP0 pid=4242) ERROR 12-02 {hour:02d}:46:44 [multiproc_executor.py:381] "
            f"Worker proc VllmWorker-{worker} died unexpectedly (exit code: -11)\n")


def _import(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str) -> tuple[
        str, list[dict[str, object]]]:
    """``import``'s output line and the events of the capture imported from a log of ``text``."""
    said, _, events = import_log(capsys, tmp_path, text)
    return said, events


# ------------------------------ T120a: a bare EngineDeadError line joins the crash before it


def test_an_engine_dead_line_after_a_crash_is_that_crashs_report(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A CUDA error, then the API server's ``EngineDeadError`` on a line of its own: one crash
    event holding the report (its ``engine_dead``), and ``known`` counts one."""
    said, events = _import(capsys, tmp_path, STEP1 + ILLEGAL + DEAD_LINE)
    assert "1 events" in said
    assert [(e["kind"], e["line"]) for e in events] == [("illegal_memory_access", 2)]
    assert events[0]["engine_dead"]["line"] == 3  # type: ignore[index]
    code, out, err = run_cli(capsys, "known", tmp_path / "engine.capture")
    assert code in (0, 1), err
    assert "1 crash event(s)" in " ".join(out.split())


def test_an_engine_dead_line_after_later_steps_or_a_restart_is_its_own_crash(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Read after a probe line of a later step, or after an engine's start, the same line is a
    crash of its own (T115a, T115h)."""
    later = STEP1.replace("step=1", "step=2")
    for between, step in ((later, 2), (START, 1)):
        _, events = _import(capsys, tmp_path, STEP1 + ILLEGAL + between + DEAD_LINE)
        assert [(e["kind"], e["step"]) for e in events] == [("illegal_memory_access", 1),
                                                            ("engine_dead", step)]
        assert "engine_dead" not in events[0]


# ------------------------------ T120b: every report of one crash's death is kept


def test_a_second_death_report_of_one_crash_is_kept(capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Path) -> None:
    """Two workers' deaths an hour apart after one CUDA error: one crash, whose ``died`` counts
    two reports and keeps the second's line and message."""
    said, events = _import(capsys, tmp_path, STEP1 + ILLEGAL + died(0, 10) + died(1, 11))
    assert "1 events" in said
    report = events[0]["died"]
    assert isinstance(report, dict)
    assert (report["line"], report["count"]) == (3, 2)
    assert [(r["line"], "VllmWorker-1" in r["message"]) for r in report["more"]] == [(4, True)]


def test_many_reports_are_counted_and_a_bounded_few_kept(capsys: pytest.CaptureFixture[str],
                                                        tmp_path: Path) -> None:
    """A thousand ``EngineDeadError`` lines (one per failed request) after one crash: all
    counted, 16 later ones listed."""
    _, events = _import(capsys, tmp_path, STEP1 + ILLEGAL + DEAD_LINE * 1000)
    report = events[0]["engine_dead"]
    assert isinstance(report, dict)
    assert report["count"] == 1000 and len(report["more"]) == 16
    assert report["more"][-1]["line"] == 19


# ------------------------------ T120e: $RANK is read in ASCII digits only


@pytest.mark.parametrize("raw", ["٣", "３", "+3", "1_0", "3.0", "-1"])
def test_a_rank_not_written_in_ascii_digits_is_no_rank(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, raw: str) -> None:
    """``$RANK`` in another script's digits, with a sign or an underscore: rank 0 and one log
    line saying so (the probe raises nothing into the engine)."""
    monkeypatch.setenv("RANK", raw)
    with caplog.at_level(logging.WARNING, logger="forensics.probe"):
        assert probe_rank.env_rank() == 0
    assert sum("is not a rank" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize(("raw", "rank"), [("3", 3), (" 7 ", 7), ("", 0), ("0012", 12)])
def test_a_rank_in_ascii_digits_is_read(monkeypatch: pytest.MonkeyPatch, raw: str,
                                        rank: int) -> None:
    """ASCII digits (around blanks, or none: rank 0) are the rank."""
    monkeypatch.setenv("RANK", raw)
    assert probe_rank.env_rank() == rank


def test_a_redacted_capture_keeps_the_reports_public_text(capsys: pytest.CaptureFixture[str],
                                                          tmp_path: Path) -> None:
    """``redact`` keeps every report's line, count and public error text (no pid, path or
    address), as it keeps an event's own message."""
    from forensics.share.redaction import redact

    text = STEP1 + ILLEGAL + died(0, 10) + died(1, 11).replace(
        "(exit code: -11)", "(exit code: -11) at /home/alice/run.sh on 10.1.2.3")
    _import(capsys, tmp_path, text)
    out = redact(tmp_path / "engine.capture", tmp_path / "out.capture").path
    report = json.loads(run_cli(capsys, "inspect", out, "--json")[1])["events"][0]["died"]
    assert (report["line"], report["count"], report["more"][0]["line"]) == (3, 2, 4)
    assert "died unexpectedly (exit code: -11) at <path> on <ip>" in report["more"][0]["message"]
    assert not any(private in json.dumps(report) for private in ("alice", "10.1.2.3", "4242"))


# ------------------------------ T120d: simulate says on its line that no fault fired


@pytest.mark.parametrize("scenario", ["vocab-sentinel", "misattribution"])
def test_simulate_says_no_fault_fired_on_its_line(capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path, scenario: str) -> None:
    """A run too short for its random faults says so on the line it prints, not only in the
    manifest's notes; a run whose faults fired, or a scenario of none, says nothing of it."""
    out = tmp_path / "s.capture"
    code, said, err = run_cli(capsys, "simulate", scenario, "--steps", "1", "-o", out)
    assert code == 0, err
    assert "1 steps" in said and "no fault fired in its 1 step (its faults are drawn at " \
        "random: give more --steps or another --seed)" in said
    for name, steps in ((scenario, "200"), ("clean", "1")):
        code, said, err = run_cli(capsys, "simulate", name, "--steps", steps, "-o", out,
                                  "--force")
        assert code == 0 and "no fault fired" not in said, err


# ------------------------------ T120c: two engines' dumps keep their own tracebacks, any order


DUMP = "(EngineCore_DP0 pid=196) ERROR 12-02 10:46:44 [dump_input.py:72] "
CORE = "(EngineCore_DP0 pid=196) ERROR 12-02 10:46:44 [core.py:1586] "
OTHER_DUMP, OTHER_CORE = (DUMP.replace("DP0 pid=196", "DP1 pid=197"),
                          CORE.replace("DP0 pid=196", "DP1 pid=197"))


def dump(drafts: str, tag: str) -> str:
    """A crash dump's config and scheduler output lines of request r's ``drafts``."""
    return (f"{tag}Dumping input data for V1 LLM engine (v0.33.0) with config: model='m', \n"
            f"{tag}Dumping scheduler output for model execution: SchedulerOutput("
            f"num_scheduled_tokens={{r: 5}}, scheduled_spec_decode_tokens={{r: [{drafts}]}}, "
            "total_num_scheduled_tokens=5)\n")


def chain(exception: str, tag: str) -> str:
    """An exception's traceback logged by vLLM's engine core."""
    return (f"{tag}Traceback (most recent call last):\n"
            f'{tag}  File "/x/vllm/v1/core/sched/async_scheduler.py", line 63, in f\n'
            f"{tag}    assert request.num_output_placeholders >= 0\n"
            f"{tag}{exception}\n")


def test_dumps_of_two_engines_keep_their_tracebacks_in_the_opposite_order(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Dump DP0, dump DP1, traceback DP1, traceback DP0: each dump holds its own engine's
    exception, and no traceback stays an event of its own."""
    _, events = _import(capsys, tmp_path, dump("-1, -1", DUMP) + dump("1, 2", OTHER_DUMP)
                        + chain("AssertionError: one", OTHER_CORE)
                        + chain("AssertionError: zero", CORE))
    assert [(e["kind"], e["line"], e.get("exception")) for e in events] == [
        ("crash_dump", 2, "AssertionError: zero"), ("crash_dump", 4, "AssertionError: one")]


def test_many_engines_dumps_are_matched_in_linear_time(tmp_path: Path) -> None:
    """Dumps of many engines, their tracebacks in the opposite order: 4 times the engines cost
    under the limit of :mod:`tests.instructions` times the instructions."""
    assert_scales_linearly(__file__, "engines", 100, tmp_path)


def make_work(case: str, scale: int, scratch: Path) -> Callable[[], object]:
    """Importing a log of ``scale`` engines' dumps, then their tracebacks in reverse order
    (run by :mod:`tests.instructions`)."""
    from forensics.importers import crash_dump

    tags = [DUMP.replace("DP0 pid=196", f"DP{k} pid={k}") for k in range(scale)]
    log = scratch / f"{case}-{scale}.log"
    log.write_text("".join(dump("-1", tag) for tag in tags) + "".join(
        chain(f"AssertionError: {k}", tag.replace("dump_input.py:72", "core.py:1"))
        for k, tag in reversed(list(enumerate(tags)))))

    def work() -> None:
        events = crash_dump.read(log).events
        assert [e.get("exception") for e in events] == [
            f"AssertionError: {k}" for k in range(scale)]
    return work


def test_a_report_read_from_a_cut_line_says_so(capsys: pytest.CaptureFixture[str],
                                               tmp_path: Path) -> None:
    """A report on a line longer than the log's bound keeps that it was read only in part, as
    a crash event of such a line does."""
    _, events = _import(capsys, tmp_path, STEP1 + ILLEGAL + DEAD_LINE.rstrip("\n")
                        + " x" * 40_000 + "\n")
    assert "longer than 65536 bytes" in events[0]["engine_dead"]["cut"]  # type: ignore[index]
