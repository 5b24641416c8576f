"""A third-party site, ``toy_gather``: a record's ``index`` reads ``table[index[i]]``.

Upstream reads every index (one outside ``[0, size)`` is an ``index_error``); patched skips
those. A text log's ``TOY-GATHER: max=M size=S`` line is its summary record. Its distribution
names it: ``[project.entry-points."forensics.sites"] toy = "toy_site:SITE"``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

import forensics.sites as fs

NAME = "toy_gather"
FIELDS = (fs.FieldSpec("index", "tensor", doc="[n]"), fs.FieldSpec("size", "int"))


def run_batch(cols: fs.RunColumns, patched: bool) -> fs.BatchRun:
    """Every record's reads at once: every index (``patched``: those inside the table)."""
    index, counts = cols.flat("index")
    size = np.repeat(cols.ints("size"), counts)
    record, row = fs.owner(counts), fs.within(counts)
    inside = (index >= 0) & (index < size)
    read = inside if patched else np.ones(len(index), dtype=bool)
    failed = np.zeros(cols.rows, dtype=np.int8)
    failed[record[read & ~inside]] = 1  # STATUSES[1]: index_error
    messages = {int(i): "IndexError: toy index out of range" for i in np.flatnonzero(failed)}
    checks = fs.Checks.of("table", record[read], row[read], row[read], index[read], 0, size[read])
    return fs.BatchRun(failed, messages, fs.Checks.concat([checks]), [None] * cols.rows)


def checks(record: fs.Record, outcome: fs.Outcome) -> fs.CheckList:
    """Another variant's outcome on one record: the accesses it shows, if any."""
    return fs.Checks.concat([fs.Checks.of_access(a) for a in outcome.accesses or ()])


def guard(fields: Mapping[str, Any]) -> fs.Violation | None:
    """The probe's per-call check on one call's host values: the first index off the table."""
    index = np.asarray(fields["index"]).reshape(-1)
    rows = np.arange(len(index))
    return fs.first_violation(NAME, [("table", rows, index, int(fields["size"]))])


def log_fields(match: re.Match[str], number: Callable[[str], int]) -> dict[str, Any]:
    """The summary record of a ``TOY-GATHER`` line: the largest index and the table's size."""
    return {"min": 0, "max": number(match["max"]), "size": number(match["size"])}


LOG_LINE = fs.LogLine(re.compile(r"TOY-GATHER: max=(?P<max>-?\d+) size=(?P<size>\d+)"),
                      log_fields)
SITE = fs.Site(name=NAME, fields=FIELDS, output_fields=(), summary_bound="size",
               summary_tensor="table", run_batch=run_batch, checks=checks, guard=guard,
               log_line=LOG_LINE)
