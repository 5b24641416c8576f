"""Round 24's held-out attack (attack24d): the kernel worker's ok answers, tracebacks of plain
stderr interleaved with a worker's."""

from __future__ import annotations

from pathlib import Path

import pytest

# ------------- T154a: an ok answer whose outputs file cannot be read is no error of vLLM's

OK_ANSWER_WORKER = Path(__file__).with_name("ok_answer_worker.py")


@pytest.mark.parametrize(("named", "text"), [("asked", None), ("asked", "not a zip"),
                                             ("/nonexistent.npz", None), ("/etc/hostname", None),
                                             ("/", None)])
def test_an_ok_answer_whose_outputs_cannot_be_read_is_an_error_no_value_explains(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, named: str, text: str | None) -> None:
    """``replay --variant vllm``: a V2 kernel worker's ``ok`` answer naming an outputs file
    that is missing, no ``.npz``, or not the one its request gave made the record 'error:
    FileNotFoundError: ...' (a ValueError, an IsADirectoryError) as if vLLM raised it; it is an
    error no value explains, naming the file's fault, and the records after it run on."""
    from test_round3_caps import replayed_with_worker

    monkeypatch.setenv("FORENSICS_TEST_OK_OUTPUTS", named)
    if text is not None:
        monkeypatch.setenv("FORENSICS_TEST_OK_BYTES", text)
    rows = replayed_with_worker(tmp_path, monkeypatch, OK_ANSWER_WORKER)
    assert rows["status"].tolist() == ["index_error", "error", "index_error"], rows
    message = rows["message"].tolist()[1]
    assert message.startswith("the Triton interpreter's process answered ok, but the outputs "
                              "file it named could not be read ("), message
    assert message.endswith("): not explained by the values"), message


# ------ T154b: a plain-stderr traceback interleaved with a worker's prefixed one keeps its lines

#: a traceback as a process writes it to stderr (no vLLM prefix)
PLAIN = ["Traceback (most recent call last):",
         '  File "/v/vllm/v1/worker/gpu_worker.py", line 9, in run',
         "    self.model_runner.execute_model()",
         "RuntimeError: the plain process's crash"]
#: a tensor-parallel worker's traceback as vLLM logs it, each line with the worker's prefix
WORKER = [f"(Worker_TP0 pid=100) ERROR 12-02 10:46:44 [multiproc.py:9] {line}" for line in
          ["Traceback (most recent call last):",
           '  File "/v/vllm/v1/worker/gpu_model_runner.py", line 3575, in execute_model',
           "    self.prepare_inputs_event.synchronize()",
           "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"]]


def _crashes(tmp_path: Path, lines: list[str]) -> list[tuple[object, ...]]:
    """The events ``import`` reads of a log of ``lines``: (kind, exception, location), sorted."""
    from forensics.importers import read_source

    log = tmp_path / "engine.log"
    log.write_text("\n".join(lines) + "\n")
    return sorted(((e["kind"], e.get("exception"), e.get("location"))
                  for e in read_source(log).events), key=str)


def test_a_plain_traceback_interleaved_with_a_prefixed_one_keeps_its_exception(
        tmp_path: Path) -> None:
    """A process's plain stderr traceback and a worker's prefixed one, interleaved line by line:
    two crash events, each with its exception and frame, as written one after the other. The
    plain chain ended at the worker's first line: an engine_exception of no exception nor
    frame, its exception line read as no chain's."""
    apart = _crashes(tmp_path, [*PLAIN, *WORKER])
    assert [(kind, exception) for kind, exception, _ in apart] == [
        ("engine_exception", PLAIN[-1]), ("illegal_memory_access", WORKER[-1].split("] ")[1])]
    for first, second in ((PLAIN, WORKER), (WORKER, PLAIN)):
        mixed = [line for pair in zip(first, second, strict=True) for line in pair]
        assert _crashes(tmp_path, mixed) == apart, mixed
    # the plain chain's exception read, a prefixed line after it ends it as before
    assert _crashes(tmp_path, [*PLAIN, WORKER[0], *PLAIN]) == _crashes(
        tmp_path, [*PLAIN, *PLAIN, WORKER[0]])


# ------- T154c: a traceback dropped from the paused chains says so, its later lines no crash


def test_more_interleaved_tracebacks_than_are_kept_open_are_one_crash_each(
        tmp_path: Path) -> None:
    """300 workers' tracebacks interleaved line by line (more than the 256 chains kept open):
    300 crash events, one per worker; those dropped say their later lines were not read. Each
    dropped chain's later lines were read as no chain's, its exception line a crash event of
    its own: 301 events of 300 crashes, 45 of them of no exception."""
    from forensics.importers import read_source
    from forensics.importers.tracebacks import MAX_PAUSED

    lines = [WORKER[i].replace("TP0 pid=100", f"TP{r} pid={1000 + r}")
             for i in range(len(WORKER)) for r in range(300)]
    log = tmp_path / "engine.log"
    log.write_text("\n".join(lines) + "\n")
    events = read_source(log).events
    assert len(events) == 300 and len({e["first_line"] for e in events}) == 300, len(events)
    read = [e for e in events if e.get("exception")]
    assert len(read) == MAX_PAUSED and all(e["kind"] == "illegal_memory_access" for e in read)
    dropped = [e for e in events if not e.get("exception")]
    assert len(dropped) == 300 - MAX_PAUSED
    assert all(e["message"].endswith(
        f"(its lines after line {e['first_line']} were not read: more than {MAX_PAUSED} other "
        "tracebacks were open at once)") for e in dropped), dropped[0]


# -------- T154d: a kernels replay worker's line that is no answer is said so, never a crash

#: a stand-in for the kernel sanitizer's replay worker (no vLLM): ready, then each launch
#: replayed with nothing found, a launch of step 1 answered with the line ``BAD`` names
NO_ANSWER_WORKER = """
import json, os, sys
print(json.dumps({"ready": True, "note": ""}), flush=True)
for line in sys.stdin:
    if json.loads(line).get("step") == 1:
        print(os.environ["FORENSICS_TEST_BAD"], flush=True)
        continue
    print(json.dumps({"status": "replayed", "reason": "", "accesses": [], "overflows": [],
                      "differs": []}), flush=True)
"""


@pytest.mark.parametrize("line", ["not json", '{"status": "replayed", "accesses": "x"}',
                                  '{"a":' * 5000 + "1" + "}" * 5000, '{"status": "?"}',
                                  '{"status": "replayed", "more": [{}]}'])
def test_a_kernels_replay_worker_s_line_that_is_no_answer_is_said_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        line: str) -> None:
    """``forensics kernels``: a replay worker's line that is not an answer said 'the replay
    crashed the interpreter's process' (not JSON), ended the command in an internal error
    (an AttributeError of findings not a list, a RecursionError of a deep line) or gave a
    launch of no reason (a status it never gives). That launch is not replayable, saying the
    line is no answer; the worker ended, the launches after it run in a new one."""
    import json
    import sys

    from test_round4_kernels import KERNEL, MODULE, launch
    from test_round4_kernels import write_capture as write_events

    from forensics.cli import main
    from forensics.kernels import sanitizer

    capture = write_events(tmp_path / "bad.capture", [launch(step) for step in range(3)])
    monkeypatch.setenv("FORENSICS_TEST_BAD", line)
    monkeypatch.setattr(sanitizer.Worker, "command",
                        lambda self: [sys.executable, "-P", "-c", NO_ANSWER_WORKER])
    monkeypatch.setattr(sanitizer, "installed_kernels", lambda: [(MODULE, KERNEL)])
    code = main(["kernels", str(capture), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    assert [(r["step"], r["status"], r["reason"]) for r in out["launches"]] == [
        (0, "replayed", ""), (1, "not_replayable", sanitizer.NOT_AN_ANSWER),
        (2, "replayed", "")], out
    assert sanitizer.NOT_AN_ANSWER.startswith("the replay worker answered a line that is not "
                                              "an answer (cut off")
