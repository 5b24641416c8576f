"""A toy third-party site and variant, registered only through entry points (test_plugins).

Site ``toy_gather`` (the ``Site`` object ``SITE``): reads ``table[index[i]]`` for each ``i``;
upstream reads every index (an index outside ``[0, size)`` raises), patched skips those; a
text log's ``TOY-GATHER: max=M size=S`` line is its summary record (``log_line``). Variant
``toy_fix`` is the patched model under another name (``toy_variant.py``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from forensics.outcome import Outcome
from forensics.records import FieldSpec, Record
from forensics.sites import Site
from forensics.sites._common import RunColumns
from forensics.sites.base import LogLine
from forensics.sites.core import BatchRun, CheckList, Checks, owner, within

NAME = "toy_gather"
FIELDS = (FieldSpec("index", "tensor", doc="[n]"), FieldSpec("size", "int"))
SUMMARY_BOUND = "size"


def run_batch(cols: RunColumns, patched: bool) -> BatchRun:
    """Every record's reads at once: every index (``patched``: those inside the table)."""
    index, counts = cols.flat("index")
    size = np.repeat(cols.ints("size"), counts)
    record, row = owner(counts), within(counts)
    inside = (index >= 0) & (index < size)
    read = inside if patched else np.ones(len(index), dtype=bool)
    failed = np.zeros(cols.rows, dtype=np.int8)
    failed[record[read & ~inside]] = 1  # STATUSES[1]: index_error
    messages = {int(i): "IndexError: toy index out of range" for i in np.flatnonzero(failed)}
    checks = Checks.of("table", record[read], row[read], row[read], index[read], 0, size[read])
    return BatchRun(failed, messages, Checks.concat([checks]), [None] * cols.rows)


def checks(record: Record, outcome: Outcome) -> CheckList:
    """Another variant's outcome on one record: the accesses it shows, if any."""
    return Checks.concat([Checks.of_access(a) for a in outcome.accesses or ()])


def log_fields(match: re.Match[str], number: Callable[[str], int]) -> dict[str, Any]:
    """The summary record of a ``TOY-GATHER`` line: the largest index and the table's size."""
    return {"min": 0, "max": number(match["max"]), "size": number(match["size"])}


LOG_LINE = LogLine(re.compile(r"TOY-GATHER: max=(?P<max>-?\d+) size=(?P<size>\d+)"), log_fields)

#: the site the entry point names (``toy = toy_site:SITE``)
SITE = Site(name=NAME, fields=FIELDS, output_fields=(), summary_bound=SUMMARY_BOUND,
            summary_tensor="table", run_batch=run_batch, checks=checks, log_line=LOG_LINE)
