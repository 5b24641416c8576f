"""Faults injected in the live engine's worker (tests/engine/harness) at a chosen step and row,
in record and in guard mode, with and without speculative decoding."""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
from engine_runs import PROJECT_PYTHON, VOCAB, Run, forensics_cli, replay_json

TORCH_INDEX_ERROR = "index out of range in self"
OOB = 100000
#: the last step a worker runs after a fault at step 14: with async scheduling the engine core
#: has already queued step 15 when step 14 fails, and the worker runs it (with the same stale
#: sampled id) before the failure reaches the engine core
QUEUED_AFTER_FAULT = {14, 15}


def _fault(run: Run, kind: str) -> dict[str, Any]:
    found = [f for f in run.faults if f.get("event") == "fault" and f["kind"] == kind]
    assert len(found) == 1, (run.faults, run.log[-3000:])
    return found[0]


def _records(run: Run, site: str, step: int) -> list[Any]:
    import forensics

    assert run.capture is not None, run.log[-3000:]
    return [r for r in forensics.load(run.capture) if r.site == site and r.step == step]


def _findings(report: dict[str, Any], variant: str, site: str, step: int) -> list[dict]:
    return [f for f in report["findings"]
            if f["variant"] == variant and f["site"] == site and f["step"] == step]


def _steps(run: Run, site: str) -> list[int]:
    import forensics

    return sorted(r.step for r in forensics.load(run.capture) if r.site == site)


def test_a_sentinel_in_a_rejected_slot_is_an_async_output_finding(faults_record: Run) -> None:
    """vocab_size written into a rejected slot at step 8 reaches update_async_output_token_ids
    at step 9, for that request: upstream writes it (violation), patched stops at it (ok)."""
    fault = _fault(faults_record, "sentinel")
    assert fault["step"] == 8 and fault["value"] == VOCAB
    report = replay_json(PROJECT_PYTHON, faults_record.capture, "upstream", "patched")
    assert report["verdicts"]["upstream"]["async_output"] == "violation"
    assert report["verdicts"]["patched"]["async_output"] == "ok"
    found = _findings(report, "upstream", "async_output", 9)
    assert [(f["value"], f["kind"], f["upper"]) for f in found] == [(VOCAB, "out_of_bounds", VOCAB)]
    (record,) = _records(faults_record, "async_output", 9)
    assert record["req_ids"][found[0]["row"]] == fault["req_id"]
    assert _findings(report, "patched", "async_output", 9) == []


def test_a_placeholder_with_spec_decode_feeds_token_zero_silently(faults_record: Run) -> None:
    """vLLM clamps input ids to >= 0 before the model when it speculates: the -1 is in
    prepare_input_ids' output, the model receives 0 and nothing crashes at that step."""
    fault = _fault(faults_record, "placeholder")
    assert fault["step"] == 4 and fault["value"] == -1
    (prepared,) = _records(faults_record, "prepare_input_ids", 4)
    (embedded,) = _records(faults_record, "embedding", 4)
    after = np.asarray(prepared["input_ids_device_after"])
    slots = np.flatnonzero(after == -1)
    assert slots.size == 1
    fed = np.asarray(embedded["input_ids"])
    assert fed[slots[0]] == 0 and (fed >= 0).all()
    report = replay_json(PROJECT_PYTHON, faults_record.capture, "upstream")
    at_prepare = _findings(report, "upstream", "prepare_input_ids", 4)
    assert [f["value"] for f in at_prepare if f["kind"] == "out_of_bounds"] == [-1]
    # issue 40: the clamp is a finding at its step, request and position; the embedding saw 0
    (clamped,) = [f for f in at_prepare if f["kind"] == "clamped_placeholder"]
    assert clamped["element"] == int(slots[0]) and clamped["value"] == -1
    assert clamped["req_id"] and clamped["position"] is not None
    assert clamped["effect"] == "verified"
    assert _findings(report, "upstream", "embedding", 4) == []
    assert [(s["step"], s["element"], s["written"], s["fed"]) for s in report["silent_inputs"]
            if s["step"] == 4] == [(4, int(slots[0]), -1, 0)]
    text = forensics_cli(PROJECT_PYTHON, "replay", str(faults_record.capture)).stdout
    assert (f"step 4 rank 0: prepare_input_ids left id -1 at input_ids[{slots[0]}]" in text
            and "a wrong token, silently, not a crash" in text), text
    assert 4 < 14 <= max(_steps(faults_record, "embedding"))  # the engine went on past it
    known = forensics_cli(PROJECT_PYTHON, "known", str(faults_record.capture), "--json")
    assert known.returncode in (0, 1), known.stderr[-3000:]
    answer = json.loads(known.stdout)
    assert "placeholder-reaches-input-ids" in answer.get("known", answer)["matches"], answer


def test_an_out_of_range_sampled_id_is_found_and_torch_raises(faults_record: Run) -> None:
    """Record mode: the id reaches the embedding and torch raises; the capture shows it at
    prepare_input_ids and at the embedding (whose origin is prepare_input_ids)."""
    fault = _fault(faults_record, "oob")
    assert fault["step"] == 14 and fault["value"] == OOB
    assert faults_record.error is not None and TORCH_INDEX_ERROR in faults_record.log
    assert "IndexBoundsError" not in faults_record.log
    report = replay_json(PROJECT_PYTHON, faults_record.capture, "upstream")
    assert [f["value"] for f in _findings(report, "upstream", "prepare_input_ids", 14)] == [OOB]
    (sink,) = _findings(report, "upstream", "embedding", 14)
    assert sink["value"] == OOB and sink["origin"] == "prepare_input_ids"
    assert max(_steps(faults_record, "embedding")) in QUEUED_AFTER_FAULT


def test_guard_mode_passes_the_sentinel_on_with_one_warning(faults_guard: Run) -> None:
    """The async_output sentinel is only written: recorded, flushed, warned once, no raise."""
    import forensics

    warnings = re.findall(r"forensics guard: site 'async_output' step (\d+) rank 0 row (\d+) "
                          r"wrote out\.output_token_ids value (\d+)", faults_guard.log)
    assert [(int(s), int(v)) for s, _, v in warnings] == [(9, VOCAB)]
    events = forensics.load(faults_guard.capture).summary()["events"]
    passed = [e for e in events if e["kind"] == "guard_passed_on"]
    assert [(e["site"], e["step"], e["value"]) for e in passed] == [("async_output", 9, VOCAB)]
    assert max(_steps(faults_guard, "async_output")) > 9  # the engine went on


def test_guard_mode_raises_before_torch_and_keeps_every_record(faults_guard: Run) -> None:
    assert faults_guard.error is not None
    raised = (r"IndexBoundsError: forensics guard: site 'embedding' step 14 rank 0 row 2: "
              r"input_ids\[\d+\] value 100000")
    assert re.search(raised, faults_guard.log), faults_guard.log[-3000:]
    assert TORCH_INDEX_ERROR not in faults_guard.log
    for site in ("batch_change", "prepare_input_ids", "async_output", "embedding"):
        steps = _steps(faults_guard, site)
        first = 0 if site == "embedding" else 1
        # async_output runs in sample_tokens, which a failed execute_model never reaches
        assert steps[-1] in ({13} if site == "async_output" else QUEUED_AFTER_FAULT), site
        assert steps == list(range(first, steps[-1] + 1)), (site, steps)  # every record
    import forensics

    events = forensics.load(faults_guard.capture).summary()["events"]
    raised = [e["step"] for e in events if e["kind"] == "guard_violation"]
    assert raised[0] == 14 and set(raised) <= QUEUED_AFTER_FAULT


def test_without_spec_decode_a_placeholder_reaches_the_embedding(nospec_record: Run,
                                                                   nospec_guard: Run) -> None:
    """No speculation, no clamp: the -1 reaches the embedding and torch raises (record mode);
    guard mode raises IndexBoundsError first."""
    recorded, guarded = nospec_record, nospec_guard
    for run in (recorded, guarded):
        assert _fault(run, "placeholder")["step"] == 4
        (embedded,) = _records(run, "embedding", 4)
        assert -1 in np.asarray(embedded["input_ids"]).tolist()
    assert TORCH_INDEX_ERROR in recorded.log and "IndexBoundsError" not in recorded.log
    assert re.search(r"IndexBoundsError: forensics guard: site 'embedding' step 4 rank 0 row 1: "
                     r"input_ids\[\d+\] value -1", guarded.log), guarded.log[-3000:]
    assert TORCH_INDEX_ERROR not in guarded.log
