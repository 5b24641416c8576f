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
#: argv[2] names (comma-separated): it exits on it, answering nothing
DIES_ON_STEPS = """
import json, sys
import numpy as np
with open(sys.argv[1], "a") as starts:
    starts.write("started\\n")
steps = [f" at step {s}," for s in sys.argv[2].split(",")]
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    for request in json.loads(line)["batch"]:
        if any(step in request["where"] for step in steps):
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


def test_shrink_says_why_it_refuses_to_write_the_capture_it_built(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
        ) -> None:
    """T164a: ``shrink`` of 12 records whose V2 kernel worker dies on those of steps 2 and 7
    (evidence: 2 errors not explained by the values) refuses to write, its search's third
    death having ended the clock before the written capture's replay; its one line was
    ``forensics shrink: error: [Errno None] None: None``, now it says which capture is not
    written and why."""
    starts = tmp_path / "starts"
    capture = write_capture(tmp_path / "dies.capture", [post(s) for s in range(12)])
    code = with_kernel_worker(
        monkeypatch, [sys.executable, "-c", DIES_ON_STEPS, str(starts), "2,7"],
        ["shrink", str(capture), "-o", str(tmp_path / "small.capture"), "--variant", "vllm"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "[Errno" not in err and "None" not in err, err
    assert f"refusing to write '{tmp_path / 'small.capture'}': its replay did not finish" \
        in err, err
    assert starts.read_text().count("started") == 3
    assert not (tmp_path / "small.capture").exists()
