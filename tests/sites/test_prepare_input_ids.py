"""The prepare_input_ids models: CPU copy, fast path (and its broadcast), slow path, drafts."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from site_records import i32, record

from forensics.errors import CaptureFormatError
from forensics.judge.findings import judge_record
from forensics.sites import prepare_input_ids as pii
from forensics.sites.prepare_input_ids import plans as pii_plans
from forensics.sites.prepare_input_ids import replay as pii_replay


def make(pp, sampled, cu, drafts=None, ids=None, **extra):
    n = len(pp)
    total = cu[-1] if n else 0
    fields = dict(prev_positions=np.array(pp, np.int64),
                  prev_sampled_token_ids=i32(*sampled).reshape(-1, 1),
                  input_ids=i32(*(ids if ids is not None else [0] * total)),
                  cu_num_tokens=i32(*cu), num_draft_tokens=i32(*(drafts or [0] * n)),
                  prev_num_spec_tokens=extra.pop("spec", 0), vocab_size=100)
    fields.update(extra)
    return record("prepare_input_ids", **fields)


def out(outcome):
    assert outcome.status == "ok", outcome.message
    return outcome.outputs["input_ids_device"].tolist()


def test_fast_path_copies_one_slice() -> None:
    rec = make([0, 1], [7, 8], [1, 2])
    assert pii_plans.plan(rec, False).fast
    assert out(pii.SITE.upstream(rec)) == [7, 8]
    assert judge_record(rec, pii.SITE.upstream(rec)) == []


def test_fast_path_broadcasts_a_one_row_source_silently() -> None:
    rec = make([0, 1, 2], [7], [1, 2, 3])
    up = pii.SITE.upstream(rec)
    assert out(up) == [7, 7, 7]
    found = judge_record(rec, up)
    assert [(f["tensor"], f["row"], f["element"], f["value"], f["upper"]) for f in found] == [
        ("prev_sampled_token_ids", 1, 1, 1, 1), ("prev_sampled_token_ids", 2, 2, 2, 1)]


def test_fast_path_with_a_short_multi_row_source_is_a_size_error() -> None:
    rec = make([0, 1, 2], [7, 8], [1, 2, 3])
    assert pii.SITE.upstream(rec).status == "error"


def test_slow_path_stale_row_is_index_error_upstream_and_skipped_patched() -> None:
    rec = make([1, 5], [7, 8], [1, 2], ids=[3, 4])
    up, pa = pii.SITE.upstream(rec), pii.SITE.patched(rec)
    assert up.status == "index_error"
    assert [(f["row"], f["value"], f["upper"]) for f in judge_record(rec, up)] == [(1, 5, 2)]
    assert out(pa) == [8, 4]  # row 1 keeps what the CPU staged
    assert judge_record(rec, pa) == []


def test_placeholder_on_a_new_row_survives_both_models() -> None:
    rec = make([-1, 0], [7], [1, 2], ids=[-1, 0])
    for model in (pii.SITE.upstream, pii.SITE.patched):
        outcome = model(rec)
        assert out(outcome) == [-1, 7]
        assert [(f["tensor"], f["row"], f["element"], f["value"])
                for f in judge_record(rec, outcome)] == [("out.input_ids_device", 0, 0, -1)]


def test_device_buffer_keeps_its_contents_when_every_row_is_common() -> None:
    rec = make([1, 0], [7, 8], [2, 4], drafts=[1, 1], ids=[1, 2, 3, 4],
               input_ids_device=i32(50, 51, 52, 53))
    assert not pii_plans.plan(rec, False).copy_cpu
    assert out(pii.SITE.upstream(rec)) == [8, 51, 7, 53]


def test_drafts_are_scattered_and_overruns_are_reported() -> None:
    drafts = np.array([[10, 11], [20, 21]], np.int64)
    rec = make([1, 0], [7, 8], [3, 6], drafts=[2, 2], spec=2, draft_token_ids=drafts,
               ids=[0] * 6)
    assert out(pii.SITE.upstream(rec)) == [8, 20, 21, 7, 10, 11]
    over = make([1, 0], [7, 8], [4, 8], drafts=[3, 3], spec=2, draft_token_ids=drafts,
                ids=[0] * 8)
    found = judge_record(over, pii.SITE.upstream(over))
    kinds = [(f["kind"], f["tensor"], f["row"], f["value"]) for f in found]
    assert ("out_of_bounds", "draft_token_ids", 0, 4) in kinds
    assert ("misattributed", "draft_token_ids", 1, 2) in kinds


def test_drafts_absent_leave_draft_slots_alone() -> None:
    rec = make([1, 0], [7, 8], [2, 4], drafts=[1, 1], ids=[1, 2, 3, 4])
    assert out(pii.SITE.upstream(rec)) == [8, 2, 7, 4]


def test_int64_source_fails_the_slow_path_scatter() -> None:
    rec = make([1, 0], [7, 8], [1, 2])
    rec.fields["prev_sampled_token_ids"] = rec["prev_sampled_token_ids"].astype(np.int64)
    assert pii.SITE.upstream(rec).status == "error"


def test_check_record_requires_room_for_each_rows_drafts() -> None:
    with pytest.raises(CaptureFormatError, match="cu_num_tokens"):
        make([0], [7], [1], drafts=[1])


@st.composite
def pii_records(draw):
    n = draw(st.integers(0, 4))
    drafts = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    extra = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    cu = np.cumsum([1 + d + e for d, e in zip(drafts, extra, strict=True)]).astype(int).tolist()
    aligned = [c - 1 for c in cu]
    pp = draw(st.one_of(st.just(aligned), st.lists(st.integers(-1, 6), min_size=n,
                                                     max_size=n)))
    sampled = draw(st.lists(st.integers(0, 99), min_size=0, max_size=5))
    total = cu[-1] if n else 0
    ids = draw(st.lists(st.integers(-1, 99), min_size=total, max_size=total))
    fields = {}
    if draw(st.booleans()):
        rows, width = draw(st.integers(0, 4)), draw(st.integers(0, 3))
        fields["draft_token_ids"] = np.arange(rows * width, dtype=np.int64).reshape(rows, width)
    return make(pp, sampled, cu or [], drafts=drafts, ids=ids,
                spec=draw(st.integers(0, 3)), **fields)


@settings(max_examples=300, deadline=None)
@given(pii_records())
def test_patched_never_reads_past_the_sampled_rows(rec) -> None:
    outcome = pii.SITE.patched(rec)
    found = judge_record(rec, outcome)
    assert not [f for f in found if f["tensor"] == "prev_sampled_token_ids"]
    if outcome.status == "ok":
        assert outcome.outputs["input_ids_device"].dtype == np.int32


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3)), max_size=12), st.booleans(),
       st.data())
def test_drafts_scattered_a_position_at_a_time_are_the_per_draft_scatter(rows, wraps, data
                                                                        ) -> None:
    """``scatter_drafts`` writes what one assignment per draft writes, in both its forms (a
    draft position at a time, and by runs), casting to int32 only when asked."""
    count = np.array([n for n, _ in rows], dtype=np.int64)
    gap = np.array([g for _, g in rows], dtype=np.int64)
    slot = np.cumsum(count + gap) - count  # disjoint runs of slots, gaps between them
    drafts = np.array(data.draw(st.lists(st.sampled_from([0, 7, -1, 2**31, 2**32 + 5, -2**40]),
                                         min_size=8, max_size=8)), dtype=np.int64)
    index = np.array(data.draw(st.lists(st.integers(0, 3), min_size=len(rows),
                                        max_size=len(rows))), dtype=np.int64)
    size = int((slot + count).max(initial=0))
    want = np.full(size, -9, dtype=np.int64)
    for i in range(len(rows)):
        for j in range(int(count[i])):
            value = drafts[index[i] + j]
            want[slot[i] + j] = np.array([value]).astype(np.int32)[0] if wraps else value
    for columns in (0, pii_replay.DRAFT_COLUMNS):
        got = np.full(size, -9, dtype=np.int64)
        pii_replay.scatter_drafts(got, slot, drafts, index, count, wraps, columns)
        assert got.tolist() == want.tolist()


def _keyed(found: list[dict]) -> list[tuple]:
    return sorted((f["kind"], f["tensor"], f["row"], f["element"], f["value"]) for f in found)


@st.composite
def drafting_records(draw):
    """Slow-path records that numpy runs (every read inside its tensor): rows with drafts
    read at ``prev * spec + j`` from draft rows of another width, so that drafts may be
    read from another request's row."""
    n = draw(st.integers(1, 4))
    drafts = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    cu = np.cumsum([1 + d for d in drafts]).tolist()
    pp = draw(st.lists(st.integers(-1, 5), min_size=n, max_size=n))
    width = draw(st.integers(1, 3))
    return make(pp, list(range(6)), cu, drafts=drafts, ids=[0] * cu[-1],
                spec=draw(st.integers(0, 3)),
                draft_token_ids=np.arange(20 * width, dtype=np.int32).reshape(20, width))


@settings(max_examples=200, deadline=None)
@given(st.lists(pii_records() | drafting_records(), min_size=1, max_size=4), st.booleans())
def test_a_batch_finds_what_each_record_finds_alone(records, patched) -> None:
    """The columnar run of several records (its shortcuts decided per batch: drafts that
    cannot be misattributed, draft maxima) finds, per record, what the per-record checks
    of the model's outcome find (misattributed drafts judged draft by draft)."""
    from forensics.sites._common import RecordColumns

    run = pii_replay.run_batch(pii_replay.prepare_columns(RecordColumns(records)), patched).whole()
    found = run.checks.findings()
    model = pii.SITE.patched if patched else pii.SITE.upstream
    for i, rec in enumerate(records):
        alone = pii_replay.outcome_checks(rec, model(rec)).findings().get(0, [])
        assert _keyed(found.get(i, [])) == _keyed(alone)
