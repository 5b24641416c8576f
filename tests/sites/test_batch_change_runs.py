"""The columnar run of batch_change held to the per-record form: a batch's run gives, record
by record, the status, checked ranges and findings of the model's outcome on that record
alone, for both models (patched's gathers a subset of upstream's rows, the misattributed rows
shared between them)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_batch_change import bc_records

from forensics.outcome import STATUSES
from forensics.records import Record
from forensics.sites import batch_change as bc
from forensics.sites._common import RecordColumns
from forensics.sites.core import CheckList, Checks
from forensics.validate import validate_record

REQUESTS = st.sampled_from("abcdefgh")


@st.composite
def named_records(draw) -> Record:
    """A batch_change record, some with request ids and a previous batch (misattribution)."""
    rec = draw(bc_records())
    if not draw(st.booleans()):
        return rec
    n, p = len(rec["prev_positions"]), draw(st.integers(0, 6))
    prev = draw(st.lists(REQUESTS, min_size=p, max_size=p, unique=True))
    gone = draw(st.lists(st.booleans(), min_size=p, max_size=p))  # discarded rows
    fields = dict(rec.fields,
                  req_ids=draw(st.lists(REQUESTS, min_size=n, max_size=n, unique=True)),
                  prev_req_ids=[None if g else q for q, g in zip(prev, gone, strict=True)])
    return validate_record(Record("batch_change", 0, 0, fields), "test")


def _per_record(checks: Checks | CheckList) -> dict[int, list[tuple[str, list[int]]]]:
    rec, tensors, which, numbers = checks.range_table()
    table: dict[int, list[tuple[str, list[int]]]] = {}
    for r, w, row in zip(rec.tolist(), which.tolist(), numbers.tolist(), strict=True):
        table.setdefault(r, []).append((tensors[w], row))
    return table


def _keyed(found: list[dict]) -> list[tuple]:
    return sorted((f["kind"], f["tensor"], f["row"], f["element"], f["value"], f["lower"],
                   f["upper"]) for f in found)


@settings(max_examples=300, deadline=None)
@given(st.lists(named_records(), min_size=1, max_size=6))
def test_a_batch_judges_each_record_as_alone(records) -> None:
    prepared = bc.prepare_columns(RecordColumns(records))
    for patched, model in ((False, bc.SITE.upstream), (True, bc.SITE.patched)):
        run = bc.run_batch(prepared, patched)
        ranges, found = _per_record(run.checks), run.checks.findings()
        for i, rec in enumerate(records):
            outcome = model(rec)
            alone = bc.outcome_checks(rec, outcome)
            assert STATUSES[int(run.status[i])] == outcome.status, (patched, i)
            assert ranges.get(i, []) == _per_record(alone).get(0, []), (patched, i)
            assert _keyed(found.get(i, [])) == _keyed(alone.findings().get(0, [])), (patched, i)
        assert np.array_equal(run.status == 0, [model(r).status == "ok" for r in records])
