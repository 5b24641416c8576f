"""A toy third-party site and variant, registered only through entry points (test_plugins).

Site ``toy_gather`` (the ``Site`` object ``SITE``, with no columnar run): reads
``table[index[i]]`` for each ``i``; ``upstream`` reads every index (an index outside
``[0, size)`` raises), ``patched`` skips those; a text log's ``TOY-GATHER: max=M size=S``
line is its summary record (``log_line``). Variant ``toy_fix`` is the
patched model under another name (``toy_variant.py``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from forensics.outcome import Access, Outcome
from forensics.records import FieldSpec, Record
from forensics.sites import Site
from forensics.sites.base import LogLine
from forensics.sites.core import CheckList, Checks

NAME = "toy_gather"
FIELDS = (FieldSpec("index", "tensor", doc="[n]"), FieldSpec("size", "int"))
OUTPUT_FIELDS: tuple[str, ...] = ()
SUMMARY_BOUND = "size"
SUMMARY_TENSOR = "table"


def _run(record: Record, guard: bool) -> Outcome:
    index = np.asarray(record["index"], dtype=np.int64)
    rows = np.arange(len(index))
    inside = (index >= 0) & (index < record["size"])
    used = inside if guard else np.ones(len(index), dtype=bool)
    access = Access("table", rows[used], rows[used], index[used], 0, record["size"])
    if not inside[used].all():
        return Outcome("index_error", "IndexError: toy index out of range", {}, [access])
    return Outcome("ok", "", {}, [access])


def upstream(record: Record) -> Outcome:
    """Every index read."""
    return _run(record, guard=False)


def patched(record: Record) -> Outcome:
    """Indices outside the table skipped."""
    return _run(record, guard=True)


def outcome_checks(record: Record, outcome: Outcome) -> CheckList:
    """The table accesses (findings: those outside the table)."""
    return Checks.concat([Checks.of(a.tensor, 0, a.rows, a.elements, a.values, a.lower,
                                    a.upper) for a in outcome.accesses or ()])


def log_fields(match: re.Match[str], number: Callable[[str], int]) -> dict[str, Any]:
    """The summary record of a ``TOY-GATHER`` line: the largest index and the table's size."""
    return {"min": 0, "max": number(match["max"]), "size": number(match["size"])}


LOG_LINE = LogLine(re.compile(r"TOY-GATHER: max=(?P<max>-?\d+) size=(?P<size>\d+)"), log_fields)

#: the site the entry point names (``toy = toy_site:SITE``)
SITE = Site(name=NAME, fields=FIELDS, output_fields=OUTPUT_FIELDS, summary_bound=SUMMARY_BOUND,
            summary_tensor=SUMMARY_TENSOR, upstream=upstream, patched=patched,
            outcome_checks=outcome_checks, log_line=LOG_LINE)
