"""The guard's host-side checks (forensics.probe.guard) against the sites' own columnar core.

The guard keeps its own checks (the core on a batch of one costs 0.3-1 ms a call, see README,
"Where the targets stand"), so generated records hold the two together: the guard finds a
violation exactly when the core finds an index out of bounds, and the one it reports (row,
tensor, value, bound) is among the core's findings."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.probe import guard
from forensics.records import Record
from forensics.sites import get_site
from forensics.sites.batch_change import GATHERED


def core_findings(record: Record) -> set[tuple[Any, ...]]:
    """(row, tensor, value, upper) of every out-of-bounds index the site's core reports."""
    module = get_site(record.site)
    run = module.run_batch(module.prepare([record]), False)
    return {(f["row"], f["tensor"], f["value"], f["upper"])
            for f in run.checks.findings(run.req_ids).get(0, []) if f["kind"] == "out_of_bounds"}


def agree(found: guard.Violation | None, core: set[tuple[Any, ...]],
          tensor: str | None = None) -> None:
    assert (found is None) == (not core), (found, core)
    if found is not None:
        assert (found.row, tensor or found.tensor, found.value, found.upper) in core, (found, core)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_batch_change_guard_agrees_with_the_core(data: st.DataObject) -> None:
    rows = data.draw(st.integers(1, 6))
    lengths = [data.draw(st.integers(1, 8)) for _ in GATHERED]
    prev = np.array(data.draw(st.lists(st.integers(-2, 10), min_size=rows, max_size=rows)),
                    np.int64)
    size = max(rows, lengths[GATHERED.index("num_computed_tokens")])
    fields = {name: np.arange(n, dtype=np.int32) for name, n in zip(GATHERED, lengths,
                                                                       strict=True)}
    fields["num_computed_tokens"] = np.arange(size, dtype=np.int32)
    record = Record("batch_change", 0, 0, {
        **fields, "prev_positions": prev, "num_accepted_tokens": np.ones(rows, np.int32),
        "cpu_num_computed_tokens": np.full(rows, 3, np.int32)})
    sizes = {name: len(record.fields[name]) for name in GATHERED}
    agree(guard.check_batch_change(prev, sizes), core_findings(record))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(-3, 14), min_size=1, max_size=12), st.integers(1, 12),
       st.booleans())
def test_embedding_guard_agrees_with_the_core(ids: list[int], rows: int, split: bool) -> None:
    input_ids = np.array(ids, np.int64)
    fields: dict[str, Any] = {"input_ids": input_ids, "num_embeddings": rows}
    cu = None
    if split:  # one row per two tokens, the last row taking what is left
        cu = np.minimum(np.arange(2, len(ids) + 2, 2), len(ids)).astype(np.int32)
        fields.update(cu_num_tokens=cu, req_ids=[f"r{i}" for i in range(len(cu))])
    found = guard.check_ids("embedding", "input_ids", input_ids, rows, cu)
    agree(found, core_findings(Record("embedding", 0, 0, fields)), "input_ids")


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_prepare_input_ids_guard_agrees_with_the_core(data: st.DataObject) -> None:
    reqs, prev_rows = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5))
    spec = data.draw(st.integers(0, 3))
    prev = np.array(data.draw(st.lists(st.integers(-1, prev_rows + 2), min_size=reqs,
                                       max_size=reqs)), np.int32)
    drafts = np.array(data.draw(st.lists(st.integers(0, spec), min_size=reqs, max_size=reqs)),
                      np.int32)
    cu = np.cumsum(1 + drafts).astype(np.int32)
    tokens = int(cu[-1])
    fields: dict[str, Any] = {
        "prev_positions": prev, "prev_sampled_token_ids": np.zeros((prev_rows, spec + 1),
                                                                   np.int32),
        "input_ids": np.arange(tokens, dtype=np.int32),
        "input_ids_device": np.arange(tokens, dtype=np.int32), "cu_num_tokens": cu,
        "num_draft_tokens": drafts, "prev_num_spec_tokens": spec, "vocab_size": 1000}
    draft_numel = None
    if spec and data.draw(st.booleans()):  # drafts may be narrower than the stride read
        width = data.draw(st.integers(1, spec))
        fields["draft_token_ids"] = np.zeros((prev_rows, width), np.int32)
        draft_numel = prev_rows * width
    found = guard.check_prepare_input_ids(prev, cu, drafts, prev_rows, spec, draft_numel)
    agree(found, core_findings(Record("prepare_input_ids", 0, 0, fields)))
