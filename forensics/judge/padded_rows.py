"""Ids the embedding received inside its padded rows: at or past the vocabulary the capture's
manifest names, yet inside the weight's rows (``num_embeddings``), so no bound check sees them.

vLLM pads the embedding past the vocabulary (``VocabParallelEmbedding``): its weight loader fills
the padded rows with zeros, and with tensor parallelism the lookup masks an id outside the shard's
vocabulary to a zero row. An id there (the ``vocab_size`` rejection sentinel among them) reads a
row no token has: the model gets a wrong input, silently, not a crash.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from forensics.digits import plain_int
from forensics.manifest_facts import VOCAB, read_fact
from forensics.records import Record
from forensics.sites import SINK, get_site


def padded_inputs(records: Iterable[Record], vocab: int) -> list[dict[str, Any]]:
    """Each slot of the sink's full records holding an id in ``[vocab, num_embeddings)``:
    ``{step, rank, element, fed, vocab_size, rows, site, padded}``, in record order."""
    schema = get_site(SINK)
    found: list[dict[str, Any]] = []
    for record in records:
        if record.site != SINK or record.summary:
            continue
        rows = int(record[schema.summary_bound])
        ids = np.asarray(record[schema.summary_tensor]).reshape(-1)
        found.extend({"step": record.step, "rank": record.rank, "element": int(e),
                      "fed": int(ids[e]), "vocab_size": vocab, "rows": rows, "site": SINK,
                      "padded": True}
                     for e in np.flatnonzero((ids >= vocab) & (ids < rows)))
    return found


def padded_inputs_of(capture: Any) -> list[dict[str, Any]]:
    """:func:`padded_inputs` of ``capture``'s sink records, against the vocabulary its
    manifest names; none where it names none."""
    vocab, _, _ = read_fact(getattr(capture, "manifest", None) or {}, VOCAB)
    if vocab is None or capture is None:
        return []
    return padded_inputs(capture.records(site=SINK), int(vocab))


def describe_padded(slot: dict[str, Any]) -> str:
    """One line: the embedding read a padded row (the sentinel, or past the vocabulary)."""
    vocab = slot["vocab_size"]
    what = (f"the vocab_size rejection sentinel of the manifest's vocabulary of {vocab}"
            if slot["fed"] == vocab else f"past the manifest's vocabulary of {vocab}")
    return (f"step {slot['step']} rank {slot['rank']}: the embedding received id {slot['fed']} "
            f"at input_ids[{slot['element']}], {what}, inside its {slot['rows']} rows: it read "
            "a padded row, which no token has (vLLM fills it with zeros): a wrong input, "
            "silently, not a crash")


def padded_summaries_of(capture: Any) -> list[dict[str, Any]]:
    """The sink's summary records (a log's or a dump's least and greatest values) of ``capture``
    whose greatest id lies in ``[vocab, num_embeddings)``, against the vocabulary its manifest
    names: ``{step, rank, fed, vocab_size, rows, site, padded, summary}``; a padded row was read,
    values nothing replays."""
    vocab, _, _ = read_fact(getattr(capture, "manifest", None) or {}, VOCAB)
    if vocab is None or capture is None:
        return []
    found = []
    for record in capture.records(site=SINK):
        high, rows = record.get("max"), record.get(get_site(SINK).summary_bound)
        if record.summary and plain_int(high) and plain_int(rows) and vocab <= high < rows:
            found.append({"step": record.step, "rank": record.rank, "fed": high,
                          "vocab_size": int(vocab), "rows": rows, "site": SINK,
                          "padded": True, "summary": True})
    return found


def describe_padded_summary(slot: dict[str, Any]) -> str:
    """One line: a summary record's greatest id lies in the embedding's padded rows."""
    return (f"step {slot['step']} rank {slot['rank']}: the embedding's summary record names its "
            f"greatest id {slot['fed']}, at or past the manifest's vocabulary of "
            f"{slot['vocab_size']}, inside its {slot['rows']} rows: a padded row was read, "
            "which no token has (vLLM fills it with zeros): values nothing replays, a wrong "
            "input, silently, not a crash")
