"""Hostile input, round 16 (attack 16b): the replay's overall deadline (T83a), the race check
it feeds, and what a conclusion says of records no variant of the engine's code judged.

T88a: the race check counted a step as compared, and said "they agree", where what the
writer wrote was unknown (no output recorded, and the baseline's replay of the writer raised
or was cut by the overall deadline).
T88b: a replay whose overall deadline cut only the race check's replay of writer records said
"Not judged: : the overall deadline ... passed ...; they count as errors" (no record named,
none counted as an error).
T88c/T88f: records that ended in errors under every engine variant read as "the capture shows
no failure to report" and "the captured values do not explain the crash".
T88d/T88e: the race check said "they agree" past the writer's output, and counted at most its
cap of findings (making a dict of every disagreement of a step first).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from forensics.records import Record
from forensics.store.writer import write_capture
from forensics.validate import validate_record

COUNTED_WORKER = Path(__file__).with_name("round16b_counted_worker.py")


def _i32(*values: int) -> np.ndarray:
    return np.array(values, np.int32)


def _combine(**change: object) -> Record:
    """A ``combine_tokens`` record (step 0): row 0 (slot 3) verifies two drafts, row 1 (slot 0)
    decodes one token; it writes 11, 7, 8 then 21 into the first ids of ``input_ids``."""
    drafts = np.zeros((4, 2), np.int32)
    drafts[3] = (7, 8)
    fields: dict[str, object] = dict(
        input_ids=np.full(6, 99, np.int32), idx_mapping=np.array([3, 0], np.int64),
        last_sampled_tokens=_i32(21, 0, 0, 11), query_start_loc=_i32(0, 3, 4),
        seq_lens=_i32(10, 7), prefill_len=_i32(4, 0, 0, 5), draft_tokens=drafts,
        cu_num_logits=_i32(0, 3, 4), num_new_sampled_tokens=1, vocab_size=50,
        req_ids=["a", "b"])
    fields.update(change)
    return validate_record(Record("combine_tokens", 0, 0, fields), "test record")


def _embedding(ids: tuple[int, ...] = (11, 7, 8, 21)) -> Record:
    """The ``embedding`` record of step 0: what the model received (in range by default)."""
    return validate_record(Record("embedding", 0, 0, {
        "input_ids": np.array(ids, np.int32), "num_embeddings": 50, "req_ids": ["a", "b"],
        "cu_num_tokens": np.array([3, 4])}), "test record")


# ----------------------------------------------- T88a: a writer whose output is unknown


def test_race_check_never_says_they_agree_where_the_writer_produced_nothing(
        tmp_path: Path) -> None:
    """A ``combine_tokens`` record whose slot 9 is past its buffers: the upstream replay of it
    raises, so what it wrote is unknown. The race check counted the step as compared and said
    "Compared ... at 1 step(s): they agree." while the embedding had received ids (99) that a
    real write would not have held; now the step is not compared and the sentence says why,
    and the known answer says it too."""
    from forensics.present.conclusion import conclude
    from forensics.replaying import replay

    capture = write_capture(tmp_path / "raise.capture", [
        _combine(idx_mapping=np.array([9, 0], np.int64)), _embedding((99, 99, 99, 99))])
    result = replay(capture)
    text = result.race.summary()
    assert "agree" not in text and "Compared" not in text, text
    assert result.race.compared == 0 and len(result.race.unproduced) == 1, result.race
    assert "1 step(s) were not compared: what the writer wrote there is not known (no " \
           "output recorded, and the upstream replay produced none; the first: " \
           "combine_tokens at step 0 rank 0)" in text, text
    assert text in conclude(result).paragraph()
    agreed = write_capture(tmp_path / "agree.capture", [_combine(), _embedding()])
    assert replay(agreed).race.summary().endswith("at 1 step(s): they agree."), "unchanged"


# ----------------------------------------- T88b: the deadline cut only the race's replay


def test_a_deadline_that_cuts_only_the_race_replay_is_one_true_sentence(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``replay --variant vllm --deadline 5`` of a ``combine_tokens`` and an ``embedding``
    record, with a kernel worker that answers the replay of ``combine_tokens`` and then hangs:
    the overall deadline cut the race check's replay of the writer (the baseline, ``vllm``),
    and the conclusion said "Not judged: : the overall deadline of 5 s passed before the
    Triton interpreter answered them; they count as errors" (no record named, none an error)
    while the race check said the step agreed. Now it says which replay was cut and that the
    race check did not compare that step (the deadline may pass before the race's replay
    asks the worker, or while it waits: the sentence is the same)."""
    from forensics.present.conclusion import conclude
    from forensics.replaying import replay
    from forensics.variants import triton_kernels

    capture = write_capture(tmp_path / "race.capture", [_combine(), _embedding()])
    monkeypatch.setenv("FORENSICS_TEST_ANSWERS", "2")  # the warm-up's, then combine_tokens'
    monkeypatch.setattr(triton_kernels.KernelWorker, "_command",
                        lambda self: [sys.executable, str(COUNTED_WORKER)])
    triton_kernels.close_worker()
    try:  # the worker starts (imports vLLM) before the clock runs
        replay(write_capture(tmp_path / "warm.capture", [_combine()]), variants=["vllm"])
        result = replay(capture, variants=["vllm"], deadline=5)
    finally:
        triton_kernels.close_worker()
    assert result.outcomes["status"].tolist() == ["ok", "ok"], result.outcomes
    assert result.cut == "the overall deadline of 5 s passed"
    sentence = conclude(result).cut
    assert "Not judged: :" not in sentence and "count as errors" not in sentence, sentence
    assert sentence == ("Not judged: the overall deadline of 5 s passed (counted from the "
                        "replay's start) before the race check's replay of writer records was "
                        "answered. The race check did not compare 1 step(s): what the writer "
                        "wrote there is not known (give a longer --deadline)."), sentence
    assert "agree" not in result.race.summary(), result.race.summary()


# ------------------------------- T88c: records no engine variant judged are no "no failure"


def _replayed_unanswered(root: Path, events: list[dict[str, object]],
                         monkeypatch: pytest.MonkeyPatch,
                         capsys: pytest.CaptureFixture[str]) -> str:
    """The output of ``replay --variant vllm --deadline 3`` (exit 0) of three ``post_update``
    records at ``root`` (step 1's sampled id 60000 past its 50 bins) and ``events``, by a
    kernel worker that answers nothing."""
    from test_round3_caps import post

    from forensics.cli import main
    from forensics.variants import triton_kernels

    sampled = np.array([(5, 60000, -1), (22, -1, -1)], np.int32)
    capture = write_capture(root, [post(0), post(1, sampled_tokens=sampled), post(2)],
                            events=events)
    monkeypatch.setenv("FORENSICS_TEST_ANSWERS", "0")
    monkeypatch.setattr(triton_kernels.KernelWorker, "_command",
                        lambda self: [sys.executable, str(COUNTED_WORKER)])
    triton_kernels.close_worker()
    try:
        code = main(["replay", str(capture), "--variant", "vllm", "--deadline", "3"])
    finally:
        triton_kernels.close_worker()
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0, out
    return out


def test_records_the_deadline_left_unjudged_never_read_as_no_failure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``replay --variant vllm --deadline 3`` of three ``post_update`` records, step 1's
    sampled id 60000 past its 50 bins (upstream finds it), with a kernel worker that answers
    nothing: all three records are errors, not judged, yet the conclusion said "No known
    signature matches, and the capture shows no failure to report." Now it says whether the
    capture shows a failure is not known, and how many records no variant of the engine's code
    judged."""
    from forensics.cli import main

    capture = tmp_path / "cut.capture"
    out = _replayed_unanswered(capture, [], monkeypatch, capsys)
    assert "vllm: ok 0, index_error 0, error 3" in out, out
    assert "shows no failure" not in out, out
    assert ("No known signature matches the records judged; whether the capture shows a "
            "failure to report is not known (3 record(s) were not judged: they ended in errors "
            "under every replayed variant of the engine's code)") in out, out
    assert main(["replay", str(capture), "--variant", "upstream"]) == 0
    judged = " ".join(capsys.readouterr().out.split())
    assert "No known signature matches: a reason to file a new issue" in judged, judged


# --------------------------------- T88d: a writer's output shorter than what was received


def test_race_check_never_says_they_agree_past_what_the_writer_holds(tmp_path: Path) -> None:
    """A ``combine_tokens`` record whose recorded output ``input_ids_after`` holds 2 ids while
    the embedding received 4 (the last two 99): the check compared the first two and said
    "they agree." of the step; now it says they agree on the ids both hold and that the ids
    past the writer's output were not compared, naming the step and both lengths."""
    from forensics.replaying import replay

    capture = write_capture(tmp_path / "short.capture", [
        _combine(input_ids_after=np.array([11, 7], np.int32)), _embedding((11, 7, 99, 99))])
    race = replay(capture).race
    text = race.summary()
    assert not text.endswith("they agree."), text
    assert "at 1 step(s): they agree on the ids both hold. At 1 step(s) the embedding " \
           "received more ids than the writer's output holds, and those past it were not " \
           "compared (the first: step 0 rank 0, 4 received, 2 written)." in text, text
    assert race.short == [(0, 0, 4, 2)]
    whole = write_capture(tmp_path / "whole.capture", [
        _combine(input_ids_after=np.array([11, 7, 8, 21, 99, 99], np.int32)),
        _embedding((11, 7, 8, 21))])
    assert replay(whole).race.summary().endswith("at 1 step(s): they agree."), "unchanged"


# ------------------------- T88e: the race check's disagreements past its cap of findings


def _disagreeing(path: Path, steps: int, ids: int) -> Path:
    """A capture of ``steps`` steps whose ``combine_tokens`` wrote ``ids`` zeros (recorded)
    where the embedding received ``ids`` ones: every element disagrees."""
    records = []
    for step in range(steps):
        writer = _combine(input_ids_after=np.zeros(ids, np.int32))
        records += [validate_record(Record("combine_tokens", step, 0, dict(writer.fields)), "t"),
                    validate_record(Record("embedding", step, 0, {
                        "input_ids": np.ones(ids, np.int32), "num_embeddings": 50,
                        "req_ids": ["a"], "cu_num_tokens": np.array([ids])}), "t")]
    return write_capture(path, records)


def test_race_check_counts_every_disagreement_and_keeps_only_its_cap(tmp_path: Path) -> None:
    """Three steps of 6,000 disagreeing ids each: the check said "10000 element(s) disagree"
    (its cap of findings, 18,000 do) and stopped comparing at the cap; one step of 200,000 made
    200,000 dicts before the cap cut them (a 15 MB capture of 2,000,000 took 1.5 GB). Now every
    compared step is counted, the sentence says 18000 disagree and 10000 are kept, and the
    check holds no more than its cap of findings while it runs."""
    import tracemalloc

    from forensics.judge.race import MAX_FINDINGS, race_check
    from forensics.replaying import replay

    race = replay(_disagreeing(tmp_path / "three.capture", 3, 6000)).race
    assert len(race.findings) == MAX_FINDINGS and race.disagree == 18_000, race
    assert "at 3 step(s): 18000 element(s) disagree (10000 kept as findings), the first at " \
           "step 0 rank 0" in race.summary(), race.summary()
    result = replay(_disagreeing(tmp_path / "one.capture", 1, 200_000))
    tracemalloc.start()
    try:
        again = race_check(result)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert again.disagree == 200_000 and len(again.findings) == MAX_FINDINGS
    assert peak < 40 * 2**20, f"the race check peaked at {peak / 2**20:.0f} MiB"


# ----------------- T88f: a crash beside records no engine variant judged is not "unexplained"


def test_a_crash_beside_unjudged_records_is_never_said_unexplained_by_the_values(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A capture holding an engine exception and three ``post_update`` records, step 1's id
    60000 past its 50 bins, replayed with ``--variant vllm --deadline 3`` by a kernel worker
    that answers nothing: the conclusion said "Not explained: the capture holds a crash, yet no
    variant finds a captured value out of range, so the captured values do not explain the
    crash" of records no variant judged. Now it says how many were not judged and that whether
    the values explain the crash is not known."""
    crash = {"kind": "engine_exception", "step": 1, "rank": 0,
             "message": "RuntimeError: CUDA error: an illegal memory access was encountered"}
    out = _replayed_unanswered(tmp_path / "crash.capture", [crash], monkeypatch, capsys)
    assert "do not explain the crash" not in out, out
    assert ("Not explained: the capture holds a crash, yet no variant finds a captured value "
            "out of range in the records judged, and 3 record(s) were not judged (they ended "
            "in errors under every replayed variant of the engine's code), so whether the "
            "captured values explain the crash is not known.") in out, out
