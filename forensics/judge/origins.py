"""Where a finding comes from: the origin record of a sink finding's bad value, a real-code
``IndexError`` named after the model's access it came from, and the reference's accesses a
blind variant could not see. Reads the reference (``upstream``) model's findings, runs
nothing.

Only output findings (``out.*``) and summary findings make a record an origin candidate; at
equal steps the site nearer the sink wins (:data:`forensics.sites.ORIGIN_CHAIN`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from forensics.sites import ORIGIN_CHAIN, SINK, SITES, site_order
from forensics.sites._common import OUT_OF_BOUNDS

#: a record's findings (one dict per finding)
Findings = list[dict[str, Any]]


def _produced(summary: bool, found: Findings) -> set[tuple[int, str | None]]:
    """Out-of-range (value, request) pairs a record wrote or passed on under one variant."""
    return {(f["value"], f["req_id"]) for f in found
            if f["kind"] == OUT_OF_BOUNDS and f["value"] is not None
            and (summary or (f["tensor"] or "").startswith("out."))}


def _matches(pairs: set[tuple[int, str | None]], value: int, req: str | None) -> bool:
    return any(v == value and (req is None or r is None or r == req) for v, r in pairs)


class Origins:
    """Finds the origin record of a sink finding from the reference (upstream) findings."""

    def __init__(self, coords: np.ndarray, reference: Mapping[int, Findings]) -> None:
        self.candidates: dict[int, list[tuple[int, int, int]]] = {}
        self.produced: dict[int, set[tuple[int, str | None]]] = {}
        for i in sorted(reference):
            site = SITES[coords[i, 0]]
            if site not in ORIGIN_CHAIN:
                continue
            pairs = _produced(bool(coords[i, 3]), reference[i])
            if pairs:
                self.produced[i] = pairs
                pref = ORIGIN_CHAIN.index(site) + 1  # at equal steps: nearer the sink wins
                self.candidates.setdefault(int(coords[i, 2]), []).append(
                    (int(coords[i, 1]), pref, i))

    def origin(self, step: int, rank: int, value: int | None, req: str | None) -> int | None:
        """Index of the origin record of ``value`` seen at a sink of ``step`` and ``rank``."""
        if value is None:
            return None
        best = None
        for cand_step, pref, i in self.candidates.get(rank, ()):
            if cand_step <= step and _matches(self.produced[i], value, req):
                best = max(best or (cand_step, pref, i), (cand_step, pref, i))
        return None if best is None else best[2]


def is_raised(f: Mapping[str, Any]) -> bool:
    """Whether ``f`` is the bare finding of an ``index_error`` raised by code that shows no
    accesses, not mapped to the access it came from (no tensor is known)."""
    return (f.get("kind") == OUT_OF_BOUNDS and f.get("tensor") is None
            and f.get("index_tensor") is None)


def named_after_access(raised: dict[str, Any], model: Sequence[Mapping[str, Any]]
                       ) -> dict[str, Any] | None:
    """``raised`` (see :func:`is_raised`) named after the access it came from: the first of
    the ``model``'s out-of-bounds findings at the same record (reads, not outputs) whose value
    and bound are the ones the exception names; None when there is none (or the exception
    named no index)."""
    value, upper = raised.get("value"), raised.get("upper")
    if value is None:
        return None
    for f in model:
        if (f["kind"] == OUT_OF_BOUNDS and f["value"] == value and f["upper"] == upper
                and not (f["tensor"] or "").startswith("out.")):
            return {**raised, **{k: f[k] for k in _NAMING_KEYS}}
    return None


#: what a real-code finding takes from the model finding of the access it came from
_NAMING_KEYS = ("row", "element", "tensor", "lower", "req_id", "index_tensor", "index_at",
                "held", "indexed", "value_class")


def name_raised(found: dict[int, Findings], reference: Mapping[int, Findings]) -> None:
    """Name each raised finding of ``found`` after the reference model's access at its
    record (:func:`named_after_access`), in place; those without a match stay as they are."""
    for i, fs in found.items():
        model = reference.get(i)
        if not model:
            continue
        for k, f in enumerate(fs):
            if is_raised(f):
                fs[k] = named_after_access(f, model) or f


def not_judged(coords: np.ndarray, reference: Mapping[int, Findings], blind: set[int],
                found: Mapping[int, Findings]) -> dict[int, Findings]:
    """The reference's (upstream's) access findings that a variant could not see: reads
    (not ``out.*``, not at the sink, whose ids every variant checks alike) of the records it
    ran without raising and without showing its accesses (``blind``), where it has no finding
    of its own."""
    sink = site_order(SINK)
    unseen: dict[int, Findings] = {}
    for i in sorted(blind & reference.keys()):
        if coords[i, 0] == sink or found.get(i):
            continue
        reads = [dict(f) for f in reference[i] if f["kind"] == OUT_OF_BOUNDS
                 and not (f["tensor"] or "").startswith("out.")]
        if reads:
            unseen[i] = reads
    return unseen


def annotate_sink(coords: np.ndarray, found: Mapping[int, Findings], origins: Origins) -> None:
    """Fill ``origin``/``resolved`` of this variant's sink findings (null elsewhere)."""
    sink = site_order(SINK)
    for i, fs in found.items():
        for f in fs:
            f["origin"] = f["resolved"] = None
            if coords[i, 0] != sink or f["kind"] != OUT_OF_BOUNDS:
                continue
            src = origins.origin(int(coords[i, 1]), int(coords[i, 2]), f["value"], f["req_id"])
            f["origin"] = None if src is None else SITES[coords[src, 0]]
            f["resolved"] = src is not None and not _matches(
                _produced(bool(coords[src, 3]), found.get(src, [])), f["value"], f["req_id"])


def annotate_token(coords: np.ndarray, found: Mapping[int, Findings], origins: Origins,
                   token: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the token continuity finding ``token`` (a wrong token fed at the sink) with
    the ``origin`` of its value and whether this variant (its findings ``found``) resolves it
    there, as :func:`annotate_sink` fills a sink finding's: an out-of-range value an origin
    record wrote, which this variant's replay of that record no longer writes, is resolved."""
    src = origins.origin(int(token["step"]), int(token["rank"]), token["value"],
                         token.get("req_id"))
    if src is None:
        return {**token, "origin": None, "resolved": None}
    return {**token, "origin": SITES[coords[src, 0]], "resolved": not _matches(
        _produced(bool(coords[src, 3]), found.get(src, [])), token["value"], token.get("req_id"))}
