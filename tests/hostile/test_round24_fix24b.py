"""Round 24, fix 24b: a command's children's timeouts, the probe's failed fork, its signal hold."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from test_round3_caps import post, with_kernel_worker

from forensics.store.writer import write_capture
from tests.hostile.test_round23_attack23b import PROBE_TESTS, _child

if TYPE_CHECKING:
    from forensics.budget import Clock

# ------------------------------- T147a: every record of a replay outlives its child's deadline
#: a kernel worker that starts at once (no vLLM), notes each start in the file argv[1] names,
#: says it is ready and never answers a record
HANGING_WORKER = """
import json, sys, time
with open(sys.argv[1], "a") as starts:
    starts.write("started\\n")
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    time.sleep(3600)
"""


def test_a_replay_stops_restarting_a_worker_that_outlives_its_deadline_on_every_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
        ) -> None:
    """T147a: ``replay --variant vllm`` of 10 records the worker never answers starts it 3
    times, not 10 (each start is vLLM's import, each timeout the child deadline: 79 records
    at 1 s ran past 300 s); the 3 records it outlived are ``timed out``, the 7 left are
    ``not judged`` saying why, counted as errors, and the conclusion says so; exit 0."""

    starts = tmp_path / "starts"
    capture = write_capture(tmp_path / "hangs.capture", [post(s) for s in range(10)])
    monkeypatch.setenv("FORENSICS_CHILD_TIMEOUT", "0.25")
    code = with_kernel_worker(monkeypatch, [sys.executable, "-c", HANGING_WORKER, str(starts)],
                              ["replay", str(capture), "--variant", "vllm", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    assert starts.read_text().count("started") == 3
    assert out["outcomes"]["vllm"] == {"ok": 0, "index_error": 0, "error": 10}, out
    why = ("3 answers outlived the child deadline of 0.25 s (FORENSICS_CHILD_TIMEOUT), so no "
           "more were run")
    assert out["conclusion"]["cut"] == (
        f"Not judged: 7 post_update record(s) of vllm (7 steps from 3 to 9): {why}; they "
        "count as errors, not as clean (give a longer FORENSICS_CHILD_TIMEOUT).")


def test_shrink_of_records_its_worker_never_answers_says_which_deadline_to_lengthen(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
        ) -> None:
    """T147a: ``shrink`` of 5 records the worker never answers starts it 3 times and refuses
    in one line that names the child deadline to lengthen, not ``--deadline``; nothing is
    written."""

    starts = tmp_path / "starts"
    capture = write_capture(tmp_path / "hangs.capture", [post(s) for s in range(5)])
    monkeypatch.setenv("FORENSICS_CHILD_TIMEOUT", "0.25")
    code = with_kernel_worker(monkeypatch, [sys.executable, "-c", HANGING_WORKER, str(starts)],
                              ["shrink", str(capture), "-o", str(tmp_path / "small.capture"),
                               "--variant", "vllm"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert starts.read_text().count("started") == 3
    assert err.rstrip().endswith("nothing was written; give a longer FORENSICS_CHILD_TIMEOUT")
    assert "3 answers outlived the child deadline of 0.25 s" in err, err
    assert not (tmp_path / "small.capture").exists()


def test_the_timeouts_of_a_commands_replays_count_together(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """T147a: a replay inside a command's overall clock (a shrink's) counts its children's
    timeouts with the command's: two timeouts in one replay and one in the next end them all,
    the next replay's clock ended from its start."""
    from forensics.budget import Clock

    monkeypatch.setenv("FORENSICS_CHILD_TIMEOUT", "2")
    command, why = counted_across_blocks(Clock.timed_out)
    assert why == ("3 answers outlived the child deadline of 2 s (FORENSICS_CHILD_TIMEOUT), "
                   "so no more were run")
    assert command.timeouts == 3


def counted_across_blocks(count: Callable[[Clock], None]) -> tuple[Clock, str]:
    """Two of a command's children's answers counted (``count``: ``Clock.timed_out`` or
    ``Clock.died``) in its first replay's clock and one in its second: the first runs on, the
    second ends at the third, a third replay's clock is ended from its start; the command's
    clock (ended) and why the third's ended."""
    from forensics.budget import overall_clock

    with overall_clock(100) as command:
        with overall_clock(50) as first:
            count(first)
            count(first)
            assert first.left() > 0
        with overall_clock(50) as second:
            assert second.left() > 0
            count(second)
            assert second.left() < 0
        with overall_clock(50) as third:
            assert third.left() < 0
            why = third.passed()
    assert command.left() < 0
    return command, why


def test_what_a_cut_says_to_lengthen_is_what_ended_its_clock() -> None:
    """T147a: a cut by the overall deadline says ``--deadline``; one by the children's
    timeouts (the conclusion, shrink's refusals) ``FORENSICS_CHILD_TIMEOUT``."""
    from forensics.budget import longer

    assert longer("the overall deadline of 5 s passed") == "--deadline"
    assert longer("3 answers outlived the child deadline of 1 s (FORENSICS_CHILD_TIMEOUT), "
                  "so no more were run") == "FORENSICS_CHILD_TIMEOUT"


def test_kernels_stops_restarting_a_replay_worker_that_outlives_its_deadline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
        ) -> None:
    """T147a: ``forensics kernels`` of 6 launches its replay worker never answers starts it 3
    times, not 6: the 3 launches it outlived are ``timed out``, the 3 left ``not run`` saying
    why, never replayed; nothing was judged (exit 2, one line)."""
    from test_round4_kernels import STAND_IN, launch
    from test_round4_kernels import write_capture as write_events

    from forensics.kernels import sanitizer

    starts: list[int] = []

    def command(self: sanitizer.Worker) -> list[str]:
        starts.append(1)
        return [sys.executable, "-P", str(STAND_IN)]  # it never answers a launch of step 1

    capture = write_events(tmp_path / "hangs.capture", [launch(1) for _ in range(6)])
    monkeypatch.setenv("FORENSICS_CHILD_TIMEOUT", "0.25")
    _err, out = refused_kernels(monkeypatch, capsys, capture, command)
    assert len(starts) == 3
    why = ("not run: 3 answers outlived the child deadline of 0.25 s "
           "(FORENSICS_CHILD_TIMEOUT), so no more were run")
    assert [(r["status"], r["reason"]) for r in out["launches"]] == (
        [("not_replayable", "timed out after 0.25 s")] * 3 + [("not_run", why)] * 3)


def refused_kernels(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                    capture: Path, command: Callable[[Any], list[str]]
                    ) -> tuple[str, dict[str, Any]]:
    """``forensics kernels CAPTURE --json`` with the sanitizer's replay worker started by
    ``command`` (a method of its Worker) and the stand-in's kernel installed, which judges
    nothing: its one line (exit 2, checked) and its JSON."""
    from test_round4_kernels import KERNEL, MODULE

    from forensics.cli import main
    from forensics.kernels import sanitizer

    monkeypatch.setattr(sanitizer.Worker, "command", command)
    monkeypatch.setattr(sanitizer, "installed_kernels", lambda: [(MODULE, KERNEL)])
    code = main(["kernels", str(capture), "--json"])
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert code == 2 and captured.err.count("\n") == 1, captured.err
    return captured.err, out


# ------------------------------- T147b: a fork that fails leaves no join mark
#: the writer (argv[3]); the probe starts, then a fork fails as ``os.fork`` runs it when
#: fork() returns -1 (EAGAIN: too many processes): the at-fork hooks before it and the
#: parent's after it, no copy; the folder is listed, the probe stopped, the folder listed again
FORK_FAILED = textwrap.dedent("""
    import ctypes
    from forensics.probe import plugin

    capture = Path(sys.argv[1])
    session = started()
    ctypes.pythonapi.PyOS_BeforeFork()
    ctypes.pythonapi.PyOS_AfterFork_Parent()  # what os.fork runs when fork() fails
    print(sorted(n for n in os.listdir(capture) if n.startswith(".joined-")))
    plugin.stop()
    print(capture.exists())
""")


@pytest.mark.parametrize("writer", ["thread", "process"])
def test_a_failed_fork_leaves_no_join_mark(tmp_path: Path, writer: str) -> None:
    """T147b: the join mark the first process leaves before a fork (T144a) is removed when
    the fork fails, so a first process that recorded nothing removes its folder as it closes;
    the mark stayed, and the folder held only it."""
    capture = tmp_path / "x.capture"
    child = _child(FORK_FAILED, str(capture), str(PROBE_TESTS), writer)
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.split("\n")[:2] == ["[]", "False"], child.stdout
