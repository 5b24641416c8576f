"""Round 20's attack20a (issue 38): what a hostile or careful user found in ``forensics import``
and the commands that read what it wrote.

- T115a: a log in which the engine ran on (probe lines of later steps) after a CUDA error, then
  died of a SIGSEGV, imported as one crash at the first error's step: the later death became
  the first error's ``died`` (and the API server's ``EngineDeadError`` of a later crash its
  ``engine_dead``), so the crash at the later step was counted nowhere.
- T115b: a log holding two crash dumps of one engine, the first with no traceback after it (the
  engine ran on) and the second followed by its exception, said the first dump's requests
  ("4 of 4 spec-decode token(s) -1") raised the second's exception, and the second none.
- T115c: ``forensics findings --request ID`` of a request no record of the capture names said
  "no findings" alone, read as that request's rows judged clean (as T111b's steps were).
- T115d: a probe line naming a negative step (``step=-5``) or rank was imported at the next step
  of the log's order (step 8 after step 7), as if it named none: a step the line does not say;
  ``step=1e3`` was read as step 1, ``step=7.9`` as step 7.
- T115e: one CUDA error, then the API server's ``EngineDeadError`` traceback for each of the
  three requests it failed, imported as three crash events (the first report joined the error,
  each later one counted a crash of its own), and ``known`` said "3 crash event(s)".
- T115f: a crash dump whose batch holds a request id with a ``}`` (a client's ``X-Request-Id``)
  said "0 request(s) scheduled, 0 of 0 spec-decode token(s) -1" of a batch of -1 drafts: the
  brace closed the dumped dict. A dump whose requests' counts do not add up to its
  ``total_num_scheduled_tokens`` says its batch is unknown, and why.
- T115g: CPython's ``Fatal Python error: _enter_buffered_busy: could not acquire lock for
  <_io.BufferedWriter name='<stderr>'> at interpreter shutdown, possibly due to daemon
  threads``, which vLLM's processes print when exiting after a run that went well, imported as a
  ``process_died`` crash: ``known`` said "crash verdict unexplained".
- T115h: a log appended to by a restarted server (vLLM's ``Initializing a V1 LLM engine``
  between), without probe lines, whose second engine died of a SIGSEGV, imported as one crash:
  the second death joined the first engine's CUDA error and was counted nowhere.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from test_round2 import run_cli
from test_round19_attack19b import ENGINE_DEAD_CHAIN as ENGINE_DEAD
from test_round19_attack19b import WORKER_DIED, import_log

from tests.instructions import assert_scales_linearly

ROOT = Path(__file__).resolve().parents[2]
INCIDENT_B = ROOT / "data" / "incident-b-vocab-sentinel.capture"


def probe(step: int) -> str:
    """The embedding probe's line of ``step``."""
    return ("(EngineCore_DP0 pid=4242) SM70-TEMB: rows=1000 input=(4,) dtype=torch.int32 "
            f"min=0 max=7 step={step}\n")


ILLEGAL = ("(EngineCore_DP0 pid=4242) ERROR 12-02 10:40:00 [core.py:1] RuntimeError: CUDA "
           "error: an illegal memory access was encountered\n")


def _events(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str) -> list[
        dict[str, object]]:
    """The events of the capture imported from a log of ``text``."""
    return import_log(capsys, tmp_path, text)[2]


# ------------------------------ T115a: a death after the engine ran on is a crash of its own


def test_a_death_after_later_steps_is_a_crash_of_its_own(capsys: pytest.CaptureFixture[str],
                                                         tmp_path: Path) -> None:
    """A worker's death read after probe lines of later steps than a CUDA error's is its own
    crash, at its own step: the engine ran on after that error."""
    events = _events(capsys, tmp_path, probe(1) + ILLEGAL + probe(2) + probe(3) + WORKER_DIED)
    assert [(e["kind"], e["line"], e["step"]) for e in events] == [
        ("illegal_memory_access", 2, 1), ("process_died", 5, 3)]
    assert "died" not in events[0]


def test_an_engine_dead_after_later_steps_is_a_crash_of_its_own(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The API server's ``EngineDeadError`` read after probe lines of later steps than a CUDA
    error's is not that error's report: it is counted, at its own step."""
    events = _events(capsys, tmp_path, probe(1) + ILLEGAL + probe(2) + ENGINE_DEAD)
    assert [(e["kind"], e["step"]) for e in events] == [("illegal_memory_access", 1),
                                                        ("engine_dead", 2)]
    assert "engine_dead" not in events[0]


def test_a_death_right_after_its_crash_still_joins_it(capsys: pytest.CaptureFixture[str],
                                                      tmp_path: Path) -> None:
    """With no probe line of another step between them (a line of the same step, another
    rank's, is none), the death and the EngineDeadError stay the error's: one crash."""
    events = _events(capsys, tmp_path, probe(1) + ILLEGAL + probe(1) + WORKER_DIED
                     + ENGINE_DEAD)
    assert [(e["kind"], e["step"]) for e in events] == [("illegal_memory_access", 1)]
    assert events[0]["died"] and events[0]["engine_dead"]


# ------------------------------ T115b: a dump's exception is the one after it, not a later one's


DUMP = "(EngineCore_DP0 pid=196) ERROR 12-02 10:46:44 [dump_input.py:72] "
CORE = "(EngineCore_DP0 pid=196) ERROR 12-02 10:46:44 [core.py:1586] "


def dump(batch: str, tag: str = DUMP) -> str:
    """A crash dump's config and scheduler output lines of ``batch`` (``r: [ids]``, ...)."""
    counts = ", ".join(f"{entry.split(':')[0]}: 5" for entry in batch.split("], "))
    return (f"{tag}Dumping input data for V1 LLM engine (v0.33.0) with config: model='m', \n"
            f"{tag}Dumping scheduler output for model execution: SchedulerOutput("
            f"num_scheduled_tokens={{{counts}}}, scheduled_spec_decode_tokens={{{batch}}}, "
            "total_num_scheduled_tokens=5)\n")


def chain(exception: str, tag: str = CORE) -> str:
    """An exception's traceback logged by vLLM's engine core."""
    return (f"{tag}Traceback (most recent call last):\n"
            f'{tag}  File "/x/vllm/v1/core/sched/async_scheduler.py", line 63, in f\n'
            f"{tag}    assert request.num_output_placeholders >= 0\n"
            f"{tag}{exception}\n")


def test_a_dump_is_not_given_the_exception_of_a_later_dump(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The exception after the second of two dumps of one engine is the second's: the first,
    with no traceback after it, says no exception."""
    events = _events(capsys, tmp_path, dump("r1: [-1, -1, -1, -1]")
                     + "(APIServer pid=1) INFO 12-02 10:47:00 [loggers.py:271] Running: 1 reqs\n"
                     + dump("r2: [1, 2, 3, 4]") + chain("AssertionError: boom"))
    assert [(e["kind"], e["line"], e.get("exception")) for e in events] == [
        ("crash_dump", 2, None), ("crash_dump", 5, "AssertionError: boom")]
    assert "AssertionError" not in str(events[0]["message"])
    assert "0 of 4 spec-decode token(s) -1; " in str(events[1]["message"])


def test_dumps_of_two_engines_keep_their_own_exceptions(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Two engines' dumps, then their tracebacks in the same order: each dump holds its own
    engine's exception (a dump of another process between them blocks none)."""
    other, other_core = (DUMP.replace("DP0 pid=196", "DP1 pid=197"),
                         CORE.replace("DP0 pid=196", "DP1 pid=197"))
    events = _events(capsys, tmp_path, dump("r1: [-1, -1]") + dump("r2: [1, 2]", other)
                     + chain("AssertionError: zero", CORE)
                     + chain("AssertionError: one", other_core))
    assert [(e["line"], str(e.get("exception", "")).rsplit(" ", 1)[-1]) for e in events] == [
        (2, "zero"), (4, "one")]


# ------------------------------ T115c: a request the capture never names is not said clean


def test_findings_of_a_request_no_record_names_says_so(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``--request`` naming no request of the capture (its records name req-0 and req-1) says
    that nothing of it was judged, under "no findings"; one it names says no such line."""
    code, out, err = run_cli(capsys, "findings", INCIDENT_B, "--request", "req-9\x1b[2J",
                             "--site", "embedding", "--steps", "3:5")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "no findings"
    assert lines[1].startswith("the capture holds no record of site embedding at steps 3..5 "
                               "naming request 'req-9")
    assert lines[1].endswith("name their requests): nothing of it was judged")
    assert "\x1b" not in out
    code, out, err = run_cli(capsys, "findings", INCIDENT_B, "--request", "req-0",
                             "--site", "embedding", "--steps", "3:5")
    assert code == 0, err
    assert out.splitlines() == ["no findings"]


# ------------------------------ T115d: a probe line's negative step is refused, not replaced


@pytest.mark.parametrize(("named", "said"), [
    ("step=-5", "'step' must be a non-negative int64, got -5"),
    ("rank=-1 step=8", "'rank' must be a rank from 0 to 999999"),
    ("step=1e3", "its step 'step=1e3' is not an integer"),
    ("step=7.9", "its step 'step=7.9' is not an integer"),
    ("rank=1x step=8", "its rank 'rank=1x' is not an integer")])
def test_a_probe_line_naming_a_negative_step_or_rank_is_refused(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, named: str, said: str) -> None:
    """``step=-5`` (or ``rank=-1``, ``step=1e3``, ``step=7.9``) on a probe line is refused with
    exit 2 naming the line and the field; it was read as naming no step and placed at the next
    one (step 8), or cut to its first digits (step 1, step 7)."""
    line = "SM70-TEMB: rows=100 input=(4,) dtype=torch.int64 min=1 max=2 "
    (tmp_path / "engine.log").write_text(f"{line}step=7\n{line}{named}\n")
    code, out, err = run_cli(capsys, "import", tmp_path / "engine.log", "-o",
                             tmp_path / "engine.capture")
    assert code == 2, out
    assert len(err.strip().splitlines()) == 1
    assert "'engine.log' (line 2)" in err and said in err
    assert not (tmp_path / "engine.capture").exists()


# ------------------------------ T115e: one EngineDeadError per failed request is one crash


def test_the_engine_dead_reports_of_every_failed_request_are_one_crash(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Three ``EngineDeadError`` tracebacks (one per request the API server failed) after a
    CUDA error are that error's: one crash event, and ``known`` counts one."""
    events = _events(capsys, tmp_path, probe(1) + ILLEGAL + ENGINE_DEAD * 3)
    assert [(e["kind"], e["line"]) for e in events] == [("illegal_memory_access", 2)]
    assert events[0]["engine_dead"]["line"] == 6  # type: ignore[index]
    code, out, err = run_cli(capsys, "known", tmp_path / "engine.capture")
    assert code in (0, 1), err
    assert "1 crash event(s)" in " ".join(out.split())


def test_engine_dead_reports_without_a_crash_before_are_one_crash(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The API server's log alone (the engine's crash in another log): its ``EngineDeadError``
    tracebacks, one per failed request, are one crash event."""
    events = _events(capsys, tmp_path, probe(1) + ENGINE_DEAD * 3)
    assert [(e["kind"], e["line"]) for e in events] == [("engine_dead", 5)]


# ------------------------------ T115f: a brace in a request id does not empty a dump's batch


@pytest.mark.parametrize("rid", ["chatcmpl-x}y", "chatcmpl-{z}", "a, b: 3}", "q}, r=1"])
def test_a_request_id_holding_a_brace_keeps_the_dumps_batch(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, rid: str) -> None:
    """vLLM prints a dict's keys unquoted: a client's request id holding ``}`` (or ``, `` and
    ``: ``) is read whole, and the dump says both requests and their drafts."""
    text = (f"{DUMP}Dumping scheduler output for model execution: SchedulerOutput("
            f"num_scheduled_tokens={{{rid}: 5, r2: 5}}, total_num_scheduled_tokens=10, "
            f"scheduled_spec_decode_tokens={{{rid}: [-1, -1, -1, -1], r2: [-1, -1, -1, -1]}}, "
            "scheduled_encoder_inputs={})\n" + chain("AssertionError"))
    events = _events(capsys, tmp_path, text)
    if rid == "q}, r=1":  # a close and a next field inside an id: where the dict ends is
        # ambiguous, and its counts do not add up to the total: the batch is unknown
        assert events[0]["scheduled_spec_decode_tokens"] == "unknown"
        assert "requests scheduled and spec-decode tokens unknown (the 0 request(s) read" in \
            str(events[0]["message"])
        return
    assert events[0]["num_scheduled_tokens"] == {rid: 5, "r2": 5}
    assert events[0]["scheduled_spec_decode_tokens"] == {rid: [-1] * 4, "r2": [-1] * 4}
    assert str(events[0]["message"]).startswith(
        "vLLM crash dump: 2 request(s) scheduled, 8 of 8 spec-decode token(s) -1")


def test_a_dumped_dict_of_hostile_keys_is_read_in_linear_time(tmp_path: Path) -> None:
    """Keys holding many ``: `` before a value that does not parse, braces and unclosed lists:
    4 times the text costs under 6 times the instructions."""
    assert_scales_linearly(__file__, "keys", 1000, tmp_path)


def make_work(case: str, scale: int, scratch: Path) -> Callable[[], object]:
    """Parsing dumped dicts of hostile keys of ``scale`` (run by :mod:`tests.instructions`)."""
    from forensics.importers.crash_dump import parse_scheduler_output

    def work() -> None:
        for body in ("a: 5x" * 4 * scale, "}: 5}" * 4 * scale, "x: [1]}" * 3 * scale,
                     "k: [" + "1, " * 6 * scale, "r}, " * 5 * scale + "r: 1"):
            parse_scheduler_output(f"S(num_scheduled_tokens={{{body}}}, "
                                   f"scheduled_spec_decode_tokens={{{body}}})")
    return work


# ------------------------------ T115g: a fatal error at interpreter shutdown is no crash


SHUTDOWN = (
    "INFO 05-09 16:29:13 [multiproc_worker_utils.py:124] Killing local vLLM worker processes\n"
    "Fatal Python error: _enter_buffered_busy: could not acquire lock for <_io.BufferedWriter "
    "name='<stderr>'> at interpreter shutdown, possibly due to daemon threads\n"
    "Python runtime state: finalizing (tstate=0x00000000009c89d0)\n\n"
    "Current thread 0x00007faec6b2c740 (most recent call first):\n  <no Python frame>\n")


def test_a_fatal_error_at_interpreter_shutdown_is_no_crash(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The lock error a process prints while exiting is no engine's death: no event, and
    ``known`` says no crash; a segfault's fatal error stays a crash."""
    assert _events(capsys, tmp_path, probe(1) + SHUTDOWN) == []
    code, out, err = run_cli(capsys, "known", tmp_path / "engine.capture")
    assert code in (0, 1), err
    assert "crash verdict no crash" in " ".join(out.split())
    events = _events(capsys, tmp_path, probe(1) + "Fatal Python error: Segmentation fault\n")
    assert [e["kind"] for e in events] == ["process_died"]


# ------------------------------ T115h: a death after an engine's restart is a crash of its own


START = ("(EngineCore_DP0 pid=99) INFO 12-02 11:00:00 [core.py:140] Initializing a V1 LLM engine "
         "(v0.33.0) with config: model='m'\n")


def test_a_death_after_an_engines_restart_is_a_crash_of_its_own(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A worker's death (or an EngineDeadError) read after vLLM's line at an engine's start is
    not the crash before that start: it is counted, once, and the first crash keeps its own
    death report."""
    events = _events(capsys, tmp_path, ILLEGAL + WORKER_DIED + START + WORKER_DIED)
    assert [(e["kind"], e["line"]) for e in events] == [("illegal_memory_access", 1),
                                                       ("process_died", 4)]
    assert events[0]["died"]["line"] == 2  # type: ignore[index]
    events = _events(capsys, tmp_path, ILLEGAL + START + ENGINE_DEAD)
    assert [(e["kind"], e["line"]) for e in events] == [("illegal_memory_access", 1),
                                                       ("engine_dead", 6)]
    prompt = ("INFO 12-02 11:00:00 [logger.py:1] Received request r1: prompt: 'Initializing a "
              "V1 LLM engine (v9)'\n")
    events = _events(capsys, tmp_path, ILLEGAL + prompt + WORKER_DIED)
    assert [e["kind"] for e in events] == ["illegal_memory_access"]  # a prompt starts nothing
