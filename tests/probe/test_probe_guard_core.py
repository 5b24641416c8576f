"""The guard's host-side checks (forensics.probe.guard) against the sites' own columnar core.

The guard keeps its own checks (the core on a batch of one costs 0.3-1 ms a call:
benchmarks/README.md, "Where the targets stand"), so generated records hold the two
together: the guard finds a violation exactly when the core finds an index out of bounds,
and the one it reports (row,
tensor, value, bound) is among the core's findings (``async_output``: a written id the guard
reports at an earlier row than a failed read may be missing from the core's, whose run stops at
the read)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import event, given, settings
from hypothesis import strategies as st

from forensics.probe import guard
from forensics.records import Record
from forensics.sites import async_output, batch_change, get_site, prepare_input_ids
from forensics.sites.batch_change import GATHERED


def core_findings(record: Record) -> set[tuple[Any, ...]]:
    """(row, tensor, value, upper) of every out-of-bounds index the site's core reports."""
    run = get_site(record.site).run_records([record], False)
    assert run is not None
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
    agree(batch_change.guard(prev, sizes), core_findings(record))


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
    found = prepare_input_ids.guard(prev, cu, drafts, prev_rows, spec, draft_numel)
    agree(found, core_findings(Record("prepare_input_ids", 0, 0, fields)))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_async_output_guard_agrees_with_the_core(data: st.DataObject) -> None:
    reqs, prev_rows = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    width, vocab = data.draw(st.integers(1, 3)), 50
    req_ids = [f"r{i}" for i in range(reqs)]
    prev = {r: data.draw(st.integers(-1, prev_rows + 1)) for r in req_ids
            if data.draw(st.booleans())}
    outputs = [data.draw(st.lists(st.integers(0, vocab - 1), max_size=3))
               + [-1] * data.draw(st.integers(0, 3)) for _ in req_ids]
    sampled = []
    for _ in range(prev_rows):  # valid ids, then -1 padding
        ids = data.draw(st.lists(st.one_of(st.integers(0, vocab - 1), st.just(vocab),
                                           st.integers(vocab + 1, vocab + 2)),
                                 max_size=width))
        sampled.append(ids + [-1] * (width - len(ids)))
    record = Record("async_output", 0, 0, {
        "req_ids": req_ids, "prev_req_id_to_index": prev, "output_token_ids": outputs,
        "sampled_token_ids_cpu": np.array(sampled, np.int64), "vocab_size": vocab})
    found = async_output.guard(req_ids, prev, outputs, sampled, vocab)
    core = core_findings(record)
    key = None if found is None else (found.row, found.tensor, found.value, found.upper)
    if found is not None and not found.used and key not in core:
        # a failed read stops the core's run before the ids a row above it writes
        assert any(not tensor.startswith("out.") for _, tensor, _, _ in core), (found, core)
    else:
        agree(found, core)


def test_async_output_guard_reads_a_previous_row_as_an_earlier_request_cut_it() -> None:
    """Two requests read previous row 1, ``[0, 50]``: vLLM cuts that list to the one id the
    first writes (``del new_ids[1:]``), so the second writes only ``0``; the guard must not
    report the ``50`` (found by hypothesis in the test above)."""
    req_ids = ["r0", "r1", "r2", "r3"]
    prev = {"r2": 1, "r3": 1}
    outputs: list[list[int]] = [[], [], [-1], [-1, -1]]
    sampled = [[-1, -1], [0, 50]]
    record = Record("async_output", 0, 0, {
        "req_ids": req_ids, "prev_req_id_to_index": prev, "output_token_ids": outputs,
        "sampled_token_ids_cpu": np.array(sampled, np.int64), "vocab_size": 50})
    assert async_output.guard(req_ids, prev, outputs, sampled, 50) is None
    assert core_findings(record) == set()
    # the other order: the request with two placeholders first writes both ids
    found = async_output.guard(req_ids, {"r3": 1, "r2": 1}, outputs[:2] + [[-1, -1], [-1]],
                                     sampled, 50)
    assert found is not None and (found.row, found.value) == (2, 50)


def _ids(data: st.DataObject, shape: tuple[int, ...], vocab: int) -> np.ndarray:
    """Token ids of ``shape``, mostly valid, some ``-1`` or ``vocab`` and beyond."""
    size = int(np.prod(shape))
    ids = st.one_of(st.integers(0, vocab - 1), st.integers(-2, -1), st.integers(vocab, vocab + 1))
    return np.array(data.draw(st.lists(ids, min_size=size, max_size=size)),
                    np.int64).reshape(shape)


def _slots(data: st.DataObject, n: int, low: int, high: int, m: int) -> np.ndarray:
    """``n`` slots: half the time all in ``[0, m)``, else any in ``[low, high]``."""
    inside = data.draw(st.booleans())
    slots = st.integers(0, m - 1) if inside else st.integers(low, high)
    return np.array(data.draw(st.lists(slots, min_size=n, max_size=n)), np.int32)


def _cumulative(data: st.DataObject, n: int, most: int) -> np.ndarray:
    """``n + 1`` offsets from 0, steps in ``[0, most]``."""
    steps = data.draw(st.lists(st.integers(0, most), min_size=n, max_size=n))
    return np.concatenate([[0], np.cumsum(steps)]).astype(np.int32)


@settings(max_examples=600, deadline=None)
@given(st.data())
def test_combine_tokens_guard_is_violation_of(data: st.DataObject) -> None:
    """The V2 guard finds exactly what the upstream model's run does (v2_hooks.violation_of:
    row, tensor, value, bounds), slots, draft columns and positions out of range included."""
    from forensics.probe import v2_hooks
    from forensics.sites import combine_tokens

    n, m, s, vocab = (data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5)),
                      data.draw(st.integers(0, 3)), 20)
    qsl = _cumulative(data, n, 4)
    tokens = max(int(qsl[-1]) + data.draw(st.integers(-2, 2)), 0)
    fields: dict[str, Any] = {
        "input_ids": _ids(data, (tokens,), vocab),
        "idx_mapping": _slots(data, n, -1, m + 1, m),
        "last_sampled_tokens": _ids(data, (m + data.draw(st.integers(-1, 0)),), vocab),
        "query_start_loc": qsl,
        "seq_lens": np.array(data.draw(st.lists(st.integers(0, 8), min_size=n, max_size=n)),
                             np.int32),
        "prefill_len": np.array(data.draw(st.lists(st.integers(0, 8), min_size=m, max_size=m)),
                                np.int32),
        "draft_tokens": _ids(data, (m, s), vocab),
        "cu_num_logits": _cumulative(data, n, s + 2),
        "num_new_sampled_tokens": data.draw(st.integers(0, 1)), "vocab_size": vocab}
    found = combine_tokens.guard(fields)
    event(f"found: {None if found is None else found.tensor}")
    assert found == v2_hooks.violation_of("combine_tokens", fields)


@settings(max_examples=600, deadline=None)
@given(st.data())
def test_post_update_guard_is_violation_of(data: st.DataObject) -> None:
    """The V2 guard finds exactly what the upstream model's run does (v2_hooks.violation_of),
    slots, sampled columns, all_token_ids columns and bin-count ids out of range included,
    and rows of one slot that move its ``total_len`` in batch order."""
    from forensics.probe import v2_hooks
    from forensics.sites import post_update

    n, m, s, vocab = (data.draw(st.integers(1, 5)), data.draw(st.integers(1, 4)),
                      data.draw(st.integers(0, 2)), 20)
    width = data.draw(st.integers(1, 6))

    def per_slot(low: int, high: int) -> np.ndarray:
        return np.array(data.draw(st.lists(st.integers(low, high), min_size=m, max_size=m)),
                        np.int32)

    fields: dict[str, Any] = {
        "idx_mapping": _slots(data, n, -1, m, m),
        "num_computed_tokens": per_slot(0, 9), "last_sampled_tokens": _ids(data, (m,), vocab),
        "sampled_tokens": _ids(data, (n, s + 1), vocab),
        "num_sampled": np.array(data.draw(st.lists(st.integers(-1, s + 2), min_size=n,
                                                   max_size=n)), np.int32),
        "num_rejected": np.zeros(n, np.int32), "total_len": per_slot(-1, width),
        "all_token_ids_width": width,
        "bin_counts_rows": data.draw(st.sampled_from([0, m, max(m - 1, 1)])),
        "bin_counts_width": vocab + data.draw(st.integers(-1, 0)), "vocab_size": vocab}
    if data.draw(st.booleans()):
        fields["query_start_loc"] = _cumulative(data, n, 3)
    if data.draw(st.booleans()):
        fields["draft_tokens"] = _ids(data, (n, s), vocab)
        fields["draft_tokens_out"] = _ids(data, (m + data.draw(st.integers(-1, 0)), s), vocab)
    found = post_update.guard(fields)
    event(f"found: {None if found is None else found.tensor}")
    assert found == v2_hooks.violation_of("post_update", fields)
