"""The known issues a capture matches, for triage's rows (:mod:`forensics.known`)."""

from __future__ import annotations

from typing import Any


def match_known(result: Any, capture: Any = None, origins_unsearched: bool = False
                ) -> tuple[list[str], list[str]]:
    """The ids of the catalogue entries ``result`` (a ReplayResult) matches, and of those it
    could not judge (a fact one needs unknown: ``not judged``), each sorted
    (:func:`forensics.known.answer`), with the facts and events of ``capture`` (a replay of
    a part of it holds none of its own); ``origins_unsearched``: a null origin of a sink
    finding read as unknown, not none (a piece whose origins were not all searched)."""
    from forensics.known import answer

    checked = answer(result, capture=capture, origins_unsearched=origins_unsearched).checked
    return (sorted(m.entry.id for m in checked if m.matched),
            sorted(m.entry.id for m in checked if m.status == "not judged"))
