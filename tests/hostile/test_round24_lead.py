"""Round 24, the lead's own: a split triage's plan counts steps without ordering every record."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from forensics.records import Record
from forensics.store.reader import _merged_counts, load
from forensics.store.writer import write_capture


def _capture(root: Path) -> Path:
    """Embedding and sampler records over two sites, steps repeated and out of order."""
    steps = [5, 3, 3, 9, 0, 5, 5, 10**15, 2]
    records = [Record("embedding", s, 0, {"input_ids": np.arange(4, dtype=np.int32),
                                          "num_embeddings": 10}) for s in steps]
    records += [Record("embedding", s, 1, {"input_ids": np.arange(2, dtype=np.int32),
                                           "num_embeddings": 10}) for s in steps[:4]]
    return Path(write_capture(root / "mixed.capture", records))


def test_step_counts_agree_with_the_ordered_records(tmp_path: Path) -> None:
    """The distinct steps and each one's records, as ordering every record gives them."""
    capture = load(_capture(tmp_path), mapped=False)
    steps, counts = capture.step_counts()
    want_steps, want_counts = np.unique([r.step for r in load(capture.path).records()],
                                        return_counts=True)
    assert steps.tolist() == want_steps.tolist()
    assert counts.tolist() == want_counts.tolist()


def test_step_counts_do_not_order_the_capture(tmp_path: Path) -> None:
    """The plan's count holds one batch's steps and the distinct steps so far, not the
    capture's record order (about 64 bytes a record, held by the plan's parent)."""
    capture = load(_capture(tmp_path), mapped=False)
    capture.step_counts()
    assert capture._order is None


def test_merged_counts_add_the_counts_of_a_step_seen_twice() -> None:
    """Parts that share steps merge into one count a step."""
    parts = [(np.array([1, 4]), np.array([2, 3])), (np.array([0, 4, 7]), np.array([1, 1, 5])),
             (np.array([], np.int64), np.array([], np.int64))]
    steps, counts = _merged_counts(parts)
    assert (steps.tolist(), counts.tolist()) == ([0, 1, 4, 7], [1, 2, 4, 5])
    assert _merged_counts([])[0].tolist() == []


# --------------- T151b: a report's cell outlasts its replay's waits for the kernel worker

def test_a_report_whose_kernel_worker_never_answers_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
        ) -> None:
    """``report --variant vllm`` of a capture whose every record the kernel worker never
    answers: each cell's deadline was one ``FORENSICS_CHILD_TIMEOUT``, as was each answer's,
    so the cell replaying the records always timed out first ('cell 4: timed out after 2 s',
    exit 2) and no deadline could be long enough. A wait for the worker now puts the cell's
    deadline past its own: the report is written, its records said not judged."""
    import sys

    from test_round3_caps import post, with_kernel_worker
    from test_round24_fix24b import HANGING_WORKER

    capture = write_capture(tmp_path / "silent.capture", [post(s) for s in range(6)])
    monkeypatch.setenv("FORENSICS_CHILD_TIMEOUT", "2")
    out = tmp_path / "report.html"
    code = with_kernel_worker(monkeypatch, [sys.executable, "-c", HANGING_WORKER,
                                             str(tmp_path / "starts")],
                              ["report", str(capture), "-o", str(out), "--variant", "vllm"])
    err = capsys.readouterr().err
    assert code == 0, err
    page = out.read_text(encoding="utf-8")
    assert "timed out after 2 s" in page and "outlived the child deadline of 2 s" in page


def test_a_wait_for_a_child_puts_off_the_alarm_of_a_block_that_allows_it() -> None:
    """``alarm_deadline(s, past_waits=True)``: a wait of ``w`` seconds begun in the block
    puts its alarm off to ``w + s``, and its error says how long the block ran; without
    ``past_waits`` (or without a wait) the alarm rings at ``s``."""
    import time

    from forensics.budget import alarm_deadline, waiting
    from forensics.errors import DeadlineError

    with alarm_deadline(0.3, past_waits=True):
        waiting(0.4)
        time.sleep(0.5)  # past 0.3 s, inside 0.4 + 0.3
    with pytest.raises(DeadlineError, match=r"timed out after 0\.3 s"):
        with alarm_deadline(0.3):
            waiting(0.4)
            time.sleep(2)
    with pytest.raises(DeadlineError, match=r"timed out after 0\.[789] s"):
        with alarm_deadline(0.3, past_waits=True):
            waiting(0.4)
            time.sleep(2)


def test_the_notebook_process_waits_past_a_cell_s_wait_for_a_child() -> None:
    """The process running a report's notebook ends a cell one child deadline after its
    start, or after the deadline of a wait the cell said it began, whichever is later, and
    says how long the cell ran."""
    import json
    import os

    from forensics.errors import DeadlineError
    from forensics.present.notebook_process import _answer

    reader, writer = os.pipe()
    try:
        os.write(writer, json.dumps({"cell": 3}).encode() + b"\n"
                 + json.dumps({"wait": 0.5}).encode() + b"\n")
        with pytest.raises(DeadlineError) as ended:
            _answer(reader, 0.2)
        said = str(ended.value)
        assert said.startswith("cell 3: timed out after ") and said != (
            "cell 3: timed out after 0.2 s"), said  # the cell ran past its wait's deadline
    finally:
        os.close(reader)
        os.close(writer)
