"""A guard event read against its own bound: the probe's guard writes an event only for a value
outside ``[0, bound)`` (forensics/probe/guard.py), so an event whose value lies inside its own
bound contradicts itself (a forged or damaged line) and claims no violation."""

from __future__ import annotations

from typing import Any

from forensics.digits import plain_int

#: event kinds of the probe's guard: each names a value out of range it found (a failure to
#: report, whether or not the engine went on)
GUARD_EVENT_KINDS = frozenset({"guard_violation", "guard_passed_on"})


def inside_own_bound(event: dict[str, Any]) -> bool:
    """Whether ``event``'s integer ``value`` lies inside ``[0, bound)`` of its integer ``bound``
    (an event that says no value out of range); False where either is no integer."""
    value, bound = event.get("value"), event.get("bound")
    return plain_int(value) and plain_int(bound) and 0 <= value < bound


def self_refuted(event: dict[str, Any]) -> bool:
    """Whether ``event`` is a guard event whose value lies inside its own bound: it contradicts
    itself (the guard writes none such), so no guard raised or passed on a value."""
    return event.get("kind") in GUARD_EVENT_KINDS and inside_own_bound(event)


def claimed(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events of ``events`` that are no guard event contradicting its own bound."""
    return [event for event in events if not self_refuted(event)]


def self_contradicting(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The guard events of ``events`` whose value lies inside their own bound."""
    return [event for event in events if self_refuted(event)]


def refuted_note(event: dict[str, Any]) -> str:
    """What a guard event whose value lies inside its own bound says, in place of its message
    (which claims a value out of range): ``"value 2 is inside its own bound 4: the event
    contradicts itself and names no value out of range (not judged)"``."""
    return (f"value {event['value']} is inside its own bound {event['bound']}: the event "
            "contradicts itself and names no value out of range (not judged)")
