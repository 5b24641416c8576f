"""Origins carried across the pieces of a split capture.

A piece of steps ``[start, stop)`` replays :data:`~forensics.fleet.piece.LOOKBACK` earlier
steps, so a sink finding whose origin record lies further back found none there, where a
replay of the whole capture names it. Each piece therefore says, as data in its row, which
origins it looked for and found none of and which origins its own steps hold
(:mod:`forensics.fleet.origins`). Once every piece ran, :func:`reruns` walks each capture's
pieces in step order, carrying the latest candidate of each key forward, and gives the
pieces that looked for an origin an earlier piece holds a task again, with the steps of those
origins to replay too (its ``origins``): the rerun finds the origin record itself, as the
whole replay does, and judges whether each variant still produces its value (``resolved``).
Time stays linear (a piece runs at most twice, given at most as many origin steps as its own
steps, the latest: :func:`nearest`) and memory bounded: at most ``MAX_KEYS`` keys a piece and
a capture, the latest kept (a piece says from which step its keys are complete,
``from``). A piece whose origins may lie among those left out (or that looked for more than
``MAX_KEYS``, or more origin steps than it replays) is named with the step before which
they were not searched (:func:`reruns`);
its first finding says so where its origin is null (:func:`noted`: "origin not searched
before step N"), never that it has none.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from forensics.fleet.origins import MAX_KEYS, Key, capped, key_of
from forensics.fleet.piece import LOOKBACK
from forensics.fleet.tasks import Task


def reruns(tasks: Sequence[Task], decoded: Sequence[Sequence[dict[str, Any]]]
           ) -> tuple[dict[int, Task], dict[int, int]]:
    """``{index: task}`` of the pieces to replay again: each piece that looked for an origin
    that an earlier piece of its capture holds, given the steps of those origins
    (``origins``); and ``{index: step}`` of the pieces whose origins were not searched before
    ``step`` (keys left out: :data:`MAX_KEYS`). ``decoded``: each task's piece rows, decoded
    once for this walk and the rows (:func:`~forensics.fleet.triage.decoded`: a result that
    could not be read is its error row, which looked for and holds nothing). The walk carries
    the candidates of each capture's pieces forward in step order."""
    by_capture: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for index, (task, rows) in enumerate(zip(tasks, decoded, strict=True)):
        if task.start is not None and rows:
            by_capture.setdefault(task.path, []).append((index, rows[0]))
    out: dict[int, Task] = {}
    unsearched: dict[int, int] = {}
    for pieces in by_capture.values():
        latest: dict[Key, int] = {}
        complete: int | None = None  # the step from which ``latest`` holds every key
        for index, row in sorted(pieces, key=lambda p: p[1]["start"]):
            wants, cut = _wants(row)
            steps, missing = _steps(wants, latest, complete)
            kept, since = nearest(steps, tasks[index])
            if kept:
                out[index] = replace(tasks[index], origins=kept)
            if cut:
                unsearched[index] = max(0, row["start"] - LOOKBACK)
            elif missing and complete is not None:
                unsearched[index] = complete
            if since is not None:
                unsearched[index] = max(unsearched.get(index, 0), since)
            complete = _add(latest, row, complete)
    return out, unsearched


def nearest(steps: set[int], task: Task) -> tuple[tuple[int, ...], int | None]:
    """The origin steps a piece replays again: the latest :func:`most_origins` of ``steps``
    (each brings its step's records into the rerun: a sink record of many out-of-range
    values, each written at its own earlier step, made a piece of 1,000 records replay
    65,536 steps' records); and the earliest step kept where some were left out (the
    piece's origins were not searched before it), else None."""
    ordered = sorted(steps, reverse=True)
    kept = ordered[:most_origins(task)]
    return tuple(sorted(kept)), (kept[-1] if len(ordered) > len(kept) else None)


def most_origins(task: Task) -> int:
    """The most origin steps the piece ``task`` replays again: as many as its own steps
    (:data:`LOOKBACK` at least), so a rerun replays about twice its piece at most: the steps
    that hold records where the plan counted them, else the width of its range."""
    return max(LOOKBACK, task.steps or (task.stop or 0) - (task.start or 0))


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


def _wants(row: dict[str, Any]) -> tuple[list[Key], bool]:
    """The keys a piece's row looked for an origin of, and whether it looked for more."""
    try:
        said = json.loads(row.get("origin_wanted") or "{}")
        return [key_of(*k) for k in said.get("keys", [])], bool(said.get("cut"))
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
        latest[key_of(rank, value, req)] = int(step)
    froms = [f for f in (complete, parsed.get("from")) if isinstance(f, int)]
    if len(latest) > MAX_KEYS:
        kept, since = capped(latest)
        latest.clear()
        latest.update(kept)
        froms.append(since or 0)
    return max(froms) if froms else None


def _steps(keys: list[Key], latest: dict[Key, int], complete: int | None = None
           ) -> tuple[set[int], bool]:
    """The step of the latest carried candidate of each of ``keys`` (a request matches its
    own, and a key whose request is unknown any), where there is one at or after
    ``complete`` (the step from which ``latest`` holds every key: one before it may be an
    earlier piece's where a later piece's was left out); and whether some key has none."""
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
        known = bool(found) and (complete is None or max(found) >= complete)
        if known:
            steps.add(max(found))
        missing = missing or not known
    return steps, missing
