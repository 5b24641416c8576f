"""The wrappers put around Model Runner V2 (``vllm.v1.worker.gpu``, vLLM 0.32/0.33).

V2 keeps request state in per-slot buffers and does its index math in Triton kernels without
bounds checks. The probe records, at their call sites in ``vllm.v1.worker.gpu.model_runner``:

- ``combine_sampled_and_draft_tokens`` (site ``combine_tokens``): its inputs before the call
  and ``input_ids`` after it;
- ``post_update`` (site ``post_update``): its inputs before the call and the per-slot buffers
  it changes after it (``all_token_ids`` and ``output_bin_counts`` by their widths only);
- the ``input_ids`` ``GPUModelRunner.prepare_inputs`` hands to the model (site ``embedding``),
  checked in guard mode before the model runs.

Steps are counted at V2's ``GPUModelRunner.execute_model`` (the V1 wrapper, which only counts).
Guard mode checks a call with the site's ``Site.guard`` (:func:`checker`; a site without one
with its own model and checks, :func:`violation_of`): it raises before the kernel only for an
index the kernel uses; an id it only writes is recorded,
flushed and warned of, and the embedding raises if the id reaches it.

``Worker.load_model`` is wrapped too: a runner the probe knows sets the manifest's ``runner``;
any other gets a ``probe_unsupported`` event and one warning (:func:`report_unsupported`).
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from forensics.probe import hooks
from forensics.probe.frames import only_strings
from forensics.probe.guard import Violation
from forensics.sites import SINK, hooked_at

if TYPE_CHECKING:
    from forensics.probe.copy import PendingRecord
    from forensics.probe.session import ProbeSession

LOG = logging.getLogger("forensics.probe")
RUNNER_V2 = "vllm.v1.worker.gpu.model_runner"
WORKER = "vllm.v1.worker.gpu_worker"
#: the V2 functions the probe wraps, as a site's ``Site.hook`` names them (the registry says
#: which site records each: :func:`forensics.sites.hooked_at`)
COMBINE = "vllm.v1.worker.gpu.model_runner:combine_sampled_and_draft_tokens"
POST_UPDATE = "vllm.v1.worker.gpu.model_runner:post_update"
#: the runner classes the probe records, by ``module.qualname``, and their manifest names
KNOWN_RUNNERS = {"vllm.v1.worker.gpu_model_runner.GPUModelRunner": "v1",
                 f"{RUNNER_V2}.GPUModelRunner": "v2"}
#: host facts of the step being prepared (tokens scheduled), per runner
_TOKENS: dict[int, int] = {}


def runner_kind(runner: Any) -> str | None:
    """``"v1"`` or ``"v2"`` for a runner whose class is (or derives from) one the probe
    records; None for any other."""
    for cls in type(runner).__mro__:
        kind = KNOWN_RUNNERS.get(f"{cls.__module__}.{cls.__qualname__}")
        if kind is not None:
            return kind
    return None


def _host(value: Any) -> np.ndarray:
    """A host numpy copy of a tensor (waits for the device)."""
    return value.detach().to("cpu").numpy()


def violation_of(site: str, fields: dict[str, Any]) -> Violation | None:
    """The first index ``site``'s upstream model finds out of range in a record of ``fields``
    (host values), preferring one the kernel uses (a read, a write position) over an id it
    only writes (``out.*``); None when every index is in range."""
    from forensics.records import Record
    from forensics.sites import get_site

    record = Record(site, 0, 0, fields)
    spec = get_site(site)
    found = [f for f in spec.judge(record, spec.upstream(record)) if f["kind"] == "out_of_bounds"]
    if not found:
        return None
    used = [f for f in found if not str(f["tensor"]).startswith("out.")]
    first = (used or found)[0]
    return Violation(site, first["row"], str(first["tensor"]), int(first["value"]),
                     int(first["lower"]), int(first["upper"]))


def checker(site: str) -> Callable[[dict[str, Any]], Violation | None]:
    """Guard mode's check of one ``site`` call on its host values: the site's own
    ``Site.guard`` (vectorised, held to :func:`violation_of` by
    ``tests/probe/test_probe_guard_core.py``) when it has one, else :func:`violation_of`."""
    from forensics.sites import get_site

    guard = get_site(site).guard
    if guard is not None:
        return guard
    return functools.partial(violation_of, site)


def _record(pending: PendingRecord, session: ProbeSession, tensors: dict[str, Any],
            ints: dict[str, int], host: dict[str, Any], rows: int) -> None:
    """Put ``tensors`` (copied: at once on the CPU, asynchronously from a device) and ``ints``
    into the record, and the request ids of its ``rows`` batch rows when the runner knows
    them; in guard mode also their host values into ``host`` (a host tensor's copy is its
    host value: no second copy). (One copy per tensor: joining them, as V1's
    ``batch_change`` does, cost more on CPU tensors, benchmarks/README.md; on a device, not
    measured.)"""
    copies = session.copier.take_all(list(tensors.values()))
    pending.fields.update(zip(tensors, copies, strict=True))
    pending.fields.update(ints)
    if session.guard:
        host.update({name: copy if type(copy) is np.ndarray else _host(tensors[name])
                     for name, copy in zip(tensors, copies, strict=True)})
        host.update(ints)
    req_ids = _req_ids(session.runner, rows)
    if req_ids is not None:
        pending.fields["req_ids"] = host["req_ids"] = req_ids


def _req_ids(runner: Any, n: int) -> list[str] | None:
    batch = getattr(runner, "_forensics_batch_req_ids", None)
    return list(batch) if isinstance(batch, list) and len(batch) == n and only_strings(
        batch) else None


# -- combine_tokens --------------------------------------------------------------------------
def wrap_combine(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap ``combine_sampled_and_draft_tokens`` where V2's runner calls it."""
    site = hooked_at()[COMBINE]
    site_check = checker(site)

    @functools.wraps(original)
    def combine_sampled_and_draft_tokens(
            input_ids: Any, idx_mapping: Any, last_sampled_tokens: Any, query_start_loc: Any,
            seq_lens: Any, prefill_len: Any, draft_tokens: Any, cu_num_logits: Any,
            num_logits: int, num_new_sampled_tokens: int = 1) -> Any:
        host: dict[str, Any] = {}
        n = int(idx_mapping.shape[0])
        runner = hooks.SESSION.runner if hooks.SESSION is not None else None
        tokens = _TOKENS.get(id(runner), int(input_ids.shape[0]))

        def inputs(session: ProbeSession, pending: PendingRecord) -> bool:
            _record(pending, session, {
                "input_ids": input_ids[:tokens], "idx_mapping": idx_mapping,
                "last_sampled_tokens": last_sampled_tokens.reshape(-1),
                "query_start_loc": query_start_loc[:n + 1], "seq_lens": seq_lens[:n],
                "prefill_len": prefill_len, "draft_tokens": draft_tokens,
                "cu_num_logits": cu_num_logits[:n + 1]},
                {"num_new_sampled_tokens": int(num_new_sampled_tokens),
                 "vocab_size": int(session.runner.vocab_size)}, host, n)
            return True

        def check(session: ProbeSession, pending: PendingRecord) -> Violation | None:
            return site_check(host)

        def outputs(session: ProbeSession, pending: PendingRecord) -> None:
            pending.fields["input_ids_after"] = session.copier.take(input_ids[:tokens])

        return hooks._run(site, lambda: original(
            input_ids, idx_mapping, last_sampled_tokens, query_start_loc, seq_lens,
            prefill_len, draft_tokens, cu_num_logits, num_logits, num_new_sampled_tokens),
            inputs, check, outputs)

    return combine_sampled_and_draft_tokens


# -- post_update -----------------------------------------------------------------------------
def wrap_post_update(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap ``post_update`` where V2's runner calls it (after sampling)."""
    site = hooked_at()[POST_UPDATE]
    site_check = checker(site)

    @functools.wraps(original)
    def post_update_call(idx_mapping: Any, num_computed_tokens: Any, last_sampled_tokens: Any,
                         output_bin_counts: Any, sampled_tokens: Any, num_sampled: Any,
                         num_rejected: Any, query_start_loc: Any, all_token_ids: Any,
                         total_len: Any, *drafts: Any, **named: Any) -> Any:
        host: dict[str, Any] = {}
        n = int(idx_mapping.shape[0])
        given = dict(zip(("draft_tokens", "draft_tokens_out"), drafts, strict=False))
        given.update(named)
        changed = {"num_computed_tokens": num_computed_tokens,
                   "last_sampled_tokens": last_sampled_tokens.reshape(-1),
                   "total_len": total_len}
        if given.get("draft_tokens") is not None:
            changed["draft_tokens_out"] = given["draft_tokens_out"]

        def inputs(session: ProbeSession, pending: PendingRecord) -> bool:
            tensors = {"idx_mapping": idx_mapping, **changed, "sampled_tokens": sampled_tokens,
                       "num_sampled": num_sampled, "num_rejected": num_rejected}
            if query_start_loc is not None:
                tensors["query_start_loc"] = query_start_loc[:n + 1]
            if given.get("draft_tokens") is not None:
                tensors["draft_tokens"] = given["draft_tokens"]
            bins = (0, 0) if output_bin_counts is None else tuple(output_bin_counts.shape)
            _record(pending, session, tensors, {
                "all_token_ids_width": int(all_token_ids.shape[1]),
                "bin_counts_rows": int(bins[0]), "bin_counts_width": int(bins[1]),
                "vocab_size": int(session.runner.vocab_size)}, host, n)
            return True

        def check(session: ProbeSession, pending: PendingRecord) -> Violation | None:
            return site_check(host)

        def outputs(session: ProbeSession, pending: PendingRecord) -> None:
            take = session.copier.take
            for name, tensor in changed.items():
                pending.fields[f"{name}_after"] = take(tensor)

        return hooks._run(site, lambda: original(
            idx_mapping, num_computed_tokens, last_sampled_tokens, output_bin_counts,
            sampled_tokens, num_sampled, num_rejected, query_start_loc, all_token_ids,
            total_len, *drafts, **named), inputs, check, outputs)

    return post_update_call


# -- embedding: the input_ids prepare_inputs hands to the model ------------------------------
def wrap_prepare_inputs(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap V2's ``GPUModelRunner.prepare_inputs``: note the step's tokens and requests for
    the kernels' records, then record (and in guard mode check) the ``input_ids`` it built."""

    @functools.wraps(original)
    def prepare_inputs(self: Any, scheduler_output: Any, batch_req_state: Any, *args: Any,
                       **kwargs: Any) -> Any:
        try:
            _TOKENS[id(self)] = int(batch_req_state.num_tokens)
            self._forensics_batch_req_ids = list(batch_req_state.req_ids)
        except Exception:  # a dummy or unfamiliar batch: the kernels record what they see
            _TOKENS.pop(id(self), None)
        batch = original(self, scheduler_output, batch_req_state, *args, **kwargs)
        return hooks._run(SINK, lambda: batch, *_embedding_steps(self, batch))

    return prepare_inputs


def _embedding_steps(runner: Any, batch: Any) -> tuple[Any, Any, None]:
    """The ``inputs`` and ``check`` steps of the embedding record of ``batch``."""
    cu = np.array(batch.query_start_loc_np[1:batch.num_reqs + 1])

    def inputs(session: ProbeSession, pending: PendingRecord) -> bool:
        if getattr(runner, "uses_inputs_embeds", False):
            return False  # the model may take embeddings instead of ids
        rows, tp_size = hooks.embedding_rows(runner)
        fields = pending.fields
        fields.update(input_ids=session.copier.take(batch.input_ids), num_embeddings=rows)
        if tp_size is not None:
            fields["tp_size"] = int(tp_size)
        req_ids = list(batch.req_ids[:batch.num_reqs])
        fits = cu.size > 0 and int(cu[-1]) <= int(batch.input_ids.shape[0])
        if fits and all(isinstance(r, str) for r in req_ids):
            fields.update(req_ids=req_ids, cu_num_tokens=cu)
        return True

    def check(session: ProbeSession, pending: PendingRecord) -> Violation | None:
        from forensics.probe import guard

        return guard.check_ids(SINK, "input_ids", _host(batch.input_ids),
                               pending.fields["num_embeddings"], cu)

    return inputs, check, None


# -- which runner runs -----------------------------------------------------------------------
def wrap_load_model(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap ``Worker.load_model``: after it, tell the session which runner the worker holds
    (:func:`report_unsupported` when the probe knows none of its classes)."""

    @functools.wraps(original)
    def load_model(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        session = hooks.SESSION
        runner = getattr(self, "model_runner", None)
        if session is not None and runner is not None:
            if session.runner is None:
                session.runner = runner
            if runner_kind(runner) is None:
                report_unsupported(session, runner)
            else:
                report_no_site(session, runner)
        return result

    return load_model


def runner_sites(kind: str) -> tuple[str, ...]:
    """The sites a runner of ``kind`` (``v1``, ``v2``) calls: those whose hook is in Model
    Runner V2's package for ``v2``, the others for ``v1``; the embedding sink for both."""
    package = RUNNER_V2.rpartition(".")[0] + "."
    return tuple(site for hook, site in hooked_at().items()
                 if site == SINK or hook.startswith(package) == (kind == "v2"))


def report_no_site(session: ProbeSession, runner: Any) -> None:
    """Log one warning when ``FORENSICS_SITES`` names none of the sites ``runner`` calls
    (``batch_change`` alone under Model Runner V2): nothing would be recorded, and with
    nothing recorded no capture, no event, no word. Never raises."""
    try:
        kind = runner_kind(runner) or ""
        runs = runner_sites(kind)
        if set(session.settings.sites) & set(runs):
            return
        from forensics.probe.settings import ENV_SITES

        LOG.warning("forensics probe: %s=%s names none of the sites the %s runner calls (%s): "
                    "nothing is recorded; add one of them to %s, or unset it", ENV_SITES,
                    ",".join(session.settings.sites), kind, ", ".join(runs), ENV_SITES)
    except Exception as exc:  # the probe's own failure never reaches vLLM
        session.error(exc, "checking the sites of the runner")


def report_unsupported(session: ProbeSession, runner: Any) -> None:
    """Keep a ``probe_unsupported`` event (the capture is written for it) and log one warning
    naming the vLLM version, the runner class and what to set. Never raises."""
    try:
        from forensics.versions import module_version

        cls = type(runner)
        name = f"{cls.__module__}.{cls.__qualname__}"
        version = module_version("vllm") or "unknown"
        message = (f"forensics probe: vLLM {version} runs model runner {name}, which the probe "
                   f"does not know (it records {', '.join(sorted(KNOWN_RUNNERS))}); nothing "
                   f"is recorded. Set VLLM_USE_V2_MODEL_RUNNER=1 for Model Runner V2, or "
                   f"VLLM_USE_V2_MODEL_RUNNER=0 for V1, or use a vLLM the probe supports")
        session.keep_event("probe_unsupported", runner=name, vllm=version, message=message)
        LOG.warning("%s", message)
    except Exception as exc:  # the probe's own failure never reaches vLLM
        session.error(exc, "reporting an unsupported runner")


# -- any other V2 function a site's hook names: recorded by its schema's field names --------
@functools.cache
def wrap_by_fields(hook: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The wrapper of ``hook`` (a V2 module global), recording the site whose hook it is by
    its schema: each field named like one of the function's parameters takes that argument
    (a tensor copied, an int as it is), each int field the function does not take is the
    runner's attribute of that name (``vocab_size``), ``req_ids`` the batch's request ids,
    and each output field the argument after the call. Guard mode checks the call as the
    other V2 wrappers do (:func:`checker`)."""

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        from forensics.sites import get_site

        site = hooked_at()[hook]
        spec = get_site(site)
        site_check = checker(site)
        signature = inspect.signature(original)
        names = [f.name for f in spec.fields if f.name != "req_ids"]
        from_runner = [f.name for f in spec.fields
                       if f.kind == "int" and f.name not in signature.parameters]

        @functools.wraps(original)
        def recorded(*args: Any, **kwargs: Any) -> Any:
            host: dict[str, Any] = {}
            bound: dict[str, Any] = {}

            def inputs(session: ProbeSession, pending: PendingRecord) -> bool:
                bound.update(signature.bind(*args, **kwargs).arguments)
                given = {n: bound[n] for n in names if bound.get(n) is not None}
                ints = {n: int(v) for n, v in given.items() if isinstance(v, int)}
                ints.update({n: int(getattr(session.runner, n)) for n in from_runner})
                tensors = {n: v for n, v in given.items() if n not in ints}
                batch = getattr(session.runner, "_forensics_batch_req_ids", None)
                rows = len(batch) if "req_ids" in spec.field_specs() and isinstance(
                    batch, list) else -1
                _record(pending, session, tensors, ints, host, rows)
                return True

            def check(session: ProbeSession, pending: PendingRecord) -> Violation | None:
                return site_check(host)

            def outputs(session: ProbeSession, pending: PendingRecord) -> None:
                for name in spec.output_fields:
                    pending.fields[f"{name}_after"] = session.copier.take(bound[name])

            return hooks._run(site, lambda: original(*args, **kwargs), inputs, check,
                              outputs)

        return recorded

    return wrap


#: the V2 functions with a wrapper of their own (the others: :func:`wrap_by_fields`)
_OWN_WRAPPERS = {COMBINE: wrap_combine, POST_UPDATE: wrap_post_update}


def v2_hooks() -> list[str]:
    """Every hook of a registered site in Model Runner V2's package
    (``vllm.v1.worker.gpu.``), in pipeline order."""
    return [hook for hook in hooked_at() if hook.startswith("vllm.v1.worker.gpu.")]


def targets(target: Callable[..., Any]) -> tuple[Any, ...]:
    """The V2 wrappers as ``patch.Target`` objects (``target`` is that class)."""
    return (
        *(target(hook.partition(":")[0], "", hook.partition(":")[2],
                 _OWN_WRAPPERS.get(hook) or wrap_by_fields(hook)) for hook in v2_hooks()),
        target(RUNNER_V2, "GPUModelRunner", "prepare_inputs", wrap_prepare_inputs, False),
        target(RUNNER_V2, "GPUModelRunner", "execute_model", hooks.wrap_execute_model, False),
        target(RUNNER_V2, "GPUModelRunner", "sample_tokens", hooks.wrap_sample_tokens, False),
        target(WORKER, "Worker", "load_model", wrap_load_model, False),
    )
