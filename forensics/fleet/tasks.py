"""The tasks of a triage (a capture, or a step range of a huge one) and their merge into rows."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from forensics.fleet.piece import Held, Window, changed, window_in

#: a capture with more records than this is replayed in step ranges of about this many
SPLIT_RECORDS = 500_000
#: the range ``triage --split-records`` takes: at least this many records a piece (a capture
#: of N records is at most N / 1,000 pieces, each of which opens the capture), at most
#: this many (a piece is replayed in one process)
MIN_SPLIT_RECORDS, MAX_SPLIT_RECORDS = 1_000, 1_000_000_000
#: verdicts from worst to best: a merged site takes the worst of its pieces
VERDICT_ORDER = ("violation", "error", "suspect", "not judged", "unjudged", "ok")


@dataclass(frozen=True)
class Task:
    """Replay ``path``, steps ``[start, stop)`` (None: the whole capture); ``window``: for a
    step range, the pairs of its capture's race window it replays
    (:func:`forensics.fleet.piece.window_in`), or None for the piece to work them out;
    ``planned``: for a step range, what its capture held when the ranges were cut (its files,
    records, first and last step: :class:`~forensics.fleet.piece.Held`), which its piece
    checks; ``origins``: earlier steps to replay too, where origins of its sink findings lie
    (a piece given again by :func:`forensics.fleet.carry.reruns`); ``steps``: for a step
    range, how many steps in it hold records (0: not counted)."""

    path: str
    start: int | None = None
    stop: int | None = None
    window: Window | None = None
    planned: Held | None = None
    origins: tuple[int, ...] = ()
    steps: int = 0


def plan(paths: Sequence[Path], split_records: int = SPLIT_RECORDS) -> list[Task]:
    """One task per capture; a capture of more than ``split_records`` records is cut into step
    ranges of about that many records (a capture that cannot be opened or read gets one task,
    which reports the error). The race window of a capture cut so
    (:func:`forensics.judge.race.window_of`, about 2 us a record) is worked out here, once,
    and each range's task carries its part: every piece worked it out from the whole capture
    again."""
    from forensics.store.reader import load

    tasks: list[Task] = []
    for path in paths:
        try:
            capture = load(path, mapped=False)  # read, not mapped: a cut file is no SIGBUS
            total = len(capture)
            counts = capture.step_counts() if total > split_records else None
        except Exception:  # noqa: BLE001  (its task replays it and reports the error)
            counts = None
        if counts is None or not len(counts[0]):
            tasks.append(Task(str(path)))
            continue
        held, window = Held.of(capture), _window(capture)
        for lo, hi, steps in ranges(counts, split_records):
            tasks.append(Task(str(path), lo, hi,
                              None if window is None else window_in(window, lo, hi), held,
                              steps=steps))
    return tasks


def ranges(step_counts: tuple[np.ndarray, np.ndarray], split_records: int
           ) -> list[tuple[int, int, int]]:
    """``[(start, stop, steps)]``: step ranges that cover the steps ``step_counts`` holds
    (distinct steps ascending, and the records of each), each of about ``split_records``
    records (a step is never cut: the range its first record falls in holds it whole), and
    the number of steps in each. Cut by records, not by step width: one step far from the rest
    (10**15 beside 0..19,999) made one range of every record and many of none."""
    steps, counts = step_counts
    if not len(steps):
        return []
    before = np.cumsum(counts) - counts  # the records of the steps before each
    piece = before // split_records
    starts = np.flatnonzero(np.r_[True, piece[1:] != piece[:-1]])
    bounds = [*(int(steps[i]) for i in starts), int(steps[-1]) + 1]
    sizes = np.diff(np.r_[starts, len(steps)])
    return [(bounds[i], bounds[i + 1], int(sizes[i])) for i in range(len(starts))]


def _window(capture: Any) -> frozenset[tuple[int, int]] | None:
    """The race window of ``capture``, or None when it cannot be worked out (each piece then
    tries, and reports the capture's error)."""
    from forensics.judge.race import window_of

    try:
        return window_of(capture)
    except Exception:  # noqa: BLE001  (its pieces replay it and report the error)
        return None


def merge_pieces(pieces: list[dict[str, Any]]) -> dict[str, Any]:
    """One capture's row from its pieces (step ranges, or one whole-capture piece): facts of the
    first, records and findings summed, the worst verdict per site, the earliest first
    finding, known issues united; the first error, if any, makes the row an error row, and
    so do pieces that read different files of it (:meth:`~forensics.store.reader.Capture.held`:
    it changed between them)."""
    pieces = sorted(pieces, key=lambda p: (p["start"] is not None, p["start"] or 0))
    row = {k: v for k, v in pieces[0].items() if k not in ("start", "stop")}
    failed = [p for p in pieces if p["error"]]
    if failed:
        return {"capture": row["capture"], "name": row["name"], "error": failed[0]["error"]}
    if len({p["held"] for p in pieces}) > 1:  # its files differ from one piece to another
        return {"capture": row["capture"], "name": row["name"], "error": changed(
            row["capture"], "its step ranges read different files")}
    if len(pieces) == 1:
        return row
    row["records"] = sum(p["records"] for p in pieces)
    row["findings"] = sum(p["findings"] for p in pieces)
    row["verdicts"] = json.dumps(_worst([json.loads(p["verdicts"]) for p in pieces]),
                                 sort_keys=True)
    firsts = [p["first_finding"] for p in pieces if json.loads(p["first_finding"]) is not None]
    row["first_finding"] = firsts[0] if firsts else "null"
    known = {k for p in pieces for k in json.loads(p["known"])}
    row["known"] = json.dumps(sorted(known))  # one piece's match is the capture's
    row["known_not_judged"] = json.dumps(sorted(
        {k for p in pieces for k in json.loads(p.get("known_not_judged") or "[]")} - known))
    return row


def _worst(all_verdicts: list[dict[str, dict[str, str]]]) -> dict[str, dict[str, str]]:
    """Per variant and site, the worst verdict of the pieces (:data:`VERDICT_ORDER`; a verdict
    it does not list ranks just above ``ok``)."""
    def rank(verdict: str) -> float:
        if verdict in VERDICT_ORDER:
            return float(VERDICT_ORDER.index(verdict))
        return len(VERDICT_ORDER) - 1.5

    out: dict[str, dict[str, str]] = {}
    for verdicts in all_verdicts:
        for variant, sites in verdicts.items():
            mine = out.setdefault(variant, {})
            for site, verdict in sites.items():
                if site not in mine or rank(verdict) < rank(mine[site]):
                    mine[site] = verdict
    return out
