"""Site ``prepare_input_ids``: the async branch of ``GPUModelRunner._prepare_input_ids``.

vLLM 0.33.0 skips rows with ``prev_position < 0``; the others are the common rows. When some rows
are not common (``num_common < total - drafts of the common rows``) the CPU staging is copied to
the device buffer first. The **fast path** (every common row has ``prev_position ==
cu_num_tokens[row] - 1`` and the largest is ``num_common - 1``) copies
``prev_sampled_token_ids[:num_common, 0]`` as one slice: a one-row source is silently broadcast.
The **slow path** scatters ``prev_sampled_token_ids[prev_position, 0]`` to slot
``cu_num_tokens[row] - 1 - num_draft_tokens[row]``, then (only when drafts were captured) draft
``j`` from ``draft_token_ids.flatten()[prev_position * prev_num_spec_tokens + j]``.
The patched model also skips common rows at or past ``prev_sampled_token_ids.shape[0]``.

The total number of scheduled tokens is ``cu_num_tokens[-1]`` (0 without rows).
"

This package is the site: its records and their checks (``records``), the path each record
takes (``plans``), the columnar replay (``replay``) and the torch model it falls back to and is
checked against (``model``), ``scan``, the probe's ``guard``; this module declares :data:`SITE`
and the ``forensics repro`` call.
"""

from __future__ import annotations

from forensics.sites.base import Site
from forensics.sites.prepare_input_ids.guard import guard
from forensics.sites.prepare_input_ids.records import (
    FIELDS,
    NAME,
    OUTPUT_FIELDS,
    SUMMARY_BOUND,
    SUMMARY_TENSOR,
    check_batch,
    check_record,
)
from forensics.sites.prepare_input_ids.replay import outcome_checks, prepare_columns, run_batch
from forensics.sites.prepare_input_ids.scan import scan_indices

#: this module's site: its schema and operations (the registry holds it)
#: ``forensics repro``: the vLLM function a standalone test calls with one record ``r``,
#: and the test body that calls it (``{lower}``/``{upper}``: the first finding's bound)
REPRO = ('vllm.v1.worker.gpu_model_runner.GPUModelRunner._prepare_input_ids',
         '''    from vllm.v1.worker import gpu_model_runner

    if hasattr(gpu_model_runner, "PIN_MEMORY"):
        gpu_model_runner.PIN_MEMORY = False  # CPU: no pinned memory

    class Buffer:
        """Stand-in for CpuGpuBuffer: .cpu, .gpu, .np and copy_to_gpu."""

        def __init__(self, cpu, gpu):
            self.cpu, self.gpu, self.np = cpu, gpu, cpu.numpy()

        def copy_to_gpu(self, n=None):
            cpu, gpu = (self.cpu, self.gpu) if n is None else (self.cpu[:n], self.gpu[:n])
            return gpu.copy_(cpu, non_blocking=True)

    req_ids = r.get("req_ids") or [f"r{i}" for i in range(len(r["prev_positions"]))]
    cu_num_tokens = r["cu_num_tokens"].numpy().copy()
    total = int(cu_num_tokens[-1]) if len(cu_num_tokens) else 0
    staged = r["input_ids"].clone()
    device = r["input_ids_device"].clone() if "input_ids_device" in r else staged.clone()
    drafts = r["num_draft_tokens"].tolist()
    budget(8 * sum(max(int(k), 0) for k in drafts), "num_draft_tokens", sum(drafts))
    spec = {rid: [-1] * int(k) for rid, k in zip(req_ids, drafts) if k > 0}
    runner = NS(_pp_recv_work=None, enable_prompt_embeds=False,
                prev_positions=NS(np=r["prev_positions"].numpy().copy()),
                input_batch=NS(prev_sampled_token_ids=r["prev_sampled_token_ids"].clone(),
                               req_ids=req_ids),
                input_ids=Buffer(staged, device), prev_num_spec_tokens=r["prev_num_spec_tokens"],
                _draft_token_ids=r.get("draft_token_ids"), device=torch.device("cpu"))
    gpu_model_runner.GPUModelRunner._prepare_input_ids(
        runner, NS(scheduled_spec_decode_tokens=spec), len(req_ids), total, cu_num_tokens)
    return [("input_ids", runner.input_ids.gpu[:total].tolist(), ())]
''')
SITE = Site(name=NAME, fields=FIELDS, output_fields=OUTPUT_FIELDS, summary_bound=SUMMARY_BOUND,
            summary_tensor=SUMMARY_TENSOR,
            adapter="forensics.variants.vllm_adapters:run_prepare_input_ids",
            hook="vllm.v1.worker.gpu_model_runner:GPUModelRunner._prepare_input_ids",
            repro=REPRO,
            feeds_sink=(f"{OUTPUT_FIELDS[0]}_after", SUMMARY_BOUND),
            checks=outcome_checks, scan_indices=scan_indices, guard=guard,
            check_record=check_record, check_batch=check_batch, prepare_columns=prepare_columns,
            run_batch=run_batch)
