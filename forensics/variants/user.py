"""User variants: a callable ``fn(record) -> dict of outputs | Outcome`` run as a variant.

The callable gets a private copy of the record (it may edit it freely). Its exceptions propagate
to the replay, which turns them into ``index_error`` / ``error`` outcomes. User variants expose no
access pattern: they are judged by their outcome and outputs alone.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from forensics.outcome import Outcome
from forensics.records import Record


class UserVariant:
    """Wraps ``fn`` under ``name``."""

    def __init__(self, name: str, fn: Callable[[Record], Any]) -> None:
        self.name = name
        self.fn = fn

    def run(self, record: Record) -> Outcome:
        """Call ``fn`` on a copy of ``record``.

        Returns:
            ``fn``'s Outcome, or an ``ok`` Outcome holding the dict it returned (None: no
            outputs).
        Raises:
            TypeError: ``fn`` returned something else; whatever ``fn`` raises.
        """
        result = self.fn(_private_copy(record))
        if isinstance(result, Outcome):
            return result
        if result is None:
            return Outcome("ok", "", {}, None)
        if isinstance(result, dict):
            return Outcome("ok", "", dict(result), None)
        raise TypeError(f"variant {self.name!r} returned {type(result).__name__}; expected a "
                        f"dict of outputs or a forensics.outcome.Outcome")

    def __repr__(self) -> str:
        return f"UserVariant({self.name!r}, {self.fn!r})"


def _private_copy(record: Record) -> Record:
    return Record(record.site, record.step, record.rank, copy.deepcopy(record.fields),
                  record.summary)
