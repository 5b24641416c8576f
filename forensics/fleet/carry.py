"""Origins carried across the pieces of a split capture.

A piece of steps ``[start, stop)`` replays :data:`~forensics.fleet.piece.LOOKBACK` earlier
steps, so a sink finding whose origin record lies further back found none there, where a
replay of the whole capture names it. Each piece therefore says, as data in its row, which
origins it looked for and found none of (:func:`wanted`: rank, value and request of each such
sink finding) and which origins its own steps hold (:func:`candidates`: per rank, value and
request, the latest step of a record whose outputs hold that out-of-range value). Once every
piece ran, :func:`reruns` walks each capture's pieces in step order, carrying the latest
candidate of each key forward, and gives the pieces that looked for an origin an earlier piece
holds a task again, with the steps of those origins to replay too (its ``origins``): the
rerun finds the origin record itself, as the whole replay does, and judges whether each
variant still produces its value (``resolved``). Time stays linear (a piece runs at most twice)
and memory bounded: at most :data:`MAX_KEYS` keys a piece and a capture, the latest kept (a
piece says from which step its keys are complete, ``from``). A piece whose origins may lie
among those left out (or that looked for more than :data:`MAX_KEYS`) is named with the step
before which they were not searched (:func:`reruns`); its first finding says so where its
origin is null (:func:`noted`: "origin not searched before step N"), never that it has none.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from forensics.fleet.piece import LOOKBACK, from_ipc
from forensics.fleet.tasks import Task

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
    keys = {_key(r, v, q) for r, v, q in zip(rows["rank"], rows["value"], rows["req_id"],
                                             strict=True)}
    return json.dumps({"keys": sorted(keys, key=_order)[:MAX_KEYS], "cut": len(keys) > MAX_KEYS})


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
            key = _key(rank, value, req)
            latest[key] = max(int(step), latest.get(key, int(step)))
    kept, complete = _capped(latest)
    return json.dumps({"keys": [[*k, s] for k, s in kept.items()], "from": complete})


def reruns(tasks: Sequence[Task], results: Sequence[bytes]
           ) -> tuple[dict[int, Task], dict[int, int]]:
    """``{index: task}`` of the pieces to replay again: each piece that looked for an origin
    that an earlier piece of its capture holds, given the steps of those origins
    (``origins``); and ``{index: step}`` of the pieces whose origins were not searched before
    ``step`` (keys left out: :data:`MAX_KEYS`). The walk carries the candidates of each
    capture's pieces forward in step order."""
    by_capture: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for index, (task, data) in enumerate(zip(tasks, results, strict=True)):
        if task.start is None:
            continue
        try:
            row = from_ipc(data).to_pylist()[0]
        except Exception:  # noqa: BLE001  (its row says the error, as before)
            continue
        by_capture.setdefault(task.path, []).append((index, row))
    out: dict[int, Task] = {}
    unsearched: dict[int, int] = {}
    for pieces in by_capture.values():
        latest: dict[Key, int] = {}
        complete: int | None = None  # the step from which ``latest`` holds every key
        for index, row in sorted(pieces, key=lambda p: p[1]["start"]):
            wants, cut = _wants(row)
            steps, missing = _steps(wants, latest)
            if steps:
                out[index] = replace(tasks[index], origins=tuple(sorted(steps)))
            if cut:
                unsearched[index] = max(0, row["start"] - LOOKBACK)
            elif missing and complete is not None:
                unsearched[index] = complete
            complete = _add(latest, row, complete)
    return out, unsearched


def noted(first: str | None, step: int | None) -> str | None:
    """A piece's ``first_finding`` (JSON) with ``origin_unsearched``: ``step`` where it is a
    sink finding whose origin is null and the piece's origins were not searched before
    ``step`` (None: they were)."""
    from forensics.sites import SINK
    from forensics.sites._common import OUT_OF_BOUNDS

    finding = json.loads(first or "null")
    if step is None or not isinstance(finding, dict) or finding.get("site") != SINK or \
            finding.get("kind") != OUT_OF_BOUNDS or finding.get("origin") is not None:
        return first
    return json.dumps({**finding, "origin_unsearched": step})


def _key(rank: Any, value: Any, req: Any) -> Key:
    """A key of plain values (a missing request: None)."""
    return int(rank), int(value), req if isinstance(req, str) else None


def _order(key: Key) -> tuple[int, int, str]:
    """A sort key of :data:`Key` (None sorts first)."""
    return key[0], key[1], key[2] or ""


def _capped(latest: dict[Key, int]) -> tuple[dict[Key, int], int | None]:
    """``latest`` cut to the :data:`MAX_KEYS` keys of the latest steps, and the step from
    which the kept keys are complete (None: none left out)."""
    if len(latest) <= MAX_KEYS:
        return latest, None
    ordered = sorted(latest.items(), key=lambda item: item[1], reverse=True)
    kept = dict(ordered[:MAX_KEYS])
    return kept, ordered[MAX_KEYS][1] + 1


def _wants(row: dict[str, Any]) -> tuple[list[Key], bool]:
    """The keys a piece's row looked for an origin of, and whether it looked for more."""
    try:
        said = json.loads(row.get("origin_wanted") or "{}")
        return [_key(*k) for k in said.get("keys", [])], bool(said.get("cut"))
    except (TypeError, ValueError, AttributeError):
        return [], False


def _parsed(row: dict[str, Any]) -> dict[str, Any]:
    """A piece's ``origin_candidates`` (empty when it holds none)."""
    try:
        parsed = json.loads(row.get("origin_candidates") or "{}")
    except (TypeError, ValueError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _add(latest: dict[Key, int], row: dict[str, Any], complete: int | None) -> int | None:
    """Carry a piece's candidates into ``latest`` (a later step replaces an earlier one), kept
    to :data:`MAX_KEYS` keys (the latest); return the step from which ``latest`` holds every
    key (``complete`` before; None: every key since the capture's first step)."""
    parsed = _parsed(row)
    for rank, value, req, step in parsed.get("keys", []):
        latest[_key(rank, value, req)] = int(step)
    froms = [f for f in (complete, parsed.get("from")) if isinstance(f, int)]
    if len(latest) > MAX_KEYS:
        kept, since = _capped(latest)
        latest.clear()
        latest.update(kept)
        froms.append(since or 0)
    return max(froms) if froms else None


def _steps(keys: list[Key], latest: dict[Key, int]) -> tuple[set[int], bool]:
    """The step of the latest carried candidate of each of ``keys`` (a request matches its
    own, and a key whose request is unknown any), where there is one; and whether some key
    has none."""
    by_value: dict[tuple[int, int], dict[str | None, int]] = {}
    if keys:
        for (rank, value, req), step in latest.items():
            by_value.setdefault((rank, value), {})[req] = step
    steps: set[int] = set()
    missing = False
    for rank, value, req in keys:
        held = by_value.get((rank, value), {})
        found = list(held.values()) if req is None else \
            [s for r, s in held.items() if r is None or r == req]
        if found:
            steps.add(max(found))
        missing = missing or not found
    return steps, missing
