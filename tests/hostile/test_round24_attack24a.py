"""Round 24, attack24a: hostile logs and captures (issue 38, round 3 of hostile input)."""

from __future__ import annotations

from pathlib import Path

# ------------- T148a: a line of no prefix between a worker's traceback lines pauses its chain

#: a tensor-parallel worker's traceback as vLLM logs it, each line with the worker's prefix
WORKER = ["Traceback (most recent call last):",
          '  File "/v/vllm/v1/worker/gpu_model_runner.py", line 3575, in execute_model',
          "    self.prepare_inputs_event.synchronize()",
          "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"]
PREFIX = "(Worker_TP0 pid=100) ERROR 12-02 10:46:44 [multiproc.py:9] "
#: another process's plain stderr (NCCL's debug line), no vLLM prefix
NCCL = "node1:200:300 [1] NCCL INFO comm 0x5581 rank 1 nranks 2 - Abort COMPLETE"
ASSERT = ("/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [0,0,0], "
          "thread: [0,0,0] Assertion `idx < size` failed.")


def _crashes(tmp_path: Path, lines: list[str]) -> list[tuple[str, str | None, int]]:
    """The events ``import`` reads of a log of ``lines``: (kind, exception, first line)."""
    from forensics.importers import read_source

    log = tmp_path / "engine.log"
    log.write_text("\n".join(lines) + "\n")
    return [(e["kind"], e.get("exception"), e.get("first_line", e["line"]))
            for e in read_source(log).events]


def test_a_line_of_no_prefix_inside_a_workers_traceback_ends_no_crash(tmp_path: Path) -> None:
    """Another process's plain stderr line (NCCL's) between a worker's prefixed traceback
    lines pauses the chain, as a line of another prefix does: one crash, its exception read.
    It ended the chain: "2 crash event(s)" of one crash, an engine_exception of no exception
    and an illegal_memory_access of no traceback."""
    lines = [PREFIX + line for line in WORKER]
    alone = _crashes(tmp_path, lines)
    assert alone == [("illegal_memory_access", WORKER[-1], 1)]
    assert _crashes(tmp_path, lines[:2] + [NCCL] + lines[2:]) == alone
    assert _crashes(tmp_path, [x for line in lines for x in (line, NCCL)]) == alone
    # a device's assert (no prefix) between them is its own event; the chain still one crash
    mixed = _crashes(tmp_path, lines[:2] + [ASSERT] + lines[2:])
    assert sorted(mixed) == [("cuda_assert", None, 3), ("illegal_memory_access", WORKER[-1], 1)]
