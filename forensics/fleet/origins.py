"""What a piece of a split capture says of origins (:mod:`forensics.fleet.carry` walks it):
the origins it looked for and found none of (:func:`wanted`) and those its own steps hold
(:func:`candidates`), each as a key of rank, out-of-range value and request, at most
:data:`MAX_KEYS` a piece (the latest kept)."""

from __future__ import annotations

import json
from typing import Any

#: the most (rank, value, request) keys a piece reports and a capture's walk carries
MAX_KEYS = 65_536

#: a key: rank, out-of-range value, request (None: not known, matches any)
Key = tuple[int, int, str | None]


def wanted(found: Any, start: int) -> str:
    """The keys of the sink findings of ``found`` (a findings table) at step ``start`` or
    later whose origin is null, as a row's ``origin_wanted`` (JSON: ``{"keys": [[rank,
    value, request], ...], "cut": bool}``, at most :data:`MAX_KEYS` keys, ``cut`` when there
    were more)."""
    from forensics.sites import SINK
    from forensics.sites._common import OUT_OF_BOUNDS

    rows = found[(found["site"] == SINK) & (found["kind"] == OUT_OF_BOUNDS)
                 & (found["step"] >= start) & found["value"].notna() & found["origin"].isna()]
    keys = {key_of(r, v, q) for r, v, q in zip(rows["rank"], rows["value"], rows["req_id"],
                                             strict=True)}
    return json.dumps({"keys": sorted(keys, key=key_order)[:MAX_KEYS], "cut": len(keys) > MAX_KEYS})


def candidates(result: Any, start: int, stop: int) -> str:
    """Per key, the latest step in ``[start, stop)`` of a record of ``result`` (a replay) that
    the reference (``upstream``) found writing or passing on that value (an ``out.*`` or a
    summary finding of a site of the origin chain), as a row's ``origin_candidates`` (JSON:
    ``{"keys": [[rank, value, request, step], ...], "from": step}``, ``from`` the step from
    which the keys are complete, null when none was left out)."""
    from forensics.sites import ORIGIN_CHAIN
    from forensics.sites._common import OUT_OF_BOUNDS

    found, summary = result.findings, result.index["summary"].to_numpy()
    rows = found[(found["variant"] == "upstream") & found["site"].isin(ORIGIN_CHAIN)
                 & (found["kind"] == OUT_OF_BOUNDS) & found["value"].notna()
                 & (found["step"] >= start) & (found["step"] < stop)]
    latest: dict[Key, int] = {}
    for rank, value, req, step, tensor, record in zip(
            rows["rank"], rows["value"], rows["req_id"], rows["step"], rows["tensor"],
            rows["record"], strict=True):
        if summary[int(record)] or str(tensor or "").startswith("out."):
            key = key_of(rank, value, req)
            latest[key] = max(int(step), latest.get(key, int(step)))
    kept, complete = capped(latest)
    return json.dumps({"keys": [[*k, s] for k, s in kept.items()], "from": complete})


def key_of(rank: Any, value: Any, req: Any) -> Key:
    """A key of plain values (a missing request: None)."""
    return int(rank), int(value), req if isinstance(req, str) else None


def key_order(key: Key) -> tuple[int, int, str]:
    """A sort key of :data:`Key` (None sorts first)."""
    return key[0], key[1], key[2] or ""


def capped(latest: dict[Key, int]) -> tuple[dict[Key, int], int | None]:
    """``latest`` cut to the :data:`MAX_KEYS` keys of the latest steps, and the step from
    which the kept keys are complete (None: none left out)."""
    if len(latest) <= MAX_KEYS:
        return latest, None
    ordered = sorted(latest.items(), key=lambda item: item[1], reverse=True)
    kept = dict(ordered[:MAX_KEYS])
    return kept, ordered[MAX_KEYS][1] + 1
