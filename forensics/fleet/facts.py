"""What a triage row says about a capture before any replay: who wrote it and what happened."""

from __future__ import annotations

from collections import Counter
from typing import Any

from forensics.known.evidence import CRASH_EVENT_KINDS, crashed

#: event kinds the probe's guard mode writes
GUARD_KINDS = ("guard_violation", "guard_passed_on")
#: event kinds that say the engine crashed (probe events, imported log lines and crash dumps:
#: those of the known-issue evidence, less the guard's)
CRASH_KINDS = tuple(sorted(CRASH_EVENT_KINDS - set(GUARD_KINDS)))
UNKNOWN = "unknown"


def capture_facts(capture: Any) -> dict[str, Any]:
    """Host, pid, ranks, engine id, vLLM version, runner, speculative method, async flag,
    steps, records and events of a loaded capture; a fact the capture lacks is "unknown"
    (None for numbers and flags)."""
    manifest = capture.manifest
    process = _dict(manifest.get("process"))
    model = _dict(manifest.get("model"))
    spec = _dict(model.get("speculative_config"))
    simulation = _dict(manifest.get("simulation"))
    summary = capture.summary()
    return {
        "host": _text(process.get("host")),
        "pid": _int(process.get("pid")),
        "ranks": ",".join(str(r) for r in capture.ranks),
        "engine_id": _text(manifest.get("engine_id")),
        "vllm": _text(_dict(manifest.get("versions")).get("vllm")),
        "runner": _text(manifest.get("runner")),
        "spec_method": _text(spec.get("method")),
        "async_scheduling": _flag(model.get("async_scheduling")),
        "steps": len(capture.steps),
        "records": int(summary["records"]),
        "crash_events": event_text(capture.events, CRASH_KINDS),
        "guard_events": event_text(capture.events, GUARD_KINDS),
        "crashed": crashed(capture.events),
        "scenario": _text(simulation.get("scenario")) if simulation else "",
        "started": _text(manifest.get("created")),
        "history": step_history(summary),
    }


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


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    return UNKNOWN if value is None or value == "" else str(value)


def _int(value: Any) -> int | None:
    """``value`` when it is an integer int64 can hold, else None (unknown)."""
    if isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63:
        return value
    return None


def _flag(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None
