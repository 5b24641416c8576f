"""The async_output models: the counting rule, placeholders, tails, the vocabulary guard."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from site_records import i32, record
from test_common_prev_rows import assert_prev_rows_is_prev_index_map, async_records

from forensics.judge.findings import judge_record
from forensics.outcome import STATUSES
from forensics.sites import async_output as ao
from forensics.sites._common import RecordColumns, placeholder_start
from forensics.sites.async_output import lines as ao_lines
from forensics.sites.async_output import replay as ao_replay

V = 248320


def make(outputs, sampled, prev=None, **extra):
    req_ids = [f"r{i}" for i in range(len(outputs))]
    prev = prev if prev is not None else {r: i for i, r in enumerate(req_ids)}
    sampled = np.array(sampled, np.int32)
    return record("async_output", req_ids=req_ids, prev_req_id_to_index=prev,
                  sampled_token_ids_cpu=sampled.reshape(len(sampled), -1) if sampled.ndim != 2
                  else sampled,
                  output_token_ids=outputs, vocab_size=extra.pop("vocab", V), **extra)


def test_sentinel_before_the_first_placeholder_is_written_upstream_only() -> None:
    rec = make([[1, -1, -1, -1, -1, -1]], [[5, V, -1, -1, -1]])
    up, pa = ao.SITE.upstream(rec), ao.SITE.patched(rec)
    assert up.outputs["output_token_ids"] == [[1, 5, V]]
    assert pa.outputs["output_token_ids"] == [[1, 5]]
    assert [(f["tensor"], f["row"], f["element"], f["value"], f["upper"])
            for f in judge_record(rec, up)] == [("out.output_token_ids", 0, 2, V, V)]
    assert judge_record(rec, pa) == []


def test_untouched_rows_keep_placeholders_without_findings() -> None:
    rec = make([[1, -1], [2, 3], [4, -1]], [[7], [8], [9]], prev={"r1": 1, "r2": 2})
    outcome = ao.SITE.upstream(rec)
    assert outcome.outputs["output_token_ids"] == [[1, -1], [2, 3], [4, 9]]
    assert judge_record(rec, outcome) == []


def test_empty_sampled_row_and_fewer_placeholders() -> None:
    rec = make([[1, -1], [2, -1]], np.zeros((2, 0), np.int32).tolist())
    assert ao.SITE.upstream(rec).outputs["output_token_ids"] == [[1, -1], [2, -1]]
    rec = make([[1, -1]], [[7, 8, 9]])
    assert ao.SITE.upstream(rec).outputs["output_token_ids"] == [[1, 7]]


def test_previous_row_past_the_sampled_rows_is_an_index_error() -> None:
    rec = make([[1, -1]], [[7]], prev={"r0": 3})
    outcome = ao.SITE.upstream(rec)
    assert outcome.status == "index_error"
    assert [(f["tensor"], f["value"], f["upper"]) for f in judge_record(rec, outcome)] == [
        ("sampled_token_ids_cpu", 3, 1)]


def test_rows_sharing_a_previous_row_see_it_shortened_as_in_vllm() -> None:
    rec = make([[1, -1], [-1, -1]], [[-1, -1]], prev={"r0": 0, "r1": 0})
    assert ao.SITE.upstream(rec).outputs["output_token_ids"] == [[1], [-1, -1]]


def test_prev_req_ids_list_is_the_same_as_the_map() -> None:
    rec = record("async_output", req_ids=["a", "b"], prev_req_ids=[None, "a"],
                 sampled_token_ids_cpu=i32(1, 2).reshape(2, 1),
                 output_token_ids=[[-1], [-1]], vocab_size=10)
    assert ao.SITE.upstream(rec).outputs["output_token_ids"] == [[2], [-1]]


def _tail(rec, keep):
    lists = rec["output_token_ids"]
    tails = [row[max(0, len(row) - k):] for row, k in zip(lists, keep, strict=True)]
    fields = {k: v for k, v in rec.fields.items() if k != "output_token_ids"}
    return record("async_output", output_tail=tails,
                  output_len=np.array([len(r) for r in lists], np.int32), **fields)


@st.composite
def ao_records(draw):
    n, k = draw(st.integers(0, 4)), draw(st.integers(0, 5))
    sampled = [draw(st.lists(st.sampled_from([-1, 0, 7, V - 1, V, V + 3, -2]), min_size=k,
                             max_size=k)) for _ in range(draw(st.integers(0, 4)))]
    outputs = [draw(st.lists(st.integers(0, 9), max_size=3)) + [-1] * draw(st.integers(0, 5))
               for _ in range(n)]
    prev = {f"r{i}": draw(st.integers(0, 4)) for i in range(n) if draw(st.booleans())}
    return make(outputs, np.array(sampled, np.int32).reshape(len(sampled), k), prev)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from([-1, -1, 0, 3, 7]), max_size=6), max_size=5))
def test_the_per_list_placeholder_start_is_the_columnar_one(lists) -> None:
    """The probe's per-call form of the rule equals the columnar rule, list by list."""
    from forensics.sites.core import ragged_parts

    values, lengths = ragged_parts(lists)
    assert ao_lines.trailing_start(values, lengths).tolist() == [
        placeholder_start(ids) for ids in lists]


@settings(max_examples=300, deadline=None)
@given(ao_records(), st.data())
def test_tails_give_the_same_result_as_full_lists(rec, data) -> None:
    keep = []
    for row in rec["output_token_ids"]:
        trailing = len(row) - placeholder_start(row)
        keep.append(data.draw(st.integers(min(len(row), trailing + 1), max(len(row), 1))))
    tailed = _tail(rec, keep)
    for model in (ao.SITE.upstream, ao.SITE.patched):
        full, part = model(rec), model(tailed)
        assert full.status == part.status
        if full.status == "ok":
            for row, tail, length in zip(full.outputs["output_token_ids"],
                                         part.outputs["output_tail"],
                                         part.outputs["output_len"], strict=True):
                assert len(row) == length and row[len(row) - len(tail):] == tail
            assert ([f["value"] for f in judge_record(rec, full)]
                    == [f["value"] for f in judge_record(tailed, part)])


@settings(max_examples=300, deadline=None)
@given(ao_records())
def test_patched_never_writes_an_id_outside_the_vocabulary(rec) -> None:
    outcome = ao.SITE.patched(rec)
    assert not [f for f in judge_record(rec, outcome) if f["tensor"].startswith("out.")]


@given(st.lists(st.tuples(st.lists(st.sampled_from("abcdef"), unique=True, max_size=5),
                          st.lists(st.sampled_from("abcdef") | st.none(), max_size=6)),
                max_size=4),
       st.booleans())
@settings(max_examples=60, deadline=None)
def test_previous_rows_by_table_and_by_search_are_prev_index_map(batch, search) -> None:
    """``prev_rows`` gives each current row its previous row as ``prev_index_map`` does
    (the last of a repeated id wins), whether it looks the keys up in a table or, past the
    table's size, by a sort and a search (imported at the top: imported here, the module's
    own ``@given`` was applied inside this test's, and hypothesis refused the test as nested
    whenever this file ran without the other first)."""
    assert_prev_rows_is_prev_index_map(async_records(batch, long=False), table=not search)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10).flatmap(
    lambda w: st.lists(st.lists(st.booleans(), min_size=w, max_size=w), max_size=20)
    .map(lambda lines: np.array(lines, dtype=bool).reshape(len(lines), w))))
def test_first_true_is_the_first_true_of_each_line(mask) -> None:
    want = [line.index(True) if True in line else mask.shape[1] for line in mask.tolist()]
    assert ao_lines.first_true(mask).tolist() == want


@st.composite
def same_width_batches(draw):
    """Records whose sampled rows all have one width (their sampled rows form one matrix),
    vocabularies shared or not."""
    k = draw(st.integers(1, 9))
    vocab = draw(st.sampled_from([[V], [V, 7], [7, 3]]))
    records = []
    for _ in range(draw(st.integers(1, 4))):
        n = draw(st.integers(0, 4))
        sampled = [draw(st.lists(st.sampled_from([-1, 0, 6, 7, V - 1, V, -2]), min_size=k,
                                 max_size=k)) for _ in range(draw(st.integers(1, 4)))]
        outputs = [draw(st.lists(st.integers(0, 9), max_size=3)) + [-1] * draw(st.integers(0, 9))
                   for _ in range(n)]
        prev = {f"r{i}": draw(st.integers(0, 4)) for i in range(n) if draw(st.booleans())}
        records.append(make(outputs, sampled, prev, vocab=draw(st.sampled_from(vocab))))
    return records


@settings(max_examples=300, deadline=None)
@given(same_width_batches())
def test_counts_on_the_sampled_matrix_are_the_counts_of_gathered_rows(records) -> None:
    """Counted once per line of the sampled matrix, or per row on the rows gathered: the same
    ids written; and a batch's run gives each record its own run's outcome and checks."""
    batch = ao_replay.Batch.of(records)
    s = ao_replay._select(batch)
    assert s.lines is not None
    for patched in (False, True):
        gathered = ao_replay._gathered_counts(s.ids, s.k, s.vocab, s.placeholders, s.groups,
                                              patched)
        assert ao_replay._counts(batch, s, patched).tolist() == gathered.tolist()
        model = ao.SITE.patched if patched else ao.SITE.upstream
        together = ao_replay.run(batch, patched)
        found = together.checks().findings()
        # the ids written, as read from the rows before and after the call
        rebuilt = ao_replay.written(batch, *together.after(), together.status == 0)
        assert together.writes().findings() == rebuilt.findings()
        for i, (rec, outcome) in enumerate(zip(records, together.outcomes(), strict=True)):
            alone = model(rec)
            assert (outcome.status, outcome.outputs) == (alone.status, alone.outputs)
            own = ao_replay.run(ao_replay.Batch.of([rec]), patched).checks().findings().get(0, [])
            assert found.get(i, []) == own


#: rows as the probe records tails: the trailing placeholders and the id before them
PROBE_TAILS = st.tuples(st.booleans(), st.integers(0, 6)).map(
    lambda t: [5] * t[0] + [-1] * t[1])
ANY_ROWS = st.lists(st.sampled_from([-1, -1, 0, 5, V]), max_size=9)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from([ANY_ROWS, PROBE_TAILS, ANY_ROWS | PROBE_TAILS])
       .flatmap(lambda rows: st.lists(rows, max_size=12)))
def test_trailing_start_is_where_each_rows_trailing_placeholders_begin(rows) -> None:
    """Per row: one past its last id that is not -1 (0 for a row of -1 only, its length
    when it does not end in -1), as a loop over the row from its end finds it; rows made
    only of probe tails, of any ids, or of both."""
    def by_loop(row):
        end = len(row)
        while end and row[end - 1] == -1:
            end -= 1
        return end

    values = np.array([v for row in rows for v in row], dtype=np.int64)
    lengths = np.array([len(row) for row in rows], dtype=np.int64)
    want = [by_loop(row) for row in rows]
    assert ao_lines.trailing_start(values, lengths).tolist() == want
    some = np.arange(len(rows))[::2]
    assert ao_lines.trailing_start(values, lengths, some).tolist() == [want[i] for i in some]


def _judged(checks, req_ids):
    """What the judge reads from checks: findings per record, and each checked range as
    (record, tensor, min, max, lower, upper)."""
    rec, tensors, which, numbers = checks.range_table()
    ranges = [(r, tensors[w], *n) for r, w, n in zip(rec.tolist(), which.tolist(),
                                                      numbers.tolist(), strict=True)]
    return checks.findings(req_ids), ranges


@settings(max_examples=300, deadline=None)
@given(st.one_of(same_width_batches(), st.lists(ao_records(), min_size=1, max_size=4)),
       st.sampled_from([(False, True), (True, False), (True,)]))
def test_run_batch_judges_each_record_as_its_own_outcome(records, order) -> None:
    """``run_batch`` of a batch (a model run after the other shares its accesses, its run
    when it writes the same ids, and cuts the other's ids where it writes fewer): status,
    findings and checked ranges of each record are those of its own outcome, one record at
    a time."""
    batch = ao_replay.prepare_columns(RecordColumns(records))
    for patched in order:
        done = ao_replay.run_batch(batch, patched)
        model = ao.SITE.patched if patched else ao.SITE.upstream
        found, ranges = _judged(done.checks, done.req_ids)
        for i, rec in enumerate(records):
            outcome = model(rec)
            assert STATUSES[done.status[i]] == outcome.status
            assert (i in done.messages) == (outcome.status != "ok")
            own_found, own_ranges = _judged(ao_replay.outcome_checks(rec, outcome),
                                            [rec["req_ids"]])
            assert found.get(i, []) == own_found.get(0, [])
            assert [r[1:] for r in ranges if r[0] == i] == [r[1:] for r in own_ranges]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 8).flatmap(lambda k: st.tuples(
    st.lists(st.lists(st.integers(-2, 9), min_size=k, max_size=k), min_size=1, max_size=6),
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, k)), max_size=10))))
def test_line_prefixes_are_the_first_ids_of_each_line(case) -> None:
    lines, taken = case
    matrix = np.array(lines, dtype=np.int32)
    taken = [(line % len(lines), count) for line, count in taken]
    at = np.array([line for line, _ in taken], dtype=np.int64)
    count = np.array([c for _, c in taken], dtype=np.int64)
    want = [v for line, c in taken for v in lines[line][:c]]
    got = ao_lines.line_prefixes(matrix, at, count)
    assert got.dtype == matrix.dtype and got.tolist() == want


@st.composite
def list_records(draw):
    """Records whose previous batch is a list (ids may repeat, rows may be discarded)."""
    n, k = draw(st.integers(0, 4)), draw(st.integers(1, 3))
    req = draw(st.lists(st.sampled_from("abcde"), unique=True, min_size=n, max_size=n))
    prev = draw(st.lists(st.sampled_from("abcde") | st.none(), max_size=5))
    sampled = np.array([draw(st.lists(st.sampled_from([-1, 0, 7, V]), min_size=k,
                                      max_size=k)) for _ in range(len(prev))], np.int32)
    outputs = [draw(st.lists(st.integers(0, 9), max_size=2)) + [-1] * draw(st.integers(0, 4))
               for _ in range(n)]
    return record("async_output", req_ids=req, prev_req_ids=prev,
                  sampled_token_ids_cpu=sampled.reshape(len(prev), k),
                  output_token_ids=outputs, vocab_size=V)


@settings(max_examples=200, deadline=None)
@given(st.lists(list_records(), min_size=1, max_size=3))
def test_a_previous_list_gives_no_two_rows_one_previous_row(records) -> None:
    """A list gives each request the row of its last entry: no two rows of a record share
    a previous row, so the rows are not searched for sharing; each record's outcome is the
    one its previous batch gives as a map (where rows may be shared)."""
    from forensics.sites._common import prev_index_map

    assert ao_replay._select(ao_replay.Batch.of(records)).groups is None
    for model in (lambda rs: ao_replay.run(ao_replay.Batch.of(rs), patched=False).outcomes(),
                  lambda rs: ao_replay.run(ao_replay.Batch.of(rs), patched=True).outcomes()):
        as_maps = [record("async_output", req_ids=r["req_ids"],
                          prev_req_id_to_index=prev_index_map(r),
                          sampled_token_ids_cpu=r["sampled_token_ids_cpu"],
                          output_token_ids=r["output_token_ids"], vocab_size=V)
                   for r in records]
        for a, b in zip(model(records), model(as_maps), strict=True):
            assert (a.status, a.outputs) == (b.status, b.outputs)
