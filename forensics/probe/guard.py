"""Host-side bound checks run by guard mode before the consuming kernel.

Each ``check_*`` takes host values (numpy arrays, ints, lists) and returns the first
:class:`Violation`, or None. They mirror the index arithmetic of vLLM 0.33.0 (DESIGN.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from forensics.errors import IndexBoundsError
from forensics.sites.async_output import sampled_count
from forensics.sites.batch_change import gathered_rows


@dataclass(frozen=True)
class Violation:
    """One index outside ``[lower, upper)`` of ``tensor`` at batch ``row`` of ``site``."""

    site: str
    row: int | None
    tensor: str
    value: int
    lower: int
    upper: int

    @property
    def used(self) -> bool:
        """True when the call uses the value as an index (a gather, a read, the embedding's
        input): guard mode raises before the call. False for an id the call only writes or
        passes on (tensor ``out.*``, the ``async_output`` sentinel): guard mode records it,
        flushes, warns and lets the call run; the sink raises if the id is then used."""
        return not self.tensor.startswith("out.")


def _first_outside(values: np.ndarray, lower: int, upper: int) -> int | None:
    bad = np.flatnonzero((values < lower) | (values >= upper))
    return int(bad[0]) if bad.size else None


def check_batch_change(prev_positions: np.ndarray, lengths: Mapping[str, int]) -> Violation | None:
    """Rows gather every tensor of ``lengths`` at ``prev_positions.clamp(min=0)``, unchecked."""
    gather = gathered_rows(np.asarray(prev_positions))
    for tensor, length in lengths.items():
        row = _first_outside(gather, 0, length)
        if row is not None:
            return Violation("batch_change", row, tensor, int(gather[row]), 0, int(length))
    return None


def check_prepare_input_ids(prev_positions: np.ndarray, cu_num_tokens: np.ndarray,
                            num_draft_tokens: np.ndarray, prev_rows: int,
                            prev_num_spec_tokens: int, draft_numel: int | None) -> Violation | None:
    """Common rows read ``prev_sampled_token_ids[prev_position]`` and, on the scatter path,
    ``draft_token_ids.flatten()[prev_position * prev_num_spec_tokens + j]``."""
    prev_positions = np.asarray(prev_positions)
    common = np.flatnonzero(prev_positions >= 0)
    for row in common:
        if prev_positions[row] >= prev_rows:
            return Violation("prepare_input_ids", int(row), "prev_sampled_token_ids",
                             int(prev_positions[row]), 0, int(prev_rows))
    if draft_numel is None or _fast_path(prev_positions, cu_num_tokens, common):
        return None
    for row in common:
        start = int(prev_positions[row]) * int(prev_num_spec_tokens)
        for j in range(int(num_draft_tokens[row])):
            if start + j >= draft_numel:
                return Violation("prepare_input_ids", int(row), "draft_token_ids",
                                 start + j, 0, int(draft_numel))
    return None


def _fast_path(prev_positions: np.ndarray, cu_num_tokens: np.ndarray, common: np.ndarray) -> bool:
    if common.size == 0:
        return True  # nothing is gathered
    last = np.asarray(cu_num_tokens)[common] - 1
    return bool(np.all(prev_positions[common] == last) and last.max() == common.size - 1)


def check_async_output(req_ids: Sequence[str], prev_req_id_to_index: Mapping[str, int],
                       outputs: Sequence[Sequence[int]], sampled: Sequence[Sequence[int]],
                       vocab_size: int) -> Violation | None:
    """Rows ending in ``-1`` placeholders read ``sampled[prev_row]`` and write its leading ids.
    vLLM cuts the row's list to the ids it wrote (``del new_ids[n:]`` on the list it reads), so
    a later request mapped to the same previous row reads only those."""
    cut: dict[int, list[int]] = {}  # previous rows as earlier requests left them
    for row, req_id in enumerate(req_ids):
        prev = prev_req_id_to_index.get(req_id)
        output = outputs[row] if row < len(outputs) else ()
        if prev is None or not output or output[-1] != -1:
            continue
        if not 0 <= prev < len(sampled):
            return Violation("async_output", row, "sampled_token_ids_cpu", int(prev), 0,
                             len(sampled))
        written = cut[prev] = _written(output, cut.get(prev, sampled[prev]))
        for value in written:
            if not 0 <= value < vocab_size:
                return Violation("async_output", row, "out.output_token_ids", int(value), 0,
                                 int(vocab_size))
    return None


def _written(output: Sequence[int], new_ids: Sequence[int]) -> list[int]:
    new_ids = list(new_ids)
    if not new_ids:
        return []
    minus = new_ids.index(-1) if new_ids[-1] == -1 else len(new_ids)
    count = int(sampled_count(len(new_ids), minus, new_ids[-1] == -1))
    placeholders = len(output) - len(list(_strip_placeholders(output)))
    return new_ids[:min(count, placeholders)]


def _strip_placeholders(output: Sequence[int]) -> Sequence[int]:
    end = len(output)
    while end > 0 and output[end - 1] == -1:
        end -= 1
    return output[:end]


def check_ids(site: str, tensor: str, ids: np.ndarray, upper: int,
              cu_num_tokens: np.ndarray | None = None) -> Violation | None:
    """Every id must lie in ``[0, upper)``. The row of an offending token comes from
    ``cu_num_tokens`` (inclusive cumulative tokens per row) when given, else it is None."""
    ids = np.asarray(ids).reshape(-1)
    element = _first_outside(ids, 0, upper)
    if element is None:
        return None
    row = None
    if cu_num_tokens is not None and len(cu_num_tokens) and element < int(cu_num_tokens[-1]):
        row = int(np.searchsorted(np.asarray(cu_num_tokens), element, side="right"))
    return Violation(site, row, f"{tensor}[{element}]", int(ids[element]), 0, int(upper))


def passed_on_message(violation: Violation, step: int, rank: int,
                      capture: Path | str | None) -> str:
    """The warning for a value out of range that a call only writes or passes on."""
    row = "" if violation.row is None else f" row {violation.row}"
    return (f"forensics guard: site {violation.site!r} step {step} rank {rank}{row} wrote "
            f"{violation.tensor} value {violation.value} outside [{violation.lower}, "
            f"{violation.upper}); not used as an index here, so the engine goes on (guard mode "
            f"raises if it reaches an index); recorded in {capture or 'no capture'}")


def bounds_error(violation: Violation, step: int, rank: int,
                 capture: Path | str | None) -> IndexBoundsError:
    """Return the IndexBoundsError describing ``violation`` (its attributes carry the fields)."""
    where = f"records up to this call are in {capture}" if capture else "no capture was written"
    row = "" if violation.row is None else f" row {violation.row}"
    error = IndexBoundsError(
        f"forensics guard: site {violation.site!r} step {step} rank {rank}{row}: "
        f"{violation.tensor} value {violation.value} is outside [{violation.lower}, "
        f"{violation.upper}) (bound {violation.upper}); {where}; run "
        f"`forensics replay {capture or 'CAPTURE'}` to trace it")
    for name, value in (("site", violation.site), ("step", step), ("rank", rank),
                        ("row", violation.row), ("value", violation.value),
                        ("bound", violation.upper), ("tensor", violation.tensor),
                        ("capture", str(capture) if capture else None)):
        setattr(error, name, value)
    return error
