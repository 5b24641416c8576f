"""The probe guard's message in a redacted event's kept text: its value said as the event's
field says it (:func:`said_value`), and the guard message another event echoes (the engine's
exception the guard raised, ``engine_exception``'s ``error``) read back as a guard event."""

from __future__ import annotations

import re
from typing import Any

from forensics.digits import plain_int

#: the guard's message (``bounds_error``, ``passed_on_message`` of forensics/probe/guard.py)
#: up to its bound: site, step, rank, row, tensor, value and bound, each of bounded length
GUARD_MESSAGE = re.compile(
    r"forensics guard: site '(?P<site>[^'\n]{1,100})' step (?P<step>\d{1,20}) rank "
    r"(?P<rank>\d{1,20})(?: row (?P<row>\d{1,20}))?:? (?:wrote )?(?P<tensor>[\w.\[\]]{1,120}) "
    r"value (?P<value>-?\d{1,20}) (?:is )?outside \[-?\d{1,20}, (?P<bound>-?\d{1,20})\)")


def guard_echoes(text: str) -> list[dict[str, Any]]:
    """Each guard message in ``text`` as the guard event that would say it (its ``site``,
    ``tensor``, ``value``, ``row``, ``bound``, ``step`` and ``rank``)."""
    return [{"kind": "guard_violation", "site": found["site"], "tensor": found["tensor"],
             **{key: None if found[key] is None else int(found[key])
                for key in ("value", "row", "bound", "step", "rank")}}
            for found in GUARD_MESSAGE.finditer(text)]


#: the words before a number in the guard's message naming the event's field that holds it
_GUARD_LABELS = {"step ": "step", "rank ": "rank", "row ": "row", "(bound ": "bound"}


def said_value(text: str, event: dict[str, Any], shown: int | None) -> str:
    """``text`` with each number standing alone that is the guard event's ``value`` said as
    its field says it: after ``value ``, the mapped value (``<value>`` where it was dropped);
    after a word naming another field of the event that holds the same number (``row 5``,
    ``[0, 5)`` of its bound), kept; anywhere else ``<value>``: no unmapped id is left."""
    value = event["value"]
    placeholder = "<value>" if shown is None else str(shown)

    def said(found: re.Match[str]) -> str:
        before = text[max(0, found.start() - 8):found.start()]
        if before.endswith("value "):
            return placeholder
        bound = before.endswith(", ") and text.startswith(")", found.end())  # [0, BOUND)
        if bound and _same(event.get("bound"), value) or any(
                before.endswith(word) and _same(event.get(key), value)
                for word, key in _GUARD_LABELS.items()):
            return found.group()
        return "<value>"
    return re.sub(rf"(?<![\w.\-]){re.escape(str(value))}(?!\w|\.\d)", said, text)


def _same(field: object, value: int) -> bool:
    """Whether an event's ``field`` is the integer ``value`` (no boolean)."""
    return plain_int(field) and field == value
