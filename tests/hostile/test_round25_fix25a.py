"""Round 25, fix 25a: a worker that dies, or answers no answer, on every record; a direct
``run_kernels()`` call's limits; a split triage's pieces start no worker."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from test_round3_caps import post, with_kernel_worker
from test_round24_fix24b import counted_across_blocks, refused_kernels

from forensics.store.writer import write_capture

#: a kernel worker that starts at once (no vLLM), notes each start in the file argv[1] names,
#: says it is ready and, for each batch it is sent, does what argv[2] says: ``exit`` (exit 3,
#: no answer), ``garbage`` (a line that is no answer) or ``hang`` (never answer)
BAD_WORKER = """
import json, sys, time
with open(sys.argv[1], "a") as starts:
    starts.write("started\\n")
print(json.dumps({"ready": True, "note": ""}), flush=True)
for line in sys.stdin:
    if sys.argv[2] == "exit":
        sys.exit(3)
    if sys.argv[2] == "hang":
        time.sleep(3600)
    print("garbage", flush=True)
"""
#: the limit's reason, as the records and launches left give it
DIED = ("the child died, or answered a line that is not an answer, 3 times (what it held each "
        "time says how), so no more were run")
#: what the records a dying V2 kernel worker held give
EXITED = ("the Triton interpreter's process died (it exited with status 3): not explained by "
          "the values")
#: what the records a V2 kernel worker answered garbage for give
GARBAGE = ("the Triton interpreter's process answered a line that is not an answer (cut off, "
           "or not a JSON object with a status and a message): not explained by the values")


def _worker(starts: Path, does: str) -> list[str]:
    """The command line of :data:`BAD_WORKER` noting its starts in ``starts``."""
    return [sys.executable, "-c", BAD_WORKER, str(starts), does]


@contextmanager
def bad_kernel_worker(monkeypatch: pytest.MonkeyPatch, starts: Path, does: str
                      ) -> Iterator[None]:
    """The block's V2 kernel workers are :data:`BAD_WORKER` doing ``does``, noting their
    starts in ``starts``; the shared worker closed before the block and after it."""
    from forensics.variants import triton_kernels

    monkeypatch.setattr(triton_kernels.KernelWorker, "_command",
                        lambda self: _worker(starts, does))
    triton_kernels.close_worker()
    try:
        yield
    finally:
        triton_kernels.close_worker()


@pytest.mark.parametrize(("does", "held"), [("exit", EXITED), ("garbage", GARBAGE)])
def test_a_replay_stops_restarting_a_worker_that_dies_on_every_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        does: str, held: str) -> None:
    """T156a: ``replay --variant vllm`` of 10 records whose worker exits (or answers a line
    that is no answer) on each started it 10 times, each start vLLM's import (about 10 s),
    bounded only by the 6 h ``--deadline``; now 3 times: the 3 records it held say how it
    ended, not explained by the values, the 7 left are ``not judged`` saying why, all
    counted as errors, and the conclusion says so; exit 0."""
    starts = tmp_path / "starts"
    capture = write_capture(tmp_path / "dies.capture", [post(s) for s in range(10)])
    code = with_kernel_worker(monkeypatch, _worker(starts, does),
                              ["replay", str(capture), "--variant", "vllm", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    assert starts.read_text().count("started") == 3
    assert out["outcomes"]["vllm"] == {"ok": 0, "index_error": 0, "error": 10}, out
    assert out["conclusion"]["cut"] == (
        f"Not judged: 7 post_update record(s) of vllm (7 steps from 3 to 9): {DIED}; they "
        "count as errors, not as clean (find what ended the child).")


def test_the_records_a_dying_worker_held_say_how_it_ended(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """T156a: in the replay's outcomes the 3 records the worker died on say how, not
    explained by the values; the 7 after them ``not judged`` with the limit's reason."""
    from forensics.replaying import replay

    capture = write_capture(tmp_path / "dies.capture", [post(s) for s in range(10)])
    with bad_kernel_worker(monkeypatch, tmp_path / "starts", "exit"):
        result = replay(str(capture), variants=["vllm"])
    table = result.outcomes
    messages = list(table[table["variant"] == "vllm"].sort_values("step")["message"])
    assert messages == [EXITED] * 3 + [f"not judged: {DIED}"] * 7
    assert result.cut == DIED


def test_shrink_of_records_its_worker_dies_on_names_no_deadline_to_lengthen(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
        ) -> None:
    """T156a: ``shrink`` of 5 records its worker dies on starts it 3 times and refuses in one
    line that says to find what ended it (no wait would help), nothing written."""
    starts = tmp_path / "starts"
    capture = write_capture(tmp_path / "dies.capture", [post(s) for s in range(5)])
    code = with_kernel_worker(monkeypatch, _worker(starts, "exit"),
                              ["shrink", str(capture), "-o", str(tmp_path / "small.capture"),
                               "--variant", "vllm"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert starts.read_text().count("started") == 3
    assert DIED in err, err
    assert err.rstrip().endswith("nothing was written; find what ended the child"), err
    assert not (tmp_path / "small.capture").exists()


def test_deaths_of_a_commands_replays_count_together() -> None:
    """T156a: a replay inside a command's clock counts its children's deaths with the
    command's (as T147a's timeouts): two in one, one in the next end them all; what to do
    then is to find what ended the child, not to lengthen a deadline."""
    from forensics.budget import Clock, remedy

    command, why = counted_across_blocks(Clock.died)
    assert why == DIED and command.deaths == 3
    assert remedy(DIED) == "find what ended the child"
    assert remedy("the overall deadline of 5 s passed") == "give a longer --deadline"


#: a stand-in for the kernel sanitizer's replay worker that answers each launch with a line
#: that is no answer, noting its starts in the file argv[1] names
GARBAGE_REPLAY_WORKER = """
import json, sys
with open(sys.argv[1], "a") as starts:
    starts.write("started\\n")
print(json.dumps({"ready": True, "note": ""}), flush=True)
for line in sys.stdin:
    print("garbage", flush=True)
"""


@pytest.mark.parametrize("does", ["exit", "garbage"])
def test_kernels_stops_restarting_a_replay_worker_that_dies_on_every_launch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        does: str) -> None:
    """T156b: ``forensics kernels`` of 6 launches whose replay worker dies on each (or
    answers a line that is no answer) started it 6 times; now 3: the 3 launches it held are
    ``not_replayable`` saying how, the 3 left ``not run`` saying why (exit 2, one line that
    says to find what ended the worker, not to lengthen a deadline)."""
    from test_round4_kernels import STAND_IN, launch
    from test_round4_kernels import write_capture as write_events

    from forensics.kernels import sanitizer

    starts = tmp_path / "starts"

    def command(self: sanitizer.Worker) -> list[str]:
        if does == "exit":  # the stand-in exits on a launch of step 2
            with starts.open("a") as noted:
                noted.write("started\n")
            return [sys.executable, "-P", str(STAND_IN)]
        return [sys.executable, "-P", "-c", GARBAGE_REPLAY_WORKER, str(starts)]

    capture = write_events(tmp_path / "dies.capture", [launch(2) for _ in range(6)])
    err, out = refused_kernels(monkeypatch, capsys, capture, command)
    assert err.rstrip().endswith(  # it named --deadline and FORENSICS_CHILD_TIMEOUT
        "fix what it says; for the launches 'not run', find what ended the child"), err
    assert starts.read_text().count("started") == 3
    how = ("the replay crashed the interpreter's process" if does == "exit"
           else sanitizer.NOT_AN_ANSWER)
    assert [(r["status"], r["reason"]) for r in out["launches"]] == (
        [("not_replayable", how)] * 3 + [("not_run", f"not run: {DIED}")] * 3)


@pytest.mark.parametrize(("does", "held"), [
    ("hang", "timed out after 0.25 s"), ("exit", EXITED), ("garbage", GARBAGE)])
def test_a_direct_run_kernels_call_has_the_commands_limits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, does: str, held: str) -> None:
    """T156c: ``run_kernels()`` called directly (a notebook's, outside a command's clock) of 6
    records whose worker never answers, dies or answers garbage started it 6 times, each a
    child deadline and vLLM's import; now 3, under a clock of its own (a replay's): the 3
    records after are ``not judged`` saying why."""
    from forensics.variants import triton_kernels

    starts = tmp_path / "starts"
    monkeypatch.setenv("FORENSICS_CHILD_TIMEOUT", "0.25")
    with bad_kernel_worker(monkeypatch, starts, does):
        outcomes = triton_kernels.run_kernels([post(s) for s in range(6)])
    why = DIED if does != "hang" else (
        "3 answers outlived the child deadline of 0.25 s (FORENSICS_CHILD_TIMEOUT), so no "
        "more were run")
    assert [(o.status, o.message) for o in outcomes] == (
        [("error", held)] * 3 + [("error", f"not judged: {why}{triton_kernels.KEPT}")] * 3)
    assert starts.read_text().count("started") == 3


def test_a_split_triages_pieces_start_no_kernel_worker(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """T156d: a split triage's pieces replay the model variants (``upstream``, ``patched``),
    in their own process: of a capture of Model Runner V2 records cut into 3 pieces none
    starts the kernel worker, so no piece's child timeouts or deaths add up across them."""
    from forensics.fleet.piece import VARIANTS, from_ipc, replay_piece
    from forensics.fleet.tasks import plan
    from forensics.variants import triton_kernels

    starts = tmp_path / "starts"
    monkeypatch.setattr(triton_kernels.KernelWorker, "_command",
                        lambda self: _worker(starts, "hang"))
    capture = write_capture(tmp_path / "v2.capture", [post(s) for s in range(6)])
    tasks = plan([capture], split_records=2)
    assert len(tasks) == 3 and VARIANTS == ("upstream", "patched")
    for task in tasks:
        row = from_ipc(replay_piece(task.path, task.start, task.stop, task.window,
                                    planned=task.planned)).to_pylist()[0]
        assert row["error"] == "", row
    assert not starts.exists()
