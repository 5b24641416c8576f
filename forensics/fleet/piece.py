"""One task of a triage: replay a capture (or a range of its steps) and return one Arrow row.

A task's result crosses processes and machines as Arrow IPC bytes (:func:`to_ipc`), never as
pickled records. A step range ``[start, stop)`` is replayed with :data:`LOOKBACK` earlier steps,
so a finding at the sink still finds its origin a few steps back; only findings, outcomes and
records of the range itself count. A range is judged as part of its capture (``replay(...,
part_of=capture)``): the capture's manifest says whether its vLLM clamps input ids, and the race
check, which compares at most :data:`forensics.judge.race.MAX_STEPS` steps, compares in a range
the steps a replay of the whole capture compares there: a triage finds the same whatever its
split. Those steps are worked out once, when the triage is planned
(:func:`forensics.fleet.tasks.plan`), and handed to each piece as data (its ``window``).
"""

from __future__ import annotations

import json
import os
from typing import Any, NamedTuple

from forensics.errors import CaptureFormatError, SegmentChanged
from forensics.fleet.facts import capture_facts
from forensics.fleet.known_issues import match_known
from forensics.records import INT64_MAX, INT64_MIN

BASELINE = "upstream"
VARIANTS = ("upstream", "patched")
#: earlier steps replayed before a step range (origins of sink findings lie this close)
LOOKBACK = 8
#: the words of the error of a capture that holds no records (its conclusion is ``empty``)
NO_RECORDS = "holds no records"
#: the words of the error of a capture whose only records are of sites this install does not
#: know (its conclusion is ``not judged``)
ONLY_NOT_KNOWN = "holds only records of sites this install does not know"
#: a piece's columns, in order; JSON text for the nested ones
PIECE_COLUMNS = ("capture", "name", "start", "stop", "error", "host", "pid", "ranks",
                 "engine_id", "vllm", "runner", "spec_method", "async_scheduling", "steps",
                 "records", "crash_events", "guard_events", "crashed", "scenario", "verdicts",
                 "first_finding", "findings", "known", "known_not_judged", "started", "history",
                 "refused", "not_judged", "held", "origin_wanted", "origin_candidates",
                 "known_unsearched")


#: the (step, rank) pairs a whole capture's race check compares, as a task carries them
Window = tuple[tuple[int, int], ...]


class Held(NamedTuple):
    """What a capture held as a reader of the triage opened it: its files, segments,
    manifest, events and ``.idx`` sidecars (:meth:`~forensics.store.reader.Capture.held`: name,
    device, inode, size, modification and change time of each), its records, first and last
    step. The plan takes it of a capture it
    cuts into step ranges (a task's ``planned``), each piece of what it replayed (its row's
    ``held``), and each later reader refuses a capture that no longer holds it
    (:func:`check_held`): one check from the plan to the stitch."""

    files: str
    records: int
    first: int | None
    last: int | None

    @classmethod
    def of(cls, capture: Any) -> Held:
        """What ``capture`` (a :class:`~forensics.store.reader.Capture`) held as opened."""
        steps = capture.summary()["steps"]
        first, last = steps if steps is not None else (None, None)
        return cls(capture.held(), len(capture), first, last)

    def text(self) -> str:
        """As a row's ``held`` column holds it (JSON)."""
        return json.dumps(list(self))

    @classmethod
    def parse(cls, text: Any) -> Held | None:
        """The :class:`Held` of a row's ``held`` column (None: none, or not one)."""
        try:
            files, records, first, last = json.loads(text)
        except (TypeError, ValueError):
            return None
        return cls(files, records, first, last)


class CaptureChanged(CaptureFormatError):
    """A capture no longer holds what an earlier reader of its triage read (its one-line
    message names it, :func:`changed`); ``capture``: its path, as given."""

    def __init__(self, capture: str, message: str) -> None:
        super().__init__(message)
        self.capture = capture


def replay_piece(path: str, start: int | None = None, stop: int | None = None,
                 window: Window | None = None, variants: tuple[str, ...] = VARIANTS,
                 planned: Held | None = None, origins: tuple[int, ...] = ()) -> bytes:
    """Replay the capture at ``path`` (steps ``[start, stop)``, or all when None) and return
    its one-row table as Arrow IPC bytes; a capture that cannot be read or replayed gives a
    row whose ``error`` is its one-line message (never raises for the capture's sake); a
    segment cut or replaced under this process's reads, that the capture changed while the
    triage ran (:func:`changed`).
    ``window``: a step range's race window as planned (:func:`replayed_range`); ``planned``:
    what the capture held when its ranges were cut (:func:`check_held`, as the replay's end
    checks that it held still what it read); ``origins``: earlier steps whose records to
    replay too, where the origins of its sink findings lie (:mod:`forensics.fleet.carry`)."""
    from forensics.errors import one_line

    row: dict[str, Any] = {"capture": os.path.abspath(path), "name": os.path.basename(path),
                           "start": start, "stop": stop, "error": ""}
    try:
        row.update(_replayed(path, start, stop, window, variants, planned, origins))
        return to_ipc([row])
    except Exception as exc:  # noqa: BLE001  (a bad capture is a row, never the end of a run)
        failed = {k: row[k] for k in ("capture", "name", "start", "stop")}
        said = changed(path, f"it can no longer be read ({one_line(exc)})") \
            if isinstance(exc, SegmentChanged) else one_line(exc)
        return to_ipc([{**failed, "error": said}])


def _replayed(path: str, start: int | None, stop: int | None, window: Window | None,
              variants: tuple[str, ...], planned: Held | None = None,
              origins: tuple[int, ...] = ()) -> dict[str, Any]:
    """The facts and replay columns of one capture or step range (of a range, the origins it
    looked for and holds: :mod:`forensics.fleet.carry`)."""
    from forensics.escaping import terminal
    from forensics.fleet.origins import candidates, wanted
    from forensics.store.reader import load

    capture = load(path)
    if planned is not None:
        check_held(capture, path, planned, "when its step ranges were cut")
    facts = capture_facts(capture)
    if len(capture) == 0 and capture.unknown_sites:
        raise CaptureFormatError(f"'{terminal(os.path.basename(path))}' {ONLY_NOT_KNOWN}: "
                                 f"{facts['not_judged']}, judged by no variant; install the "
                                 "plugin that declares each and triage it again")
    if len(capture) == 0:
        raise CaptureFormatError(f"'{terminal(os.path.basename(path))}' {_no_records(capture)}")
    result, verdicts, found = replayed_range(capture, start, stop, variants, window, origins)
    if start is not None:  # a piece's record count is its own range's
        facts["records"] = len(capture.records(steps=range(start, stop or start)))
        facts["origin_wanted"] = wanted(found, start)
        facts["origin_candidates"] = candidates(result, start, stop or start)
        # known issues again with a null origin unknown: the row's if a search was cut (JSON
        # of the ids matched and those not judged)
        looked = json.loads(facts["origin_wanted"])
        facts["known_unsearched"] = json.dumps(match_known(result, capture, True)) \
            if looked["keys"] or looked["cut"] else None
    known, unjudged = match_known(result, capture)
    return {**facts, "verdicts": json.dumps(verdicts, sort_keys=True),
            "first_finding": json.dumps(first_of(found)),
            "findings": int((found["variant"] == BASELINE).sum()), "known": json.dumps(known),
            "known_not_judged": json.dumps(unjudged),
            "held": check_held(capture, path, planned, "when its step ranges were cut").text()}


def check_held(capture: Any, path: str, held: Held | None, when: str) -> Held:
    """What ``capture`` (opened at ``path``) holds (:meth:`Held.of`), refusing it when a
    segment file changed since it was opened (what was read of it may be another file's), or
    it does not hold ``held`` (what an earlier reader read ``when``; None: not compared):
    a segment, the manifest, an events file or an ``.idx`` sidecar
    replaced, written to, or rewritten in place. A step range's records are counted over the
    steps it held then, the stitch compares the ranks a row replayed: another file's would be
    counted or compared.

    Raises:
        CaptureChanged: naming the capture, and what it held then and now, or the segment.
    """
    from forensics.escaping import terminal

    moved = capture.changed()
    if moved is not None:
        raise CaptureChanged(path, changed(path, f"'{terminal(moved)}' was written to, replaced, "
                                                 "added or removed while it was read"))
    now = Held.of(capture)
    if held is None or now == held:
        return now
    if now[1:] == held[1:]:
        how = (f"its files are not those it held {when}, though its records and "
               "steps are (rewritten in place, or copied over)")
    else:
        how = (f"it held {held.records} records over steps {held.first}-{held.last} {when}, "
               f"{now.records} over steps {now.first}-{now.last} now")
    raise CaptureChanged(path, changed(path, how))


def changed(path: str, how: str) -> str:
    """The one line of a capture that changed while its triage ran, saying ``how``."""
    from forensics.escaping import terminal

    return (f"'{terminal(os.path.basename(path))}' changed while the triage ran: {how} "
            "(replaced, or still being written); triage it again once it no longer changes")


def replayed_range(capture: Any, start: int | None, stop: int | None,
                   variants: tuple[str, ...] = VARIANTS, window: Window | None = None,
                   origins: tuple[int, ...] = ()) -> tuple[Any, dict[str, Any], Any]:
    """The replay of ``capture`` (steps ``[start, stop)`` with :data:`LOOKBACK` earlier ones
    and the steps ``origins``, or all when None), and the verdicts and findings a triage
    counts of it. ``window``: the pairs of the whole capture's race window in those steps
    (:func:`window_in`), as planned; None: worked out here from all of ``capture``
    (:func:`forensics.judge.race.window_of`)."""
    from forensics.replaying import replay

    if start is None or stop is None:
        result = replay(capture, list(variants))
        return result, result.verdicts, result.findings
    steps = replayed_steps(start, stop)
    result = replay(capture.records(steps=[*origins, *steps] if origins else steps),
                    list(variants),
                    part_of=capture, window=None if window is None else frozenset(window))
    return (result, *_in_range(result, start))


def replayed_steps(start: int, stop: int) -> range:
    """The steps a piece of steps ``[start, stop)`` replays: its own and :data:`LOOKBACK`
    earlier ones."""
    return range(max(0, start - LOOKBACK), stop)


def window_in(window: Any, start: int, stop: int) -> Window:
    """The pairs of ``window`` (a capture's race window) that the piece of steps ``[start,
    stop)`` replays (:func:`replayed_steps`), in order: what a task carries to it."""
    steps = replayed_steps(start, stop)
    return tuple(sorted(pair for pair in window if pair[0] in steps))


def _in_range(result: Any, start: int) -> tuple[dict[str, dict[str, str]], Any]:
    """Verdicts and findings of ``result`` from step ``start`` on (the lookback left out)."""
    from forensics.judge.findings import verdicts

    steps = result.index["step"].to_numpy()
    kept = [int(i) for i in (steps >= start).nonzero()[0]]
    records = [result.records[i] for i in kept]
    outcomes = _statuses(result, kept)
    found = result.findings[result.findings["step"] >= start].reset_index(drop=True)
    return verdicts(records, outcomes, found), found


def _statuses(result: Any, kept: list[int]) -> dict[str, list[Any]]:
    """Per variant, an :class:`~forensics.outcome.Outcome` holding each kept record's status
    (from ``result.outcomes``; None for a summary record, which has no outcome)."""
    from forensics.outcome import Outcome

    table = result.outcomes
    status = {(v, int(r)): s for v, r, s in zip(table["variant"], table["record"],
                                                table["status"], strict=True)}
    return {name: [Outcome(status=status[(name, i)]) if (name, i) in status else None
                   for i in kept] for name in result.variants}


def first_of(found: Any) -> dict[str, Any] | None:
    """The baseline's first finding with every findings column but variant and record."""
    from forensics.judge.findings import first_finding

    keys = [c for c in found.columns if c not in ("variant", "record")]
    return first_finding(found, BASELINE, keys)


def piece_schema() -> Any:
    """The Arrow schema of a piece's row."""
    import pyarrow as pa

    ints = {"start", "stop", "pid", "steps", "records", "findings"}
    bools = {"async_scheduling", "crashed"}
    return pa.schema([(name, pa.int64() if name in ints else pa.bool_() if name in bools
                       else pa.string()) for name in PIECE_COLUMNS])


def to_ipc(rows: list[dict[str, Any]]) -> bytes:
    """``rows`` as an Arrow IPC stream of the piece schema (missing values null; text made
    storable, :func:`storable`)."""
    import pyarrow as pa

    schema = piece_schema()
    table = pa.Table.from_pylist([{k: storable(r.get(k)) for k in schema.names} for r in rows],
                                 schema=schema)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def storable(value: Any) -> Any:
    """``value`` as Arrow can hold it: text as valid UTF-8 (:func:`forensics.escaping.unicode`:
    a lone surrogate of an undecodable file name shown as ``\\udcNN``), an integer outside
    int64 as null (unknown); other values unchanged."""
    from forensics.escaping import unicode

    if isinstance(value, str):
        return unicode(value)
    if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
        return None
    return value


def from_ipc(data: bytes) -> Any:
    """The table in the Arrow IPC stream ``data`` (checked against the piece schema).

    Raises ValueError when the stream is not a piece's table.
    """
    import pyarrow as pa

    table = pa.ipc.open_stream(pa.py_buffer(data)).read_all()
    if not table.schema.equals(piece_schema()):
        raise ValueError("a triage task returned a table of another schema")
    return table


def _no_records(capture: Any) -> str:
    """What a capture of no records holds instead, after ``holds no records``: its recorded
    kernel launches (``forensics kernels`` judges them), the records of the capture it was
    redacted from that its redaction could not keep, or why it holds none, as its manifest
    tells."""
    from forensics.manifest_facts import no_records_why
    from forensics.present.conclusion import kernel_launches
    from forensics.store.unjudged import REDACTED, unjudged_of, unjudged_text

    launches = kernel_launches(capture)
    redacted = unjudged_text(unjudged_of(capture), {REDACTED})
    if redacted:
        return f"{NO_RECORDS}: nothing to replay; no variant judged {redacted}"
    if launches:
        return (f"{NO_RECORDS} of a site, only {launches} recorded kernel launch(es): nothing "
                "to replay here (forensics kernels replays and judges the launches)")
    return f"{NO_RECORDS}: nothing to replay ({no_records_why(capture.summary().get('manifest'))})"
