"""What a signature is matched against: a capture's findings, facts, events and crash dump.

:func:`evidence_of` gathers them from a :class:`~forensics.replaying.ReplayResult`;
:func:`value_class` names the class of an out-of-range value (the ``value_class`` column when the
findings carry it, else derived from the value and its bound); :func:`crashed` says whether the
timeline holds an engine exception, a guard event or a crash event, or a probe that never
stopped (:func:`unstopped`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from forensics.digits import plain_int
from forensics.known.guard_bounds import self_refuted
from forensics.manifest_facts import PROBE_NO_RECORDS

if TYPE_CHECKING:
    import pandas as pd

    from forensics.replaying import ReplayResult

OUT_OF_BOUNDS = "out_of_bounds"
#: event kinds that mean the engine failed (or a guard stopped it): a crash to explain; a
#: guard's ``guard_passed_on`` is none (it warns of a value only written, and the engine goes on)
CRASH_EVENT_KINDS = frozenset({"engine_exception", "guard_violation",
                               "cuda_assert", "cuda_error", "illegal_memory_access",
                               "engine_dead", "crash_dump", "process_died"})
#: ``indexed`` values (a newer findings column) naming an id's range rather than a row range
ID_RANGES = frozenset({"vocabulary", "embedding rows"})
#: manifest model keys read as facts (:data:`forensics.manifest_facts.MODEL`), the names
#: signatures use
MODEL_FACT_KEYS = frozenset({"async_scheduling", "speculative", "num_speculative_tokens",
                             "vocab_size", "num_embeddings", "tensor_parallel_size"})


@dataclass
class Evidence:
    """Everything a signature may look at (see the module docstring)."""

    findings: pd.DataFrame
    baseline: str
    facts: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    #: each crash dump's line (None: unknown) and request id -> scheduled spec-decode tokens,
    #: in the timeline's order (None: no dump)
    spec_tokens: list[tuple[int | None, dict[str, list[int]]]] | None = None
    #: ``unwritten_input`` findings (:mod:`forensics.judge.race`), kept apart from the judge's
    race: pd.DataFrame | None = None
    #: the facts taken from a crash dump's config line (an event's text, not the manifest)
    dumped: frozenset[str] = frozenset()
    #: the facts crash dumps' config lines state differently, and the manifest does not
    disputed: frozenset[str] = frozenset()
    #: the facts a crash dump's config line leaves unknown (it spells the field more than
    #: once: a model's path or name holds its text), and the manifest does not state
    unspelled: frozenset[str] = frozenset()
    #: the variants the replay ran (None: not known, as in evidence built by hand)
    replayed: frozenset[str] | None = None
    #: whether the capture held records of a site this install knows (None: not known, as in
    #: evidence built by hand); without one no value was judged
    held_records: bool | None = None
    #: whether a null origin of a sink finding is unknown, not none: a piece of a split
    #: triage whose origins were not all searched (:mod:`forensics.fleet.carry`)
    origins_unsearched: bool = False
    #: why the capture holds no record, as its manifest tells (:func:`~forensics.
    #: manifest_facts.no_records_why`)
    no_records: str = PROBE_NO_RECORDS
    #: whether the manifest says the probe ran in guard mode (its ``probe.mode``)
    guard_mode: bool = False

    def engine_replayed(self) -> bool:
        """Whether a variant of the engine's code (:data:`ENGINE_CODE`) was replayed (True
        where the variants replayed are not known)."""
        return self.replayed is None or bool(self.replayed & ENGINE_CODE)

    def id_bounds(self) -> set[int]:
        """Bounds that are a vocabulary or an embedding's row count (ids, not rows)."""
        bounds = {int(self.facts[k]) for k in ("vocab_size", "num_embeddings")
                  if isinstance(self.facts.get(k), int)}
        from forensics.sites import SINK

        sink = self.findings[self.findings["site"] == SINK]["upper"].dropna()
        return bounds | {int(u) for u in sink}


def evidence_of(result: ReplayResult, capture: Any = None) -> Evidence:
    """The :class:`Evidence` of a replay (facts and events from ``capture``, default its own
    when it has one; ``race`` is left for :func:`forensics.known.answer` to fill)."""
    from forensics.judge.findings import baseline_of
    from forensics.manifest_facts import no_records_why, ran_in_guard_mode
    from forensics.sites.runners import runner_of_sites

    baseline = str(baseline_of(result.variants))
    summary = _summary(capture if capture is not None else result.capture)
    events = list(summary.get("events") or [])
    dumped, stated = dump_facts(events), facts_of(summary.get("manifest") or {})
    facts = {**dumped, **stated}
    continuity = getattr(result, "continuity", None)
    if "runner" not in facts and continuity is not None and not continuity.needs:
        # the token streams were rebuilt from that runner's own sites: its records say which
        facts["runner"] = continuity.runner
    sites = _sites(capture if capture is not None else result.capture, result)
    if "runner" not in facts:  # records of one runner's own sites say which ran
        runner = runner_of_sites(sites)
        if runner is not None:
            facts["runner"] = runner
    return Evidence(findings=result.findings, baseline=baseline, facts=facts, events=events,
                    spec_tokens=spec_tokens_of(events), dumped=frozenset(set(dumped) - set(stated)),
                    disputed=disputed_facts(events) - set(stated),
                    unspelled=unspelled_facts(events) - set(stated),
                    replayed=frozenset(result.variants), held_records=bool(sites),
                    no_records=no_records_why(summary.get("manifest")),
                    guard_mode=ran_in_guard_mode(summary.get("manifest")))


def _sites(capture: Any, result: ReplayResult) -> list[str]:
    """The sites that hold records: the capture's (from its index), else the replayed
    records'."""
    if capture is not None and hasattr(capture, "sites"):
        return list(capture.sites)
    return sorted({record.site for record in getattr(result, "records", ())})


def _summary(capture: Any) -> dict[str, Any]:
    if capture is None or not hasattr(capture, "summary"):
        return {}
    return capture.summary()  # type: ignore[no-any-return]


def facts_of(manifest: dict[str, Any]) -> dict[str, Any]:
    """The facts signatures use, from a manifest: model facts, ``runner`` and ``vllm``, each
    read by :func:`~forensics.manifest_facts.read_fact` (one the manifest names unknown, or
    holds with the wrong type, out of range or out of form, is not recorded)."""
    from forensics.manifest_facts import MODEL, UNKNOWN, read_stated, runner_of, vllm_version

    facts: dict[str, Any] = {}
    for fact in MODEL:
        value, _, _ = read_stated(manifest, fact)
        if fact.keys[-1] in MODEL_FACT_KEYS and value is not None:
            facts[fact.keys[-1]] = value
    runner = runner_of(manifest)
    if runner is not None:
        facts["runner"] = runner
    vllm, _ = vllm_version(manifest)
    if vllm not in (None, UNKNOWN):
        facts["vllm"] = vllm
    return facts


def dump_facts(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Facts from the config line of vLLM's crash dumps, only those such a line states
    (:func:`dumped_facts`; a manifest's facts take precedence): an event naming ``runner``
    or ``async_scheduling`` in its config states nothing of them, and a value that does not
    fit its fact as a manifest's is read (:mod:`forensics.manifest_facts`) states none; a fact
    two dumps state differently (two engines' in one log) is stated by none: the last one
    read was said of them all ("speculative is ngram, not mtp" of an mtp engine's dump)."""
    stated, unspelled = _stated_by_dumps(events), unspelled_facts(events)
    return {k: next(iter(values)) for k, values in stated.items()
            if len(values) == 1 and k not in unspelled}


def unspelled_facts(events: list[dict[str, Any]]) -> frozenset[str]:
    """The facts a crash dump's config line holds as unknown (spelled more than once: which
    is the config's own is not known), which no other dump then states for it."""
    from forensics.manifest_facts import UNKNOWN

    declared = dumped_facts()
    return frozenset(k for event in events if event.get("kind") == "crash_dump"
                     and isinstance(event.get("config"), dict)
                     for k, v in event["config"].items() if k in declared and v == UNKNOWN)


def disputed_facts(events: list[dict[str, Any]]) -> frozenset[str]:
    """The facts the crash dumps' config lines state differently (:func:`dump_facts` leaves
    them out)."""
    return frozenset(k for k, values in _stated_by_dumps(events).items()
                     if len(values) > 1) - unspelled_facts(events)


def _stated_by_dumps(events: list[dict[str, Any]]) -> dict[str, set[Any]]:
    """Each fact the crash dumps' config lines state (:func:`dumped_facts`, fitting its
    declared type), with the values they state."""
    from forensics.manifest_facts import UNKNOWN

    declared = dumped_facts()
    stated: dict[str, set[Any]] = {}
    for event in events:
        config = event.get("config")
        if event.get("kind") == "crash_dump" and isinstance(config, dict):
            for k, v in config.items():
                if k in declared and declared[k].fits(v) and v != UNKNOWN:
                    stated.setdefault(k, set()).add(v)
    return stated


def dumped_facts() -> dict[str, Any]:
    """The facts a crash dump's config line states (``forensics.importers.crash_dump``'s),
    by the name signatures use, each with its declared :class:`~forensics.manifest_facts.Fact`:
    the vLLM version, the model's name, the speculative method and draft tokens, and the
    tensor-parallel size."""
    from forensics.manifest_facts import MODEL, VLLM

    by_key = {fact.keys[-1]: fact for fact in MODEL}
    return {"vllm": VLLM, "model": by_key["name"], "speculative": by_key["speculative"],
            "num_speculative_tokens": by_key["num_speculative_tokens"],
            "tensor_parallel_size": by_key["tensor_parallel_size"]}


def spec_tokens_of(events: list[dict[str, Any]]
                   ) -> list[tuple[int | None, dict[str, list[int]]]] | None:
    """Each crash-dump event's line (None: not an int) and scheduled spec-decode tokens per
    request, one entry per dump (two dumps, of two engines or two crashes, were merged into
    one: "the crash dump schedules 8 of 16" of a dump of 8 of 8 and one of 0 of 8), or None
    when the timeline has no dump."""
    found: list[tuple[int | None, dict[str, list[int]]]] = []
    for event in events:
        tokens = event.get("scheduled_spec_decode_tokens")
        if event.get("kind") == "crash_dump" and isinstance(tokens, dict):
            line = event.get("line")
            found.append((line if plain_int(line) else None,
                          {str(k): [int(t) for t in v] for k, v in tokens.items()
                           if isinstance(v, list) and all(isinstance(t, int) for t in v)}))
    return found or None


def is_crash_event(event: dict[str, Any]) -> bool:
    """Whether ``event`` means the engine failed: one of :data:`CRASH_EVENT_KINDS`, less a guard
    event that contradicts itself (:func:`self_refuted`)."""
    return event.get("kind") in CRASH_EVENT_KINDS and not self_refuted(event)


def crash_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events of ``events`` that mean the engine failed (:func:`is_crash_event`)."""
    return [event for event in events if is_crash_event(event)]


def crashed(events: list[dict[str, Any]]) -> bool:
    """Whether the timeline holds an engine exception, a guard event or a crash event, or a
    probe that started and never stopped (its process was killed or crashed)."""
    return bool(crash_events(events)) or bool(unstopped(events))


def died_only(events: list[dict[str, Any]]) -> bool:
    """Whether the one sign of a failure the timeline holds is a probe that started and never
    stopped (killed or crashed: it does not say which), no crash event."""
    return not crash_events(events) and bool(unstopped(events))


def in_step_order(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``events`` by step (those without an integer step last), else as read: the first is
    the earliest, whichever process's events file holds it."""
    def step_of(event: dict[str, Any]) -> tuple[int, int]:
        step = event.get("step")
        return (0, step) if plain_int(step) else (1, 0)
    return sorted(events, key=step_of)


def step_words(event: dict[str, Any]) -> str | None:
    """``step N`` for an event of an integer step; ``an unknown step (line N of the log)`` for
    an imported log's line after a probe line naming no step (``"step_known": false``: its
    step only the lines' order) or of no step; None when neither is known."""
    step, line = event.get("step"), event.get("line")
    known = plain_int(step) and event.get("step_known") is not False
    if known:
        return f"step {step}"
    return f"an unknown step (line {line} of the log)" if plain_int(line) else None


def at_step(event: dict[str, Any]) -> str:
    """`` at `` and :func:`step_words` of ``event``, or ``""``."""
    words = step_words(event)
    return f" at {words}" if words else ""


#: the probe's own bookkeeping events: never crash events
PROBE_START, PROBE_STOP = "probe_start", "probe_stop"


def unstopped(events: list[dict[str, Any]]) -> list[str]:
    """The processes whose last ``probe_start`` event has no ``probe_stop`` after it (events
    in their process's order): they ended without the probe's stop (SIGKILL, SIGSEGV,
    SIGABRT, the OOM killer), even where an earlier session of theirs stopped."""
    last: dict[str, str] = {}
    for event in events:
        if event.get("kind") in (PROBE_START, PROBE_STOP):
            last[str(event.get("process"))] = event["kind"]
    return sorted(process for process, kind in last.items() if kind == PROBE_START)


def crash_bound(events: list[dict[str, Any]]) -> int | None:
    """The step of the timeline's last crash event, where every crash event is the probe's
    own, stating its step (an imported log's line takes the step of the probe line before it,
    an order buffered output may change) and no process died without the probe's stop; None
    otherwise: then any value out of range may explain it."""
    crashes = crash_events(events)
    if not crashes or unstopped(events) or any(
            not plain_int(e.get("step")) or "line" in e for e in crashes):
        return None
    return max(int(e["step"]) for e in crashes)


def before_crash(findings: pd.DataFrame, events: list[dict[str, Any]]) -> pd.DataFrame:
    """The findings at a step up to :func:`crash_bound` (all where it is None): a value the
    engine read after it crashed explains nothing of the crash."""
    bound = crash_bound(events)
    if bound is None or not len(findings):
        return findings
    return findings[~(findings["step"] > bound)]  # a finding of no step stays


#: the columns that name one element a variant judged
ELEMENT = ("variant", "site", "step", "rank", "tensor", "element")


def out_of_range(findings: pd.DataFrame, variants: frozenset[str] | None = None,
                 clamped_too: bool = False) -> bool:
    """Whether any variant (of ``variants`` when given) found a value out of range that the
    engine read as it was: a ``-1`` that vLLM clamped to token 0 (a ``clamped_placeholder``
    finding of the same element) was read as token 0, a wrong token that crashes nothing
    (counted only with ``clamped_too``). A finding the variant cannot see (``judged`` false: a
    model's, where Triton's interpreter flags nothing) is none it found (:func:`unseen`)."""
    import pandas as pd

    from forensics.judge.continuity import CLAMPED

    if not len(findings):
        return False
    found = (findings["kind"] == OUT_OF_BOUNDS) & ~_unseen_rows(findings)
    if variants is not None:
        found &= findings["variant"].isin(list(variants))
    clamped = findings.loc[findings["kind"] == CLAMPED, list(ELEMENT)]
    if found.any() and len(clamped) and not clamped_too:
        keys = set(clamped.itertuples(index=False, name=None))
        found &= pd.Series([key not in keys for key in findings[list(ELEMENT)].itertuples(
            index=False, name=None)], index=findings.index, dtype=bool)
    return bool(found.any())


def unseen(findings: pd.DataFrame, variants: frozenset[str]) -> int:
    """How many out-of-range findings of ``variants`` lie where the variant cannot see them
    (``judged`` false: the models find them, the ``vllm`` variants' kernels raise nothing)."""
    if not len(findings):
        return 0
    rows = _unseen_rows(findings) & (findings["kind"] == OUT_OF_BOUNDS)
    return int((rows & findings["variant"].isin(sorted(variants))).sum())


def _unseen_rows(findings: pd.DataFrame) -> pd.Series:
    """Per finding, whether its variant could not see it (its ``judged`` is false; a frame
    without the column, built by hand, has none)."""
    import pandas as pd

    if "judged" not in findings:
        return pd.Series(False, index=findings.index, dtype=bool)
    return pd.Series([value is False for value in findings["judged"].tolist()],
                     index=findings.index, dtype=bool)  # tolist(): numpy's bools as Python's


#: the variant that replays vLLM's own installed code, unpatched
UNPATCHED_VLLM = "vllm"
#: the variants that replay the engine's own code (its model, its real code): a crash is
#: explained or not, and a signature matched, only by their findings
ENGINE_CODE = frozenset({"upstream", UNPATCHED_VLLM})


def engine_variants(evidence: Evidence) -> frozenset[str]:
    """The variants whose findings tell what the engine's own code did: the baseline and the
    unpatched real code, those of :data:`ENGINE_CODE` (a patch's findings, its own reads,
    explain no crash the engine had: a fix replayed first, ``--variant patched --variant
    vllm``, is the baseline and is still no engine code)."""
    return frozenset({evidence.baseline, UNPATCHED_VLLM}) & ENGINE_CODE


def engine_baseline(evidence: Evidence) -> str:
    """The variant a signature's finding is looked for in: the baseline when it replays the
    engine's code, else unpatched vLLM (with the fix alone, which finds nothing: the
    signatures are not judged, never matched on a finding the fix resolved)."""
    return evidence.baseline if evidence.baseline in ENGINE_CODE else UNPATCHED_VLLM


def value_class(row: Any, id_bounds: set[int]) -> str | None:
    """The class of a finding's value: the ``value_class`` column when present, else
    ``placeholder`` (-1), ``negative``, ``vocab_size`` (an id equal to its vocabulary bound),
    ``past_end`` (another id at or past it) or ``stale_row`` (a row index at or past the
    tensor it reads); None for a finding that is not out of bounds."""
    given = row.get("value_class") if hasattr(row, "get") else None
    if isinstance(given, str) and given:
        return given
    if row.get("kind") != OUT_OF_BOUNDS or is_missing(row.get("value")):
        return None
    value, upper = int(row["value"]), row.get("upper")
    lower = 0 if is_missing(row.get("lower")) else int(row["lower"])
    if value == -1:
        return "placeholder"
    if value < lower:
        return "negative"
    if is_missing(upper):
        return "past_end"
    is_id = row.get("indexed") in ID_RANGES or int(upper) in id_bounds
    if is_id:
        return "vocab_size" if value == int(upper) else "past_end"
    return "stale_row"


def is_missing(value: Any) -> bool:
    """Whether a findings cell is empty (None, NaN or pandas' NA)."""
    import pandas as pd

    return value is None or bool(pd.isna(value))
