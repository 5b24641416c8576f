"""The probe's cost per call on Model Runner V2's call sites (issue 28, point 7).

``benchmarks/run.py``'s ``probe`` phase times V1's ``batch_change`` wrapper; this module times
the V2 wrappers of :mod:`forensics.probe.v2_hooks` the same way: rounds of
:data:`run.PROBE_ROUND` plain calls and as many wrapped calls alternate, on CPU tensors of a
decode step of batch 64 with 4 drafts, in record and in guard mode, each recording into a real
capture (the session's writer process working meanwhile), under ``torch.inference_mode()``.

The wrapped functions are torch stand-ins for vLLM's ``combine_sampled_and_draft_tokens`` and
``post_update`` (the same reads and writes, vectorised): on this machine the real ones launch
Triton kernels that run in Triton's interpreter (milliseconds a call), which would bury the
probe's cost in noise. The figure is the probe's: probed minus plain, so the stand-in's own
cost cancels. The inputs are in range, so guard mode checks and never raises.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: the shapes of a decode step: ``BATCH`` requests in slots of ``MAX_REQS``, ``DRAFTS``
#: drafts each, vLLM's buffers at common sizes
BATCH, DRAFTS, MAX_REQS, VOCAB, MAX_MODEL_LEN, MAX_TOKENS = 64, 4, 256, 32_000, 4_096, 8_192
QUERY = DRAFTS + 1  # tokens a request is scheduled: the last sampled one and its drafts
SITES = ("combine", "post_update")  # the call sites timed, in this order
MODES = ("record", "guard")


class Runner:
    """What the V2 wrappers read of the runner: the vocabulary size and the batch's request
    ids (set by the ``prepare_inputs`` wrapper in an engine)."""

    def __init__(self) -> None:
        self.vocab_size = VOCAB
        self._forensics_batch_req_ids = [f"cmpl-{i:04d}-0" for i in range(BATCH)]


def combine_standin(input_ids: Any, idx_mapping: Any, last_sampled_tokens: Any,
                    query_start_loc: Any, seq_lens: Any, prefill_len: Any, draft_tokens: Any,
                    cu_num_logits: Any, num_logits: int, num_new_sampled_tokens: int = 1) -> Any:
    """``combine_sampled_and_draft_tokens`` in torch (every row decoding): the logits indices
    returned, each row's last sampled token and drafts written into ``input_ids``."""
    import torch

    n = idx_mapping.shape[0]
    k = draft_tokens.shape[-1]
    ends = query_start_loc[1:n + 1].long()
    counts = (cu_num_logits[1:n + 1] - cu_num_logits[:n]).long()
    starts = ends - counts
    block = torch.arange(k + 1)
    logits_indices = (starts[:, None] + block).reshape(-1)[:num_logits]
    slots = idx_mapping.long()
    input_ids[starts] = last_sampled_tokens.reshape(-1)[slots].to(input_ids.dtype)
    input_ids[(starts[:, None] + 1 + block[:k]).reshape(-1)] = \
        draft_tokens[slots].reshape(-1).to(input_ids.dtype)
    return logits_indices


def post_update_standin(idx_mapping: Any, num_computed_tokens: Any, last_sampled_tokens: Any,
                        output_bin_counts: Any, sampled_tokens: Any, num_sampled: Any,
                        num_rejected: Any, query_start_loc: Any, all_token_ids: Any,
                        total_len: Any, draft_tokens: Any = None,
                        draft_tokens_out: Any = None) -> None:
    """``post_update`` in torch: drafts stored per slot, the last sampled id, the sampled ids
    appended to ``all_token_ids`` and counted in ``output_bin_counts``, the lengths moved."""
    import torch

    n = idx_mapping.shape[0]
    slots = idx_mapping.long()
    counts = num_sampled.long()
    rows = torch.arange(n)
    if draft_tokens is not None:
        draft_tokens_out[slots] = draft_tokens
    base = total_len[slots].long()
    last_sampled_tokens.reshape(-1)[slots] = sampled_tokens[rows, counts - 1]
    total_len[slots] = (base + counts).to(total_len.dtype)
    taken = torch.arange(sampled_tokens.shape[1])[None, :] < counts[:, None]
    row_of = slots[:, None].expand_as(taken)[taken]
    ids = sampled_tokens[taken]
    all_token_ids[row_of, (base[:, None] + torch.arange(sampled_tokens.shape[1]))[taken]] = \
        ids.to(all_token_ids.dtype)
    if output_bin_counts is not None:
        output_bin_counts.index_put_((row_of, ids), torch.ones_like(ids, dtype=torch.int32),
                                     accumulate=True)
    delta = (query_start_loc[1:n + 1] - query_start_loc[:n] - num_rejected).to(
        num_computed_tokens.dtype)
    num_computed_tokens[slots] += delta


def state(torch: Any) -> dict[str, Any]:
    """The tensors of one decode step (vLLM's dtypes and buffer shapes), every index in
    range: requests in scattered slots, each of ``QUERY`` tokens, 1 to ``QUERY`` sampled."""
    g = torch.Generator().manual_seed(0)
    i32, i64 = torch.int32, torch.int64
    slots = torch.randperm(MAX_REQS, generator=g)[:BATCH].to(i32)
    qsl = torch.zeros(MAX_REQS + 1, dtype=i32)
    qsl[:BATCH + 1] = torch.arange(BATCH + 1, dtype=i32) * QUERY
    prefill = torch.full((MAX_REQS,), 16, dtype=i32)
    num_sampled = torch.randint(1, QUERY + 1, (BATCH,), generator=g, dtype=i32)
    return {
        "input_ids": torch.randint(0, VOCAB, (MAX_TOKENS,), generator=g, dtype=i32),
        "idx_mapping": slots,
        "last_sampled_tokens": torch.randint(0, VOCAB, (MAX_REQS, 1), generator=g, dtype=i64),
        "query_start_loc": qsl,
        "seq_lens": torch.full((MAX_REQS,), 64, dtype=i32),
        "prefill_len": prefill,
        "draft_tokens": torch.randint(0, VOCAB, (MAX_REQS, DRAFTS), generator=g, dtype=i64),
        "cu_num_logits": torch.arange(BATCH + 1, dtype=i32) * QUERY,
        "num_computed_tokens": torch.full((MAX_REQS,), 60, dtype=i32),
        "output_bin_counts": torch.zeros(MAX_REQS, VOCAB, dtype=i32),
        "sampled_tokens": torch.randint(0, VOCAB, (BATCH, QUERY), generator=g, dtype=i64),
        "num_sampled": num_sampled,
        "num_rejected": (QUERY - num_sampled).to(i32),
        "all_token_ids": torch.zeros(MAX_REQS, MAX_MODEL_LEN, dtype=i32),
        "total_len": torch.full((MAX_REQS,), 64, dtype=i32),
        "new_drafts": torch.randint(0, VOCAB, (BATCH, DRAFTS), generator=g, dtype=i64),
    }


def calls(s: dict[str, Any], fn: dict[str, Any]) -> dict[str, Any]:
    """Per site, a call of ``fn[site]`` on the state ``s`` as V2's runner makes it. The
    per-slot lengths ``post_update`` moves are reset first (as V1's bench clones its state),
    so every call sees the same in-range step."""
    lengths = {name: s[name].clone() for name in ("num_computed_tokens", "total_len")}

    def combine() -> Any:
        return fn["combine"](s["input_ids"], s["idx_mapping"], s["last_sampled_tokens"],
                             s["query_start_loc"], s["seq_lens"], s["prefill_len"],
                             s["draft_tokens"], s["cu_num_logits"], BATCH * QUERY, 1)

    def post_update() -> Any:
        for name, value in lengths.items():
            s[name].copy_(value)
        return fn["post_update"](s["idx_mapping"], s["num_computed_tokens"],
                                 s["last_sampled_tokens"], s["output_bin_counts"],
                                 s["sampled_tokens"], s["num_sampled"], s["num_rejected"],
                                 s["query_start_loc"], s["all_token_ids"], s["total_len"],
                                 s["new_drafts"], s["draft_tokens"])

    return {"combine": combine, "post_update": post_update}


class V2Bench:
    """One probe session of ``mode`` writing to ``work`` and the wrapped stand-ins of both
    V2 call sites; :meth:`round` times one round of plain then probed calls of a site."""

    def __init__(self, work: Path, mode: str, timer: Any) -> None:
        import torch

        from forensics.probe import hooks, v2_hooks
        from forensics.probe.session import ProbeSession
        from forensics.probe.settings import Settings

        self.hooks, self.timer = hooks, timer
        self.session = ProbeSession(Settings(directory=work, mode=mode,
                                             capture=work / f"probe-v2-{mode}.capture"))
        runner = self.session.runner = Runner()
        v2_hooks._TOKENS[id(runner)] = BATCH * QUERY  # what prepare_inputs notes per step
        s = state(torch)
        plain = {"combine": combine_standin, "post_update": post_update_standin}
        wrapped = {"combine": v2_hooks.wrap_combine(combine_standin),
                   "post_update": v2_hooks.wrap_post_update(post_update_standin)}
        self.plain, self.wrapped = calls(s, plain), calls(s, wrapped)

    def round(self, site: str) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
        """One round of plain calls of ``site``, then one of probed calls (each a step),
        timed by ``timer`` (``run._round``)."""
        session, call, timer = self.session, self.wrapped[site], self.timer
        plain = timer(self.plain[site], inference=True)
        self.hooks.activate(session)
        try:
            probed = timer(lambda: (session.begin_step(), call()), inference=True)
        finally:
            self.hooks.activate(None)
        return plain, probed
