"""Wrong tokens fed to the model without a crash: ids out of range that vLLM changed on the way.

With speculative decoding vLLM clamps the input ids to ``>= 0`` before the model
(``GPUModelRunner._preprocess``), so a ``-1`` placeholder that ``prepare_input_ids`` leaves in
the input ids reaches the embedding as token 0: nothing crashes, and the request silently
continues from a wrong token. A capture shows it as an out-of-range id in
``prepare_input_ids``' ``input_ids_device_after`` whose slot in the ``embedding`` record of the
same step and rank holds an in-range id. This module finds those slots, from the records alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from forensics.records import Record


def silent_inputs(records: Iterable[Record]) -> list[dict[str, Any]]:
    """Each slot whose id left ``prepare_input_ids`` out of ``[0, vocab_size)`` but reached the
    embedding in range: ``{step, rank, element, written, fed, vocab_size}``, by step and
    element. Records without the fields needed (summaries, no output recorded) are skipped."""
    prepared: dict[tuple[int, int], Record] = {}
    embedded: dict[tuple[int, int], Record] = {}
    for record in records:
        if record.summary:
            continue
        if record.site == "prepare_input_ids" and "input_ids_device_after" in record:
            prepared[(record.step, record.rank)] = record
        elif record.site == "embedding":
            embedded[(record.step, record.rank)] = record
    found: list[dict[str, Any]] = []
    for key in sorted(prepared.keys() & embedded.keys()):
        found.extend(_slots(prepared[key], embedded[key]))
    return found


def silent_inputs_of(result: Any) -> list[dict[str, Any]]:
    """:func:`silent_inputs` of a replay's records; from a capture, only the two sites it reads
    are decoded."""
    capture = getattr(result, "capture", None)
    if capture is None:
        return silent_inputs(result.records)
    return silent_inputs([*capture.records(site="prepare_input_ids"),
                          *capture.records(site="embedding")])


def _slots(prepared: Record, embedded: Record) -> list[dict[str, Any]]:
    written = np.asarray(prepared["input_ids_device_after"]).reshape(-1)
    fed = np.asarray(embedded["input_ids"]).reshape(-1)
    vocab, rows = int(prepared["vocab_size"]), int(embedded["num_embeddings"])
    count = min(written.size, fed.size)
    bad = np.flatnonzero(((written[:count] < 0) | (written[:count] >= vocab))
                         & (fed[:count] >= 0) & (fed[:count] < rows))
    return [{"step": prepared.step, "rank": prepared.rank, "element": int(e),
             "written": int(written[e]), "fed": int(fed[e]), "vocab_size": vocab}
            for e in bad]


def describe(slot: dict[str, Any]) -> str:
    """One line: the model was fed a wrong token silently (not a crash)."""
    return (f"step {slot['step']} rank {slot['rank']}: prepare_input_ids left id "
            f"{slot['written']} at input_ids[{slot['element']}] (outside [0, "
            f"{slot['vocab_size']})) and the model was fed token {slot['fed']} there instead: "
            f"a wrong token, silently, not a crash")
