"""Round 25, attack 25d: a refusal raised while a capture is written keeps its one line; a
shrink's written capture's replay."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from test_round3_caps import post, with_kernel_worker

from forensics.errors import DeadlineError, OutputError
from forensics.store.writer import new_capture, write_capture

#: a kernel worker that starts at once (no vLLM), notes each start in the file argv[1] names,
#: and answers each record ``ok`` (an outputs file of no arrays), except a record of a step
#: argv[2] names (comma-separated): it exits on it (argv[3] ``exit``), or never answers it
#: (``hang``)
DIES_ON_STEPS = """
import json, sys, time
import numpy as np
with open(sys.argv[1], "a") as starts:
    starts.write("started\\n")
steps = [f" at step {s}," for s in sys.argv[2].split(",")]
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    for request in json.loads(line)["batch"]:
        if any(step in request["where"] for step in steps):
            if sys.argv[3] == "hang":
                time.sleep(3600)
            sys.exit(3)
        np.savez(request["outputs"])
        print(json.dumps({"status": "ok", "message": "", "outputs": request["outputs"]}),
              flush=True)
"""


@pytest.mark.parametrize("error", [DeadlineError, OutputError])
def test_a_refusal_raised_while_a_capture_is_built_keeps_its_message(
        tmp_path: Path, error: type[OSError]) -> None:
    """T164a: a refusal of ours that is an OSError too (DeadlineError, OutputError), raised in
    a capture's building (:func:`new_capture`'s block), kept its type but its message became
    ``[Errno None] None: None``: the builder named the file of every OSError, setting it to
    None where there was none."""
    with pytest.raises(error) as raised, new_capture(tmp_path / "out.capture"):
        raise error("refusing to write 'out.capture': its replay did not finish")
    assert str(raised.value) == "refusing to write 'out.capture': its replay did not finish"
    assert not (tmp_path / "out.capture").exists()


def test_shrink_says_why_it_refuses_to_write_the_capture_it_built(tmp_path: Path) -> None:
    """T164a: ``shrink``'s refusal to write the capture whose replay its clock cut (here its
    children's deaths had ended it: nothing was replayed) was ``forensics shrink: error:
    [Errno None] None: None``; it says which capture is not written and why."""
    from forensics.budget import overall_clock
    from forensics.share.evidence import Evidence, publish

    out = tmp_path / "small.capture"
    with overall_clock(100) as clock, pytest.raises(DeadlineError) as raised:
        for _ in range(3):
            clock.died()
        publish(out, [post(2)], {}, [], Evidence({}, {}), ["vllm"])
    assert str(raised.value) == (
        f"refusing to write '{out}': its replay did not finish (the child died, or answered a "
        "line that is not an answer, 3 times (what it held each time says how), so no more "
        "were run), so it is not known to keep the original's evidence; find what ended the "
        "child")
    assert not out.exists()


@pytest.mark.parametrize("does", ["exit", "hang"])
def test_shrink_of_two_records_its_worker_dies_on_writes_the_capture_it_keeps(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        does: str) -> None:
    """T164b: ``shrink`` of 12 records whose V2 kernel worker dies on those of steps 2 and 7
    (its evidence: an error not explained by the values) refused to write what it kept: the
    original's 2 deaths and its search's third had ended the clock, so the written capture's
    replay, which dies as the original did, ran nothing. That replay counts its own deaths:
    the capture of step 2 is written, its replay the same; 4 starts in all. The same of a
    worker that never answers those records (timeouts)."""
    starts = tmp_path / "starts"
    monkeypatch.setenv("FORENSICS_CHILD_TIMEOUT", "0.5")
    capture = write_capture(tmp_path / "dies.capture", [post(s) for s in range(12)])
    code = with_kernel_worker(
        monkeypatch, [sys.executable, "-c", DIES_ON_STEPS, str(starts), "2,7", does],
        ["shrink", str(capture), "-o", str(tmp_path / "small.capture"), "--variant", "vllm"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "kept 1 of 12 records (8.33%), step 2;" in captured.out, captured.out
    assert starts.read_text().count("started") == 4
    assert (tmp_path / "small.capture").is_dir()
