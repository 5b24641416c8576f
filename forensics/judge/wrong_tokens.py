"""Wrong tokens fed to the model without a crash: ids out of range that vLLM changed on the way.

With speculative decoding vLLM clamps the input ids to ``>= 0`` before the model
(``GPUModelRunner._preprocess``), so a ``-1`` placeholder that the input staging leaves in the
input ids reaches the embedding as token 0: nothing crashes, and the request silently
continues from a wrong token. A capture shows it as an out-of-range id in the ids a site hands
to the sink (``Site.feeds_sink``: the field it writes and the bound of its ids) whose slot in
the sink's record of the same step and rank (its ``summary_tensor``, against its
``summary_bound``) holds an in-range id. This module finds those slots, from the records alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from forensics.judge.keyed import by_key
from forensics.records import Record
from forensics.sites import SINK, SITES, get_site


def feeders() -> dict[str, tuple[str, str]]:
    """The sites that hand ids to the sink: name -> (field written, bound of its ids)."""
    return {name: feed for name in SITES if (feed := get_site(name).feeds_sink) is not None}


def silent_inputs(records: Iterable[Record]) -> list[dict[str, Any]]:
    """Each slot whose id left a site feeding the sink out of ``[0, bound)`` but reached the
    sink in range: ``{step, rank, element, written, fed, vocab_size, site}``, by step, rank,
    site (pipeline order) and element. Records without the fields needed (summaries, no
    output recorded) are skipped, and so is a step and rank where a site holds two records
    (two engines claiming one rank, a repeated step): which wrote what the other fed is
    unknown."""
    feeds = feeders()
    held, twice = by_key(((r.step, r.rank, SITES.index(r.site)), r) for r in records
                         if _feeds(r, feeds.get(r.site)) or (r.site == SINK and not r.summary))
    written = {key: r for key, r in held.items() if r.site != SINK}
    fed = {key[:2]: r for key, r in held.items() if r.site == SINK}
    repeated = {key[:2] for key in twice}
    found: list[dict[str, Any]] = []
    for where in sorted(written):
        if where[:2] in fed and where[:2] not in repeated:
            found.extend(_slots(written[where], feeds[written[where].site], fed[where[:2]]))
    return found


def _feeds(record: Record, feed: tuple[str, str] | None) -> bool:
    """Whether ``record`` holds the ids its site hands to the sink (``feed``: the field)."""
    return feed is not None and not record.summary and feed[0] in record


def silent_inputs_of(result: Any) -> list[dict[str, Any]]:
    """:func:`silent_inputs` of a replay's records; from a capture, only the sites it reads
    are decoded, and the ids its embedding read in padded rows follow
    (:func:`~forensics.judge.padded_rows.padded_inputs_of`, each slot said once)."""
    from forensics.judge.padded_rows import padded_inputs_of

    capture = getattr(result, "capture", None)
    if capture is None:
        return silent_inputs(result.records)
    found = silent_inputs([record for site in (*feeders(), SINK)
                           for record in capture.records(site=site)])
    said = {(slot["step"], slot["rank"], slot["element"]) for slot in found}
    return found + [slot for slot in padded_inputs_of(capture)
                    if (slot["step"], slot["rank"], slot["element"]) not in said]


def _slots(written_by: Record, feed: tuple[str, str], sink: Record) -> list[dict[str, Any]]:
    field, bound_field = feed
    schema = get_site(SINK)
    written = np.asarray(written_by[field]).reshape(-1)
    fed = np.asarray(sink[schema.summary_tensor]).reshape(-1)
    vocab, rows = int(written_by[bound_field]), int(sink[schema.summary_bound])
    count = min(written.size, fed.size)
    bad = np.flatnonzero(((written[:count] < 0) | (written[:count] >= vocab))
                         & (fed[:count] >= 0) & (fed[:count] < rows))
    return [{"step": written_by.step, "rank": written_by.rank, "element": int(e),
             "written": int(written[e]), "fed": int(fed[e]), "vocab_size": vocab,
             "site": written_by.site} for e in bad]


def describe(slot: dict[str, Any]) -> str:
    """One line: the model was fed a wrong token silently (not a crash)."""
    if slot.get("padded"):
        from forensics.judge.padded_rows import describe_padded

        return describe_padded(slot)
    return (f"step {slot['step']} rank {slot['rank']}: {slot['site']} left id "
            f"{slot['written']} at input_ids[{slot['element']}] (outside [0, "
            f"{slot['vocab_size']})) and the model was fed token {slot['fed']} there instead: "
            f"a wrong token, silently, not a crash")
