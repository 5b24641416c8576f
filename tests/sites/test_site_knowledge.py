"""What Model Runner V2's sites declare and the rest of the package reads from the registry:
the vLLM function each records (``Site.hook``) and the Triton kernel the ``vllm`` variant runs
(``Site.kernel``)."""

from __future__ import annotations

import dataclasses

import pytest

from forensics.probe import v2_hooks
from forensics.probe.patch import TARGETS, Target
from forensics.schema import SiteDefinitionError
from forensics.sites import SITES, get_site, hooked_at, rejection_drafts
from forensics.variants import triton_worker

RUNNER_V2 = "vllm.v1.worker.gpu.model_runner"
REJECTION = "vllm.v1.worker.gpu.spec_decode.rejection_sampler"


def test_hooked_at_tells_a_site_from_the_vllm_function_of_its_name() -> None:
    assert hooked_at()[f"{RUNNER_V2}:post_update"] == "post_update"
    assert hooked_at()[f"{RUNNER_V2}:combine_sampled_and_draft_tokens"] == "combine_tokens"
    assert set(hooked_at().values()) == {n for n in SITES if get_site(n).hook is not None}


def test_the_v2_wrappers_record_the_sites_whose_hook_they_wrap() -> None:
    recorded = {(t.module, t.attribute): t.site for t in v2_hooks.targets(Target) if t.recorded}
    assert recorded == {(RUNNER_V2, "combine_sampled_and_draft_tokens"): "combine_tokens",
                        (RUNNER_V2, "post_update"): "post_update",
                        (REJECTION, "gather_draft_sampled"): "rejection_drafts"}
    assert set(v2_hooks.targets(Target)) <= set(TARGETS)


def test_the_kernel_sites_name_their_worker_functions() -> None:
    kernels = {n: get_site(n).kernel for n in SITES if get_site(n).kernel is not None}
    assert set(kernels) == {"combine_tokens", "post_update", "rejection_drafts"}
    assert triton_worker.kernel_of("rejection_drafts") is rejection_drafts.run_kernel
    assert triton_worker.kernel_of("post_update") is triton_worker.run_post_update
    assert (triton_worker.kernel_of("combine_tokens")
            is triton_worker.run_combine_sampled_and_draft_tokens)
    with pytest.raises(ValueError, match="no Triton kernel"):
        triton_worker.kernel_of("embedding")


def test_a_kernel_must_be_module_and_function() -> None:
    with pytest.raises(SiteDefinitionError, match="'kernel' must be 'module:name'"):
        dataclasses.replace(get_site("post_update"), kernel="run_post_update")
