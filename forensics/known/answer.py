"""Known or new, and explained or not: the part of a conclusion that answers the on-call
engineer's first two questions.

:func:`answer` matches a replay against the catalogue and decides the capture's crash verdict
(:data:`CRASH_VERDICTS`): ``unexplained`` when the timeline holds an engine exception, guard
event or crash event and no variant of the engine's own code (the baseline, the unpatched real
code: never a patch) finds a value out of range (at or before the last crash event's step, where
the probe's own events state it: :func:`~forensics.known.evidence.crash_bound`). Then the lead
sentence says so first, and :meth:`KnownAnswer.experiments` lists what the evidence points to
instead, with the next experiment for each.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from forensics.escaping import capped, spanless
from forensics.judge.padded_rows import padded_inputs_of, padded_summaries_of
from forensics.known.evidence import (
    ENGINE_CODE,
    Evidence,
    at_step,
    before_crash,
    crash_bound,
    crash_events,
    crashed,
    died_only,
    engine_variants,
    evidence_of,
    in_step_order,
    out_of_range,
    unseen,
    unstopped,
)
from forensics.known.guard_bounds import GUARD_EVENT_KINDS, claimed
from forensics.known.matching import Match, match_entry
from forensics.known.schema import Catalogue, load_catalogue
from forensics.manifest_facts import PROBE_NO_RECORDS

if TYPE_CHECKING:
    from forensics.judge.race import RaceCheck
    from forensics.replaying import ReplayResult
    from forensics.store.unjudged import Unjudged

UNEXPLAINED, EXPLAINED, NO_CRASH = "unexplained", "explained", "no crash"
CRASH_VERDICTS = (UNEXPLAINED, EXPLAINED, NO_CRASH)


@dataclass
class KnownAnswer:
    """Matches against the catalogue, the crash verdict and the next experiments."""

    crash_verdict: str
    checked: list[Match]
    experiments: list[str] = field(default_factory=list)
    race: str = ""
    #: whether any variant finds a value out of range, a misattributed row, or an input the
    #: model received that no recorded site wrote (``unwritten_input``), or the probe's guard
    #: found a value out of range (a ``guard_passed_on`` or ``guard_violation`` event), or the
    #: embedding read an id in padded rows past the vocabulary (:attr:`padded`): the one source
    #: of whether the capture shows a failure to report (``known`` and ``summary``'s draft)
    failing: bool = False
    #: whether :attr:`failing` rests on the guard's events alone (its claims: no finding)
    claims_only: bool = False
    #: what the verdict rests on: the crash events in the capture and where the replay
    #: raises (:func:`what_was_seen`)
    seen: str = ""
    #: whether the capture holds no record: no value to judge the crash by
    empty: bool = False
    #: why it holds none, as its manifest tells (:attr:`Evidence.no_records`)
    no_records: str = PROBE_NO_RECORDS
    #: whether a variant of the engine's code (:data:`ENGINE_CODE`) was replayed: the
    #: signatures describe its findings, so without one none is judged
    engine_replayed: bool = True
    #: records that ended in an ``error`` outcome (raised, timed out, cut by the overall
    #: deadline) under every replayed variant of the engine's code: none judged them
    #: (:func:`unjudged_records`)
    unjudged: int = 0
    #: whether the engine's code finds values out of range that vLLM clamped to token 0 (read
    #: as a wrong token, no crash), and none it read as they were
    clamped: bool = False
    #: what the capture held that no variant judged (records of sites not known here, the
    #: ends of files cut short, records the probe never wrote, events it left out: a guard's
    #: ``guard_passed_on`` among them would be a failure; :func:`~forensics.store.unjudged.
    #: unjudged_of`)
    unjudged_facts: list[Unjudged] = field(default_factory=list)
    #: the out-of-range findings of the models that the replayed variants of the engine's code
    #: cannot see (:func:`~forensics.known.evidence.unseen`): with no finding of their own, the
    #: crash is not judged
    unseen: int = 0
    #: of :attr:`unseen`, the values of summary records (a log's or a dump's least and greatest
    #: values, which nothing replays), not of reads inside an allocation
    unseen_summaries: int = 0
    #: where the values out of range that the engine's code finds come, every one after the
    #: last crash event (:func:`after_crash`), or ``""``
    after_crash: str = ""
    #: ids the embedding read in padded rows past the manifest's vocabulary (a wrong input, no
    #: crash: :func:`~forensics.judge.padded_rows.padded_inputs_of`)
    padded: int = 0
    #: whether the verdict's crash is an engine that died without the probe's stop, no crash
    #: event (:func:`~forensics.known.evidence.died_only`): killed or crashed, not known which
    died: bool = False
    #: the embedding's summary records whose greatest id lies in its padded rows past the
    #: vocabulary (:func:`~forensics.judge.padded_rows.padded_summaries_of`)
    padded_summaries: int = 0
    #: whether the race check found an input the model received that no recorded site wrote
    unwritten: bool = False

    def failure(self) -> tuple[str, str]:
        """What the capture holds and its name after: ``("the capture holds a crash", "the
        crash")``, or, of an engine that died with no crash event, that it died (never "a
        crash": it may have been killed)."""
        if self.died:
            return ("the engine died without the probe's stop (killed or crashed: the capture "
                    "does not say which)", "its death")
        return "the capture holds a crash", "the crash"

    def unseen_why(self) -> str:
        """Why the variants of the engine's code cannot see the :attr:`unseen` values: reads
        inside an allocation, summary records, or both (summary records' values were said to
        be "an access inside an allocation")."""
        inside = "an access inside an allocation, which Triton's interpreter does not flag"
        summary = ("the least and greatest values of summary records, which no variant but the "
                   "baseline judges: nothing there is replayed")
        if not self.unseen_summaries:
            return inside
        return summary if self.unseen_summaries >= self.unseen else f"{inside}; or {summary}"

    def verdict_text(self) -> str:
        """``"crash verdict no crash (no crash event in the capture; the replay raises
        IndexError at step 7)"``: the verdict with what it saw."""
        return f"crash verdict {self.crash_verdict}" + (f" ({self.seen})" if self.seen else "")

    @property
    def judged(self) -> bool:
        """Whether the signatures were judged: one matches, or a variant of the engine's code
        was replayed (without one, an entry that matches nothing was not judged, not found
        absent)."""
        return bool(self.matches) or self.engine_replayed

    def issues_text(self) -> str:
        """The known issues matched, by id, for one line: ``"none"``, or ``"not judged (...)"``
        replayed through no variant of the engine's code."""
        if not self.judged:
            return (f"not judged (no variant of the engine's code, "
                    f"{' or '.join(sorted(ENGINE_CODE))}, was replayed: replay with upstream too)")
        return ", ".join(m.entry.id for m in self.matches) or "none"

    @property
    def matches(self) -> list[Match]:
        """The entries that match."""
        return [m for m in self.checked if m.matched]

    def lead(self) -> str:
        """The sentence that comes first in a conclusion: ``"Not explained: ..."``, ``"Not
        judged: ..."`` or ``""``."""
        held, crash = self.failure()
        if self.crash_verdict == NOT_JUDGED and self.unseen:
            return (f"Not judged: {held}, and no variant of the engine's code "
                    "replayed finds a captured value out of range where it can see one, but "
                    f"{self.unseen} value(s) out of range that the models find lie where it "
                    f"cannot see ({self.unseen_why()}), so whether the captured values explain "
                    f"{crash} is not known: replay with upstream too.")
        if self.crash_verdict == NOT_JUDGED:
            return (f"Not judged: {held}, but no variant of the engine's code "
                    f"({' or '.join(sorted(ENGINE_CODE))}) was replayed, so whether the "
                    "captured values explain it is not known: replay with upstream too.")
        if self.crash_verdict != UNEXPLAINED:
            return ""
        why = ("no records were captured, so there is no value to judge it by "
               f"({self.no_records})" if self.empty else
               "no variant finds a captured value out of range in the records judged, and "
               f"{self.unjudged} record(s) were not judged (they ended in errors under every "
               "replayed variant of the engine's code), so whether the captured values explain "
               f"{crash} is not known" if self.unjudged else
               "every value out of range that the engine's code finds comes after the last "
               f"crash event {self.after_crash}, so the engine read none of them before it "
               "crashed and the captured values do not explain the crash (a stream-ordering "
               "race or a site that was not recorded can)" if self.after_crash else
               "no variant finds a captured value out of range that the engine read as it was "
               "(each -1 it finds was clamped to token 0 before the embedding: a wrong token, "
               f"not a crash), so the captured values do not explain {crash} (a "
               "stream-ordering race or a site that was not recorded can)" if self.clamped else
               "no variant finds a captured value out of range, so the captured values do not "
               f"explain {crash} (a stream-ordering race or a site that was not recorded can)")
        return f"Not explained: {held}, yet {why}. Next: " + " ".join(
            self.experiments)

    def known_sentence(self) -> str:
        """Which known issues match, with evidence, fix and workaround; that none does; or,
        replayed through no variant of the engine's code, that none was judged."""
        if not self.matches and not self.engine_replayed:
            return ("Known signatures not judged: they describe the findings of the engine's "
                    f"code ({' or '.join(sorted(ENGINE_CODE))}), and none of its variants was "
                    "replayed: replay with upstream too.")
        unjudged = (f" ({self.unjudged} record(s) were not judged: they ended in errors under "
                    "every replayed variant of the engine's code)" if self.unjudged else "")
        if not self.matches and self.crash_verdict == NO_CRASH and not self.failing:
            if self.unjudged_facts:
                from forensics.store.unjudged import unjudged_text

                unjudged += f" (not judged: {unjudged_text(self.unjudged_facts)})"
            if self.empty:  # kernel launches alone: `forensics kernels` may find a failure
                return (f"No known signature matches{self.open_entries()}, and the capture "
                        "holds no record to judge: whether it shows a failure to report is "
                        f"not known{unjudged}.")
            if unjudged:
                return (f"No known signature matches the records judged{self.open_entries()}; "
                        "whether the capture shows a failure to report is not known"
                        f"{unjudged}.")
            return (f"No known signature matches{self.open_entries()}, and the capture shows "
                    "no failure to report.")
        if not self.matches:
            entries = self.open_entries()
            padded = "".join(f", and {said}" for said in self.padded_said())
            return (f"No known signature matches{' the records judged' if unjudged else ''}"
                    f"{unjudged}{entries}{padded}: a reason to file a new issue"
                    f"{' if those do not apply' if entries else ''} "
                    "(`forensics summary --format markdown` drafts the report).")
        return " ".join(describe_match(m) for m in self.matches)

    def padded_said(self) -> list[str]:
        """What the embedding read in padded rows past the vocabulary: ids of its full records,
        and summary records whose greatest id lies there (values nothing replays)."""
        return [*([f"the embedding read {self.padded} id(s) in padded rows past the vocabulary "
                   "(a wrong input, not a crash)"] if self.padded else []),
                *([f"{self.padded_summaries} summary record(s) of the embedding name a greatest "
                   "id in padded rows past the vocabulary (a padded row was read: values "
                   "nothing replays)"] if self.padded_summaries else [])]

    def open_entries(self) -> str:
        """`` (N known signature(s) not judged: ids; ...)`` of the entries whose required facts
        the capture does not hold (:attr:`~forensics.known.matching.Match.status`), or ``""``:
        "no known signature matches" is not all there is to say of them."""
        ids = [m.entry.id for m in self.checked if not m.matched and m.status == "not judged"]
        if not ids:
            return ""
        return (f" ({len(ids)} known signature(s) not judged, their facts not in the capture: "
                f"{', '.join(ids)}; `forensics known` says which)")

    def paragraph(self) -> str:
        """Lead, known issues and race evidence as one paragraph."""
        return " ".join(p for p in (self.lead(), self.known_sentence(), self.race) if p)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: verdict, whether the signatures were judged (:attr:`judged`),
        matches, every entry checked, experiments, race text, and what the text says: the lead
        (why a crash is not explained or not judged, or ``""``) and the whole paragraph."""
        return {"crash_verdict": self.crash_verdict, "judged": self.judged,
                "matches": [m.entry.id for m in self.matches],
                "checked": [m.to_json() for m in self.checked],
                "experiments": self.experiments, "race": self.race, "seen": self.seen,
                "lead": self.lead(), "text": self.paragraph()}


def describe_match(match: Match) -> str:
    """``"Known issue all-placeholder-drafts-race (#40756 ...): evidence ...; fix ...;
    workaround ..."``; a match resting on misattributed rows alone leaves the entry's title
    out (it describes a value out of range) and says what matched instead."""
    e = match.entry
    if match.kinds == {"misattributed"}:  # the title describes another kind of finding
        return (f"Known issue {e.id} ({e.threads()}), matched by a misattributed row only (an "
                f"in-range row another request held, no value out of range): evidence: "
                f"{'; '.join(match.evidence)}; fix: {e.fix_text()}; workaround: "
                f"{e.workaround.rstrip('.')}.")
    return (f"Known issue {e.id} ({e.threads()}): {e.title}; evidence: "
            f"{'; '.join(match.evidence)}; fix: {e.fix_text()}; workaround: "
            f"{e.workaround.rstrip('.')}.")


def crash_verdict(evidence: Evidence) -> str:
    """``unexplained``, ``explained`` or ``no crash`` (see the module docstring)."""
    if not crashed(evidence.events):
        return NO_CRASH
    explained = out_of_range(before_crash(evidence.findings, evidence.events),
                             engine_variants(evidence))
    return EXPLAINED if explained else UNEXPLAINED


#: the verdict of a crash when no variant of :data:`ENGINE_CODE` was replayed (never written to
#: ``expected.json``: :func:`crash_verdict_of` gives None)
NOT_JUDGED = "not judged"


def judged_verdict(evidence: Evidence, variants: list[str]) -> str:
    """:func:`crash_verdict`, or :data:`NOT_JUDGED` for a crash replayed through no variant of
    :data:`ENGINE_CODE` (``patched`` alone, a diff): a fix's findings say nothing of what the
    engine's values did, and its finding none said "the captured values do not explain the
    crash" of one the engine's do explain. So too for a crash no variant of it explains where
    the models find a value out of range that it cannot see (:func:`unseen`: ``vllm`` alone on
    a Model Runner V2 kernel's access inside an allocation)."""
    verdict = crash_verdict(evidence)
    if verdict == UNEXPLAINED and unseen(evidence.findings, engine_variants(evidence)):
        return NOT_JUDGED
    return NOT_JUDGED if verdict != NO_CRASH and not ENGINE_CODE & set(variants) else verdict


def crash_verdict_of(result: ReplayResult) -> str | None:
    """The crash verdict of a replay (:func:`judged_verdict` of its evidence); None where not
    judged."""
    verdict = judged_verdict(evidence_of(result), result.variants)
    return None if verdict == NOT_JUDGED else verdict


def answer(result: ReplayResult, catalogue: Catalogue | None = None,
           capture: Any = None, origins_unsearched: bool = False) -> KnownAnswer:
    """Match ``result`` against ``catalogue`` (default: the bundled one); ``capture``: where
    the facts and events come from when ``result`` holds a part of it (default: its own);
    ``origins_unsearched``: a null origin is unknown, not none (:class:`Evidence`)."""
    from forensics.replaying import race_of
    from forensics.store.unjudged import unjudged_of

    catalogue = catalogue or load_catalogue()
    race = result.race if getattr(result, "race", None) is not None else race_of(result)
    evidence = evidence_of(result, capture)
    evidence.race = race.findings
    evidence.origins_unsearched = origins_unsearched
    verdict = judged_verdict(evidence, result.variants)
    checked = [match_entry(entry, evidence) for entry in catalogue.entries]
    experiments = next_experiments(evidence, race, result) if verdict == UNEXPLAINED else []
    findings = evidence.findings
    failing = bool(len(findings)) and bool(
        findings["kind"].isin(["out_of_bounds", "misattributed"]).any())
    found = failing or bool(len(race.findings))
    padded = len(padded_inputs_of(capture or result.capture))
    summaries = len(padded_summaries_of(capture or result.capture))
    failing = found or bool(padded or summaries) or any(e.get("kind") in GUARD_EVENT_KINDS
                                           for e in claimed(evidence.events))
    race_text = (race.summary() if len(race.findings) or race.partial or verdict == UNEXPLAINED
                 else "")
    return KnownAnswer(verdict, checked, experiments, race_text, failing,
                       failing and not found and not (padded or summaries),
                       what_was_seen(evidence, result), empty=not len(result.records),
                       no_records=evidence.no_records,
                       engine_replayed=bool(ENGINE_CODE & set(result.variants)),
                       unjudged=unjudged_records(result),
                       unjudged_facts=unjudged_of(capture or result.capture),
                       unseen=unseen(findings, engine_variants(evidence))
                       if verdict == NOT_JUDGED else 0,
                       unseen_summaries=unseen_summaries(result, engine_variants(evidence))
                       if verdict == NOT_JUDGED else 0,
                       clamped=verdict == UNEXPLAINED and out_of_range(
                           before_crash(findings, evidence.events), engine_variants(evidence),
                           clamped_too=True),
                       after_crash=after_crash(evidence) if verdict == UNEXPLAINED else "",
                       padded=padded, padded_summaries=summaries,
                       unwritten=bool(len(race.findings)), died=died_only(evidence.events))


def after_crash(evidence: Evidence) -> str:
    """Where the values out of range that the engine's code finds come, all after the last
    crash event (``"(step 3): the first at step 13"``), or ``""``."""
    bound, findings, engine = (crash_bound(evidence.events), evidence.findings,
                               engine_variants(evidence))
    if bound is None or not out_of_range(findings, engine, clamped_too=True) or out_of_range(
            before_crash(findings, evidence.events), engine, clamped_too=True):
        return ""
    late = findings[(findings["kind"] == "out_of_bounds") & (findings["step"] > bound)
                    & findings["variant"].isin(sorted(engine))]
    return f"(step {bound}): the first at step {int(late['step'].min())}"


def unjudged_records(result: ReplayResult) -> int:
    """How many records of ``result`` ended in an ``error`` outcome under every replayed
    variant of the engine's code (:data:`ENGINE_CODE`): no variant of it judged them."""
    outcomes = getattr(result, "outcomes", None)
    engine = ENGINE_CODE & set(result.variants)
    if outcomes is None or not engine or not len(outcomes):
        return 0
    mine = outcomes[outcomes["variant"].isin(sorted(engine))]
    errored = (mine["status"] == "error").groupby(mine["record"]).all()
    return int(errored.sum())


def what_was_seen(evidence: Evidence, result: ReplayResult) -> str:
    """The crash events of the capture (or that it holds none) and where the baseline's
    replay raises first (or that it raises nothing): what the crash verdict rests on."""
    events = in_step_order(crash_events(evidence.events))
    gone = unstopped(evidence.events)
    if events:
        first = events[0]
        text = (f"{len(events)} crash event(s) in the capture, the first {first.get('kind')}"
                f"{at_step(first)}")
    else:
        text = "no crash event in the capture"
    if gone:
        text += (f"; {len(gone)} process(es) died without the probe's stop "
                 f"({', '.join(map(spanless, gone[:3]))}{', ...' if len(gone) > 3 else ''})")
    outcomes = result.outcomes
    raised = outcomes[(outcomes["variant"] == evidence.baseline) & (outcomes["status"] != "ok")]
    if not len(getattr(result, "records", (None,))):  # records not known: say what ran
        return f"{text}; no record to replay"
    ran = outcomes[outcomes["variant"] == evidence.baseline]
    if hasattr(result, "records") and not len(ran):  # records known, and it ran none
        return f"{text}; {ran_none(evidence.baseline, result)}"
    if not len(raised):
        return f"{text}; the {evidence.baseline} replay raises nothing"
    first_row = raised.sort_values(["step", "rank"], kind="mergesort").iloc[0]
    message = str(first_row["message"])
    exception = message.split(":", 1)[0] or str(first_row["status"])
    step = f"step {int(first_row['step'])} ({first_row['site']}, rank {int(first_row['rank'])})"
    if not EXCEPTION_NAME.fullmatch(exception):  # a child timed out, a deadline passed: no raise
        return (f"{text}; the {evidence.baseline} replay of {step} ended unjudged: "
                f"{spanless(capped(message, 200))}")
    return f"{text}; the {evidence.baseline} replay raises {spanless(exception)} at {step}"


#: an exception's name as an ``error`` outcome's message begins with it (``IndexError``,
#: ``torch.AcceleratorError``); a message of another head (``timed out after 1 s``, ``not
#: judged: the overall deadline of N s passed``) tells of a record no run judged, not a raise
EXCEPTION_NAME = re.compile(r"[A-Za-z_][\w.]*")


def unseen_summaries(result: ReplayResult, variants: frozenset[str]) -> int:
    """How many of the out-of-range findings of ``variants`` that they cannot see
    (:func:`~forensics.known.evidence.unseen`) are of summary records (by the result's index)."""
    findings, index = result.findings, getattr(result, "index", None)
    if not len(findings) or index is None or "summary" not in index \
            or "record" not in findings or "judged" not in findings:
        return 0
    blind = [judged is False for judged in findings["judged"].tolist()]  # numpy's as Python's
    rows = findings[(findings["kind"] == "out_of_bounds").to_numpy(dtype=bool)
                    & findings["variant"].isin(sorted(variants)).to_numpy(dtype=bool)
                    & blind]
    flags = index["summary"].to_numpy(dtype=bool)
    return sum(bool(flags[int(r)]) for r in rows["record"] if 0 <= int(r) < len(flags))


def ran_none(baseline: str, result: ReplayResult) -> str:
    """That the ``baseline``'s replay ran none of ``result``'s records (summary records alone:
    a log's probe lines, a dump's ``summary`` records; each a least and a greatest value,
    judged by its bounds): "raises nothing" would be said of no run."""
    records = result.records
    index = getattr(result, "index", None)
    summaries = (int(index["summary"].sum()) if index is not None and "summary" in index
                 else sum(bool(getattr(r, "summary", False)) for r in records))
    why = (" (summary records: each a least and a greatest value, judged by its bounds "
           "alone)" if summaries == len(records) else "")
    return f"the {spanless(baseline)} replay runs none of its {len(records)} record(s){why}"


def _guard_step(evidence: Evidence) -> str:
    """The experiment for a bad index at a recorded site: guard mode, or, where the probe's
    guard already raised in this run (a ``guard_violation`` event outside its own bound), that
    event to read; where the manifest says the run was in guard mode already, no rerun in it."""
    raised = any(e.get("kind") == "guard_violation" for e in claimed(evidence.events))
    if not raised and evidence.guard_mode:
        held = "no guard_violation" if not any(
            e.get("kind") == "guard_violation" for e in evidence.events) else \
            "no guard_violation naming a value out of range"
        return ("A bad index used at one of the recorded sites: the capture's manifest says "
                f"the probe already ran in guard mode (probe.mode), and its events hold {held} "
                "(the guard's raise): rerunning in guard mode is what this run did.")
    if not raised:
        return ("A bad index used at one of the recorded sites: rerun with the probe in guard "
                "mode, which raises where an index is about to be used out of range.")
    return ("A bad index used at one of the recorded sites: the capture's guard_violation "
            "event says the probe's guard already raised in guard mode (its claim of a site, "
            "tensor and value, which no replay of the records finds); read that event.")


def next_experiments(evidence: Evidence, race: RaceCheck, result: ReplayResult) -> list[str]:
    """What an unexplained crash points to, each with the experiment that tells."""
    steps = [
        "A stream-ordering race (values in range when staged, stale when read): rerun with "
        "--no-async-scheduling (an A/B on the same load), and once with "
        "CUDA_LAUNCH_BLOCKING=1; a crash that vanishes under either is a race, not an index "
        "value.",
        _guard_step(evidence),
    ]
    crash_steps = {int(e["step"]) for e in crash_events(evidence.events)
                   if isinstance(e.get("step"), int)}
    missing = race.missing_at(crash_steps)
    if missing:
        steps.append(f"The crash step lacks a record ({'; '.join(missing[:4])}): the race "
                     "check could not compare what was written with what the model read.")
    if len(race.findings):
        steps.append("The model received input ids no recorded site wrote (unwritten_input "
                      "findings): evidence of a race on the input buffer.")
    recorded = sorted({str(s) for s in result.verdicts.get(evidence.baseline, {})})
    crash = "what stopped the engine" if died_only(evidence.events) else "the crash"
    steps.append(f"A site that was not recorded (recorded: {', '.join(recorded) or 'none'}): "
                 f"{crash} may come from an index these sites do not see; see which known "
                 "issues this capture matches and record nearer the failing kernel.")
    return steps
