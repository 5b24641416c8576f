"""The probe's per-call check of ``async_output`` (``Site.guard``): the previous rows each call
reads and the ids it writes, on plain lists."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from forensics.sites._common import (
    Violation,
    placeholder_start,
)
from forensics.sites.async_output.lines import sampled_count
from forensics.sites.async_output.records import NAME


def guard(req_ids: Sequence[str], prev_req_id_to_index: Mapping[str, int],
                       outputs: Sequence[Sequence[int]], sampled: Sequence[Sequence[int]],
                       vocab_size: int) -> Violation | None:
    """The probe's per-call check (``Site.guard``): rows ending in ``-1`` placeholders read
    ``sampled[prev_row]`` and write its leading ids.
    vLLM cuts the row's list to the ids it wrote (``del new_ids[n:]`` on the list it reads), so
    a later request mapped to the same previous row reads only those."""
    cut: dict[int, list[int]] = {}  # previous rows as earlier requests left them
    for row, req_id in enumerate(req_ids):
        prev = prev_req_id_to_index.get(req_id)
        output = outputs[row] if row < len(outputs) else ()
        if prev is None or not output or output[-1] != -1:
            continue
        if not 0 <= prev < len(sampled):
            return Violation(NAME, row, "sampled_token_ids_cpu", int(prev), 0,
                             len(sampled))
        written = cut[prev] = _written(output, cut.get(prev, sampled[prev]))
        for value in written:
            if not 0 <= value < vocab_size:
                return Violation(NAME, row, "out.output_token_ids", int(value), 0,
                                 int(vocab_size))
    return None


def _written(output: Sequence[int], new_ids: Sequence[int]) -> list[int]:
    new_ids = list(new_ids)
    if not new_ids:
        return []
    minus = new_ids.index(-1) if new_ids[-1] == -1 else len(new_ids)
    count = int(sampled_count(len(new_ids), minus, new_ids[-1] == -1))
    placeholders = len(output) - placeholder_start(output)
    return new_ids[:min(count, placeholders)]
