"""``forensics.fleet.triage.triage(paths)``: every capture replayed, stitched and grouped."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from forensics.errors import reason
from forensics.fleet.signature import Group, conclusion, group_rows
from forensics.fleet.tasks import SPLIT_RECORDS, Task


@dataclass
class Triage:
    """One row per capture (sorted by path) and the groups of rows by signature."""

    rows: list[dict[str, Any]]
    groups: list[Group] = field(default_factory=list)
    seconds: float = 0.0
    where: str = "local"


def triage(paths: Iterable[str | os.PathLike[str]], ray: str | None = None,
           workers: int | None = None, split_records: int = SPLIT_RECORDS,
           progress: bool = False) -> Triage:
    """Replay every capture under ``paths`` (on local processes, or on Ray at ``ray``:
    ``"local"`` starts a cluster here), stitch the ranks of each engine, group by signature.

    A capture that cannot be read is a row with its error. Raises ConfigurationError when a
    path names no capture; MissingDependencyError for ``ray`` without Ray installed.
    """
    from forensics.fleet.paths import find_captures
    from forensics.fleet.runners import run_local, run_ray
    from forensics.fleet.tasks import plan
    from forensics.progress import Progress

    start = time.perf_counter()
    tasks = plan(find_captures(paths), split_records)
    bar = Progress(len(tasks), "triage", force=progress) if progress else None
    done = bar.advance if bar is not None else None

    def run(given: Sequence[Task], done: Any = None) -> list[bytes]:
        """The results of ``given``, on Ray or local processes."""
        return (run_ray(given, ray, done) if ray is not None
                else run_local(given, workers, done))

    results = run(tasks, done)
    if bar is not None:
        bar.close()
    rows = rows_of(tasks, results, run)
    return Triage(rows, group_rows(rows), time.perf_counter() - start,
                  "ray" if ray is not None else "local")


#: the piece rows of each task's result, decoded (:func:`decoded`)
Pieces = list[list[dict[str, Any]]]


def rows_of(tasks: Sequence[Task], results: Sequence[bytes],
            run: Callable[[Sequence[Task]], list[bytes]]) -> list[dict[str, Any]]:
    """The rows of the tasks' ``results``, each decoded once (:func:`decoded`), the pieces that
    look for a carried origin replayed again by ``run`` (:func:`with_origins`)."""
    pieces, unsearched = with_origins(tasks, decoded(tasks, results), run)
    return merged(tasks, pieces, unsearched)


def decoded(tasks: Sequence[Task], results: Sequence[bytes]) -> Pieces:
    """The piece rows of each task's result (:func:`_decoded`), in the tasks' order."""
    return [_decoded(task, data) for task, data in zip(tasks, results, strict=True)]


def with_origins(tasks: Sequence[Task], pieces: Pieces,
                 run: Callable[[Sequence[Task]], list[bytes]]
                 ) -> tuple[Pieces, dict[int, int]]:
    """``pieces`` (:func:`decoded`), each piece that looked for an origin an earlier piece of
    its capture holds replayed again (by ``run``) with that origin's steps
    (:func:`~forensics.fleet.carry.reruns`): its sink findings name the origin the whole
    replay names; and ``{task: step}`` of the pieces whose origins were not searched before
    ``step``."""
    from forensics.fleet.carry import reruns

    again, unsearched = reruns(tasks, pieces)
    out = list(pieces)
    if again:
        for index, data in zip(again, run(list(again.values())), strict=True):
            out[index] = _decoded(again[index], data)
    return out, unsearched


def merged(tasks: Sequence[Task], pieces: Pieces,
           unsearched: dict[int, int] | None = None) -> list[dict[str, Any]]:
    """Rows from the tasks' decoded ``pieces``: merged per capture, engines stitched, each
    row's conclusion set; ``unsearched``: ``{task: step}`` of the pieces whose origins were
    not searched before ``step`` (:func:`with_origins`), said by their first finding."""
    from forensics.fleet.carry import noted
    from forensics.fleet.tasks import merge_pieces

    by_capture: dict[str, list[dict[str, Any]]] = {}
    for index, rows in enumerate(pieces):
        for piece in map(dict, rows):  # the decoded rows stay as they were
            step = (unsearched or {}).get(index)
            piece["first_finding"] = noted(piece.get("first_finding"), step)
            if step is not None and piece.get("known_unsearched"):  # origin unknown, not none
                known, unjudged = json.loads(piece["known_unsearched"])
                piece["known"], piece["known_not_judged"] = json.dumps(known), json.dumps(unjudged)
            by_capture.setdefault(piece["capture"], []).append(piece)
    rows = [_parsed(merge_pieces(by_capture[key])) for key in sorted(by_capture)]
    _stitch(rows)
    for row in rows:
        row["conclusion"] = conclusion(row)
    return rows


def _decoded(task: Task, data: bytes) -> list[dict[str, Any]]:
    """The piece rows in ``data``, each named by its task's own path (the piece holds a
    printable copy of it); a result that is not a piece table is its task's error."""
    from forensics.fleet.piece import from_ipc
    from forensics.fleet.runners import lost

    try:
        pieces = list(from_ipc(data).to_pylist())
    except Exception as exc:  # noqa: BLE001  (a garbled result is reported, not dropped)
        pieces = list(from_ipc(lost(task, f"unreadable task result: {reason(exc)}")).to_pylist())
    for piece in pieces:
        piece["capture"], piece["name"] = os.path.abspath(task.path), os.path.basename(task.path)
    return pieces


def _parsed(row: dict[str, Any]) -> dict[str, Any]:
    """A merged row with its JSON columns as Python values (``first``: the first finding)."""
    row = dict(row)
    row["verdicts"] = json.loads(row["verdicts"]) if row.get("verdicts") else {}
    row["first"] = json.loads(row.pop("first_finding", None) or "null")
    for carried in ("origin_wanted", "origin_candidates", "known_unsearched"):  # pieces' only
        row.pop(carried, None)
    row["known"] = json.loads(row["known"]) if row.get("known") else []
    row["known_not_judged"] = json.loads(row.get("known_not_judged") or "[]")
    row.setdefault("findings", None)
    row["divergence"] = None
    row["contested"] = None
    return row


def _stitch(rows: list[dict[str, Any]]) -> None:
    """Set ``divergence`` on the two rows of every engine (:func:`~forensics.fleet.stitch.
    engines`: claims corroborated) whose ranks disagree: the rows of the captures compared
    (:func:`_divergence`); a step not compared (its ranks holding unlike numbers of records)
    is no step of any rank compared, so every other row of the engine gets it (the hit, or
    its ``before``: "divergence not judged", never "clean"), and a row the first divergence
    does not name, whose later steps were compared with nothing, gets it marked ``stopped``
    (:func:`~forensics.fleet.stitch.stopped_text`); and ``contested`` on the row of
    each capture that claims a rank another capture of its engine holds (its ranks were
    compared with no other's: the sentence names the rank and the other captures)."""
    from forensics.escaping import unicode_path
    from forensics.fleet.stitch import engines

    by_capture = {row["capture"]: row for row in rows}
    contested: dict[str, str] = {}
    for captures in engines(rows, contested).values():
        hit = _divergence(list(captures), by_capture)
        if hit is not None:
            for capture in captures:
                compared = unicode_path(os.path.abspath(capture)) in hit["captures"]
                mine = hit if compared or hit.get("unpaired") else \
                    hit.get("before") or {**hit, "stopped": True}
                if mine is not None and not by_capture[capture].get("error"):
                    by_capture[capture]["divergence"] = mine
    for capture, text in contested.items():  # each row names the others of its rank
        if not by_capture[capture].get("error"):
            by_capture[capture]["contested"] = text


def _divergence(captures: list[str], by_capture: dict[str, dict[str, Any]]
                ) -> dict[str, Any] | None:
    """The first divergence of one engine's ``captures``, each compared as its replay read it
    (:func:`~forensics.fleet.stitch.first_divergence` with what each row's replay held): one
    changed since (replaced after its task, still written) becomes its error row, and the
    others are compared without it; None when fewer than two ranks are left."""
    from forensics.fleet.piece import CaptureChanged
    from forensics.fleet.stitch import first_divergence

    while True:
        ranks = {r for c in captures for r in str(by_capture[c]["ranks"]).split(",") if r}
        if len(ranks) < 2:
            return None  # one rank: nothing to compare
        try:
            return first_divergence(captures, {c: by_capture[c]["held"] for c in captures})
        except CaptureChanged as exc:
            row = by_capture[exc.capture]
            replaced = _parsed({"capture": row["capture"], "name": row["name"],
                                "error": str(exc)})
            row.clear()
            row.update(replaced)
            captures.remove(exc.capture)
