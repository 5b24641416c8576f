"""A plain-torch copy of vLLM 0.33.0's ``update_num_computed_tokens_for_batch_change`` body.

For measuring and testing the probe's wrapper where importing vLLM (tens of seconds) is not
wanted: the benchmark, the GPU check script and the probe's unit tests. The replay never uses
it: the ``vllm`` variant calls the installed function itself.
"""

from __future__ import annotations

from typing import Any


def batch_change_reference(num_computed_tokens: Any, num_accepted_tokens: Any,
                           prev_positions: Any, valid_sampled_token_count: Any,
                           prev_num_draft_tokens: Any, cpu_num_computed_tokens: Any) -> None:
    """Update ``num_computed_tokens[:n]`` and ``num_accepted_tokens`` in place, as vLLM 0.33.0
    does (clamped gathers at ``prev_positions``, no upper check: may raise IndexError)."""
    import torch

    gather = prev_positions.clamp(min=0)
    valid = valid_sampled_token_count[gather]
    prev_computed = num_computed_tokens[gather]
    participating = (prev_positions >= 0) & (prev_num_draft_tokens[gather] > 0)
    n = prev_positions.shape[0]
    num_computed_tokens[:n].copy_(torch.where(participating, prev_computed + valid.int(),
                                              cpu_num_computed_tokens))
    num_accepted_tokens.copy_(torch.where(participating, valid, num_accepted_tokens))
