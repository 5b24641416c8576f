"""A guard event read against its own bound: the probe's guard writes an event only for a value
outside ``[0, bound)`` (forensics/probe/guard.py), so an event whose value lies inside its own
bound contradicts itself (a forged or damaged line) and claims no violation."""

from __future__ import annotations

from typing import Any

from forensics.digits import plain_int


def inside_own_bound(event: dict[str, Any]) -> bool:
    """Whether ``event``'s integer ``value`` lies inside ``[0, bound)`` of its integer ``bound``
    (an event that says no value out of range); False where either is no integer."""
    value, bound = event.get("value"), event.get("bound")
    return plain_int(value) and plain_int(bound) and 0 <= value < bound


def claimed(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events of ``events`` that do not contradict their own bound."""
    return [event for event in events if not inside_own_bound(event)]


def self_contradicting(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events of ``events`` whose value lies inside their own bound."""
    return [event for event in events if inside_own_bound(event)]


def refuted_note(event: dict[str, Any]) -> str:
    """What a guard event whose value lies inside its own bound says, in place of its message
    (which claims a value out of range): ``"value 2 is inside its own bound 4: the event
    contradicts itself and names no value out of range (not judged)"``."""
    return (f"value {event['value']} is inside its own bound {event['bound']}: the event "
            "contradicts itself and names no value out of range (not judged)")
