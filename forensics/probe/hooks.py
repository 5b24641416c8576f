"""The wrappers put around vLLM 0.33.x code: the four V1 sites and the step counter.

Each wrapper records the site whose ``Site.hook`` names the vLLM function it wraps
(:func:`forensics.sites.hooked_by`: the registry says which site, and its ``Site.guard`` is
the check). It records the call's inputs before it runs and the fields it changes after
(``<field>_after``), checks the site's bounds first in guard mode, and hands the record to the
active :class:`~forensics.probe.session.ProbeSession`. Without an active session a wrapper just
calls the original.

``step`` is counted at ``GPUModelRunner.execute_model``: every site called during one model
execution, and ``async_output`` in the ``sample_tokens`` call that follows it, share one step.
The ``embedding`` site is recorded at ``GPUModelRunner._model_forward`` from the ``input_ids``
handed to the model (never inside the model, where torch.compile and CUDA graphs would skip a
Python wrapper).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from forensics.probe import guard, handed
from forensics.sites import get_site, hooked_by
from forensics.sites._common import placeholder_start

if TYPE_CHECKING:
    from forensics.probe.copy import PendingRecord
    from forensics.probe.guard import Violation
    from forensics.probe.session import ProbeSession

#: the session of this process (set by forensics.probe.plugin.start)
SESSION: ProbeSession | None = None
Step = Callable[["ProbeSession", "PendingRecord"], Any]


def activate(session: ProbeSession | None) -> None:
    """Make ``session`` the one the wrappers record into (None: wrappers pass through)."""
    global SESSION
    SESSION = session


FAILED = object()


def site_guard(site: str) -> Callable[..., Violation | None]:
    """``site``'s per-call check (``Site.guard``), for the wrapper of its hook."""
    check = get_site(site).guard
    if check is None:
        raise TypeError(f"site {site!r} declares no guard for its probe hook")
    return check


def _safely(session: ProbeSession, what: str, step: Step, pending: PendingRecord) -> Any:
    try:
        return step(session, pending)
    except Exception as exc:  # the probe's own failure never reaches vLLM
        session.error(exc, f"{what} at {pending.site}")
        return FAILED


def _run(site: str, call: Callable[[], Any], inputs: Step, check: Step | None,
         outputs: Step | None, late: Step | None = None) -> Any:
    """Record around ``call()``: inputs, guard check (guard mode), the call, late inputs,
    outputs."""
    session = SESSION
    if session is None or not session.wants(site):
        return call()
    pending = session.new_record(site)
    if _safely(session, "recording inputs", inputs, pending) is not True:
        return call()  # inactive for this call (e.g. the synchronous branch), or failed
    if check is not None and session.guard:
        return _guarded(session, pending, call, check, outputs, late)
    try:
        result = call()
    except BaseException:
        _finish(session, pending, late, None, failed=True)
        raise
    _finish(session, pending, late, outputs, failed=False)
    return result


def _guarded(session: ProbeSession, pending: PendingRecord, call: Callable[[], Any],
             check: Step, outputs: Step | None, late: Step | None) -> Any:
    """:func:`_run` in guard mode, once the inputs are recorded: the bounds check, raising
    before an index is used; a value only written or passed on is flushed and warned of."""
    found: Violation | Any = _safely(session, "checking bounds", check, pending)
    found = None if found is FAILED else found
    if found is not None and found.used:  # raise before the index is used
        if late is not None:
            _safely(session, "recording inputs", late, pending)
        raise session.violation(pending, found)
    try:
        result = call()
    except BaseException:
        _finish(session, pending, late, None, failed=True)
        raise
    _finish(session, pending, late, outputs, failed=found is not None)  # flush on a finding
    if found is not None:  # only written or passed on: warn, the engine goes on
        session.passed_on(pending, found)
    return result


def _finish(session: ProbeSession, pending: PendingRecord, late: Step | None,
            outputs: Step | None, *, failed: bool) -> None:
    """Record the call's late inputs and outputs into ``pending`` and queue it; a signal's
    handler that raises meanwhile (a Ctrl-C) leaves it counted lost to a signal."""
    try:
        if late is not None:
            _safely(session, "recording outputs", late, pending)
        if outputs is not None:
            _safely(session, "recording outputs", outputs, pending)
    except BaseException:
        handed.cut(session)
        raise
    try:
        if pending.deferred():
            pending.events += (handed.sealed(session),)
        session.add(pending, failed=failed)
    except Exception as exc:
        session.error(exc, f"queueing a {pending.site} record")


def _host(tensor: Any) -> np.ndarray:
    """A host copy of ``tensor`` (waits for the device: guard mode only)."""
    return tensor.detach().to("cpu").numpy()


def _batch_context(session: ProbeSession, fields: dict[str, Any], rows: int) -> None:
    batch = getattr(session.runner, "input_batch", None)
    if batch is None:
        return
    req_ids = list(batch.req_ids[:rows])
    if len(req_ids) == rows and all(isinstance(r, str) for r in req_ids):
        fields["req_ids"] = req_ids
    prev = getattr(batch, "prev_req_id_to_index", None)
    if isinstance(prev, dict):
        fields["prev_req_id_to_index"] = dict(prev)


# -- update_num_computed_tokens_for_batch_change --------------------------------------------
#: the recorded inputs in the order the wrapper takes them: prev_positions, the tensors it
#: gathers from (vLLM's order), the per-row tensors; then the outputs
_BATCH_CHANGE_INPUTS = ("prev_positions", "valid_sampled_token_count", "num_computed_tokens",
                        "prev_num_draft_tokens", "num_accepted_tokens", "cpu_num_computed_tokens")
_BATCH_CHANGE_OUTPUTS = ("num_computed_tokens_after", "num_accepted_tokens_after")


def wrap_batch_change(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap ``update_num_computed_tokens_for_batch_change`` (the torch.compile'd function)."""
    site = hooked_by()["update_num_computed_tokens_for_batch_change"]
    site_check = site_guard(site)

    @functools.wraps(original)
    def update_num_computed_tokens_for_batch_change(
            num_computed_tokens: Any, num_accepted_tokens: Any, prev_positions: Any,
            valid_sampled_token_count: Any, prev_num_draft_tokens: Any,
            cpu_num_computed_tokens: Any) -> None:
        tensors = (prev_positions, valid_sampled_token_count, num_computed_tokens,
                   prev_num_draft_tokens, num_accepted_tokens, cpu_num_computed_tokens)

        def inputs(session: ProbeSession, pending: PendingRecord) -> bool:
            pending.joined.append((_BATCH_CHANGE_INPUTS, session.copier.join(tensors)))
            if session.runner is not None:
                _batch_context(session, pending.fields, int(prev_positions.shape[0]))
            return True

        def check(session: ProbeSession, pending: PendingRecord) -> Violation | None:
            lengths = {name: int(tensor.shape[0])
                       for name, tensor in zip(_BATCH_CHANGE_INPUTS, tensors, strict=True)}
            return site_check(_host(prev_positions), lengths)

        def outputs(session: ProbeSession, pending: PendingRecord) -> None:
            pending.joined.append((_BATCH_CHANGE_OUTPUTS, session.copier.join(
                (num_computed_tokens, num_accepted_tokens))))

        return _run(site, lambda: original(
            num_computed_tokens, num_accepted_tokens, prev_positions, valid_sampled_token_count,
            prev_num_draft_tokens, cpu_num_computed_tokens), inputs, check, outputs)

    return update_num_computed_tokens_for_batch_change


# -- GPUModelRunner._prepare_input_ids -------------------------------------------------------
def _draft_tensor(runner: Any) -> Any:
    import torch

    draft = getattr(runner, "_draft_token_ids", None)
    if not isinstance(draft, torch.Tensor) or draft.ndim not in (1, 2):
        return None
    return draft if draft.ndim == 2 else draft.reshape(-1, 1)


def wrap_prepare_input_ids(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap ``GPUModelRunner._prepare_input_ids``; records its async branch only."""
    site = hooked_by()["GPUModelRunner._prepare_input_ids"]
    site_check = site_guard(site)

    @functools.wraps(original)
    def _prepare_input_ids(self: Any, scheduler_output: Any, num_reqs: int,
                           total_num_scheduled_tokens: int, cu_num_tokens: Any) -> None:
        batch = self.input_batch
        host: dict[str, Any] = {}

        def inputs(session: ProbeSession, pending: PendingRecord) -> bool:
            prev_sampled = batch.prev_sampled_token_ids
            if prev_sampled is None:
                return False
            take, fields = session.copier.take, pending.fields
            req_ids = list(batch.req_ids[:num_reqs])
            spec = scheduler_output.scheduled_spec_decode_tokens or {}
            host["draft"] = draft = _draft_tensor(self)
            fields.update(
                prev_positions=np.array(self.prev_positions.np[:num_reqs]),
                prev_sampled_token_ids=take(prev_sampled),
                input_ids=take(self.input_ids.cpu[:total_num_scheduled_tokens]),
                input_ids_device=take(self.input_ids.gpu[:total_num_scheduled_tokens]),
                cu_num_tokens=np.array(cu_num_tokens[:num_reqs]),
                num_draft_tokens=np.array([len(spec.get(r, ())) for r in req_ids], np.int32),
                prev_num_spec_tokens=int(self.prev_num_spec_tokens),
                vocab_size=int(batch.vocab_size),
            )
            if all(isinstance(r, str) for r in req_ids):
                fields["req_ids"] = req_ids
            if draft is not None:
                fields["draft_token_ids"] = take(draft)
            return True

        def check(session: ProbeSession, pending: PendingRecord) -> Violation | None:
            fields, draft = pending.fields, host["draft"]
            return site_check(
                fields["prev_positions"], fields["cu_num_tokens"], fields["num_draft_tokens"],
                int(batch.prev_sampled_token_ids.shape[0]), fields["prev_num_spec_tokens"],
                None if draft is None else int(draft.numel()))

        def outputs(session: ProbeSession, pending: PendingRecord) -> None:
            after = self.input_ids.gpu[:total_num_scheduled_tokens]
            pending.fields["input_ids_device_after"] = session.copier.take(after)

        return _run(site, lambda: original(
            self, scheduler_output, num_reqs, total_num_scheduled_tokens, cu_num_tokens),
            inputs, check, outputs)

    return _prepare_input_ids


# -- InputBatch.update_async_output_token_ids -----------------------------------------------
def _tail_start(output: list[int]) -> int:
    """Start of the tail kept for ``output``: its trailing ``-1`` run and one id before it."""
    return max(placeholder_start(output) - 1, 0)


def wrap_async_output(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap ``InputBatch.update_async_output_token_ids``; keeps only the output tails.

    ``sampled_token_ids_cpu`` is read after the call: the call itself waits for its copy event
    whenever it reads the tensor, so the probe adds no wait in record mode.
    """
    site = hooked_by()["InputBatch.update_async_output_token_ids"]
    site_check = site_guard(site)

    @functools.wraps(original)
    def update_async_output_token_ids(self: Any) -> None:
        starts: list[int] = []

        def inputs(session: ProbeSession, pending: PendingRecord) -> bool:
            outputs_now = self.sampling_metadata.output_token_ids
            prev = self.prev_req_id_to_index
            if self.sampled_token_ids_cpu is None or not outputs_now or not isinstance(prev, dict):
                return False
            starts.extend(_tail_start(out) for out in outputs_now)
            pending.fields.update(
                req_ids=list(self.req_ids), prev_req_id_to_index=dict(prev),
                output_tail=[list(out[s:]) for out, s in zip(outputs_now, starts, strict=True)],
                output_len=np.array([len(out) for out in outputs_now], np.int64),
                vocab_size=int(self.vocab_size))
            return True

        def check(session: ProbeSession, pending: PendingRecord) -> Violation | None:
            if self.async_copy_ready_event is not None:
                self.async_copy_ready_event.synchronize()  # guard mode waits, by design
            fields = pending.fields
            return site_check(
                fields["req_ids"], fields["prev_req_id_to_index"],
                self.sampling_metadata.output_token_ids, self.sampled_token_ids_cpu.tolist(),
                fields["vocab_size"])

        def late(session: ProbeSession, pending: PendingRecord) -> None:
            pending.fields["sampled_token_ids_cpu"] = session.copier.take(
                self.sampled_token_ids_cpu)

        def outputs(session: ProbeSession, pending: PendingRecord) -> None:
            outs = self.sampling_metadata.output_token_ids
            pending.fields["output_tail_after"] = [
                list(out[s:]) for out, s in zip(outs, starts, strict=True)]
            pending.fields["output_len_after"] = np.array([len(o) for o in outs], np.int64)

        return _run(site, lambda: original(self), inputs, check, outputs, late)

    return update_async_output_token_ids


# -- GPUModelRunner._model_forward (the model's input ids) and the step counter --------------
def embedding_rows(runner: Any) -> tuple[int, int | None]:
    """Rows of the model's token-embedding weight and its tensor-parallel size (cached).

    The global padded row count of a ``VocabParallelEmbedding`` (ids in ``[0, rows)`` are
    valid on every rank), else the first ``nn.Embedding``'s rows, else the vocab size.
    """
    cached = getattr(runner, "_forensics_embedding_rows", None)
    if cached is not None:
        return cached
    layer = _embedding_layer(runner)
    if layer is not None:
        rows = getattr(layer, "num_embeddings_padded", None) or int(layer.weight.shape[0])
        found = (int(rows), getattr(layer, "tp_size", None))
    else:
        found = (int(runner.model_config.get_vocab_size()), None)
    runner._forensics_embedding_rows = found
    return found


def _embedding_layer(runner: Any) -> Any:
    import torch

    model = runner.get_model() if hasattr(runner, "get_model") else runner.model
    getter = getattr(model, "get_input_embeddings", None)
    try:
        layer = getter() if callable(getter) else None
    except Exception:  # models without a single input embedding
        layer = None
    if isinstance(layer, torch.nn.Module) and hasattr(layer, "weight"):
        return layer
    for module in model.modules() if isinstance(model, torch.nn.Module) else ():
        if type(module).__name__ == "VocabParallelEmbedding" or isinstance(
                module, torch.nn.Embedding):
            return module
    return None


def wrap_model_forward(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap ``GPUModelRunner._model_forward``: the site of the model's ``input_ids`` (the
    sink), checked against the embedding's rows (:func:`guard.check_ids`)."""
    site = hooked_by()["GPUModelRunner._model_forward"]

    @functools.wraps(original)
    def _model_forward(self: Any, input_ids: Any = None, positions: Any = None,
                       intermediate_tensors: Any = None, inputs_embeds: Any = None,
                       **model_kwargs: Any) -> Any:
        host: dict[str, Any] = {}

        def inputs(session: ProbeSession, pending: PendingRecord) -> bool:
            if input_ids is None:
                return False
            rows, tp_size = embedding_rows(self)
            fields = pending.fields
            fields.update(input_ids=session.copier.take(input_ids), num_embeddings=rows)
            if tp_size is not None:
                fields["tp_size"] = int(tp_size)
            if positions is not None and getattr(positions, "ndim", 0) == 1:
                # each id's position in its request: token continuity (issue 40); M-RoPE's
                # 2-D positions are left out
                fields["positions"] = session.copier.take(positions)
            num_reqs = int(self.input_batch.num_reqs)
            host["cu"] = cu = np.array(self.query_start_loc.np[1:num_reqs + 1])
            req_ids = list(self.input_batch.req_ids[:num_reqs])
            fits = cu.size > 0 and int(cu[-1]) <= int(input_ids.shape[0])
            if fits and all(isinstance(r, str) for r in req_ids):
                fields.update(req_ids=req_ids, cu_num_tokens=cu)
            return True

        def check(session: ProbeSession, pending: PendingRecord) -> Violation | None:
            return guard.check_ids(site, "input_ids", _host(input_ids),
                                   pending.fields["num_embeddings"], host.get("cu"))

        return _run(site, lambda: original(
            self, input_ids=input_ids, positions=positions,
            intermediate_tensors=intermediate_tensors, inputs_embeds=inputs_embeds,
            **model_kwargs), inputs, check, None)

    return _model_forward


def wrap_execute_model(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap ``GPUModelRunner.execute_model``: count the step; flush (waiting) if it raises."""

    @functools.wraps(original)
    def execute_model(self: Any, *args: Any, **kwargs: Any) -> Any:
        session = SESSION
        if session is None:
            return original(self, *args, **kwargs)
        session.begin_step(self)
        try:
            return original(self, *args, **kwargs)
        except BaseException as exc:
            session.engine_failed(exc, "execute_model")
            raise

    return execute_model


def wrap_sample_tokens(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap ``GPUModelRunner.sample_tokens``: flush (waiting) if it raises."""

    @functools.wraps(original)
    def sample_tokens(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return original(self, *args, **kwargs)
        except BaseException as exc:
            if SESSION is not None:
                SESSION.engine_failed(exc, "sample_tokens")
            raise

    return sample_tokens
