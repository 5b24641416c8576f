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
