"""A capture's facts as the conclusion, ``inspect``, the report and the write-up show them:
the manifest's declared facts (:data:`SHOWN_FACTS`, read with their checks: a refused one is
"unknown" and named), its ranks, steps and crash events, whether its engine stopped without the
probe's stop, and the vLLM version its verdicts were reached on."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from forensics.digits import plain_int
from forensics.escaping import quoted, spanless
from forensics.manifest_facts import (
    CREATED,
    HOST,
    MODEL,
    ORDINAL,
    PROCESS_HOST,
    RUNNER,
    SHRUNK_FROM,
    TORCH,
    UNKNOWN,
    VLLM,
    read_fact,
    read_stated,
    refusal,
)
from forensics.store.unjudged import COUNT_FACTS, stated_counts

#: the manifest facts shown as a capture's facts, in order, under their labels
#: (the host: the probe's ``process.host``, else the one ``import --set`` states)
SHOWN_FACTS = (*MODEL, VLLM, TORCH, RUNNER, PROCESS_HOST, HOST, CREATED)


def capture_facts(capture: Any) -> dict[str, Any]:
    """The capture's facts from its manifest, summary and events (empty without a capture)."""
    if capture is None or not hasattr(capture, "summary"):
        return {}
    return summary_facts(capture.summary())


def summary_facts(summary: dict[str, Any]) -> dict[str, Any]:
    """The capture's facts from its ``summary()`` (the ``inspect --json`` object)."""
    manifest = summary.get("manifest") or {}
    facts, refused = stated_facts(manifest)
    facts["ranks"] = summary["ranks"]
    facts["steps"] = summary["steps"]
    from forensics.known.evidence import crash_events, in_step_order

    # crash events only: the probe's start and stop (and other bookkeeping) are no crash;
    # by step, so "the first" is the earliest whichever process's file holds it
    facts["events"] = [_event_text(e) for e in in_step_order(crash_events(summary["events"]))]
    refuted = refuted_events(summary["events"])
    if refuted:
        facts[REFUTED_KEY] = refuted
    stopped = stopped_after(summary)
    if stopped is not None:
        facts["stopped_after"] = stopped
    facts.update(stated_counts(summary["events"], manifest))
    ordinal, _, _ = read_fact(manifest, ORDINAL)
    if ordinal:
        facts["ordinal_records"] = ordinal
    shrunk_from, field, _ = read_fact(manifest, SHRUNK_FROM)
    if shrunk_from and shrunk_from < summary["records"]:  # a part never outnumbers its whole
        refused.append(refusal(field, f"is {shrunk_from}, fewer than the {summary['records']} "
                                      "record(s) the capture holds"))
    elif shrunk_from:
        facts[SHRUNK_KEY] = shrunk_from
    if manifest.get("notes"):
        facts["notes"] = manifest["notes"]
    if refused:
        facts["refused"] = refused
    return facts


def stated_facts(manifest: Any) -> tuple[dict[str, Any], list[str]]:
    """The facts the manifest states (:data:`SHOWN_FACTS`, by label), each checked by its
    declared type and range: one it holds wrong is "unknown", and named in the second item
    (``manifest field model.vocab_size is not ...: read as unknown``)."""
    facts: dict[str, Any] = {}
    refused: list[str] = []
    for fact in SHOWN_FACTS:
        if fact.column in facts:
            continue
        value, field, problem = read_stated(manifest, fact)
        if problem:
            refused.append(refusal(field, problem))
            value = UNKNOWN
        if fact is VLLM and value in (None, ""):
            value = UNKNOWN  # the one fact every verdict rests on: never left out unsaid
        if value is not None and value != "":
            facts[fact.column] = value
    return facts, refused


#: the facts' key of the guard events that contradict their own bounds (:func:`refuted_events`)
REFUTED_KEY = "self_refuted_events"


def refuted_events(events: list[dict[str, Any]]) -> list[str]:
    """The guard events of ``events`` whose values lie inside their own bounds, by step, each
    said as contradicting itself in place of its message (which claims a value out of range)."""
    from forensics.known.evidence import in_step_order
    from forensics.known.guard_bounds import refuted_note, self_refuted

    return [_event_text({**event, "message": refuted_note(event)})
            for event in in_step_order([e for e in events if self_refuted(e)])]


def _event_text(event: dict[str, Any]) -> str:
    """``"cuda_assert at step 14 rank 0: MESSAGE"``; an unknown rank left out, an unknown step
    said so with its log's line where it has one (:func:`~forensics.known.evidence.
    step_words`)."""
    from forensics.known.evidence import step_words

    step = step_words(event)
    where = " ".join([*([spanless(step)] if step else []),
                      *([f"rank {spanless(event['rank'])}"] if event.get("rank") is not None
                        else [])])
    message = spanless(event.get("message") or event.get("detail") or "").strip().rstrip(".")
    head = f"{spanless(event.get('kind', 'event'))}{f' at {where}' if where else ''}"
    return f"{head}: {message}" if message else head


#: the most guard claims a draft's title names of a capture holding several (the rest counted)
NAMED_GUARD_EVENTS = 2


def guard_claim(capture: Any) -> str:
    """What the capture's guard events claim (by step; a ``guard_violation``, the guard that
    raised, before a ``guard_passed_on``), as their own words: ``"its guard_violation event
    names prev_positions = 9 out of range at batch_change"`` of one; of several, the distinct
    claims (tensor, row, value, site: one line in two processes' events is one), their
    count and the first :data:`NAMED_GUARD_EVENTS` (``"its 3 guard events name values out of
    range: prev_positions = 9 at batch_change (guard_violation), ... and 1 more"``), the
    events' count said apart where it differs; an event whose value is inside its own bound
    (:mod:`~forensics.known.guard_bounds`) said apart as naming none; ``""`` when it holds
    none. A capture is data: an event is the probe's claim, not a finding."""
    from forensics.known.evidence import in_step_order
    from forensics.known.guard_bounds import GUARD_EVENT_KINDS, claimed, self_contradicting

    found = [e for e in getattr(capture, "events", None) or []
             if isinstance(e, dict) and e.get("kind") in GUARD_EVENT_KINDS]
    events = claimed(found)
    said = [_claims_said(in_step_order(events))] if events else []
    inside = self_contradicting(found)
    return "; ".join(said + ([_inside_said(in_step_order(inside))] if inside else []))


def _claims_said(events: list[dict[str, Any]]) -> str:
    """:func:`guard_claim` of ``events`` (in step order), each naming a value outside its bound."""
    claims: dict[tuple[str, ...], list[str]] = {}
    for event in sorted(events, key=lambda e: e["kind"] != "guard_violation"):
        kinds = claims.setdefault(_said(event), [])
        kinds += [] if event["kind"] in kinds else [event["kind"]]
    if len(claims) == 1:
        [((tensor, _, value, site), kinds)] = claims.items()
        said = f"{' and '.join(kinds)} event"
        said = f"{len(events)} {said}s name" if len(events) > 1 else f"{said} names"
        return f"its {said} {tensor} = {value} out of range at {site}"
    named = ", ".join(f"{_named(claim, claims)} ({', '.join(kinds)})" for claim, kinds in
                      list(claims.items())[:NAMED_GUARD_EVENTS])
    more = len(claims) - NAMED_GUARD_EVENTS
    values = "values" if len(claims) == len(events) else f"{len(claims)} values"
    return (f"its {len(events)} guard events name {values} out of range: {named}"
            f"{f' and {more} more' if more > 0 else ''}")


def _inside_said(events: list[dict[str, Any]]) -> str:
    """What guard events whose values lie inside their own bounds claim: no value out of range
    (``"its guard_violation event's prev_positions = 2 at batch_change is inside its own bound
    4: it names no value out of range (not judged)"``; of several, counted, the first named)."""
    tensor, _, value, site = _said(events[0])
    first = f"{tensor} = {value} at {site}"
    bound = _claimed(events[0].get("bound"))
    if len(events) == 1:
        return (f"its {_claimed(events[0]['kind'])} event's {first} is inside its own bound "
                f"{bound}: it names no value out of range (not judged)")
    return (f"its {len(events)} guard events whose values are inside their own bounds name no "
            f"value out of range (not judged), the first {first} (bound {bound})")


def _said(event: dict[str, Any]) -> tuple[str, ...]:
    """A guard event's tensor, row (of the batch), value and site as it claims them
    (:func:`_claimed`)."""
    return tuple(_claimed(event.get(key)) for key in ("tensor", "row", "value", "site"))


def _named(claim: tuple[str, ...], claims: dict[tuple[str, ...], list[str]]) -> str:
    """``"prev_positions = 9 at batch_change"``: ``claim`` as a title names it, its row named
    as the guard's message names it (``at batch_change row 3``: the batch's row, no element of
    the tensor) where another of ``claims`` differs from it in that alone."""
    tensor, row, value, site = claim
    twin = sum((other[0], *other[2:]) == (tensor, value, site) for other in claims) > 1
    return f"{tensor} = {value} at {site}{f' row {row}' if twin else ''}"


def _claimed(value: Any) -> str:
    """An event's field as it claims it, at most 80 characters (``unknown`` when absent)."""
    text = "unknown" if value is None else str(value)
    return text if len(text) <= 80 else f"{text[:79]}…"


def stopped_after(summary: dict[str, Any]) -> int | str | None:
    """The last step a process reached that stopped without the probe's stop (a process
    with a ``probe_start`` event and no ``probe_stop``: killed or crashed): the latest step of
    its events and records (a capture written again, whose records name no process of the
    engine's: the capture's last step; a shrunk one's, the step its ``shrink`` entry kept
    from the capture it was shrunk from, never the last step it kept), "unknown" when neither
    holds a step; None when every process stopped."""
    from forensics.known.evidence import unstopped
    from forensics.store.paths import WRITTEN_AGAIN

    events = summary.get("events") or []
    gone = set(unstopped(events))
    if not gone:
        return None
    steps = [e["step"] for e in events if str(e.get("process")) in gone
             and isinstance(e.get("step"), int)]
    spans = summary.get("process_steps")
    if spans is None:  # a summary of another version: whose records these are is not known
        spans = {WRITTEN_AGAIN: summary["steps"]} if summary.get("steps") else {}
    shrunk = (summary.get("manifest") or {}).get("shrink")
    if isinstance(shrunk, dict):  # its records are a part: the engine ran past the last kept
        spans = {process: span for process, span in spans.items() if process != WRITTEN_AGAIN}
        before = shrunk.get(STOPPED_AFTER)
        if plain_int(before):
            steps.append(before)
    steps += [span[1] for process, span in spans.items()
              if process in gone or process == WRITTEN_AGAIN]
    return max(steps) if steps else UNKNOWN


#: the key of a shrunk capture's ``shrink`` entry holding :func:`stopped_after` of the capture
#: it was shrunk from
STOPPED_AFTER = "stopped_after"


def stopped_sentence(step: int | str) -> str:
    """What a capture cut short by its engine's death says (never "no failure")."""
    if step == UNKNOWN:
        return ("The engine stopped without the probe's stop (killed or crashed) at a step "
                "not known (the process that stopped recorded no step): the capture holds what "
                "was recorded up to then.")
    return (f"The engine stopped without the probe's stop (killed or crashed) after step "
            f"{step}: the capture holds what was recorded up to then.")


#: the vLLM version whose code the model variants (``upstream``, ``patched``) copy
MODELS_VLLM = "0.33.0"


def version_sentence(facts: dict[str, Any], variants: Sequence[str]) -> str:
    """That the capture's vLLM is not the one the models copy, or is not known, and what that
    may change, and that it is not the installed one the ``vllm`` variants run
    (:func:`installed_sentence`); or ``""`` (the same versions, or no such variant replayed)."""
    version = str(facts.get("vllm") or UNKNOWN)
    models = [v for v in variants if not v.startswith("vllm")]
    installed = installed_sentence(version, [v for v in variants if v.startswith("vllm")])
    return " ".join(s for s in (_models_sentence(version, models), installed) if s)


def installed_sentence(version: str, reals: Sequence[str]) -> str:
    """That the capture comes from another vLLM than the installed one whose code the
    ``reals`` (``vllm``, ``vllm+PATH.diff``) replay, or that its version is not known while
    they replay the installed one's, or ``""``: the same code (the same string, or final
    releases of one minor), or no vLLM installed. A capture of vLLM 0.31.0 replayed through
    0.33.0's code said nothing, nor one naming no version."""
    from forensics.judge.clamp import same_code
    from forensics.versions import module_version

    installed = module_version("vllm")
    if not reals or installed is None or (version != UNKNOWN and same_code(version, installed)):
        return ""
    replays = f"{', '.join(map(spanless, reals))} replay{'s' if len(reals) == 1 else ''}"
    if version == UNKNOWN:
        return (f"The vLLM version of the capture is unknown (its manifest's versions.vllm), "
                f"while {replays} the code of the installed vLLM {spanless(installed)}: a "
                f"finding or verdict of {'it' if len(reals) == 1 else 'them'} may not be what "
                f"the engine's version did (replay on a vLLM of the engine's version).")
    return (f"The capture comes from vLLM {spanless(version)}, while {replays} the code of the "
            f"installed vLLM {spanless(installed)}: where the code changed between the two, a "
            f"finding or verdict of {'it' if len(reals) == 1 else 'them'} may not be what "
            f"{spanless(version)} did (replay on a vLLM of the capture's version).")


def _models_sentence(version: str, models: Sequence[str]) -> str:
    """The models' part of :func:`version_sentence`."""
    if version == MODELS_VLLM or not models:
        return ""
    replays = f"{', '.join(models)} replay{'s' if len(models) == 1 else ''}"
    if version == UNKNOWN:
        return (f"The vLLM version of the capture is unknown (its manifest's versions.vllm), "
                f"while {replays} the code of vLLM {MODELS_VLLM}: a bound, a fast path or the "
                f"placeholder rule (whether a -1 is clamped to token 0) may differ in the "
                f"engine's version, so a verdict may not be what the engine did.")
    return (f"The capture comes from vLLM {spanless(version)}, while {replays} the code of "
            f"vLLM {MODELS_VLLM}: where these sites changed between the two, a bound, a fast "
            f"path or the placeholder rule may differ, so a verdict may not be what "
            f"{spanless(version)} did (replay with --variant vllm on that version's code where "
            f"it is supported, 0.32.x or 0.33.x).")


def facts_sentence(facts: dict[str, Any]) -> str:
    """The capture's facts as one sentence (``""`` when there are none); the records and events
    its probe never wrote are said with what no variant judged
    (:func:`~forensics.store.unjudged.unjudged_sentences`)."""
    if not facts:
        return ""
    shown = [f"{key} {fact_text(key, value)}" for key, value in facts.items()
             if key not in ("events", "notes", "stopped_after", "refused", "ordinal_records",
                            SHRUNK_KEY, REFUTED_KEY, *COUNT_FACTS)]
    events = facts.get("events") or []
    shown.append(f"{len(events)} crash event(s)" + (f", the first {events[0]}" if events else ""))
    refuted = facts.get(REFUTED_KEY) or []
    if refuted:
        shown.append(f"{len(refuted)} guard event(s) contradicting their own bounds (no crash "
                     f"event), the first {refuted[0]}")
    text = "Capture: " + "; ".join(shown) + "."
    if facts.get("refused"):
        refused = "; ".join(facts["refused"])
        text += f" {refused[:1].upper()}{refused[1:]}."
    if facts.get("ordinal_records"):
        text += " " + ordinal_sentence(facts["ordinal_records"])
    if facts.get(SHRUNK_KEY):
        text += " " + shrunk_sentence(facts[SHRUNK_KEY])
    if facts.get("stopped_after") is not None:
        text += " " + stopped_sentence(facts["stopped_after"])
    if facts.get("notes"):
        text += f" Notes: {quoted(facts['notes'])}"
    return text


def ordinal_sentence(records: int) -> str:
    """That ``records`` records of an imported capture stand at steps their source never
    named (:data:`~forensics.manifest_facts.ORDINAL`): a step said of them is their line's
    order, not the engine's step."""
    return (f"Its source named no step for {records} record(s): their steps number its probe "
            "lines in order, so a step said of them is not the engine's.")


#: the key of the facts holding :data:`~forensics.manifest_facts.SHRUNK_FROM`
SHRUNK_KEY = "records_before_shrinking"


def shrunk_sentence(records: int) -> str:
    """That the capture was shrunk from one of ``records`` records: its notes (an author's,
    or ``simulate``'s count of faults) may speak of records it does not hold."""
    return (f"It was shrunk from a capture of {records} record(s) (forensics shrink), keeping "
            "those that give the same verdicts: what its notes say may be of records it does "
            "not hold.")


def fact_text(key: str, value: Any) -> str:
    """A capture fact as text: booleans on/off, the step span ``A-B``, lists comma-joined,
    the steps and ranks of a capture of no records ``none``, a fact not stated ``unknown``; a
    value through :func:`~forensics.escaping.spanless` (it stands in a sentence too)."""
    if key in ("steps", "ranks") and not value:
        return "none"
    if key == "redacted_unjudged" and isinstance(value, dict):
        from forensics.store.unjudged import redacted_text

        return redacted_text(value)
    if value is None:
        return UNKNOWN
    if key == "steps" and isinstance(value, list) and len(value) == 2:
        return f"{value[0]}-{value[1]}"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list):
        return ", ".join(map(spanless, value))
    return spanless(value)


def facts_lines(summary: dict[str, Any]) -> list[str]:
    """The manifest's facts as ``  key: value`` lines, for ``inspect``'s text (events and the
    step span are shown there already), then what no variant judged of the records its probe
    never wrote, the events it left out and what a redaction could not keep, worded as every
    output words them (:func:`~forensics.store.unjudged.unjudged_text`; the sites not known
    and the files cut short have lines of their own)."""
    from forensics.store.unjudged import (
        LEFT_OUT,
        NEVER_WRITTEN,
        REDACTED,
        UNWRITTEN,
        unjudged,
        unjudged_text,
    )

    facts = summary_facts(summary)
    unseen = unjudged_text(unjudged(None, None, facts), {NEVER_WRITTEN, LEFT_OUT, UNWRITTEN,
                                                               REDACTED})
    return ["manifest:", *(f"  {fact_label(key)}: {fact_text(key, value)}"
                           for key, value in facts.items()
                           if key not in ("events", "steps", "ranks", "redacted_unjudged")),
            *([f"  not judged: {unseen}"] if unseen else [])]


def fact_label(key: str) -> str:
    """How a fact is named in a list of facts: its label (``stopped_after``, a field of the
    facts' JSON, as "engine stopped after step")."""
    return "engine stopped after step" if key == "stopped_after" else key.replace("_", " ")
