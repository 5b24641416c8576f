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
    import sys

    from test_round3_caps import post

    from forensics.replaying import replay
    from forensics.store.writer import write_capture
    from forensics.variants import triton_kernels

    capture = write_capture(tmp_path / "ok.capture", [post(0), post(1), post(2)])
    monkeypatch.setenv("FORENSICS_TEST_OK_OUTPUTS", named)
    if text is not None:
        monkeypatch.setenv("FORENSICS_TEST_OK_BYTES", text)
    monkeypatch.setattr(triton_kernels.KernelWorker, "_command",
                        lambda self: [sys.executable, str(OK_ANSWER_WORKER)])
    triton_kernels.close_worker()
    try:
        rows = replay(capture, variants=["vllm"]).outcomes.sort_values("step")
    finally:
        triton_kernels.close_worker()
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
