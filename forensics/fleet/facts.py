"""What a triage row says about a capture before any replay: who wrote it and what happened."""

from __future__ import annotations

from collections import Counter
from typing import Any

from forensics.known.evidence import (
    CRASH_EVENT_KINDS,
    at_step,
    crashed,
    in_step_order,
)
from forensics.known.guard_bounds import self_refuted
from forensics.manifest_facts import (
    PID,
    PROCESS_HOST,
    RUNNER,
    VLLM,
    Fact,
    read_fact,
    refusal,
    runner_of,
)

#: event kinds the probe's guard mode writes
GUARD_KINDS = ("guard_violation", "guard_passed_on")
#: event kinds that say the engine crashed (probe events, imported log lines and crash dumps:
#: those of the known-issue evidence, less the guard's)
CRASH_KINDS = tuple(sorted(CRASH_EVENT_KINDS - set(GUARD_KINDS)))


#: the manifest facts of a triage row (the one place their fields and types are declared)
FACTS = (PROCESS_HOST, PID,
         Fact("engine_id", ("engine_id",), str), VLLM, RUNNER,
         Fact("spec_method", ("model", "speculative_config", "method"), str),
         Fact("async_scheduling", ("model", "async_scheduling"), bool),
         Fact("scenario", ("simulation", "scenario"), str), Fact("started", ("created",), str))


def capture_facts(capture: Any) -> dict[str, Any]:
    """Host, pid, ranks, engine id, vLLM version, runner, speculative method, async flag,
    steps, records and events of a loaded capture; a fact the capture lacks, or holds with the
    wrong type or out of range (:data:`FACTS`), is "unknown" (None for numbers and flags), and
    ``refused`` names each one refused; ``not_judged`` names the records of sites this install
    does not know (:func:`not_judged`)."""
    manifest = capture.manifest
    summary = capture.summary()
    facts, refused = manifest_facts(manifest)
    if runner_of(manifest) is None:  # the sites recorded say which ran, as `known` reads it
        from forensics.sites.runners import runner_of_sites

        facts[RUNNER.column] = runner_of_sites(capture.sites) or RUNNER.unknown
    if not isinstance(manifest.get("simulation"), dict) and "simulation" not in refused:
        facts["scenario"] = ""
    return {
        **facts,
        "ranks": ",".join(str(r) for r in capture.ranks),
        "steps": len(capture.steps),
        "records": int(summary["records"]),
        "crash_events": event_text(capture.events, CRASH_KINDS),
        "guard_events": event_text(capture.events, GUARD_KINDS),
        "crashed": crashed(capture.events),
        "history": step_history(summary),
        "refused": "; ".join(refused.values()),
        "not_judged": not_judged(capture),
    }


def not_judged(capture: Any) -> str:
    """``3 record(s) of site 'toy' (not known to this install)``: the records of ``capture``'s
    sites this install does not know (a plugin not installed here), which no variant judges,
    the ends of its files cut short, not read
    (:func:`~forensics.store.paths.cut_text`), and the records and events its probe
    never wrote (``dropped``, ``events_dropped``); ``""`` when there are none."""
    from forensics.store.unjudged import unjudged_of, unjudged_text

    return unjudged_text(unjudged_of(capture))


def manifest_facts(manifest: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Every fact of :data:`FACTS` read from ``manifest`` (a missing or empty one unknown),
    and ``{field: phrase}`` for each one refused for its type, range or form (read as
    unknown)."""
    facts: dict[str, Any] = {}
    refused: dict[str, str] = {}
    for fact in FACTS:
        value, field, problem = read_fact(manifest, fact)
        if problem:
            refused.setdefault(field, refusal(field, problem))
        facts[fact.column] = value if value is not None else fact.unknown
    runner = runner_of(manifest)
    if runner is not None:  # as every reader deciding by the runner reads it
        facts[RUNNER.column] = runner
    return facts, refused


def step_history(summary: dict[str, Any]) -> str:
    """What every rank of one engine shares, as text: per site, its first and last step and
    its records per rank, exactly (ranks of one engine see the same steps; a float's ``:g``
    made 1,000,000 and 1,000,001 records alike); "" for no records."""
    from fractions import Fraction

    ranks = max(1, len(summary.get("ranks") or []))
    spans = summary.get("site_steps") or {}
    sites = summary.get("sites") or {}
    return ";".join(f"{site}:{first}-{last}x{Fraction(int(sites.get(site, 0)), ranks)}"
                    for site, (first, last) in spans.items())


def event_text(events: list[dict[str, Any]], kinds: tuple[str, ...]) -> str:
    """``"cuda_assert x2 (first at step 14), engine_dead x1"`` for the events of ``kinds``, each
    kind's first the earliest by step, whichever process's events file holds it (as the
    conclusion's and ``known``'s first crash event)."""
    chosen = in_step_order([e for e in events if e.get("kind") in kinds and not self_refuted(e)])
    counts = Counter(str(e["kind"]) for e in chosen)
    parts = []
    for kind, count in counts.items():
        first = next(e for e in chosen if e["kind"] == kind)
        at = at_step(first)
        parts.append(f"{kind} x{count}{f' (first{at})' if at else ''}")
    return ", ".join(parts)
