"""Round 19's attack19b (issue 38): what a hostile or careful user found in ``forensics import``
of engine logs, ``forensics kernels`` and V2 replays.

- T110a: a log in which vLLM reports a worker process of the engine dead (a SIGSEGV's ``Worker
  proc VllmWorker-0 died unexpectedly (exit code: -11)``) imported as 0 events, and ``known``
  said "crash verdict no crash" and "the capture shows no failure to report" of an engine that
  died.
- T110b: ``forensics kernels`` said a ``_compute_slot_mappings_kernel`` position of -1 holds
  "block index -1, outside [0, W)": Triton's ``//`` truncates toward zero, the kernel read
  block 0 of the row.
- T110c: ``forensics kernels --coverage`` said ``never_launched`` of every kernel outside
  ``FORENSICS_KERNELS``' selection, and of every kernel of a capture without a
  ``kernel_summary``: the probe counted none of their launches.
- T110d: a ``kernel_contract`` line named the first 16 of 36 elements out of range as if they
  were all.
- T110e: a V2 capture of vLLM 0.31.0 replayed by ``--variant vllm`` (the installed 0.33.0's
  code) said nothing of the versions.
- T110f: CPython's ``Fatal Python error: Segmentation fault`` imported as no event.
- T110g: ``forensics kernels`` said "129 finding(s)" above the 2 lines it listed.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_round2 import run_cli

PROBE = ("(EngineCore_DP0 pid=4242) SM70-TEMB: rows=1000 input=(4,) dtype=torch.int32 "
         "min=0 max=7\n")
#: vLLM 0.33's multiproc executor's line when a worker dies of a SIGSEGV
WORKER_DIED = ("(EngineCore_DP0 pid=4242) ERROR 12-02 10:46:44 [multiproc_executor.py:381] "
               "Worker proc VllmWorker-0 died unexpectedly (exit code: -11), shutting down "
               "executor.\n")
#: the API server's report of a request it failed: an EngineDeadError chain
ENGINE_DEAD_CHAIN = (
    "ERROR 12-02 10:46:45 [serving.py:300] Traceback (most recent call last):\n"
    'ERROR 12-02 10:46:45 [serving.py:300]   File "/x/vllm/v1/engine/async_llm.py", line 419\n'
    "ERROR 12-02 10:46:45 [serving.py:300]     raise EngineDeadError()\n"
    "ERROR 12-02 10:46:45 [serving.py:300] vllm.v1.engine.exceptions.EngineDeadError: "
    "EngineCore encountered an issue. See stack trace (above) for the root cause.\n")
#: the API server's report of it: an EngineDeadError chain, then its own RuntimeError
ENGINE_DEAD = ENGINE_DEAD_CHAIN + ("RuntimeError: Engine core process EngineCore_DP0 died "
                                  "unexpectedly.\n")


def import_log(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str) -> tuple[
        str, Path, list[dict[str, object]]]:
    """``import``'s output, the capture it made of a log of ``text`` and the capture's events
    (as ``inspect --json`` lists them)."""
    (tmp_path / "engine.log").write_text(text)
    out = tmp_path / "engine.capture"
    code, said, err = run_cli(capsys, "import", tmp_path / "engine.log", "-o", out, "--force")
    assert code == 0, err
    code, shown, err = run_cli(capsys, "inspect", out, "--json")
    assert code == 0, err
    return said, out, list(json.loads(shown)["events"])


def _events(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str) -> tuple[
        Path, list[dict[str, object]]]:
    """The capture imported from a log of ``text``, and its events."""
    return import_log(capsys, tmp_path, text)[1:]


# ------------------------------ T110a: an engine whose worker died is no "no crash"


def test_a_worker_that_died_is_a_crash_event(capsys: pytest.CaptureFixture[str],
                                             tmp_path: Path) -> None:
    """vLLM's report of a worker that died (exit code -11) is one crash event, and ``known``
    says the crash is unexplained, never "no crash" nor "no failure to report"."""
    capture, events = _events(capsys, tmp_path, PROBE * 2 + WORKER_DIED)
    assert [(e["kind"], e["line"]) for e in events] == [("process_died", 3)]
    assert "exit code: -11" in str(events[0]["message"])
    code, out, err = run_cli(capsys, "known", capture)
    assert code in (0, 1), err
    said = " ".join(out.split())
    assert "crash verdict unexplained" in said and "first process_died" in said
    assert "verdict no crash" not in said and "no failure" not in said


def test_the_reports_of_one_death_are_one_crash(capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:
    """The API server's ``EngineDeadError`` and its ``Engine core process ... died
    unexpectedly`` after a worker's death are that death's, not crashes of their own (T4)."""
    _, events = _events(capsys, tmp_path, PROBE + WORKER_DIED + ENGINE_DEAD)
    [event] = events
    assert event["kind"] == "process_died" and event["line"] == 2
    assert event["engine_dead"]["line"] == 6  # type: ignore[index]
    # its own line is its died's first (T138c), the API server's report its next
    assert event["died"]["line"] == 2  # type: ignore[index]
    assert [r["line"] for r in event["died"]["more"]] == [7]  # type: ignore[index]


def test_a_death_after_a_cuda_error_is_that_errors(capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    """A worker that died after an illegal memory access (its process aborted) is that crash,
    one event; the death is said on it."""
    crash = ("(VllmWorker-0 pid=11) ERROR 12-02 10:46:43 [gpu_worker.py:1] RuntimeError: CUDA "
             "error: an illegal memory access was encountered\n")
    _, events = _events(capsys, tmp_path, PROBE + crash + WORKER_DIED)
    [event] = events
    assert event["kind"] == "illegal_memory_access"
    assert "exit code: -11" in event["died"]["message"]  # type: ignore[index]


def test_a_death_quoted_by_another_logger_is_no_crash(capsys: pytest.CaptureFixture[str],
                                                      tmp_path: Path) -> None:
    """The words at an INFO level, or after other words in an ERROR message (a prompt quoted),
    make no crash event (T51a)."""
    quoted = ("INFO 12-02 10:46:44 [x.py:1] Worker proc VllmWorker-0 died unexpectedly "
              "(exit code: -11)\n"
              "ERROR 12-02 10:46:44 [x.py:1] prompt: Worker proc VllmWorker-0 died "
              "unexpectedly\n")
    _, events = _events(capsys, tmp_path, PROBE + quoted)
    assert events == []


# ------------------------------ T110b: a negative position's block index, as Triton divides


def _slot_launch(pos: list[int], size: int = 16, width: int = 4) -> list[dict[str, object]]:
    """The ``kernel_contract`` findings of a ``_compute_slot_mappings_kernel`` launch of one
    request of positions ``pos`` (int32), one group of ``size``-token blocks ``width`` wide."""
    from test_round8b_kernels import slot_mappings, tensor

    from forensics.kernels import contracts
    from forensics.kernels.format import check_launch

    event = slot_mappings(np.array(pos, dtype=np.int32), np.array([size], dtype=np.int32))
    event["tensors"]["block_table_ptrs[0]"] = tensor(  # type: ignore[index]
        np.zeros(2 * width, dtype=np.int32), shape=[2, width])
    return contracts.check(check_launch(event, "test"), {})


def test_a_position_just_below_zero_reads_block_0_of_its_row() -> None:
    """Triton's ``pos // block_size`` truncates toward zero: positions -1 and -15 of 16-token
    blocks read block 0 of the row (inside it). They were said to hold block index -1,
    "outside [0, 4)": a block index the kernel never read."""
    assert _slot_launch([-1, -15, 3, 63]) == []


def test_a_block_index_before_the_row_is_the_one_the_kernel_reads() -> None:
    """Positions -16, -17 and -33 read blocks -1, -1 and -2 (truncated), before the row; 64 is
    past it (block 4 of 4): the finding names exactly those, with the kernel's block indices
    (-17 and -33 were said to hold -2 and -3, Python's floor)."""
    [found] = _slot_launch([-1, -16, -17, 5, -33, 64])
    assert (found["elements"], found["values"], found["positions"], found["count"],
            found["upper"]) == ([1, 2, 4, 5], [-1, -1, -2, 4], [-16, -17, -33, 64], 4, 4)


# ------------------------------ T110c: "never launched" only of a kernel a probe counted


@pytest.fixture
def three_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """The installed vLLM's kernels, as the sanitizer reads them: three of module vllm.x."""
    from forensics.kernels import sanitizer

    monkeypatch.setattr(sanitizer, "installed_kernels",
                        lambda: [("vllm.x", "_kept"), ("vllm.x", "_other"), ("vllm.x", "_seen")])


def one_launch_capture(root: Path, events: list[dict[str, object]]) -> None:
    """Write at ``root`` a capture (process ``h-1``: pid 1, rank 0) of one recorded launch of
    ``vllm.x._kept`` at step 40, followed in its events file by ``events``."""
    from test_round4_kernels import launch

    root.mkdir(parents=True)
    (root / "manifest.json").write_text(json.dumps({
        "format": 1, "creator": "test", "engine_id": "e" * 32, "model": {},
        "process": {"host": "h", "pid": 1, "rank": 0, "tag": "h-1"}, "versions": {}}))
    kept = [{**launch(step=40), "kernel": {"module": "vllm.x", "name": "_kept",
                                           "source_sha256": ""}}]
    (root / "events-h-1.jsonl").write_text("".join(json.dumps(e) + "\n"
                                                   for e in kept + events))


def _coverage(capsys: pytest.CaptureFixture[str], root: Path,
              summaries: list[dict[str, object]]) -> dict[str, dict[str, object]]:
    """The ``kernels --coverage --json`` rows, by kernel, of a capture of one launch of
    ``vllm.x._kept`` (rank 0, not replayable: no vLLM has it) and ``summaries``."""
    one_launch_capture(root, [{"kind": "kernel_summary", "format": 1, "step": 40, "rank": 0,
                               "graph_only": [], "kernels_seen": {"vllm.x._kept": 1}, **s}
                              for s in summaries])
    code, out, _ = run_cli(capsys, "kernels", root, "--coverage", "--json")
    assert code == 2, out  # the one launch is not replayable: nothing judged
    return {str(r["kernel"]): r for r in json.loads(out)["coverage"]}


def test_a_kernel_outside_the_selection_is_not_said_never_launched(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], three_kernels: None) -> None:
    """With ``FORENSICS_KERNELS=_kept`` the probe counts the launches of ``_kept`` alone: the
    others were listed ``never_launched``, of which it knew nothing. They are
    ``not_watched``, saying the selection and that whether they ran is unknown."""
    rows = _coverage(capsys, tmp_path / "k.capture", [{"selection": ["_kept"]}])
    for name in ("_other", "_seen"):
        assert rows[name]["status"] == "not_watched"
        assert "FORENSICS_KERNELS=_kept" in str(rows[name]["why"])
        assert "whether it was launched is unknown" in str(rows[name]["why"])
    code, out, _ = run_cli(capsys, "kernels", tmp_path / "k.capture", "--coverage")
    assert "never_launched" not in out and "not_watched" in out


def test_a_capture_without_a_count_says_no_kernel_never_launched(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], three_kernels: None) -> None:
    """An engine killed before its probe dumped writes no ``kernel_summary`` (its launches
    handed off one by one, ``FORENSICS_KERNELS_KEEP=all``): no kernel is ``never_launched``;
    nor where a summary lacks its selection, or the rank of the launches wrote none."""
    for at, summaries in enumerate(([], [{}], [{"selection": "*"}],
                                    [{"selection": ["*"], "rank": 1}])):  # none of rank 0
        rows = _coverage(capsys, tmp_path / f"k{at}.capture", summaries)
        assert rows["_other"]["status"] == "not_watched", summaries
        assert "whether it was launched is unknown" in str(rows["_other"]["why"])


def test_a_kernel_every_selection_chose_is_still_never_launched(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], three_kernels: None) -> None:
    """Where every summary's selection chooses a kernel (``all`` is ``*``; a glob), one
    neither recorded nor seen is ``never_launched``, as before."""
    rows = _coverage(capsys, tmp_path / "k.capture",
                     [{"selection": ["*"]}, {"selection": ["_kept", "vllm.x._o*"]}])
    assert rows["_other"]["status"] == "never_launched" and rows["_other"]["why"] == ""
    assert rows["_seen"]["status"] == "not_watched"  # the second chose it not


# ------------------------------ T110d: a contract finding of more elements than it lists


def test_a_contract_finding_says_how_many_elements_it_does_not_list() -> None:
    """36 ``idx_mapping`` entries past 4 slots: the line named the first 16 as if they were
    all. It says they are the first 16 of 36; a finding of all its elements listed says
    nothing more."""
    from test_round8b_kernels import idx_launch

    from forensics.kernels import contracts
    from forensics.kernels.sanitizer import describe

    [found] = contracts.check(idx_launch(np.arange(40, dtype=np.int32), max_num_reqs=4), {})
    assert found["count"] == 36 and len(found["elements"]) == 16
    line = describe(found)
    assert "idx_mapping element(s) [4, 5, 6," in line and "19] (the first 16 of 36) hold" in line
    [few] = contracts.check(idx_launch(np.arange(6, dtype=np.int32), max_num_reqs=4), {})
    assert "the first" not in describe(few) and "element(s) [4, 5] hold" in describe(few)


# ------------------------------ T110e: a capture of another vLLM replayed by the installed one


def test_a_capture_of_another_vllm_says_the_vllm_variant_runs_the_installed_one(
        tmp_path: Path) -> None:
    """A Model Runner V2 capture of vLLM 0.31.0 replayed with ``--variant vllm`` (the
    installed vLLM's code) said nothing of the versions: its V2 finding read as what 0.31.0
    did. The conclusion says the capture's version and the installed one; a capture of the
    installed version, or of a final release of its minor, says nothing."""
    import shutil

    import forensics
    from forensics.present import capture_facts
    from forensics.present.conclusion import conclude
    from forensics.versions import module_version

    installed = module_version("vllm")
    if installed is None:  # nothing installed to compare
        assert capture_facts.version_sentence({"vllm": "0.31.0"}, ["vllm"]) == ""
        return
    copy = tmp_path / "old.capture"
    shutil.copytree(Path(__file__).parents[2] / "data" / "v2-negative-draft.capture", copy)
    manifest = copy / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"vllm": "0.33.0"', '"vllm": "0.31.0"'))
    text = " ".join(conclude(forensics.replay(copy, ["vllm"])).paragraph().split())
    assert (f"The capture comes from vLLM 0.31.0, while vllm replays the code of the installed "
            f"vLLM {installed}: where the code changed between the two, a finding or verdict "
            "of it may not be what 0.31.0 did") in text
    said = capture_facts.installed_sentence
    assert said(installed, ["vllm", "vllm+fix.diff"]) == ""
    assert "while vllm, vllm+fix.diff replay the code of the installed" in said("0.1.0", [
        "vllm", "vllm+fix.diff"])
    assert said("0.31.0", []) == ""


# ------------------------------ T110f: a faulthandler's fatal error is a crash


SEGFAULT = ("(VllmWorker TP0 pid=11) Fatal Python error: Segmentation fault\n"
            "(VllmWorker TP0 pid=11) \n"
            "(VllmWorker TP0 pid=11) Current thread 0x00007f0000000000 (most recent call "
            "first):\n"
            '(VllmWorker TP0 pid=11)   File "/x/vllm/v1/worker/gpu/model_runner.py", line 2000 '
            "in execute_model\n")


def test_a_fatal_python_error_is_a_crash_and_its_report_joins_it(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """CPython's ``Fatal Python error: Segmentation fault`` (faulthandler, an engine in one
    process: no report of its death follows) imported as no event; it is a crash event, and
    vLLM's report of the worker's death after it is that crash's (one death, one crash)."""
    _, events = _events(capsys, tmp_path, PROBE + SEGFAULT)
    assert [(e["kind"], e["line"]) for e in events] == [("process_died", 2)]
    _, events = _events(capsys, tmp_path, PROBE + SEGFAULT + WORKER_DIED)
    [event] = events
    assert event["line"] == 2 and event["died"]["line"] == 2  # type: ignore[index]
    assert [r["line"] for r in event["died"]["more"]] == [6]  # type: ignore[index]


# ------------------------------ T110g: the findings counted are the findings listed


def test_the_count_of_findings_is_that_of_the_lines_listed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A load out of bounds in each of 128 programs and one store: the header said "129
    finding(s)" above the 2 lines it listed (one access's programs folded into one line). It
    counts the 2 and says how many there were before folding."""
    from test_round11_attack import _oob_report

    from forensics.cli import main
    from forensics.kernels import sanitizer

    capture = tmp_path / "k.capture"
    capture.mkdir()
    report = _oob_report([(x, 0, 0) for x in range(128)], str(capture))
    monkeypatch.setattr(sanitizer, "sanitize", lambda *args, **kwargs: report)
    assert main(["kernels", str(capture)]) == 1
    out = capsys.readouterr().out.splitlines()
    listed = [line for line in out if line.startswith("kernel_out_of_bounds")]
    assert len(listed) == 2
    assert out[0].endswith("1 replayed, 2 finding(s) (129 before the programs of one access "
                           "were folded into one)"), out[0]
