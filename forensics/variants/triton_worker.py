"""The process that runs Model Runner V2's Triton kernels in Triton's interpreter, on CPU.

Started by :mod:`forensics.variants.triton_kernels` as ``python -m
forensics.variants.triton_worker`` with ``TRITON_INTERPRET=1`` (read when vLLM's kernels are
decorated, so before vLLM is imported) and ``CUDA_VISIBLE_DEVICES=""`` (vLLM's Triton check then
accepts a machine without a GPU driver). It reads one JSON request per stdin line, ``{"site",
"inputs"}`` (an ``.npz`` of the record's fields, read without pickle), calls vLLM's own function
on CPU tensors built from them (the site's ``Site.kernel`` names the function that does: here,
or in the site's own module, which imports torch and vLLM inside it), and answers one JSON
line ``{"status", "message", "outputs"}`` (an ``.npz`` of the changed buffers);
``{"batch": [request, ...]}`` gets one answer line per request, in order (each answer is also
the worker's heartbeat: the replaying process gives each its deadline, see
:mod:`forensics.variants.triton_kernels`).

Every buffer the worker allocates from a record's numbers (``output_bin_counts``,
``all_token_ids``, the ``num_logits`` vLLM allocates) is first held to the allocation budget
(:func:`forensics.budget.require_alloc`); past it the answer's status is ``budget`` and the
replaying process raises AllocationBudgetError naming the record, the field and its value.

Every load and store the kernel makes is observed (:class:`Observer`): an address outside the
tensors handed to the launch is an out-of-bounds access, reported as ``index_error`` and not
performed (a load reads 0), so a wild index never corrupts or crashes this process. This
observes reads as well as stores, which buffers padded with canaries would not. The answer's
line attributes the first such access as the kernel sanitizer does
(:meth:`forensics.kernels.bounds.Bounds.owners`): to the buffer within 64 KiB of it, to the
one empty buffer whose null pointer it went through, else to no buffer ("no buffer holds
address ...", "through a null pointer ... attributed to no buffer").

Started with ``--patched DIR`` (the ``vllm+PATH.diff`` variant), the worker imports the patched
copies of vLLM's files under ``DIR`` (``DIR/vllm/...py``, written by the replaying process)
in place of the installed ones, under their own module names (:class:`PatchedFinder`): this
process serves one diff, so every kernel it runs is the diff's. Each answer names the vLLM
modules its record ran (``modules``: the kernels launched, and the module the site's function
was handed), so that the replaying process can tell a diff that does not touch them.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from forensics.budget import require_alloc
from forensics.child_answers import answer_stream
from forensics.errors import AllocationBudgetError
from forensics.kernels.bounds import FAR, REACH, Bounds, null_owner, null_pointer
from forensics.kernels.interpreter import check_masked_accesses

_MISSING = object()
#: the answer status of a request whose buffers would pass the allocation budget
BUDGET = "budget"


class _Where:
    """The record the worker is answering, named for budget messages (set per request)."""

    text = "a record"


WHERE = _Where()


class Observer:
    """Checks the kernel's memory accesses against the launch's tensors (see the module).
    Which lanes are inside, and which buffer a lane outside is attributed to, is
    :class:`forensics.kernels.bounds.Bounds`'s judgement, the kernel sanitizer's too (an
    address far from every buffer, or through a null pointer whose buffer is unknown, is no
    buffer's); what is noted of the lanes outside differs on purpose: an answer here is one
    IndexError line, so the first lane is attributed, where the sanitizer's replay worker
    attributes every lane (its findings count them per argument). Its regions are disjoint
    allocations of its own; here they are the storages of each launch of a request, which may
    repeat (two views of one storage)."""

    def __init__(self) -> None:
        self.regions: list[tuple[int, int, str]] = []
        self.outside: list[str] = []
        self.modules: set[str] = set()
        self._judged: list[tuple[int, int, str]] = []
        self._bounds = Bounds([])

    def launch(self, names: list[str], values: list[Any]) -> None:
        """Note the storages of a launch's tensor arguments (start, end, name); an empty
        tensor's as ``(0, 0)``: the kernel is handed its null pointer, whatever its storage's
        address (:func:`~forensics.kernels.bounds.null_pointer`: a numpy-made empty buffer's
        storage has one, and an access through its null pointer was said to be through "no
        buffer's")."""
        for name, value in zip(names, values, strict=False):
            if hasattr(value, "untyped_storage") and null_pointer(value):
                self.regions.append((0, 0, name))
            elif hasattr(value, "untyped_storage"):
                storage = value.untyped_storage()
                self.regions.append((storage.data_ptr(), storage.data_ptr() + storage.nbytes(),
                                     name))

    def allowed(self, addresses: np.ndarray, mask: np.ndarray, size: int, what: str
                ) -> np.ndarray:
        """``mask`` without the lanes whose access leaves every region (noted in ``outside``)."""
        if self._judged != self.regions:  # the regions changed: a launch, a new request
            self._judged = list(self.regions)
            self._bounds = Bounds([(start, end) for start, end, _ in self.regions])

        def note(bad: np.ndarray) -> None:
            self.outside.append(f"{what} at an address outside every buffer of the launch "
                                f"({self._owner(int(bad[0]))})")

        return self._bounds.allowed(addresses, mask, size, note)

    def _owner(self, address: int) -> str:
        """What the address is attributed to, in words (:meth:`Bounds.owners`)."""
        owner = int(self._bounds.owners(np.array([address], dtype=np.uint64))[0])
        if owner == FAR:
            return f"no buffer holds address {address:#x}, nor lies within {REACH} bytes of it"
        if owner >= 0:
            start, end, name = self.regions[owner]
            return f"byte {address - start} of '{name}', {end - start} bytes long"
        null = list(dict.fromkeys(name for start, _, name in self.regions if start == 0))
        empty = null_owner(null)
        if empty is not None:
            return f"through the null pointer of the empty '{empty}', at byte {address}"
        whose = "no buffer's pointer is null" if not null else (
            f"the pointers of {', '.join(repr(n) for n in null[:-1])} and {null[-1]!r} are "
            "null, which one it went through is unknown")
        return f"through a null pointer at address {address:#x}, attributed to no buffer: {whose}"


OBSERVER = Observer()


def install_observer() -> None:
    """Route the interpreter's launches, loads and stores through :data:`OBSERVER`."""
    import inspect

    interp = check_masked_accesses(OBSERVER.allowed, "a load", "a store")
    call = interp.GridExecutor.__call__

    def launch(self: Any, *args: Any, **kwargs: Any) -> Any:
        signature = inspect.signature(self.fn)
        named = {k: v for k, v in kwargs.items() if k in signature.parameters}
        bound = signature.bind_partial(*args, **named).arguments
        OBSERVER.launch(list(bound), list(bound.values()))
        OBSERVER.modules.add(getattr(self.fn, "__module__", "") or "")
        return call(self, *args, **kwargs)

    interp.GridExecutor.__call__ = launch


def _zeros(rows: int, width: int, field: str) -> Any:
    """An int32 ``rows x width`` torch buffer of zeros, held to the allocation budget first
    (``field`` names the record's fields that sized it)."""
    import torch

    require_alloc(4 * max(rows, 0) * max(width, 0), WHERE.text, field, f"{rows} x {width}")
    return torch.zeros(rows, width, dtype=torch.int32)


def _tensor(inputs: dict[str, np.ndarray], name: str) -> Any:
    import torch

    return torch.from_numpy(np.array(inputs[name], copy=True))


def run_combine_sampled_and_draft_tokens(kernels: Any, inputs: dict[str, np.ndarray]
                                         ) -> dict[str, np.ndarray]:
    """``combine_sampled_and_draft_tokens`` on the record's buffers; returns ``input_ids``."""
    t = {name: _tensor(inputs, name) for name in (
        "input_ids", "idx_mapping", "query_start_loc", "seq_lens", "prefill_len",
        "draft_tokens", "cu_num_logits")}
    last = _tensor(inputs, "last_sampled_tokens").reshape(-1, 1)
    num_logits = int(inputs["cu_num_logits"][-1]) if len(inputs["cu_num_logits"]) else 0
    require_alloc(8 * max(num_logits, 0), WHERE.text, "cu_num_logits[-1]", num_logits)
    kernels.combine_sampled_and_draft_tokens(
        t["input_ids"], t["idx_mapping"], last, t["query_start_loc"], t["seq_lens"],
        t["prefill_len"], t["draft_tokens"], t["cu_num_logits"], num_logits,
        int(inputs["num_new_sampled_tokens"]))
    return {"input_ids": t["input_ids"].numpy()}


def run_post_update(kernels: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``post_update`` on the record's buffers (``all_token_ids`` and ``output_bin_counts``
    zeros of the recorded widths); returns the per-slot buffers it changes. A ``post_update``
    that takes ``vocab_size`` (the guard's diff) gets the record's, as the patched runner
    passes its own."""
    import inspect


    t = {name: _tensor(inputs, name) for name in (
        "idx_mapping", "num_computed_tokens", "sampled_tokens", "num_sampled", "num_rejected",
        "total_len")}
    last = _tensor(inputs, "last_sampled_tokens").reshape(-1, 1)
    slots = len(inputs["num_computed_tokens"])
    rows, width = int(inputs["bin_counts_rows"]), int(inputs["bin_counts_width"])
    bins = _zeros(rows, width, "bin_counts_rows x bin_counts_width") if rows > 0 else None
    all_ids = _zeros(slots, int(inputs["all_token_ids_width"]),
                     "len(num_computed_tokens) x all_token_ids_width")
    qsl = _tensor(inputs, "query_start_loc") if "query_start_loc" in inputs else None
    drafts: tuple[Any, ...] = ()
    if "draft_tokens" in inputs:
        drafts = (_tensor(inputs, "draft_tokens"), _tensor(inputs, "draft_tokens_out"))
    vocab = {}
    if "vocab_size" in inspect.signature(kernels.post_update).parameters:
        vocab["vocab_size"] = int(inputs["vocab_size"])
    kernels.post_update(t["idx_mapping"], t["num_computed_tokens"], last, bins,
                        t["sampled_tokens"], t["num_sampled"], t["num_rejected"], qsl, all_ids,
                        t["total_len"], *drafts, **vocab)
    out = {"num_computed_tokens": t["num_computed_tokens"].numpy(),
           "last_sampled_tokens": last.reshape(-1).numpy(), "total_len": t["total_len"].numpy()}
    if drafts:
        out["draft_tokens_out"] = drafts[1].numpy()
    return out


def kernel_of(site: str) -> Any:
    """The function running ``site``'s kernel on its arrays (the site's ``Site.kernel``)."""
    import importlib

    from forensics.sites import get_site

    kernel = get_site(site).kernel
    if kernel is None:
        raise ValueError(f"site {site!r} has no Triton kernel")
    module, _, function = kernel.partition(":")
    return getattr(importlib.import_module(module), function)


def answer(kernels: Any, request: dict[str, Any]) -> dict[str, Any]:
    """Run one request; the answer's ``status`` is ``ok``, ``index_error`` (an observed
    out-of-bounds access), ``budget`` (a buffer past the allocation budget, not allocated) or
    ``error`` (anything the call raised)."""
    with np.load(request["inputs"], allow_pickle=False) as data:
        inputs = {name: data[name] for name in data.files}
    OBSERVER.regions, OBSERVER.outside, OBSERVER.modules = [], [], {kernels.__name__}
    WHERE.text = str(request.get("where", "a record"))
    try:
        outputs = kernel_of(request["site"])(kernels, inputs)
    except AllocationBudgetError as exc:
        return {"status": BUDGET, "message": str(exc)[:2000], "modules": []}
    except Exception as exc:  # the kernel's own failure is the outcome
        return {"status": "error", "message": f"{type(exc).__name__}: {exc}"[:2000],
                "modules": sorted(OBSERVER.modules)}
    if OBSERVER.outside:
        return {"status": "index_error", "modules": sorted(OBSERVER.modules),
                "message": f"IndexError: the Triton kernel made {OBSERVER.outside[0]}"}
    np.savez(request["outputs"], **outputs)  # type: ignore[arg-type]
    return {"status": "ok", "message": "", "outputs": request["outputs"],
            "modules": sorted(OBSERVER.modules)}


class PatchedFinder(importlib.abc.MetaPathFinder):
    """Finds the patched copy of a module under ``root`` (``root/vllm/...py``), if any."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        """The spec of ``fullname``'s patched file, or None (the installed module is used)."""
        parts = fullname.split(".")
        for file, package in ((self.root.joinpath(*parts).with_suffix(".py"), False),
                              (self.root.joinpath(*parts, "__init__.py"), True)):
            if parts[0] == "vllm" and file.is_file():
                installed = importlib.machinery.PathFinder.find_spec(fullname, path)
                # a patched package's submodules are still the installed ones
                below = list(installed.submodule_search_locations or []) if (
                    package and installed is not None) else None
                return importlib.util.spec_from_file_location(
                    fullname, file, submodule_search_locations=below)
        return None


def main(argv: list[str] | None = None) -> int:
    """Serve requests until stdin closes; the first line says ``ready`` (or why not)."""
    args = sys.argv[1:] if argv is None else argv
    out = answer_stream()  # what vLLM or a diff prints never reads as an answer
    if args[:1] == ["--patched"]:
        sys.meta_path.insert(0, PatchedFinder(Path(args[1])))
    try:
        install_observer()
        from vllm.v1.worker.gpu import input_batch as kernels
    except Exception as exc:
        print(json.dumps({"ready": False, "message": f"{type(exc).__name__}: {exc}"}), file=out)
        return 1
    print(json.dumps({"ready": True}), file=out)
    for line in sys.stdin:
        request = json.loads(line)
        if "batch" in request:  # many records, one answer line each (each a heartbeat)
            for one in request["batch"]:
                print(json.dumps(answer(kernels, one)), file=out)
        else:
            print(json.dumps(answer(kernels, request)), file=out)
    return 0


if __name__ == "__main__":  # run as the package's module, so that its state is one (WHERE)
    from forensics.variants.triton_worker import main as _main

    sys.exit(_main())
