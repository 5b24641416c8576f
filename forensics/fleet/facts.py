"""What a triage row says about a capture before any replay: who wrote it and what happened."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from forensics.known.evidence import CRASH_EVENT_KINDS, crashed

#: event kinds the probe's guard mode writes
GUARD_KINDS = ("guard_violation", "guard_passed_on")
#: event kinds that say the engine crashed (probe events, imported log lines and crash dumps:
#: those of the known-issue evidence, less the guard's)
CRASH_KINDS = tuple(sorted(CRASH_EVENT_KINDS - set(GUARD_KINDS)))
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Fact:
    """One manifest fact a triage row shows: its column, its keys in the manifest and its
    type (``str``: text of at most :data:`MAX_TEXT` characters; ``int``: a process id,
    1 to :data:`MAX_PID`; ``bool``: a flag)."""

    column: str
    keys: tuple[str, ...]
    kind: type

    @property
    def field(self) -> str:
        """The fact's manifest field as a reader names it: ``versions.vllm``."""
        return ".".join(self.keys)


#: the manifest facts of a triage row (the one place their fields and types are declared)
FACTS = (Fact("host", ("process", "host"), str), Fact("pid", ("process", "pid"), int),
         Fact("engine_id", ("engine_id",), str), Fact("vllm", ("versions", "vllm"), str),
         Fact("runner", ("runner",), str),
         Fact("spec_method", ("model", "speculative_config", "method"), str),
         Fact("async_scheduling", ("model", "async_scheduling"), bool),
         Fact("scenario", ("simulation", "scenario"), str), Fact("started", ("created",), str))
#: the longest text fact a row shows (a host name is at most 253; a version, a few dozen)
MAX_TEXT = 256
#: the largest process id a row shows (a pid_t is a signed 32-bit integer)
MAX_PID = 2**31 - 1
_REFUSALS = {str: f"is not a string of at most {MAX_TEXT} characters",
             int: f"is not a process id (1 to {MAX_PID})", bool: "is not true or false"}


def capture_facts(capture: Any) -> dict[str, Any]:
    """Host, pid, ranks, engine id, vLLM version, runner, speculative method, async flag,
    steps, records and events of a loaded capture; a fact the capture lacks, or holds with the
    wrong type or out of range (:data:`FACTS`), is "unknown" (None for numbers and flags), and
    ``refused`` names each one refused."""
    manifest = capture.manifest
    summary = capture.summary()
    facts, refused = manifest_facts(manifest)
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
    }


def manifest_facts(manifest: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Every fact of :data:`FACTS` read from ``manifest`` (a missing or empty one unknown),
    and ``{field: phrase}`` for each one refused for its type or range (read as unknown)."""
    facts: dict[str, Any] = {}
    refused: dict[str, str] = {}
    for fact in FACTS:
        value, field, problem = _lookup(manifest, fact)
        if problem:
            refused.setdefault(field, f"manifest field {field} {problem}: read as unknown")
        facts[fact.column] = value if value is not None else (UNKNOWN if fact.kind is str
                                                               else None)
    return facts, refused


def _lookup(manifest: dict[str, Any], fact: Fact) -> tuple[Any, str, str]:
    """``(value or None, field, problem)``: the fact's checked value, else None and the field
    refused with why ("" when it is only missing)."""
    value: Any = manifest
    for depth, key in enumerate(fact.keys):
        if not isinstance(value, dict):
            return None, ".".join(fact.keys[:depth]), "is not an object"
        value = value.get(key)
        if value is None:
            return None, fact.field, ""
    if fact.kind is str and value == "":
        return None, fact.field, ""
    return (value, fact.field, "") if _fits(value, fact.kind) else \
        (None, fact.field, _REFUSALS[fact.kind])


def _fits(value: Any, kind: type) -> bool:
    """Whether ``value`` is of ``kind`` and in its range (:class:`Fact`)."""
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_PID
    return isinstance(value, str) and len(value) <= MAX_TEXT


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
    """``"cuda_assert x2 (first at step 14), engine_dead x1"`` for the events of ``kinds``."""
    chosen = [e for e in events if e.get("kind") in kinds]
    counts = Counter(str(e["kind"]) for e in chosen)
    parts = []
    for kind, count in counts.items():
        first = next(e for e in chosen if e["kind"] == kind)
        at = f" (first at step {first['step']})" if isinstance(first.get("step"), int) else ""
        parts.append(f"{kind} x{count}{at}")
    return ", ".join(parts)
