"""Which runner a capture's sites are: the sites each runner's stream reads, named by the vLLM
functions they record (the registry says which site records each), and the runner whose own
sites a capture holds (:func:`runner_of_sites`), read by the judge's streams, ``known``,
triage and the diff variant alike."""

from __future__ import annotations

import functools
from collections.abc import Iterable

from forensics.sites import SINK, hooked_at, hooked_by

#: the vLLM functions whose sites a stream reads
V1_BATCH_CHANGE = "update_num_computed_tokens_for_batch_change"
V1_PREPARE = "GPUModelRunner._prepare_input_ids"
V2_COMBINE = "vllm.v1.worker.gpu.model_runner:combine_sampled_and_draft_tokens"
V2_POST_UPDATE = "vllm.v1.worker.gpu.model_runner:post_update"


@functools.lru_cache(maxsize=1)
def v1_sites() -> tuple[str, str, str]:
    """The V1 sites a stream reads: the sink, the input staging, the batch change."""
    by = hooked_by()
    return SINK, by[V1_PREPARE], by[V1_BATCH_CHANGE]


@functools.lru_cache(maxsize=1)
def v2_sites() -> tuple[str, str, str]:
    """The V2 sites a stream reads: the sink, the combine step, the post-update."""
    at = hooked_at()
    return SINK, at[V2_COMBINE], at[V2_POST_UPDATE]


def runner_of_sites(sites: Iterable[str]) -> str | None:
    """The runner whose own stream sites (V1's staging and batch change, V2's combine step and
    post-update) ``sites`` hold, when they hold none of the other's; None otherwise (the
    embedding sink alone is both runners')."""
    present = set(sites)
    v1, v2 = present & set(v1_sites()[1:]), present & set(v2_sites()[1:])
    if bool(v1) == bool(v2):
        return None
    return "v1" if v1 else "v2"
