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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from forensics.budget import MAX_ALLOC_ENV, require_alloc
from forensics.outcome import INDEX_ERROR, OK, Access, Outcome
from forensics.records import FieldSpec, Record
from forensics.sites import _common as common
from forensics.sites._common import stored
from forensics.sites._fields import PREFILL_LEN, REQ_IDS, VOCAB_SIZE
from forensics.sites.core import VOCABULARY, BatchRun, CheckList, Checks, row_of

NAME = "combine_tokens"
#: the width the kernel computes a write's column and position in
_INT64 = np.dtype(np.int64)
FIELDS = (
    FieldSpec("input_ids", "tensor", token_ids=True, doc="[t] the input-id buffer before the call"),
    FieldSpec("idx_mapping", "tensor", doc="[n] batch row -> request slot"),
    FieldSpec("last_sampled_tokens", "tensor", token_ids=True, doc="[m] per slot (max_num_reqs)"),
    FieldSpec("query_start_loc", "tensor", doc="[n + 1] first token of each row"),
    FieldSpec("seq_lens", "tensor", doc="[n] per row"),
    PREFILL_LEN,
    FieldSpec("draft_tokens", "tensor", ndim=2, token_ids=True, doc="[m, s] per slot"),
    FieldSpec("cu_num_logits", "tensor", doc="[n + 1] first logit of each row"),
    FieldSpec("num_new_sampled_tokens", "int", doc="0 or 1", limits=(0, 1)),
    VOCAB_SIZE,
    REQ_IDS,
)
OUTPUT_FIELDS = ("input_ids",)
SUMMARY_BOUND = "vocab_size"
SUMMARY_TENSOR = "input_ids"
_ROWS = ("seq_lens", "req_ids")


def check_record(record: Record, where: str) -> None:
    """Cross-field checks: one entry per row in the per-row fields, ``n + 1`` offsets, a
    unique request ids (the ints' ranges are the schema's ``limits``).

    Raises:
        CaptureFormatError: naming the field and what was expected.
    """
    n = len(record["idx_mapping"])
    for name in _ROWS:
        common.require_len(record, name, n, where, "one per entry of 'idx_mapping'")
    for name in ("query_start_loc", "cu_num_logits"):
        common.require_len(record, name, n + 1, where, "one more than 'idx_mapping' has entries")
    common.require_unique(record, "req_ids", where)


def check_batch(cols: common.BatchColumns) -> np.ndarray:
    """:func:`check_record` on a whole batch at once: the records it may reject."""
    n = cols.length("idx_mapping")
    bad = np.zeros(cols.rows, dtype=bool)
    for name in _ROWS:
        bad |= cols.present(name) & (cols.length(name) != n)
    for name in ("query_start_loc", "cu_num_logits"):
        bad |= cols.length(name) != n + 1
    return bad | common.screen_unique(cols, "req_ids")


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
        """Add one write, its column and position wrapped to int64 as the kernel computes
        them (a record's extreme ``query_start_loc`` or ``cu_num_logits`` never raises)."""
        self.rows.append(row)
        self.source.append(source)
        self.column.append(int(stored(column, _INT64)))
        self.position.append(int(stored(position, _INT64)))


def _block(record: Record | Mapping[str, Any]) -> int:
    """The kernel's BLOCK_SIZE: the next power of two of ``s + num_new_sampled_tokens``."""
    need = int(np.asarray(record["draft_tokens"]).shape[1]) + int(record["num_new_sampled_tokens"])
    return 1 << max(need - 1, 0).bit_length()


#: the bytes :func:`_plan`, :func:`_run` and their checks hold per write (its plan entries, its
#: accesses and checks): 350 measured on a record of a million writes, 470 MB
WRITE_BYTES = 384


def _plan(record: Record) -> _Plan:
    """The kernel's index math on one record (no values read); its writes counted first and
    held to the allocation budget: ``draft_tokens`` of 0 rows and 4,000,000 columns (no
    bytes) and a wide ``cu_num_logits`` made a plan of 8 million writes, 23 s and 1.3 GB
    before any budget was asked.

    Raises:
        AllocationBudgetError: the writes past the budget, in one line.
    """
    first, drafts, _ = _counts(record)
    writes = int(first.sum()) + int(drafts.sum())
    require_alloc(WRITE_BYTES * writes, f"a {NAME} record at step {record.step} rank "
                                        f"{record.rank}", "writes", writes,
                  f"fix the record's cu_num_logits and draft_tokens (the writes of a row: "
                  f"its drafts, at most {_block(record)}, the kernel's block, and its sampled "
                  f"id), or raise {MAX_ALLOC_ENV} if the engine really wrote that many")
    idx = np.asarray(record["idx_mapping"], dtype=np.int64)
    qsl = np.asarray(record["query_start_loc"], dtype=np.int64)
    cu = np.asarray(record["cu_num_logits"], dtype=np.int64)
    seq = np.asarray(record["seq_lens"], dtype=np.int64)
    prefill = np.asarray(record["prefill_len"], dtype=np.int64)
    new, block = int(record["num_new_sampled_tokens"]), _block(record)
    plan = _Plan([], [], [], [], [])
    with np.errstate(over="ignore"):  # int64 arithmetic wraps, as the kernel's does
        for i, slot in enumerate(idx.tolist()):
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
    plan.accesses = _accesses(record, plan, idx)
    return plan


def _accesses(record: Record, plan: _Plan, idx: np.ndarray) -> list[Access]:
    """Every index the kernel uses, named by what holds it: the slot ``idx_mapping[i]`` into
    ``prefill_len``, ``last_sampled_tokens`` and ``draft_tokens``; the draft column (computed
    from ``cu_num_logits``) into a row of ``draft_tokens``; the ``input_ids`` position
    (computed from ``query_start_loc``)."""
    drafts = np.asarray(record["draft_tokens"])
    rows = np.arange(len(idx), dtype=np.int64)
    found = [Access(name, rows, rows, idx, 0, len(record[name]), "idx_mapping")
             for name in ("prefill_len", "last_sampled_tokens")]
    src = np.asarray(plan.source, dtype=np.int64)
    draft_rows = np.asarray(plan.rows, dtype=np.int64)[src == 1]
    found.append(Access("draft_tokens", draft_rows, draft_rows, idx[draft_rows], 0,
                        drafts.shape[0], "idx_mapping"))
    columns = np.asarray(plan.column, dtype=np.int64)[src == 1]
    found.append(Access("draft_tokens.column", draft_rows, columns, columns, 0, drafts.shape[1],
                        "cu_num_logits", draft_rows + 1, held=False,
                        indexed=row_of("draft_tokens")))
    written = np.asarray(plan.rows, dtype=np.int64)
    position = np.asarray(plan.position, np.int64)
    found.append(Access("input_ids", written, position, position, 0, len(record["input_ids"]),
                        "query_start_loc", written + 1, held=False))
    return found


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
        ids[position] = common.stored(value, ids.dtype)  # int64 ids into int32 input_ids
    if wild:
        return Outcome(INDEX_ERROR, f"IndexError: illegal memory access: {wild[0]} is outside "
                                    f"its buffer", {}, plan.accesses)
    return Outcome(OK, "", {"input_ids": ids}, plan.accesses)


def run_batch(cols: common.RunColumns, patched: bool) -> BatchRun:
    """The kernel's model over a batch, record by record (:func:`_run`)."""
    return common.run_each(cols, _run, patched, outcome_checks)


def outcome_checks(record: Record, outcome: Outcome) -> CheckList:
    """The checks of any variant's outcome on one record: the indices a model used (its
    accesses), then every id written into ``input_ids`` (``out.input_ids``, element the
    position) against ``[0, vocab_size)``."""
    parts = [Checks.of_access(a) for a in outcome.accesses or ()]
    after = outcome.outputs.get("input_ids")
    if after is not None:
        plan = _plan(record)
        after = np.asarray(after).reshape(-1)
        keep = [a for a, p in enumerate(plan.position) if 0 <= p < len(after)]
        rows = np.asarray(plan.rows, dtype=np.int64)[keep]
        positions = np.asarray(plan.position, dtype=np.int64)[keep]
        parts.append(Checks.of("out.input_ids", 0, rows, positions, after[positions], 0,
                               int(record["vocab_size"])).naming(None, VOCABULARY))
    return Checks.concat(parts)


def _counts(fields: Record | Mapping[str, Any]
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per batch row: whether the kernel writes its last sampled token, how many drafts it
    writes, and its ``num_logits`` (int64, wrapped as the kernel's)."""
    idx = np.asarray(fields["idx_mapping"], dtype=np.int64)
    prefill = np.asarray(fields["prefill_len"], dtype=np.int64)
    cu = np.asarray(fields["cu_num_logits"], dtype=np.int64)
    seq = np.asarray(fields["seq_lens"], dtype=np.int64)
    new = int(fields["num_new_sampled_tokens"])
    n = len(idx)
    inside = (idx >= 0) & (idx < len(prefill))
    pre = np.where(inside, prefill[np.where(inside, idx, 0)] if len(prefill) else 0, 0)
    with np.errstate(over="ignore"):
        num_logits = cu[1:n + 1] - cu[:n]
        live = inside & (seq > pre)
        first = live & (new > 0) & (seq - num_logits >= pre)
        drafts = np.where(live, np.minimum(np.maximum(num_logits - new, 0), _block(fields)), 0)
    return first, drafts, num_logits


def _writes(fields: Mapping[str, Any]) -> tuple[np.ndarray, ...]:
    """:func:`_plan`'s writes, vectorised: per write its batch row, source (0 last sampled
    token, 1 a draft), draft column and ``input_ids`` position, in the plan's order."""
    first, drafts, num_logits = _counts(fields)
    new, n = int(fields["num_new_sampled_tokens"]), len(first)
    count = first.astype(np.int64) + drafts
    rows = np.repeat(np.arange(n, dtype=np.int64), count)
    offset = np.arange(len(rows), dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
    source = np.where(first[rows] & (offset == 0), 0, 1)
    column = np.where(source == 0, 0, offset - first[rows])
    query_end = np.asarray(fields["query_start_loc"], dtype=np.int64)[rows + 1]
    logits = num_logits[rows]
    position = np.where(source == 0, query_end - logits, query_end - (logits - new) + column)
    return rows, source, column, position


def guard(fields: Mapping[str, Any]) -> common.Violation | None:
    """The probe's per-call check (``Site.guard``) on one call's host values (the record's
    fields): what :func:`violation_of <forensics.probe.v2_hooks.violation_of>` finds in the
    upstream model's run, vectorised: the first index the kernel uses out of range (in the
    order of :func:`_plan`'s accesses), else the first id written into ``input_ids`` outside
    ``[0, vocab_size)`` (``out.input_ids``), else None."""
    idx = np.asarray(fields["idx_mapping"], dtype=np.int64)
    drafts = np.asarray(fields["draft_tokens"])
    rows, source, column, position = _writes(fields)
    every = np.arange(len(idx), dtype=np.int64)
    read = rows[source == 1]
    found = common.first_violation(NAME, (
        ("prefill_len", every, idx, len(fields["prefill_len"])),
        ("last_sampled_tokens", every, idx, len(fields["last_sampled_tokens"])),
        ("draft_tokens", read, idx[read], drafts.shape[0]),
        ("draft_tokens.column", read, column[source == 1], drafts.shape[1]),
        ("input_ids", rows, position, len(fields["input_ids"]))))
    if found is not None or not len(rows):
        return found
    slots = idx[rows]
    values = np.where(source == 0, np.asarray(fields["last_sampled_tokens"]).reshape(-1)[slots],
                      drafts.reshape(-1)[slots * drafts.shape[1] + column] if drafts.size else 0)
    after = np.array(fields["input_ids"], dtype=np.int64).reshape(-1)
    after[position] = values
    return common.first_violation(NAME, (("out.input_ids", rows, after[position],
                              int(fields["vocab_size"])),))


from forensics.sites.base import WRITE, Site  # noqa: E402  (the SITE declaration closes the module)

#: ``forensics repro``: the vLLM function a standalone test calls with one record ``r`` (in
#: Triton's interpreter, in its own process), and the test body that calls it: run twice, on an
#: ``input_ids`` of 0s and one of 1s with spare room past its end, the cells equal after both
#: are the ids the kernel wrote (checked against the vocabulary); a write past the end fails
REPRO = ('vllm.v1.worker.gpu.input_batch.combine_sampled_and_draft_tokens',
         '''    kernels = interpreted_kernels()
    size, drafts = len(r["input_ids"]), r["draft_tokens"]
    num_logits = int(r["cu_num_logits"][-1]) if len(r["cu_num_logits"]) else 0
    budget(8 * max(num_logits, 0), "cu_num_logits[-1]", num_logits)  # vLLM allocates it
    runs = []
    for fill in (0, 1):
        whole, ids = spare([size], fill, r["input_ids"].dtype, drafts.shape[-1] + 2)
        kernels.combine_sampled_and_draft_tokens(
            ids, r["idx_mapping"].clone(), r["last_sampled_tokens"].clone().reshape(-1, 1),
            r["query_start_loc"].clone(), r["seq_lens"].clone(), r["prefill_len"].clone(),
            drafts.clone(), r["cu_num_logits"].clone(), num_logits,
            r["num_new_sampled_tokens"])
        runs.append(whole)
    written_past(*runs, size, "input_ids")
    return [("input_ids", written_cells(*runs, 0, size), ())]
''')

#: this module's site: its schema and operations (the registry holds it)
SITE: Site[common.RunColumns] = Site(
    name=NAME, fields=FIELDS, output_fields=OUTPUT_FIELDS, summary_bound=SUMMARY_BOUND,
    summary_tensor=SUMMARY_TENSOR, run_batch=run_batch,
    checks=outcome_checks, check_record=check_record, check_batch=check_batch, guard=guard,
    hook="vllm.v1.worker.gpu.model_runner:combine_sampled_and_draft_tokens", repro=REPRO,
    kernel="forensics.variants.triton_worker:run_combine_sampled_and_draft_tokens",
    writes=(("input_ids", WRITE),))
