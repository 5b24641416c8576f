"""Round 24 of hostile input, fix 24d: what this round's attackers found and left: the patch
sentence of summary records, the draft title's count of one guard claim said twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile.test_round2 import run_cli

# ------------------------------ T153a: a summary record's value is not judged: nothing replays it


def test_the_patch_sentence_says_summary_values_are_not_judged_as_nothing_replays_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A log imported alone: patched "resolves 0 of 1 upstream out-of-bounds findings (1 not
    judged: it cannot see them)", as if it were a read inside an allocation, while the
    sentence after it says nothing there can be replayed. It says why they are not judged."""
    log = tmp_path / "engine.log"
    log.write_text("SM70-TEMB: rows=1000 input=(4,) dtype=torch.int32 min=5 max=1000 step=3\n")
    capture = tmp_path / "l.capture"
    code, _, err = run_cli(capsys, "import", log, "-o", capture)
    assert code == 0, err
    code, out, _ = run_cli(capsys, "summary", capture)
    assert code == 0
    assert "cannot see them" not in out, out
    assert ("resolves 0 of 1 upstream out-of-bounds findings (1 not judged: the least and "
            "greatest values of summary records, which nothing replays).") in out, out


def test_the_patch_sentence_counts_reads_it_cannot_see_apart_from_summary_values() -> None:
    """Of findings inside an allocation alone, the words are as before; of both kinds, each
    is counted apart."""
    from forensics.present.conclusion import Patch, describe_patch

    inside = Patch(variant="patched", resolved=0, total=2, added=0, not_judged=2)
    assert describe_patch(inside, "upstream") == (
        "resolves 0 of 2 upstream out-of-bounds findings (2 not judged: it cannot see them)")
    both = Patch(variant="patched", resolved=1, total=4, added=0, not_judged=3, summaries=1)
    assert describe_patch(both, "upstream") == (
        "resolves 1 of 4 upstream out-of-bounds findings (3 not judged: 2 it cannot see, 1 of "
        "the least and greatest values of summary records, which nothing replays)")


# ------------------------------ T153b: the draft title counts guard claims, not their copies


def test_the_draft_title_names_one_guard_claim_of_two_processes_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same guard_violation line in events-w0.jsonl and events-w1.jsonl of a clean capture
    was titled "its 2 guard events name values out of range: input_ids = 70000 at embedding
    (guard_violation), input_ids = 70000 at embedding (guard_violation)", one claim named
    twice as two. The title names each claim (tensor, element, value, site) once and says how
    many events made them where that differs."""
    from test_round23_fix23a import _guarded, _title
    from test_round24_fix24a import _events, _forged

    capture = _guarded(tmp_path)
    head = "**Title**: [Bug]: engine crash with no captured index value out of range, though "
    _events(capture, _forged(3, "input_ids", 70000, "embedding"))
    (capture / "events-w1.jsonl").write_text((capture / "events-w0.jsonl").read_text())
    assert _title(capsys, capture) == (
        f"{head}its 2 guard_violation events name input_ids = 70000 out of range at embedding")
    _events(capture, _forged(3, "input_ids", 70000, "embedding"),
            _forged(2, "prev_positions", 9, "batch_change"))
    (capture / "events-w1.jsonl").write_text((capture / "events-w0.jsonl").read_text())
    assert _title(capsys, capture) == (
        f"{head}its 4 guard events name 2 values out of range: prev_positions = 9 at "
        "batch_change (guard_violation), input_ids = 70000 at embedding (guard_violation)")


def test_the_draft_title_tells_two_elements_of_one_value_apart() -> None:
    """Two claims differing in their row alone are named with it (the batch's row, as the
    guard's message says it; T160a); the same claim passed on and raised is one, both kinds
    named."""
    from test_round24_fix24a import _forged

    from forensics.present.capture_facts import guard_claim

    second = {**_forged(3, "input_ids", 70000, "embedding"), "row": 1}
    capture = type("C", (), {"events": [_forged(3, "input_ids", 70000, "embedding"), second]})
    assert guard_claim(capture) == (
        "its 2 guard events name values out of range: input_ids = 70000 at embedding row 0 "
        "(guard_violation), input_ids = 70000 at embedding row 1 (guard_violation)")
    passed = {**_forged(2, "input_ids", 70000, "embedding"), "kind": "guard_passed_on"}
    capture.events = [passed, _forged(3, "input_ids", 70000, "embedding")]
    assert guard_claim(capture) == ("its 2 guard_violation and guard_passed_on events name "
                                    "input_ids = 70000 out of range at embedding")


# ------------------------------ T153c: a kernel worker's answer that is none is an error, no crash

BAD_ANSWER_WORKER = Path(__file__).with_name("bad_answer_worker.py")


@pytest.mark.parametrize("line", ['{"status": "index_error", "mess', "not json", "[1, 2]",
                                  '{"status": "ok", "message": ""}', '{"status": "?"}',
                                  "[" * 100_000])
def test_a_kernel_worker_s_answer_line_that_is_no_answer_is_an_error_of_its_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str) -> None:
    """``replay --variant vllm``: a V2 kernel worker whose answer line was cut off (or is not
    JSON, or no answer) stopped the replay with a JSONDecodeError's traceback (or a KeyError's).
    That record's outcome is an error no value explains, as a worker that died; the worker is
    ended and the records after it run in a new one."""
    from test_round3_caps import replayed_with_worker

    monkeypatch.setenv("FORENSICS_TEST_BAD_ANSWER", line)
    rows = replayed_with_worker(tmp_path, monkeypatch, BAD_ANSWER_WORKER)
    assert rows["status"].tolist() == ["index_error", "error", "index_error"], rows
    assert rows["message"].tolist()[1] == (
        "the Triton interpreter's process answered a line that is not an answer (cut off, or "
        "not a JSON object with a status and a message): not explained by the values"), rows


def test_a_kernel_worker_whose_first_line_is_not_json_is_one_line_exit_2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
        ) -> None:
    """A V2 kernel worker whose first line (its ``ready``) was cut off made every record an
    error "JSONDecodeError: ..." of vLLM's code; it is a worker that did not start, as one
    that says it is not ready: one line, exit 2."""
    import sys

    from test_round3_caps import post

    from forensics.store.writer import write_capture
    from forensics.variants import triton_kernels

    capture = write_capture(tmp_path / "bad.capture", [post(0), post(1)])
    monkeypatch.setenv("FORENSICS_TEST_BAD_HELLO", '{"ready": tr')
    monkeypatch.setattr(triton_kernels.KernelWorker, "_command",
                        lambda self: [sys.executable, str(BAD_ANSWER_WORKER)])
    triton_kernels.close_worker()
    try:
        code, _, err = run_cli(capsys, "replay", capture, "--variant", "vllm")
    finally:
        triton_kernels.close_worker()
    assert code == 2, err
    assert err.strip().count("\n") == 0 and "Traceback" not in err, err
    assert ("vLLM's Triton kernels cannot run in Triton's interpreter here (the worker's "
            "first line is not JSON)") in err, err
