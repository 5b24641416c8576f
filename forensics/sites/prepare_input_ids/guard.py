"""The probe's per-call check of ``prepare_input_ids`` (``Site.guard``): the rows and drafts a
call reads, on the call's own arrays."""

from __future__ import annotations

import numpy as np

from forensics.sites._common import (
    Violation,
)
from forensics.sites.prepare_input_ids.plans import one_slice
from forensics.sites.prepare_input_ids.records import NAME


def guard(prev_positions: np.ndarray, cu_num_tokens: np.ndarray,
                            num_draft_tokens: np.ndarray, prev_rows: int,
                            prev_num_spec_tokens: int, draft_numel: int | None) -> Violation | None:
    """The probe's per-call check (``Site.guard``): common rows read
    ``prev_sampled_token_ids[prev_position]`` and, on the scatter path,
    ``draft_token_ids.flatten()[prev_position * prev_num_spec_tokens + j]``."""
    prev_positions = np.asarray(prev_positions)
    common = np.flatnonzero(prev_positions >= 0)
    for row in common:
        if prev_positions[row] >= prev_rows:
            return Violation(NAME, int(row), "prev_sampled_token_ids",
                             int(prev_positions[row]), 0, int(prev_rows))
    if draft_numel is None or _fast_path(prev_positions, cu_num_tokens, common):
        return None
    for row in common:
        start = int(prev_positions[row]) * int(prev_num_spec_tokens)
        for j in range(int(num_draft_tokens[row])):
            if start + j >= draft_numel:
                return Violation(NAME, int(row), "draft_token_ids",
                                 start + j, 0, int(draft_numel))
    return None


def _fast_path(prev_positions: np.ndarray, cu_num_tokens: np.ndarray, common: np.ndarray) -> bool:
    if common.size == 0:
        return True  # nothing is gathered
    last = np.asarray(cu_num_tokens)[common] - 1
    return bool(one_slice(common.size, not np.all(prev_positions[common] == last), last.max()))
