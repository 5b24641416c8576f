"""Site ``async_output``: ``InputBatch.update_async_output_token_ids``.

For each current request present in the previous batch whose output is non-empty and ends in
``-1`` placeholders, vLLM 0.33.0 takes ``sampled_token_ids_cpu[prev_row]`` (skipped when empty),
counts its ids (the row's length when its last id is not ``-1``, else the position of its first
``-1``) and replaces the trailing placeholders with the first ``min(count, placeholders)`` ids.
The patched count stops at the first id ``< 0`` or ``>= vocab_size``.

Outputs are given either as full lists (``output_token_ids``) or as tails (``output_tail``, the
last ids of each list, with the full lengths ``output_len``). A tail made only of ``-1`` is taken
to hold every trailing placeholder (the id before it is assumed not to be ``-1``).
"

This package is the site: its records and their checks (``records``), the columnar replay
(``replay``, counting on ``lines`` of sampled ids), ``scan``, the probe's ``guard``; this module
declares :data:`SITE`, the probe log line and the ``forensics repro`` call.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from forensics.sites.async_output.guard import guard
from forensics.sites.async_output.records import (
    FIELDS,
    NAME,
    ORIGIN_POSITION,
    OUTPUT_FIELDS,
    SUMMARY_BOUND,
    SUMMARY_TENSOR,
    check_batch,
    check_record,
)
from forensics.sites.async_output.replay import outcome_checks, prepare_columns, run_batch
from forensics.sites.async_output.scan import scan_indices
from forensics.sites.base import LogLine, Site


def log_fields(match: re.Match[str], number: Callable[[str], int]) -> dict[str, Any]:
    """The summary record of an ``OUT-PATH`` probe line (:data:`LOG_LINE`): ``min``/``max``
    of the listed ids (and the ids), the line's other ``k=v`` pairs (``vocab_size``, extras)."""
    ids = [number(v) for v in re.findall(r"-?\d+", match["ids"])]
    pairs = {k: number(v) for k, v in PAIR_RE.findall(match["pairs"])}
    fields: dict[str, Any] = {k: v for k, v in pairs.items() if k not in ("min", "max", "line")}
    if ids:
        fields["min"], fields["max"] = min(ids), max(ids)
        fields["ids"] = ids
    return fields


#: a ``k=v`` pair of the probe line, tried only where a word starts (linear time: tried inside
#: a long word, ``\w+`` would rescan the rest of the word at every character)
PAIR_RE = re.compile(r"(?<!\w)(\w+)=(-?\d+)")
#: the SM70 fork's probe line: ``OUT-PATH out-of-range sampled ids [I, ...] (vocab_size=V k=v)``
LOG_LINE = LogLine(re.compile(r"OUT-PATH out-of-range sampled ids \[(?P<ids>[-\d,\s]*)\]\s*"
                              r"\((?P<pairs>[^()]*)\)"), log_fields,
                   counts=("num_sampled_ids", "num_placeholders", "first_placeholder",
                           "old_no_spec_end"))
#: this module's site: its schema and operations (the registry holds it)
#: ``forensics repro``: the vLLM function a standalone test calls with one record ``r``,
#: and the test body that calls it (``{lower}``/``{upper}``: the first finding's bound)
REPRO = ('vllm.v1.worker.gpu_input_batch.InputBatch.update_async_output_token_ids',
         '''    from vllm.v1.worker.gpu_input_batch import InputBatch

    hidden = None  # per row, the ids before the captured tail (output_len - its length)
    if "output_token_ids" in r:
        lists = [list(row) for row in r["output_token_ids"]]
    else:  # the captured tails after one filler id: vLLM reads a list from its end back to
        # the first id that is no placeholder, so one stands for the whole hidden prefix
        hidden = [max(n - len(tail), 0)
                  for tail, n in zip(r["output_tail"], r["output_len"].tolist())]
        lists = [[0] * min(h, 1) + list(tail) for h, tail in zip(hidden, r["output_tail"])]
    prev = r.get("prev_req_id_to_index")
    if prev is None and r.get("prev_req_ids") is not None:
        prev = {rid: i for i, rid in enumerate(r["prev_req_ids"]) if rid is not None}
    batch = NS(req_ids=list(r["req_ids"]), prev_req_id_to_index=prev,
               sampled_token_ids_cpu=r["sampled_token_ids_cpu"].clone(),
               sampling_metadata=NS(output_token_ids=lists),
               async_copy_ready_event=NS(synchronize=lambda: None),
               vocab_size=r["vocab_size"])
    InputBatch.update_async_output_token_ids(batch)
    if hidden is not None:  # each id of a tail at its place in the full list
        lists = {f"[{i}][{h + j - min(h, 1)}]": v for i, (h, row) in enumerate(zip(hidden, lists))
                 for j, v in enumerate(row) if j >= min(h, 1)}
    return [("output_token_ids", lists, (-1,))]  # -1: a placeholder, filled in later
''')
SITE = Site(name=NAME, fields=FIELDS, output_fields=OUTPUT_FIELDS, summary_bound=SUMMARY_BOUND,
            summary_tensor=SUMMARY_TENSOR,
            adapter="forensics.variants.vllm_adapters:run_update_async_output",
            hook="vllm.v1.worker.gpu_input_batch:InputBatch.update_async_output_token_ids",
            repro=REPRO,
            origin_position=ORIGIN_POSITION,
            checks=outcome_checks, scan_indices=scan_indices, guard=guard,
            check_record=check_record, check_batch=check_batch, prepare_columns=prepare_columns,
            run_batch=run_batch, log_line=LOG_LINE)
