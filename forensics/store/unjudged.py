"""What a capture held that no variant judged, composed once (:func:`unjudged`): the records of
sites this install does not know, the ends of its files cut short (not read), the records its
probe never wrote, the events it left out and, of a redacted capture, what of these its original
held that the redaction could not keep. Each output words that one list: a clause per
fact (:func:`unjudged_text`: triage, ``summary --format text``, ``check``, ``known``,
``findings``; ``repro`` and the write-up's no-reproducer line, of the records only:
:data:`RECORDS`) or a sentence per fact (:func:`unjudged_sentences`: the conclusion's
paragraph, the report)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: the records of sites this install does not know (a plugin not installed here)
NOT_KNOWN = "not_known"
#: the files whose last batch or line was cut short, not read (a capture's ``truncated``)
CUT = "cut"
#: the records the probe recorded and never wrote (its ``probe_stop``'s ``dropped``, and those
#: its ``records`` counts beyond ``written`` and ``dropped``: the fact's detail)
NEVER_WRITTEN = "never_written"
#: the events the probe left out of its full events files (``events_dropped``)
LEFT_OUT = "left_out"
#: the events the probe lost as its writer was stalled (``events_unwritten``: T163a)
UNWRITTEN = "unwritten"
#: what the capture a redacted one was made from held unjudged and the redaction could not keep
#: (records of sites not known, files cut short: its manifest's ``redaction.not_judged``)
REDACTED = "redacted"
#: every kind, in the order said
KINDS = (NOT_KNOWN, CUT, NEVER_WRITTEN, LEFT_OUT, UNWRITTEN, REDACTED)
#: the kinds that are records (what a finding or a reproducer is made of)
RECORDS = (NOT_KNOWN, CUT, NEVER_WRITTEN, REDACTED)
#: what :func:`redacted_text` says of where the facts of :data:`REDACTED` were
FROM_ORIGINAL = "in the capture this one was redacted from (not kept by the redaction)"
#: the most sites a redacted capture's ``redaction.not_judged`` is read naming
MAX_REDACTED_SITES = 64


@dataclass(frozen=True)
class Unjudged:
    """One fact of what no variant judged: its ``kind`` (:data:`KINDS`), ``count`` (records,
    files or events) and ``detail`` (``{site: records}`` of :data:`NOT_KNOWN`, the file names
    of :data:`CUT`, ``(unaccounted, lost to a signal)`` of :data:`NEVER_WRITTEN`, else None)."""

    kind: str
    count: int
    detail: Any = None


#: the counts of a capture's facts :func:`unjudged` words (:func:`stated_counts`)
COUNT_FACTS = ("records_dropped", "events_dropped", "records_unaccounted",
               "records_lost_to_signal", "redacted_unjudged", "events_unwritten")


def stated_counts(events: Sequence[dict[str, Any]], manifest: Any) -> dict[str, Any]:
    """The counts of :data:`COUNT_FACTS` the probe's stop ``events`` and the ``manifest`` state,
    each there only when it holds something: ``records_dropped`` (their ``dropped``),
    ``events_dropped``, ``records_unaccounted`` (counted, neither written nor dropped:
    :func:`~forensics.store.events.unaccounted_by_probe`), ``records_lost_to_signal`` (of
    those, lost to a signal, as the probe says: :func:`~forensics.store.events.lost_by_probe`)
    ``redacted_unjudged`` (:func:`redacted_unjudged`) and ``events_unwritten`` (the events
    its stalled writer could not take)."""
    from forensics.store.events import dropped_by_probe, lost_by_probe, unaccounted_by_probe

    counts = {"records_dropped": dropped_by_probe(events, "dropped"),
              "events_dropped": dropped_by_probe(events),
              "records_unaccounted": unaccounted_by_probe(events),
              "records_lost_to_signal": lost_by_probe(events),
              "redacted_unjudged": redacted_unjudged(manifest),
              "events_unwritten": dropped_by_probe(events, "events_unwritten")}
    return {key: value for key, value in counts.items() if value}


def unjudged(not_known: Mapping[str, int] | None, cut_files: Sequence[str] | None,
             counts: Mapping[str, Any]) -> list[Unjudged]:
    """The facts no variant judged, in the order of :data:`KINDS`, each there only when it
    holds something: the records of sites ``not_known``, the ``cut_files`` and the
    :func:`stated_counts` ``counts`` (records the probe counted and neither wrote nor dropped
    are never written too)."""
    records_dropped, events_dropped, records_unaccounted, lost, redacted, unwritten = (
        counts.get(key) for key in COUNT_FACTS)
    out: list[Unjudged] = []
    if not_known:
        out.append(Unjudged(NOT_KNOWN, sum(not_known.values()), dict(not_known)))
    if cut_files:
        out.append(Unjudged(CUT, len(cut_files), list(cut_files)))
    if records_dropped or records_unaccounted:
        unaccounted = int(records_unaccounted or 0)
        out.append(Unjudged(NEVER_WRITTEN, int(records_dropped or 0) + unaccounted,
                            (unaccounted, min(int(lost or 0), unaccounted))))
    if events_dropped:
        out.append(Unjudged(LEFT_OUT, int(events_dropped)))
    if unwritten:
        out.append(Unjudged(UNWRITTEN, int(unwritten)))
    if redacted:
        out.append(Unjudged(REDACTED, sum(redacted["not_known"].values()) + redacted["cut"],
                            dict(redacted)))
    return out


def redacted_unjudged(manifest: Any) -> dict[str, Any] | None:
    """What the capture a redacted one was made from held unjudged and the redaction could not
    keep: its manifest's ``redaction.not_judged`` (``{"not_known": {site: records}, "cut":
    files}``), None when it states nothing, or not in that form."""
    from forensics.store.events import is_count

    entry = manifest.get("redaction") if isinstance(manifest, dict) else None
    stated = entry.get("not_judged") if isinstance(entry, dict) else None
    if not isinstance(stated, dict):
        return None
    sites, cut = stated.get("not_known", {}), stated.get("cut", 0)
    if not (isinstance(sites, dict) and len(sites) <= MAX_REDACTED_SITES and is_count(cut)
            and all(isinstance(s, str) and is_count(n) for s, n in sites.items())):
        return None
    return {"not_known": dict(sites), "cut": cut} if sites or cut else None


def unjudged_of(capture: Any) -> list[Unjudged]:
    """:func:`unjudged` of a loaded capture (its ``unknown_sites``, ``truncated`` and the
    counts its probe's stop events and manifest state); empty without a capture."""
    return unjudged(getattr(capture, "unknown_sites", None),
                    list(getattr(capture, "truncated", None) or []),
                    stated_counts(getattr(capture, "events", None) or [],
                                  getattr(capture, "manifest", None)))


def unjudged_text(facts: Sequence[Unjudged], kinds: Collection[str] = KINDS) -> str:
    """The facts of ``kinds`` as clauses joined by ``"; "`` (``3 record(s) of site 'toy' (not
    known to this install); 100 record(s) recorded by the probe and never written (...)``);
    ``""`` when there are none."""
    return "; ".join(_clause(fact) for fact in facts if fact.kind in kinds)


def _clause(fact: Unjudged) -> str:
    """One fact as a clause."""
    from forensics.store.events import LEFT_OUT as EVENTS_LEFT_OUT
    from forensics.store.events import UNWRITTEN_WHY
    from forensics.store.paths import cut_text

    if fact.kind == NOT_KNOWN:
        return not_known_text(fact.detail)
    if fact.kind == CUT:
        return cut_text(fact.detail)
    if fact.kind == NEVER_WRITTEN:
        return f"{fact.count} record(s) {_never_written(fact)}"
    if fact.kind == REDACTED:
        return redacted_text(fact.detail)
    if fact.kind == UNWRITTEN:
        return f"{fact.count} event(s) lost: {UNWRITTEN_WHY}"
    return f"{fact.count} event(s) {EVENTS_LEFT_OUT}"


def redacted_text(stated: Mapping[str, Any]) -> str:
    """``3 record(s) of site 'toy' (not known to the install that redacted it) and the ends of
    1 file(s) cut short, in the capture this one was redacted from (not kept by the
    redaction)``."""
    from forensics.escaping import quoted

    parts = [f"{count} record(s) of site {quoted(site)}" for site, count in
             stated["not_known"].items()]
    if parts:
        parts[-1] += " (not known to the install that redacted it)"
    if stated["cut"]:
        parts.append(f"the ends of {stated['cut']} file(s) cut short")
    return f"{', '.join(parts)}, {FROM_ORIGINAL}"


def unjudged_sentences(facts: Sequence[Unjudged]) -> list[str]:
    """Each fact as a sentence of a paragraph, saying what goes unseen and, where there is
    one, the fix."""
    return [_sentence(fact) for fact in facts]


def _sentence(fact: Unjudged) -> str:
    """One fact as a sentence."""
    if fact.kind == NOT_KNOWN:
        return (f"No variant judged {_clause(fact)}: install the plugin that declares each and "
                "replay again.")
    if fact.kind == CUT:
        return (f"Not read: {_clause(fact)}; no variant judged the records or events it held, "
                "so a failure there would not be seen.")
    if fact.kind == NEVER_WRITTEN:
        return (f"{fact.count} record(s) were {_never_written(fact)}: no variant "
                "judged them, so a failure in them would not be seen.")
    if fact.kind == REDACTED:
        return (f"No variant judged {_clause(fact)}: a failure there would not be seen; "
                "replay the original capture to judge them.")
    if fact.kind == UNWRITTEN:
        return (f"The probe lost {fact.count} event(s) as its writer was stalled (it could not "
                "take them): guard_passed_on events, kernel launches, probe errors and how a "
                "process ended may be missing.")
    return (f"The probe left out {fact.count} event(s) when its events file was full (it keeps "
            "only the events that say how a process ended then): guard_passed_on events, "
            "kernel launches and probe errors may be missing.")


def _never_written(fact: Unjudged) -> str:
    """What befell the records of a :data:`NEVER_WRITTEN` fact, and why: dropped (its ring full,
    its writer stalled or failing), or counted and neither written nor dropped (its ``detail``),
    some of these lost to a signal where its probe says so."""
    from forensics.store.events import DROPPED_WHY, LOST_WHY, NEVER_WRITTEN, UNACCOUNTED_WHY

    unaccounted, lost = fact.detail or (0, 0)
    why = [DROPPED_WHY] if fact.count > unaccounted else []
    if unaccounted:
        why.append(f"{unaccounted} {'of them ' if why else ''}{UNACCOUNTED_WHY}"
                   + (f", {lost} of these {LOST_WHY}" if lost else ""))
    return f"{NEVER_WRITTEN} ({'; '.join(why)})"


def not_known_text(counts: Mapping[str, int]) -> str:
    """``3 record(s) of site 'toy' (not known to this install)``, each site named escaped."""
    from forensics.escaping import quoted

    return ", ".join(f"{count} record(s) of site {quoted(site)}" for site, count in
                     counts.items()) + " (not known to this install)"
