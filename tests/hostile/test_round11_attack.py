"""Round 11's attacks: a hostile capture author and a hostile local user against the commands
fewer rounds looked at (the log importer's crash lines, ``kernels``' report, ...)."""

from __future__ import annotations

from pathlib import Path

import pytest

API = "(APIServer pid=7) "
CORE = "(EngineCore_DP0 pid=9) "

#: lines of loggers other than the request logger that quote what a client sent: none is a
#: crash, a CUDA assert or a crash dump
QUOTING_LINES = (
    f"{API}INFO 12-02 10:46:44 [serving_chat.py:200] Chat template applied to 'CUDA error: "
    "device-side assert triggered'",
    f"{API}WARNING 12-02 10:46:44 [protocol.py:90] The following fields were present in the "
    "request but ignored: {'RuntimeError: CUDA error: an illegal memory access was encountered'}",
    f"{API}ERROR 12-02 10:46:44 [serving_chat.py:210] Error in preprocessing prompt inputs: "
    "prompt 'torch.AcceleratorError: CUDA error: an illegal memory access was encountered' is "
    "too long",
    f"{API}ERROR 12-02 10:46:45 [serving_chat.py:211] Invalid tool call: a.cu:1: f: block: "
    "[0,0,0], thread: [0,0,0] Assertion `x < y` failed.",
    f"{API}INFO 12-02 10:46:45 [tool_parsers.py:12] parsed: Indexing.cu:1515: k: block: "
    "[0,0,0], thread: [0,0,0] Assertion `srcIndex < srcSelectDimSize` failed.",
    f"{API}DEBUG 12-02 10:46:46 [harmony.py:80] message: vllm.v1.engine.exceptions."
    "EngineDeadError: EngineCore encountered an issue.",
    f"{API}ERROR 12-02 10:46:46 [serving_completion.py:9] Error with model user text "
    "EngineDeadError and device-side assert triggered",
    f"{API}WARNING 12-02 10:46:47 [protocol.py:90] ignored: 'Dumping input data for V1 LLM "
    "engine (v0.33.0) with config: model='m''",
    f"{API}ERROR 12-02 10:46:47 [serving_chat.py:210] Error in prompt: 'Dumping scheduler "
    "output for model execution: SchedulerOutput(num_scheduled_tokens={r: 3}, "
    "scheduled_spec_decode_tokens={r: [-1, -1]})'",
)

#: a crash's own lines, each one event of the kind named (after a line that is none)
CRASH_LINES = (
    ("illegal_memory_access", f"{CORE}ERROR 12-02 10:47:00 [core.py:9] CUDA error: an illegal "
                              "memory access was encountered"),
    ("cuda_error", "[rank0]: RuntimeError: CUDA error: device-side assert triggered"),
    ("illegal_memory_access", "  what():  CUDA error: an illegal memory access was encountered"),
    ("illegal_memory_access", "Cuda failure 'an illegal memory access was encountered'"),
    ("cuda_error", "triton.runtime.errors.Error: Triton Error [CUDA]: device-side assert "
                   "triggered"),
    ("cuda_assert", "/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: "
                    "[0,0,0], thread: [0,0,0] Assertion `-sizes[i] <= index && index < sizes[i] "
                    "&& \"index out of bounds\"` failed."),
    ("cuda_assert", "python3: /src/a.c:12: main: Assertion `n > 0' failed."),
    ("cuda_assert", "Assertion `a < n` failed"),
    ("engine_dead", f"{API}ERROR 12-02 10:47:01 [async_llm.py:5] vllm.v1.engine.exceptions."
                    "EngineDeadError: EngineCore encountered an issue."),
    ("engine_dead", "EngineDeadError"),
)


def test_a_line_quoting_crash_words_is_no_crash_by_its_words_alone(tmp_path: Path) -> None:
    """A line counts as a crash by its logger and its form (at ERROR or CRITICAL, or with no
    level; the crash's words where its line starts, after an exception's name), never because
    a prompt another logger quotes holds crash words: each quoting line made a crash event (an
    "unexplained" crash verdict) or a crash dump before."""
    from forensics.importers import read_source

    log = tmp_path / "engine.log"
    lines = [text for quoting in QUOTING_LINES for text in (quoting, "x")]
    for _kind, crash in CRASH_LINES:
        lines += [crash, "x"]
    log.write_text("\n".join(lines) + "\n")
    imported = read_source(log)
    assert imported.records == []
    first = 2 * len(QUOTING_LINES) + 1
    assert [(e["kind"], e["line"]) for e in imported.events] == [
        (kind, first + 2 * k) for k, (kind, _) in enumerate(CRASH_LINES)]
    dump = tmp_path / "dump.log"
    dump.write_text("\n".join(QUOTING_LINES) + "\n")
    assert read_source(dump).events == []


@pytest.mark.parametrize("quoting", QUOTING_LINES)
def test_each_quoting_line_alone_is_no_crash(tmp_path: Path, quoting: str) -> None:
    from forensics.importers import read_source

    log = tmp_path / "engine.log"
    log.write_text(quoting + "\n")
    assert read_source(log).events == [], quoting
