"""``forensics repro``: a standalone pytest file a vLLM maintainer can run without this package.

The capture is replayed through the installed vLLM's real code (the ``vllm`` variant); for each
site it leaves out of range, the first failing record is written inline as literals, with the
smallest stand-ins the real function needs on CPU (the same ones
:mod:`forensics.variants.vllm_adapters` uses), the call of that function, and an assertion of
the out-of-range access: an ``IndexError`` from the call, or an output outside its bound. The
test fails on the unpatched code and passes once a fix keeps the index in range. The file
imports only torch, vllm and pytest.

Every string from the capture reaches the file through ``repr`` (a Python literal), never as
code.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forensics.errors import ConfigurationError

if TYPE_CHECKING:
    from forensics.api_types import CaptureArg
    from forensics.records import Record

#: the sites a repro can call, and the vLLM function each calls
FUNCTIONS = {
    "batch_change": "vllm.v1.spec_decode.utils.update_num_computed_tokens_for_batch_change",
    "prepare_input_ids": "vllm.v1.worker.gpu_model_runner.GPUModelRunner._prepare_input_ids",
    "async_output": "vllm.v1.worker.gpu_input_batch.InputBatch.update_async_output_token_ids",
    "embedding": "vllm.model_executor.layers.vocab_parallel_embedding.VocabParallelEmbedding"
                 ".forward",
}

HEADER = '''"""Reproducer of an out-of-range index in vLLM (`forensics repro` of {capture!r}).

Run it with the vLLM under test installed: `pytest {name}`. Each test calls vLLM's own
function on CPU with one captured record (inline below) and the smallest stand-ins the function
reads; it fails while the index leaves its range and passes once a fix keeps it in range.
Needs only torch, vllm and pytest.
"""

import pytest
import torch


class NS:
    """A plain object holding the attributes a vLLM method reads (a stand-in)."""

    def __init__(self, **attributes):
        self.__dict__.update(attributes)


def real(function):
    """The plain function behind a torch.compile wrapper."""
    return getattr(function, "_torchdynamo_orig_callable", function)


def outside(values, lower, upper, allowed=()):
    """(position, value) of every value outside [lower, upper), but the ``allowed`` ones."""
    return [(i, v) for i, v in enumerate(values) if not lower <= v < upper and v not in allowed]
'''

CALLS = {
    "batch_change": '''    from vllm.v1.spec_decode import utils

    args = [r[name].clone() for name in (
        "num_computed_tokens", "num_accepted_tokens", "prev_positions",
        "valid_sampled_token_count", "prev_num_draft_tokens", "cpu_num_computed_tokens")]
    try:
        real(utils.update_num_computed_tokens_for_batch_change)(*args)
    except IndexError as exc:
        pytest.fail(f"out-of-range access in update_num_computed_tokens_for_batch_change: {{exc}}")
''',
    "prepare_input_ids": '''    from vllm.v1.worker import gpu_model_runner

    if hasattr(gpu_model_runner, "PIN_MEMORY"):
        gpu_model_runner.PIN_MEMORY = False  # CPU: no pinned memory

    class Buffer:
        """Stand-in for CpuGpuBuffer: .cpu, .gpu, .np and copy_to_gpu."""

        def __init__(self, cpu, gpu):
            self.cpu, self.gpu, self.np = cpu, gpu, cpu.numpy()

        def copy_to_gpu(self, n=None):
            cpu, gpu = (self.cpu, self.gpu) if n is None else (self.cpu[:n], self.gpu[:n])
            return gpu.copy_(cpu, non_blocking=True)

    req_ids = r.get("req_ids") or [f"r{{i}}" for i in range(len(r["prev_positions"]))]
    cu_num_tokens = r["cu_num_tokens"].numpy().copy()
    total = int(cu_num_tokens[-1]) if len(cu_num_tokens) else 0
    staged = r["input_ids"].clone()
    device = r["input_ids_device"].clone() if "input_ids_device" in r else staged.clone()
    drafts = zip(req_ids, r["num_draft_tokens"].tolist())
    spec = {{rid: [-1] * int(k) for rid, k in drafts if k > 0}}
    runner = NS(_pp_recv_work=None, enable_prompt_embeds=False,
                prev_positions=NS(np=r["prev_positions"].numpy().copy()),
                input_batch=NS(prev_sampled_token_ids=r["prev_sampled_token_ids"].clone(),
                               req_ids=req_ids),
                input_ids=Buffer(staged, device), prev_num_spec_tokens=r["prev_num_spec_tokens"],
                _draft_token_ids=r.get("draft_token_ids"), device=torch.device("cpu"))
    try:
        gpu_model_runner.GPUModelRunner._prepare_input_ids(
            runner, NS(scheduled_spec_decode_tokens=spec), len(req_ids), total, cu_num_tokens)
    except IndexError as exc:
        pytest.fail(f"out-of-range access in GPUModelRunner._prepare_input_ids: {{exc}}")
    bad = outside(runner.input_ids.gpu[:total].tolist(), {lower}, {upper})
    assert not bad, f"input_ids written out of [{lower}, {upper}): (position, id) {{bad[:5]}}"
''',
    "async_output": '''    from vllm.v1.worker.gpu_input_batch import InputBatch

    if "output_token_ids" in r:
        lists = [list(row) for row in r["output_token_ids"]]
    else:  # the captured tails after a filler prefix, at their full lengths
        lists = [[0] * (n - len(tail)) + list(tail)
                 for tail, n in zip(r["output_tail"], r["output_len"].tolist())]
    prev = r.get("prev_req_id_to_index")
    if prev is None and r.get("prev_req_ids") is not None:
        prev = {{rid: i for i, rid in enumerate(r["prev_req_ids"]) if rid is not None}}
    batch = NS(req_ids=list(r["req_ids"]), prev_req_id_to_index=prev,
               sampled_token_ids_cpu=r["sampled_token_ids_cpu"].clone(),
               sampling_metadata=NS(output_token_ids=lists),
               async_copy_ready_event=NS(synchronize=lambda: None),
               vocab_size=r["vocab_size"])
    try:
        InputBatch.update_async_output_token_ids(batch)
    except IndexError as exc:
        pytest.fail(f"out-of-range access in InputBatch.update_async_output_token_ids: {{exc}}")
    bad = [(row, i, v) for row, ids in enumerate(lists)  # -1: a placeholder, left for later
           for i, v in outside(ids, {lower}, {upper}, allowed=(-1,))]
    assert not bad, f"output ids written out of [{lower}, {upper}): (row, position, id) {{bad[:5]}}"
''',
    "embedding": '''    from vllm.model_executor.layers.vocab_parallel_embedding import (
        UnquantizedEmbeddingMethod,
        VocabParallelEmbedding,
    )

    rows = r["num_embeddings"]
    layer = NS(tp_size=1, quant_method=UnquantizedEmbeddingMethod(), weight=torch.zeros(rows, 1))
    try:
        VocabParallelEmbedding.forward(layer, r["input_ids"].clone())
    except IndexError as exc:
        pytest.fail(f"out-of-range access in VocabParallelEmbedding.forward: {{exc}}")
''',
}


def failing_records(capture: CaptureArg) -> list[tuple[Record, dict[str, Any]]]:
    """The first record of each site the installed vLLM's real code leaves out of range, with
    its first finding, in pipeline order.

    Raises MissingDependencyError / UnsupportedVersionError without a supported vLLM.
    """
    import forensics
    from forensics.sites import site_order
    from forensics.tables import findings_table
    from forensics.variants.vllm_adapters import require_vllm

    require_vllm()
    result = forensics.replay(capture, variants=["vllm"])
    table = findings_table(result)
    table = table[(table["kind"] == "out_of_bounds") & table["site"].isin(list(FUNCTIONS))]
    chosen = []
    for _, rows in table.groupby("site", sort=False):
        first = rows.sort_values(["step", "rank"]).iloc[0].to_dict()
        chosen.append((result.records[int(first["record"])], first))
    return sorted(chosen, key=lambda pair: site_order(pair[0].site))


def literal(value: Any) -> str:
    """``value`` (a field of a record) as a Python expression using only torch."""
    import numpy as np

    if isinstance(value, np.ndarray):
        return f"torch.tensor({value.tolist()!r}, dtype=torch.{value.dtype.name})"
    if isinstance(value, (np.integer, np.bool_)):
        return repr(value.item())
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return repr([v.tolist() if isinstance(v, np.ndarray) else v for v in value])
    return repr(value)


def test_source(record: Record, finding: dict[str, Any]) -> str:
    """One test function: the record inline, the stand-ins, the call and the assertion."""
    fields = ",\n".join(f"        {name!r}: {literal(value)}"
                        for name, value in record.fields.items()
                        if not name.endswith("_after"))
    where = (f"{finding['tensor']}[{finding['element']}] = {finding['value']}, outside "
             f"[{finding['lower']}, {finding['upper']})")
    body = CALLS[record.site].format(lower=int(finding["lower"] or 0),
                                     upper=int(finding["upper"]))
    return (f"\n\ndef test_{record.site}_step_{record.step}_rank_{record.rank}():\n"
            f"    # {FUNCTIONS[record.site]}: the replay found {where}\n"
            f"    r = {{\n{fields},\n    }}\n{body}")


def write_repro(capture: CaptureArg, out: str | os.PathLike[str], *,
                force: bool = False) -> Path:
    """Write the reproducer of ``capture`` at ``out`` (see the module docstring).

    Raises:
        ConfigurationError: the installed vLLM finds nothing out of range in the capture, or
            ``out`` exists without ``force``.
        MissingDependencyError / UnsupportedVersionError: no supported vLLM is installed.
    """
    target = Path(out)
    if target.exists() and not force:
        raise ConfigurationError(f"'{target}' exists; pass --force to replace it")
    chosen = failing_records(capture)
    if not chosen:
        raise ConfigurationError(
            f"the installed vLLM's code leaves no index out of range in '{capture}'; nothing "
            "to reproduce (a model-only finding is not reproducible on the real code)")
    name = Path(str(getattr(capture, "path", capture))).name
    text = HEADER.format(capture=name, name=target.name)
    text += "".join(test_source(record, finding) for record, finding in chosen)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)
    return target
