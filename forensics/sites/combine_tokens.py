"""Site ``combine_tokens``: Model Runner V2's ``combine_sampled_and_draft_tokens``.

``vllm.v1.worker.gpu.input_batch.combine_sampled_and_draft_tokens`` (vLLM 0.32/0.33) runs one
Triton program per batch row ``i`` with no bounds check:

- ``slot = idx_mapping[i]`` indexes the per-slot buffers ``prefill_len``,
  ``last_sampled_tokens`` and ``draft_tokens`` (``[max_num_reqs, num_speculative_steps]``);
- with ``num_logits = cu_num_logits[i + 1] - cu_num_logits[i]`` and ``k = num_logits -
  num_new_sampled_tokens`` drafts, a row past its prompt (``seq_lens[i] > prefill_len[slot]``)
  gets ``last_sampled_tokens[slot]`` at ``input_ids[query_end - num_logits]`` (when
  ``num_new_sampled_tokens`` is 1 and ``seq_lens[i] - num_logits >= prefill_len[slot]``) and
  ``draft_tokens[slot, j]`` at ``input_ids[query_end - k + j]`` for ``j < k`` (``query_end =
  query_start_loc[i + 1]``; only ``j`` below the kernel's block, the next power of two of
  ``num_speculative_steps + num_new_sampled_tokens``).

So a ``-1`` draft or a ``vocab_size`` last sampled token is written into ``input_ids`` as it is:
V2 does not clamp placeholders before the embedding, unlike V1's ``_preprocess``. A slot outside
the buffers is an illegal read on a GPU; a draft column past the row's width reads the next
slot's drafts. The models report a read or write outside its allocation as ``index_error``
(the GPU's illegal memory access) and every index they use as an access.

The patched model applies the fixes' rule to the ids this kernel writes: a negative draft is
rejected (vLLM PR #50939 and PR #46533 reject negative draft ids in the rejection sampler; here
the slot gets id 0, as V1 clamps its placeholders before the embedding, so no negative id
reaches the model). Sampled ids are checked where they are stored (site ``post_update``).

numpy only (``import forensics.sites`` stays light).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from forensics.outcome import INDEX_ERROR, OK, Access, Outcome
from forensics.records import FieldSpec, Record
from forensics.sites._common import (
    BatchColumns,
    RunColumns,
    require,
    require_len,
    require_unique,
    run_each,
    screen_unique,
)
from forensics.sites.core import BatchRun, CheckList, Checks

NAME = "combine_tokens"
FIELDS = (
    FieldSpec("input_ids", "tensor", token_ids=True, doc="[t] the input-id buffer before the call"),
    FieldSpec("idx_mapping", "tensor", doc="[n] batch row -> request slot"),
    FieldSpec("last_sampled_tokens", "tensor", token_ids=True, doc="[m] per slot (max_num_reqs)"),
    FieldSpec("query_start_loc", "tensor", doc="[n + 1] first token of each row"),
    FieldSpec("seq_lens", "tensor", doc="[n] per row"),
    FieldSpec("prefill_len", "tensor", doc="[m] per slot"),
    FieldSpec("draft_tokens", "tensor", ndim=2, token_ids=True, doc="[m, s] per slot"),
    FieldSpec("cu_num_logits", "tensor", doc="[n + 1] first logit of each row"),
    FieldSpec("num_new_sampled_tokens", "int", doc="0 or 1"),
    FieldSpec("vocab_size", "int", token_bound=True, doc="ids must lie in [0, vocab_size)"),
    FieldSpec("req_ids", "str_list", required=False, doc="requests of the batch rows"),
)
OUTPUT_FIELDS = ("input_ids",)
SUMMARY_BOUND = "vocab_size"
SUMMARY_TENSOR = "input_ids"
_ROWS = ("seq_lens", "req_ids")


def check_record(record: Record, where: str) -> None:
    """Cross-field checks: one entry per row in the per-row fields, ``n + 1`` offsets, a
    known ``num_new_sampled_tokens`` and a sane vocabulary.

    Raises:
        CaptureFormatError: naming the field and what was expected.
    """
    n = len(record["idx_mapping"])
    for name in _ROWS:
        require_len(record, name, n, where, "one per entry of 'idx_mapping'")
    for name in ("query_start_loc", "cu_num_logits"):
        require_len(record, name, n + 1, where, "one more than 'idx_mapping' has entries")
    require_unique(record, "req_ids", where)
    require(record["num_new_sampled_tokens"] in (0, 1), where, "num_new_sampled_tokens",
            "must be 0 or 1")
    require(record["vocab_size"] >= 0, where, "vocab_size", "must be >= 0")


def check_batch(cols: BatchColumns) -> np.ndarray:
    """:func:`check_record` on a whole batch at once: the records it may reject."""
    n = cols.length("idx_mapping")
    bad = np.zeros(cols.rows, dtype=bool)
    for name in _ROWS:
        bad |= cols.present(name) & (cols.length(name) != n)
    for name in ("query_start_loc", "cu_num_logits"):
        bad |= cols.length(name) != n + 1
    new = cols.ints("num_new_sampled_tokens")
    bad |= (new != 0) & (new != 1)
    return bad | (cols.ints("vocab_size") < 0) | screen_unique(cols, "req_ids")


@dataclass
class _Plan:
    """What the kernel reads and writes for one record: per write, its batch row, the slot it
    reads, where it reads (``source``: 0 last sampled token, 1 a draft) and the draft column,
    and the ``input_ids`` position it writes; and every index it uses."""

    rows: list[int]
    source: list[int]
    column: list[int]
    position: list[int]
    accesses: list[Access]

    def add(self, row: int, source: int, column: int, position: int) -> None:
        """Add one write."""
        self.rows.append(row)
        self.source.append(source)
        self.column.append(column)
        self.position.append(position)


def _block(record: Record) -> int:
    """The kernel's BLOCK_SIZE: the next power of two of ``s + num_new_sampled_tokens``."""
    need = int(np.asarray(record["draft_tokens"]).shape[1]) + int(record["num_new_sampled_tokens"])
    return 1 << max(need - 1, 0).bit_length()


def _plan(record: Record) -> _Plan:
    """The kernel's index math on one record (no values read)."""
    idx = np.asarray(record["idx_mapping"], dtype=np.int64)
    qsl = np.asarray(record["query_start_loc"], dtype=np.int64)
    cu = np.asarray(record["cu_num_logits"], dtype=np.int64)
    seq = np.asarray(record["seq_lens"], dtype=np.int64)
    prefill = np.asarray(record["prefill_len"], dtype=np.int64)
    drafts = np.asarray(record["draft_tokens"])
    new, block, width = int(record["num_new_sampled_tokens"]), _block(record), drafts.shape[1]
    plan = _Plan([], [], [], [], [])
    slot_rows: list[int] = []
    for i, slot in enumerate(idx.tolist()):
        slot_rows.append(i)
        if not 0 <= slot < len(prefill):
            continue  # the kernel reads outside prefill_len: judged by its access below
        num_logits = int(cu[i + 1] - cu[i])
        k, query_end = num_logits - new, int(qsl[i + 1])
        if seq[i] <= prefill[slot]:
            continue
        if new > 0 and seq[i] - num_logits >= prefill[slot]:
            plan.add(i, 0, 0, query_end - num_logits)
        for j in range(min(max(k, 0), block)):
            plan.add(i, 1, j, query_end - k + j)
    rows = np.array(slot_rows, dtype=np.int64)
    for name in ("prefill_len", "last_sampled_tokens"):
        plan.accesses.append(Access(name, rows, rows, idx, 0, len(record[name])))
    src = np.asarray(plan.source, dtype=np.int64)
    draft_rows = np.asarray(plan.rows, dtype=np.int64)[src == 1]
    plan.accesses.append(Access("draft_tokens", draft_rows, draft_rows, idx[draft_rows], 0,
                                drafts.shape[0]))
    columns = np.asarray(plan.column, dtype=np.int64)[src == 1]
    plan.accesses.append(Access("draft_tokens.column", draft_rows, columns, columns, 0, width))
    written = np.asarray(plan.rows, dtype=np.int64)
    plan.accesses.append(Access("input_ids", written, np.asarray(plan.position, np.int64),
                                np.asarray(plan.position, np.int64), 0, len(record["input_ids"])))
    return plan


def _read(record: Record, plan: _Plan, at: int) -> int | None:
    """The id the kernel reads for write ``at`` (None: outside its allocation)."""
    slot = int(record["idx_mapping"][plan.rows[at]])
    if plan.source[at] == 0:
        last = np.asarray(record["last_sampled_tokens"])
        return int(last[slot]) if 0 <= slot < len(last) else None
    flat = np.asarray(record["draft_tokens"]).reshape(-1)
    width = np.asarray(record["draft_tokens"]).shape[1]
    offset = slot * width + plan.column[at]
    return int(flat[offset]) if 0 <= offset < len(flat) else None


def _run(record: Record, patched: bool) -> Outcome:
    """The kernel on one record (``patched``: negative drafts written as 0)."""
    plan = _plan(record)
    ids = np.array(record["input_ids"], copy=True)
    idx = np.asarray(record["idx_mapping"], dtype=np.int64)
    wild = [f"{name} slot {int(s)}" for name in ("prefill_len", "last_sampled_tokens")
            for s in idx if not 0 <= s < len(record[name])]
    for at in range(len(plan.rows)):
        value, position = _read(record, plan, at), plan.position[at]
        if value is None or not 0 <= position < len(ids):
            wild.append(f"input_ids position {position}" if value is not None
                        else f"draft_tokens of slot {int(idx[plan.rows[at]])}")
            continue
        if patched and plan.source[at] == 1 and value < 0:
            value = 0
        ids[position] = value
    if wild:
        return Outcome(INDEX_ERROR, f"IndexError: illegal memory access: {wild[0]} is outside "
                                    f"its buffer", {}, plan.accesses)
    return Outcome(OK, "", {"input_ids": ids}, plan.accesses)


def run_batch(cols: RunColumns, patched: bool) -> BatchRun:
    """The kernel's model over a batch, record by record (:func:`_run`)."""
    return run_each(cols, _run, patched, outcome_checks)


def outcome_checks(record: Record, outcome: Outcome) -> CheckList:
    """The checks of any variant's outcome on one record: the indices a model used (its
    accesses), then every id written into ``input_ids`` (``out.input_ids``, element the
    position) against ``[0, vocab_size)``."""
    parts = [Checks.of(a.tensor, 0, a.rows, a.elements, a.values, a.lower, a.upper)
             for a in outcome.accesses or ()]
    after = outcome.outputs.get("input_ids")
    if after is not None:
        plan = _plan(record)
        after = np.asarray(after).reshape(-1)
        keep = [a for a, p in enumerate(plan.position) if 0 <= p < len(after)]
        rows = np.asarray(plan.rows, dtype=np.int64)[keep]
        positions = np.asarray(plan.position, dtype=np.int64)[keep]
        parts.append(Checks.of("out.input_ids", 0, rows, positions, after[positions], 0,
                               int(record["vocab_size"])))
    return Checks.concat(parts)


from forensics.sites.base import Site  # noqa: E402  (the SITE declaration closes the module)

#: this module's site: its schema and operations (the registry holds it)
SITE: Site[RunColumns] = Site(
    name=NAME, fields=FIELDS, output_fields=OUTPUT_FIELDS, summary_bound=SUMMARY_BOUND,
    summary_tensor=SUMMARY_TENSOR, run_batch=run_batch,
    checks=outcome_checks, check_record=check_record, check_batch=check_batch,
    hook="vllm.v1.worker.gpu.model_runner:combine_sampled_and_draft_tokens",
    kernel="forensics.variants.triton_worker:run_combine_sampled_and_draft_tokens")
