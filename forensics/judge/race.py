"""Race evidence: the model consumed input ids that no recorded site wrote.

Where one step (and rank) has both a writer record (what ``prepare_input_ids`` on V1 or
``combine_tokens`` on V2 wrote into the input ids) and the ``embedding`` record (what the model
received), every element where the two disagree is a finding of kind ``unwritten_input``, with
both values: ``value`` is what the model received, ``written`` what the site wrote (its recorded
output when the probe kept one, else the baseline's replay of the call, as ``source`` says). The
site and field names come from the catalogue's ``[race]`` table. The judge runs no variant: the
replay runs the baseline on the writer records :func:`race_plan` names and keeps its outputs
in the result (``ReplayResult.baseline_outputs``), which :func:`race_check` reads. The replay
puts these findings in its findings table under the baseline (:func:`as_findings`;
``written`` becomes ``expected``); they leave every verdict as it was (docs/findings.md).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from forensics.judge.findings import UNWRITTEN_INPUT, baseline_of
from forensics.judge.keyed import by_key
from forensics.records import INT64_MAX, INT64_MIN

if TYPE_CHECKING:
    import pandas as pd

    from forensics.replaying import ReplayResult

KIND = UNWRITTEN_INPUT
COLUMNS = ("variant", "site", "step", "rank", "row", "element", "tensor", "kind", "value",
           "lower", "upper", "origin", "resolved", "written", "source", "written_at", "req_id",
           "record")
#: the most disagreements kept (a capture of a broken engine may disagree everywhere)
MAX_FINDINGS = 10_000
#: the most steps compared: those nearest a crash event first, then the latest ones (each
#: compared step decodes two records and, without a recorded output, the replay runs the
#: writer's baseline)
MAX_STEPS = 256


@dataclass
class RaceCheck:
    """What the comparison saw: findings, steps compared, and steps missing a record."""

    findings: pd.DataFrame
    compared: int = 0
    #: steps that have both records (``compared`` of them were compared)
    paired: int = 0
    #: (step, rank, the record that is missing: "embedding" or the writer site(s))
    missing: list[tuple[int, int, str]] = field(default_factory=list)
    recorded: bool = False
    #: (step, rank, site) where the site holds more than one record (two engines claiming one
    #: rank, a step number repeated): which record wrote what another read is unknown, so
    #: that step is not compared
    ambiguous: list[tuple[int, int, str]] = field(default_factory=list)
    #: the steps compared, in order (one per compared step and rank)
    steps: list[int] = field(default_factory=list)
    #: (step, rank, writer site, baseline) of each chosen step not compared because what the
    #: writer wrote is unknown: no output recorded, and the baseline's replay produced none
    #: (it raised, or the replay's overall deadline cut it)
    unproduced: list[tuple[int, int, str, str]] = field(default_factory=list)
    #: (step, rank, ids received, ids written) of each compared step where the embedding
    #: received more ids than the writer's output holds: those past it were not compared
    short: list[tuple[int, int, int, int]] = field(default_factory=list)
    #: the elements that disagree at the compared steps (vLLM's clamp left out where it
    #: clamps), the first :data:`MAX_FINDINGS` of them kept as ``findings``
    disagree: int = 0

    def summary(self) -> str:
        """One sentence on the comparison, or ``""`` when the capture has neither record."""
        if not self.recorded:
            return ""
        if not self.compared and self.unproduced:
            return ("Whether the model read what was written is not known."
                    + self.unproduced_sentence() + self.ambiguous_sentence())
        if not self.compared:
            sites = sorted({m[2] for m in self.missing})
            return (f"No step has both the writer's and the embedding's record (missing: "
                    f"{', '.join(sites) or 'none'}), so whether the model read what was "
                    "written is not known." + self.ambiguous_sentence())
        text = (f"Compared what was written into the input ids with what the embedding "
                f"received at {self.compared} step(s){self.coverage()}: ")
        if len(self.findings):
            first, many = self.findings.iloc[0], max(self.disagree, len(self.findings))
            kept = f" ({len(self.findings)} kept as findings)" if many > len(self.findings) \
                else ""
            text += (f"{many} element(s) disagree{kept}, the first at step "
                     f"{first['step']} rank {first['rank']}: {first['origin']} wrote "
                     f"{first['written']} ({first['source']}), the embedding received "
                     f"{first['tensor']}[{first['element']}] = {first['value']}.")
        else:
            text += "they agree on the ids both hold." if self.short else "they agree."
        if self.missing:
            text += f" {len(self.missing)} step(s) lack one of the two records."
        return text + self.short_sentence() + self.unproduced_sentence() \
            + self.ambiguous_sentence()

    def short_sentence(self) -> str:
        """At which compared steps the embedding received ids past what the writer's output
        holds (not compared), or ``""``."""
        if not self.short:
            return ""
        step, rank, received, written = self.short[0]
        return (f" At {len(self.short)} step(s) the embedding received more ids than the "
                f"writer's output holds, and those past it were not compared (the first: step "
                f"{step} rank {rank}, {received} received, {written} written).")

    def unproduced_sentence(self) -> str:
        """Which chosen steps were not compared because what the writer wrote there is
        unknown (:attr:`unproduced`), or ``""``."""
        if not self.unproduced:
            return ""
        step, rank, site, baseline = self.unproduced[0]
        return (f" {len(self.unproduced)} step(s) were not compared: what the writer wrote "
                f"there is not known (no output recorded, and the {baseline} replay produced "
                f"none; the first: {site} at step {step} rank {rank}).")

    @property
    def partial(self) -> bool:
        """Whether some step holding both records was not compared (:data:`MAX_STEPS`, or
        :attr:`unproduced`)."""
        return self.paired > self.compared

    def coverage(self) -> str:
        """``""`` when every step holding both records was chosen, else which were compared:
        `` of 600 that hold both records (only steps 345-600: at most 256 are compared, ...)``."""
        if self.paired <= self.compared + len(self.unproduced):
            return ""
        return (f" of {self.paired} that hold both records (only steps "
                f"{spans(sorted(set(self.steps)))}: at most {MAX_STEPS} are compared, those "
                "nearest a crash event first, then the latest)")

    def ambiguous_sentence(self) -> str:
        """Which steps were not compared because a site holds several records there, or
        ``""``."""
        if not self.ambiguous:
            return ""
        step, rank, site = self.ambiguous[0]
        return (f" {len(self.ambiguous)} step(s) were not compared: a site holds more than one "
                f"record there (the first: {site} at step {step} rank {rank}), so which record "
                f"the embedding's ids came from is unknown.")

    def missing_at(self, steps: set[int]) -> list[str]:
        """Sentences naming the record missing at each of ``steps``."""
        return [f"step {s} rank {r} has no {what} record" for s, r, what in self.missing
                if s in steps]


@dataclass
class RacePlan:
    """The steps the race check compares: the writer and reader sites of the catalogue's
    ``[race]`` table, the (step, rank, writer, records by site) pairs chosen, the baseline
    variant whose replay stands in for a writer record that kept no output, the
    :class:`RaceCheck` counts known before comparing, and the replay's records."""

    reader: dict[str, str]
    chosen: list[tuple[int, int, dict[str, str], dict[str, int]]]
    baseline: str
    check: RaceCheck
    records: Sequence[Any]

    @functools.cached_property
    def writers(self) -> list[tuple[dict[str, str], int, Any]]:
        """(writer, position, record) of each chosen step, its record decoded once."""
        return [(writer, present[writer["site"]], self.records[present[writer["site"]]])
                for _, _, writer, present in self.chosen]

    def unrecorded(self) -> list[tuple[int, Any]]:
        """(position, record) of the chosen writer records that kept no output: the replay
        runs the baseline on them and keeps its outputs (``ReplayResult.baseline_outputs``)."""
        return [(position, record) for writer, position, record in self.writers
                if f"{writer['field']}_after" not in record]


def race_plan(result: ReplayResult, window: Collection[tuple[int, int]] | None = None
              ) -> RacePlan:
    """What the race check of ``result`` compares (see the module docstring): the (step,
    rank) pairs of ``window`` that hold both records, or (None) those :func:`_chosen` picks."""
    reader, writers, sites = _race_sites()
    check, pairs = _paired(_positions(result, set(sites)))
    chosen = (_chosen(pairs, _crash_steps(result.capture)) if window is None else
              [p for p in pairs if (p[0], p[1]) in window])
    return RacePlan(reader, chosen, str(baseline_of(result.variants)), check, result.records)


def window_of(capture: Any) -> frozenset[tuple[int, int]]:
    """The (step, rank) pairs a replay of the whole ``capture`` compares (from its batches'
    steps and summary flags, no record decoded): a replay of a step range of it
    (``replay(..., part_of=capture)``) compares these in its range, what the whole replay
    compares there, so a triage finds the same whatever its split."""
    columns: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for site in (s for s in _race_sites()[2] if s in capture.sites):
        steps: list[np.ndarray] = []
        ranks: list[np.ndarray] = []
        for view in capture.batches(site, private=True):  # no SIGBUS from a cut segment
            kept = np.asarray(view.steps, dtype=np.int64)[~np.asarray(view.summary, dtype=bool)]
            steps.append(kept)
            ranks.append(np.full(len(kept), int(view.rank), dtype=np.int64))
        capture.release()
        columns[site] = (np.concatenate(steps) if steps else np.zeros(0, np.int64),
                         np.concatenate(ranks) if ranks else np.zeros(0, np.int64))
    return window_from(columns, _crash_steps(capture))


def window_from(columns: Mapping[str, tuple[np.ndarray, np.ndarray]], crash_steps: set[int]
                ) -> frozenset[tuple[int, int]]:
    """The (step, rank) pairs :func:`_chosen` keeps of those :func:`_paired` pairs, for the
    records at the race sites whose steps and ranks ``columns`` holds per site (``{site:
    (steps, ranks)}``, int64), worked out on arrays: a (step, rank) is paired when the reader
    site and a writer site hold it and no race site holds it twice."""
    reader, writers, _ = _race_sites()
    steps = np.concatenate([c[0] for c in columns.values()] or [np.zeros(0, np.int64)])
    ranks = np.concatenate([c[1] for c in columns.values()] or [np.zeros(0, np.int64)])
    if not len(steps):
        return frozenset()
    order = np.lexsort((ranks, steps))  # by step, then rank: the pairs' order
    steps, ranks = steps[order], ranks[order]
    first = np.r_[True, (steps[1:] != steps[:-1]) | (ranks[1:] != ranks[:-1])]
    key = np.empty(len(order), dtype=np.int64)
    key[order] = np.cumsum(first) - 1  # each record's (step, rank), numbered in order
    counts: dict[str, np.ndarray] = {}
    start = 0
    for site, (site_steps, _) in columns.items():
        counts[site] = np.bincount(key[start:start + len(site_steps)],
                                   minlength=int(first.sum()))
        start += len(site_steps)
    none = np.zeros(int(first.sum()), dtype=bool)
    twice = np.logical_or.reduce([c > 1 for c in counts.values()])
    written = np.logical_or.reduce([counts[w["site"]] > 0 if w.get("site") in counts else none
                                    for w in writers] or [none])
    read = counts[reader["site"]] > 0 if reader.get("site") in counts else none
    paired = read & written & ~twice
    pair_steps, pair_ranks = steps[first][paired], ranks[first][paired]
    kept = _kept(pair_steps, crash_steps)
    return frozenset(zip(pair_steps[kept].tolist(), pair_ranks[kept].tolist(), strict=True))


def _kept(steps: np.ndarray, crash_steps: set[int]) -> np.ndarray:
    """The indices of the pairs (of ``steps``, in pair order) that :func:`_chosen` keeps:
    nearest a crash step first, then the latest, ties in pair order."""
    if len(steps) <= MAX_STEPS:
        return np.arange(len(steps))
    if any(not INT64_MIN <= s <= INT64_MAX for s in crash_steps):  # past int64: _chosen's
        return np.array([i for _, i in _chosen([(int(s), i) for i, s in enumerate(steps)],
                                                crash_steps)], dtype=np.int64)
    crash = np.array(sorted(crash_steps), dtype=np.int64)
    distance = np.zeros(len(steps), dtype=np.uint64)
    if len(crash):
        at = np.searchsorted(crash, steps)
        above = crash[np.minimum(at, len(crash) - 1)]
        below = crash[np.maximum(at - 1, 0)]
        distance = np.minimum(_apart(steps, above), _apart(steps, below))
    order = np.lexsort((np.arange(len(steps)), np.invert(steps), distance))
    return np.sort(order[:MAX_STEPS])


def _apart(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``|a - b|`` of two int64 arrays, exact as uint64 (it may pass int64)."""
    ua, ub = a.view(np.uint64), b.view(np.uint64)
    return np.where(a >= b, ua - ub, ub - ua)


def _race_sites() -> tuple[dict[str, str], Sequence[dict[str, str]], list[str]]:
    """The reader site and the writer sites of the catalogue's ``[race]`` table, and the
    names of all of them."""
    from forensics.known.schema import load_catalogue

    catalogue = load_catalogue()
    reader, writers = catalogue.race_reader, catalogue.race_writers
    return reader, writers, [str(s) for s in (reader.get("site"), *(w.get("site")
                                                                     for w in writers)) if s]


def _paired(positions: list[tuple[int, str, int, int]]
            ) -> tuple[RaceCheck, list[tuple[int, int, dict[str, str], dict[str, int]]]]:
    """The :class:`RaceCheck` counts known before comparing (missing, ambiguous and paired
    steps) and the (step, rank, writer, records by site) pairs of ``positions`` ((position,
    site, step, rank) of the records at the race sites), in step order."""
    import pandas as pd

    reader, writers, _ = _race_sites()
    held, twice = by_key(((step, rank, site), position)
                         for position, site, step, rank in positions)
    by_step: dict[tuple[int, int], dict[str, int]] = {}
    for (step, rank, site), position in held.items():
        by_step.setdefault((step, rank), {})[site] = position
    repeated: dict[tuple[int, int], str] = {}
    for step, rank, site in twice:
        repeated.setdefault((step, rank), site)
    check = RaceCheck(pd.DataFrame(columns=list(COLUMNS)), recorded=bool(by_step),
                      ambiguous=[(s, r, site) for (s, r), site in sorted(repeated.items())])
    pairs: list[tuple[int, int, dict[str, str], dict[str, int]]] = []
    for (step, rank), present in sorted(by_step.items()):
        if (step, rank) in repeated:
            continue
        writer = next((w for w in writers if w.get("site") in present), None)
        if writer is None or reader.get("site") not in present:
            missing = reader.get("site") if writer is not None else "/".join(
                w["site"] for w in writers)
            check.missing.append((step, rank, str(missing)))
        else:
            pairs.append((step, rank, writer, present))
    check.paired = len(pairs)
    return check, pairs


def race_check(result: ReplayResult, plan: RacePlan | None = None) -> RaceCheck:
    """Compare writer and embedding records step by step (see the module docstring), as
    ``plan`` (default: :func:`race_plan`) chose them; a writer record that kept no output is
    compared with the baseline's outputs the replay kept (``result.baseline_outputs``)."""
    import pandas as pd

    plan = plan or race_plan(result)
    check = dataclasses.replace(plan.check, missing=list(plan.check.missing), steps=[],
                                unproduced=[], short=[], disagree=0)
    clamps = getattr(getattr(result, "continuity", None), "clamps", None) is True
    outputs = getattr(result, "baseline_outputs", None) or {}
    rows: list[dict[str, Any]] = []
    for (step, rank, writer, present), written in zip(plan.chosen, plan.writers, strict=True):
        wrote = _written(plan.baseline, outputs, written)
        if wrote[0] is None:  # what the writer wrote is unknown: nothing to compare with
            check.unproduced.append((step, rank, str(writer["site"]), plan.baseline))
            continue
        check.compared += 1
        check.steps.append(step)
        rows += _compare(result, plan.baseline, wrote, (writer, plan.reader), present,
                         (step, rank), check, (MAX_FINDINGS - len(rows), clamps))
    if rows:
        check.findings = pd.DataFrame(rows[:MAX_FINDINGS], columns=list(COLUMNS))
    return check


def _crash_steps(capture: Any) -> set[int]:
    """Steps of the capture's events (crash or not): the race check looks there first."""
    if capture is None or not hasattr(capture, "summary"):
        return set()
    return {int(e["step"]) for e in capture.summary().get("events", [])
            if isinstance(e.get("step"), int)}


def _chosen(pairs: list[Any], crash_steps: set[int]) -> list[Any]:
    """At most :data:`MAX_STEPS` pairs in step order: nearest a crash event first, then the
    latest."""
    if len(pairs) <= MAX_STEPS:
        return pairs
    ranked = sorted(range(len(pairs)), key=lambda i: (
        min((abs(pairs[i][0] - s) for s in crash_steps), default=0), -pairs[i][0]))
    return [pairs[i] for i in sorted(ranked[:MAX_STEPS])]


def spans(steps: list[int], most: int = 4) -> str:
    """Sorted distinct ``steps`` as runs, ``"1-40, 345-600"``; past ``most`` runs, the first
    ``most`` and how many more."""
    from forensics.digits import runs as runs_of

    runs = runs_of(steps)
    text = ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in runs[:most])
    return text + (f" and {len(runs) - most} more run(s)" if len(runs) > most else "")


def _positions(result: ReplayResult, sites: set[Any]) -> list[tuple[int, str, int, int]]:
    """(position, site, step, rank) of every non-summary record at ``sites``."""
    index = result.index
    if index is not None and len(index):
        chosen = index[index["site"].isin(sites) & ~index["summary"].astype(bool)]
        return [(int(p), str(s), int(t), int(r)) for p, s, t, r in zip(
            chosen.index, chosen["site"], chosen["step"], chosen["rank"], strict=True)]
    return [(i, r.site, r.step, r.rank) for i, r in enumerate(result.records)
            if r.site in sites and not r.summary]


def _compare(result: ReplayResult, baseline: str, wrote: tuple[np.ndarray | None, str],
             sites: tuple[dict[str, str], dict[str, str]], present: dict[str, int],
             where: tuple[int, int], check: RaceCheck, room: tuple[int, bool]
             ) -> list[dict[str, Any]]:
    """The disagreements of one step (and rank), one dict per element for at most the first
    ``room[0]`` (all counted in ``check.disagree``; a ``-1`` written and 0 received left out
    where vLLM clamps, ``room[1]``); the step noted in ``check.short`` when the embedding
    received more ids than were written (those are not compared)."""
    (written, source), (writer, reader), (step, rank) = wrote, sites, where
    reader_record = result.records[present[reader["site"]]]
    if written is None or reader["field"] not in reader_record:
        return []
    received = np.asarray(reader_record[reader["field"]]).reshape(-1).astype(np.int64)
    n = min(len(received), len(written))
    if len(received) > n:
        check.short.append((step, rank, len(received), n))
    differ = np.flatnonzero(received[:n] != written[:n])
    if room[1]:  # vLLM's clamp explains a -1 written, 0 read (clamped_placeholder)
        differ = differ[~((written[differ] < 0) & (received[differ] == 0))]
    check.disagree += len(differ)
    differ = differ[:max(room[0], 0)]
    cu = reader_record.get("cu_num_tokens")
    rows = (np.searchsorted(np.asarray(cu), differ, side="right") if cu is not None
            else [None] * len(differ))
    return [{"variant": baseline, "site": reader["site"], "step": step, "rank": rank,
             "row": None if row is None else int(row), "element": int(i),
             "tensor": reader["field"], "kind": KIND, "value": int(received[i]),
             "lower": None, "upper": None, "origin": writer["site"], "resolved": None,
             "written": int(written[i]), "source": source,
             "written_at": f"{writer['site']} step {step} out.{writer['field']}[{int(i)}] "
                           f"({source})",
             "req_id": _request(reader_record, row), "record": present[reader["site"]]}
            for i, row in zip(differ, rows, strict=True)]


def _request(record: Any, row: int | None) -> str | None:
    """The request of batch row ``row`` of ``record`` (its ``req_ids``), or None when unknown."""
    req_ids = record.get("req_ids")
    if row is None or req_ids is None or not 0 <= row < len(req_ids):
        return None
    return str(req_ids[row])


def as_findings(found: pd.DataFrame) -> list[dict[str, Any]]:
    """The ``unwritten_input`` findings ``found`` as rows of the findings table: what was
    written goes to ``expected``, where (writer, step, tensor and element, recorded or
    replayed) to ``expected_at``."""
    kept = [c for c in COLUMNS if c not in ("written", "source", "written_at")]
    return [{**{k: row[k] for k in kept}, "expected": row["written"],
             "expected_at": row["written_at"]} for row in found.to_dict("records")]


def _written(baseline: str, outputs: Mapping[int, Mapping[str, Any] | None],
             writer: tuple[dict[str, str], int, Any]) -> tuple[np.ndarray | None, str]:
    """What one writer record wrote: its recorded ``<field>_after``, else the baseline's
    output the replay kept for it (``"not produced"`` when there is none)."""
    site, position, record = writer
    name = site["field"]
    if f"{name}_after" in record:
        value, source = record[f"{name}_after"], "recorded"
    else:
        kept = outputs.get(position)
        value, source = None if kept is None else kept.get(name), f"{baseline} replay"
    if value is None:
        return None, "not produced"
    return np.asarray(value).reshape(-1).astype(np.int64), source
