"""Hostile input, round 4: the token-continuity check (``forensics/judge/continuity.py``,
``streams.py``) against a capture author who controls every request id, row index, offset,
position and token id it reads.

Each test builds the records in memory (no torch, no engine) and runs the check as the replay
does; a test of the findings table goes through :func:`forensics.judge.findings.with_continuity`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from forensics.judge.continuity import SUBSTITUTED, Continuity, describe
from forensics.judge.findings import with_continuity
from forensics.judge.streams import continuity_of, v1_sites, v2_sites, v2_stream
from forensics.records import Record
from forensics.simulator.runs import simulate
from tests.instructions import assert_scales_linearly

SINK, PREPARE, CHANGE = v1_sites()
_, COMBINE, POST = v2_sites()
MANIFEST = {"versions": {"vllm": "0.33.0"}, "model": {"num_speculative_tokens": 0}}


def _check(records: list[Record], manifest: dict[str, Any] | None = None) -> Continuity:
    by_site: dict[str, list[Record]] = {}
    for record in records:
        by_site.setdefault(record.site, []).append(record)
    return continuity_of(lambda site: by_site.get(site, []), set(by_site), manifest)


def _v1(fed: list[int], *, prev: dict[str, Any] | None = None, sampled: Any = None,
        bound: int = 100, bound_2: int | None = None, written: list[int] | None = None
        ) -> list[Record]:
    """Two V1 steps of requests ``a`` (row 0) and ``b`` (row 1), one token each: step 1 feeds
    10 and 20 at position 5, step 2 feeds ``fed`` at position 6, where the request had 11 and
    21 (the ids step 1 sampled). ``prev``: step 2's ``batch_change`` names for its previous
    rows; ``sampled``: step 2's ``prev_sampled_token_ids``; ``bound``/``bound_2``: the
    embedding's rows at steps 1 and 2."""
    def step(s: int, ids: list[int], position: int, last: Any, names: dict[str, Any],
             rows: int) -> list[Record]:
        return [Record(CHANGE, s, 0, {"valid_sampled_token_count": np.array([1, 1]), **names}),
                Record(PREPARE, s, 0, {
                    "prev_sampled_token_ids": last, "cu_num_tokens": np.array([1, 2]),
                    "num_draft_tokens": np.array([0, 0]), "req_ids": ["a", "b"],
                    "prev_num_spec_tokens": 0}),
                Record(SINK, s, 0, {"input_ids": np.array(ids), "num_embeddings": rows,
                                    "positions": np.array([position, position])})]
    first = step(1, [10, 20], 5, np.array([[9], [19]]), {"prev_req_ids": ["a", "b"]}, bound)
    last = np.array([[11], [21]]) if sampled is None else sampled
    second = step(2, fed, 6, last, prev or {"prev_req_ids": ["a", "b"]},
                  bound if bound_2 is None else bound_2)
    if written is not None:  # what the staging wrote before the clamp
        second[1].fields["input_ids_device_after"] = np.array(written)
    return first + second


def test_the_two_step_capture_is_judged() -> None:
    """The base of the attacks below: the right ids are ok, a wrong one is substituted."""
    assert (_check(_v1([11, 21]), MANIFEST).verdict, _check(_v1([11, 21]), MANIFEST).judged) \
        == ("ok", 2)
    (found,) = _check(_v1([11, 22]), MANIFEST).findings
    assert (found["req_id"], found["element"], found["expected"]) == ("b", 1, 21)


@pytest.mark.parametrize("row", [10**12, 2**62, 2**63 - 1])
def test_a_row_index_claimed_by_prev_req_id_to_index_sizes_nothing(row: int) -> None:
    """``prev_req_id_to_index`` naming row 10**12: the check allocated a list of that many
    entries (MemoryError; a smaller claim, 10**9, took 8 GB). Only the rows the staging holds
    are read now: ``a`` is not judged, ``b`` still is."""
    records = _v1([11, 22], prev={"prev_req_id_to_index": {"a": row, "b": 1}})
    result = _check(records, MANIFEST)
    assert [(f["req_id"], f["expected"]) for f in result.findings] == [("b", 21)]
    assert result.judged == 1


def test_a_negative_row_index_is_not_read_from_the_end() -> None:
    """``{"b": 1, "a": -1}``: row -1 was Python's last row, so ``a`` took ``b``'s row and
    ``b``'s sampled id became ``a``'s expected token (a wrong sentence). Now ``a`` is unknown."""
    records = _v1([11, 21], prev={"prev_req_id_to_index": {"b": 1, "a": -1}})
    result = _check(records, MANIFEST)
    assert result.findings == [] and result.judged == 1


@pytest.mark.parametrize("prev", [{"prev_req_ids": ["a", "a"]},
                                  {"prev_req_id_to_index": {"a": 0, "b": 0}}])
def test_a_request_named_at_two_rows_or_a_row_held_twice_is_not_judged(prev: dict[str, Any]
                                                                       ) -> None:
    """No engine holds one request in two rows, nor two requests in one row: the check took
    the last claim and reported the other row's sampled id as the request's own."""
    result = _check(_v1([11, 21], prev=prev), MANIFEST)
    assert result.findings == []


def test_a_sampled_ids_tensor_without_columns_is_not_read() -> None:
    """``prev_sampled_token_ids`` of shape (2, 0): IndexError (an internal error)."""
    result = _check(_v1([11, 22], sampled=np.zeros((2, 0), dtype=np.int32)), MANIFEST)
    assert result.findings == [] and result.judged == 0


@pytest.mark.parametrize("token", [2**64 - 1, 2**63 - 1, 100, -5])
def test_an_expected_id_out_of_range_is_not_a_substitution(token: int) -> None:
    """A sampled id past the vocabulary (or past int64, in a uint64 tensor) is not the token
    the request had: the check said "was fed token 21 where the request had token
    18446744073709551615", and the findings table then failed (OverflowError)."""
    dtype = np.uint64 if token > 2**63 - 1 else np.int64
    sampled = np.array([[11], [0]], dtype=dtype)
    sampled[1, 0] = token
    result = _check(_v1([11, 21], sampled=sampled), MANIFEST)
    assert result.findings == [] and result.judged == 1


def test_each_token_is_judged_against_its_own_records_bound() -> None:
    """Step 2's embedding has 20 rows (steps 1 and 3: 100): id 22 is past it there, a bounds
    finding of that record, never a substitution (the check used the last record's bound
    for every step)."""
    records = _v1([11, 22], bound=100, bound_2=20)
    for record in records[3:]:
        third = copy.deepcopy(record)
        third.step = 3
        if record.site == SINK:
            third.fields.update(input_ids=np.array([11, 21]), num_embeddings=100)
        records.append(third)
    assert _check(records, MANIFEST).findings == []
    assert [f["step"] for f in _check(_v1([11, 22], bound=20, bound_2=100),
                                      MANIFEST).findings] == [2]


def test_an_embedding_of_zero_rows_bounds_every_id() -> None:
    """``num_embeddings = 0`` read as "no bound" (``0 or ...``): every id was judged."""
    assert _check(_v1([11, 22], bound=0), MANIFEST).findings == []


def test_the_findings_table_holds_every_continuity_finding() -> None:
    """The findings the check makes always fit the table's int64 columns."""
    records = _v1([11, 22], sampled=np.array([[11], [21]], dtype=np.uint64))
    result = _check(records, MANIFEST)
    import pandas as pd

    table = with_continuity(pd.DataFrame(), result.findings, ["upstream"],
                            np.zeros((0, 4), dtype=np.int64))
    assert list(table["expected"]) == [21]


@pytest.fixture(scope="module")
def v2_records() -> list[Record]:
    """A clean simulated V2 run with one verified token replaced at step 4."""
    records = simulate("v2-clean", steps=6, seed=1)
    sink = next(r for r in records if r.site == SINK and r.step == 4)
    ids = np.array(sink["input_ids"], copy=True)
    ids[0] = (int(ids[0]) + 1) % int(sink["num_embeddings"])
    sink.fields["input_ids"] = ids
    return records


def _v2_with(records: list[Record], site: str, field: str, change: Any) -> Continuity:
    """The check of a copy of ``records`` whose step-4 ``site`` record's ``field`` is changed
    by ``change`` (a function of the array)."""
    copied = copy.deepcopy(records)
    record = next(r for r in copied if r.site == site and r.step == 4)
    record.fields[field] = change(np.array(record[field], dtype=np.int64))
    return _check(copied, {"runner": "v2"})


def test_the_v2_base_finds_its_one_substitution(v2_records: list[Record]) -> None:
    (found,) = _check(v2_records, {"runner": "v2"}).findings
    assert (found["kind"], found["step"], found["element"]) == (SUBSTITUTED, 4, 0)


def _set(at: int, value: int) -> Any:
    def change(array: np.ndarray) -> np.ndarray:
        array[at] = value
        return array
    return change


@pytest.mark.parametrize("start", [-1, -3, -2**40])
def test_a_negative_row_start_names_no_element_from_the_end(v2_records: list[Record],
                                                            start: int) -> None:
    """``query_start_loc[0] = -3``: the check judged ``input_ids[-3]`` (the third id from the
    end, named as element -3); ``-2**40`` raised IndexError. A row whose span is not within
    the ids is not judged."""
    result = _v2_with(v2_records, COMBINE, "query_start_loc", _set(0, start))
    assert all(f["element"] >= 0 for f in result.findings)
    assert all(f["element"] >= 0 for f in result.notes)


@pytest.mark.parametrize(("at", "value"), [(-1, -2**40), (1, 0), (2, 0)])
def test_decreasing_row_offsets_judge_no_id_twice(v2_records: list[Record], at: int,
                                                  value: int) -> None:
    """Offsets that go back (rows that overlap, padding that starts before the rows end):
    no id is read as two requests' token, nor as a request's token and padding."""
    result = _v2_with(v2_records, COMBINE, "query_start_loc", _set(at, value))
    judged = [(f["step"], f["element"]) for f in result.findings + result.notes]
    assert len(judged) == len(set(judged))


def test_a_position_past_int64_is_unknown(v2_records: list[Record]) -> None:
    """``num_computed_tokens`` at int64's end: the positions after it do not fit the table
    (a finding there made the table raise OverflowError)."""
    copied = copy.deepcopy(v2_records)
    for record in copied:
        if record.site == POST:
            record.fields["num_computed_tokens"] = np.full_like(
                record["num_computed_tokens"], 2**63 - 2, dtype=np.int64)
    stream = v2_stream(lambda site: [r for r in copied if r.site == site])
    fed = [span.fed(k) for span in stream.spans for k in range(len(span.reads))]
    assert fed and all(f.position is None or f.position < 2**63 for f in fed)


def test_two_rows_of_one_slot_are_not_judged(v2_records: list[Record]) -> None:
    """``idx_mapping`` sending every row to slot 0: each row took slot 0's position and
    drafts; now none of them is judged by them."""
    result = _v2_with(v2_records, COMBINE, "idx_mapping", lambda a: np.zeros_like(a))
    assert [f for f in result.findings if f["step"] == 4] == []


def test_a_sentence_names_a_hostile_request_as_it_is() -> None:
    """The check's sentence carries the request id as every finding's sentence does: quoted
    (:func:`forensics.escaping.quoted`: escaped, its quotes and backticks too); the outputs
    write the sentence through :func:`~forensics.escaping.inert` or their escaping."""
    from forensics.escaping import quoted

    evil = '\x1b[31m"""<script>|=1'
    records = _v1([11, 22], prev={"prev_req_ids": ["a", evil]})
    for record in records:
        if "req_ids" in record.fields:
            record.fields["req_ids"] = ["a", evil]
    (found,) = _check(records, MANIFEST).findings
    assert found["req_id"] == evil and f"request {quoted(evil)}, position 6" in describe(found)
    assert "request '\\x1b[31m\"\"\"<script>|=1', position 6" in describe(found)


def _alternating(steps: int) -> Any:
    """A V1 capture of one request fed at positions 5, 6, 5, 6, ...: every second step's
    sampled id is accepted at position 6 again, so one key holds ``steps / 2`` tokens."""
    records = []
    for s in range(1, steps + 1):
        records += [
            Record(CHANGE, s, 0, {"valid_sampled_token_count": np.array([1]),
                                  "prev_req_ids": ["a"]}),
            Record(PREPARE, s, 0, {"prev_sampled_token_ids": np.array([[7]]),
                                   "cu_num_tokens": np.array([1]),
                                   "num_draft_tokens": np.array([0]), "req_ids": ["a"],
                                   "prev_num_spec_tokens": 0}),
            Record(SINK, s, 0, {"input_ids": np.array([8]), "num_embeddings": 100,
                                "positions": np.array([5 if s % 2 else 6])})]
    return lambda: _check(records, MANIFEST)


def test_a_position_accepted_at_every_step_is_judged_in_linear_time(tmp_path: Path) -> None:
    """Each token fed scanned every token accepted at its position before: quadratic in the
    steps (8,000 steps took 9x the time of 2,000); 4x the steps now cost under 6x the
    instructions. Every one of them substitutes."""
    assert len(_alternating(50)().findings) == 25
    assert_scales_linearly(__file__, "alternating", 1500, tmp_path)


def make_work(case: str, steps: int, scratch: Path) -> Callable[[], object]:
    """Judging :func:`_alternating` of ``steps`` (run by :mod:`tests.instructions`)."""
    return _alternating(steps)


def test_the_report_tables_hold_a_step_near_int64s_end(v2_records: list[Record]) -> None:
    """Steps from 2**63 - 20: the summary by site (the report's first table) built its
    ``first_step`` column through float64 and failed (``cannot safely cast non-equivalent
    float64 to int64``): ``forensics report`` ended in an error."""
    import forensics
    from forensics.present.tables import summary_by_site

    shifted = copy.deepcopy(v2_records)
    for record in shifted:
        record.step += 2**63 - 20
    table = summary_by_site(forensics.replay(shifted))
    firsts = table[table["site"] == SINK]["first_step"].tolist()
    assert firsts == [2**63 - 16] * 2
    assert table["first_step"].isna().sum() == len(table) - 2


def _entry(ident: str) -> Any:
    from forensics.known.schema import load_catalogue

    return next(e for e in load_catalogue().entries if e.id == ident)


@pytest.mark.parametrize("kind", ["note", "probe_start", "probe_error", "anything"])
def test_known_matches_no_failure_on_the_text_of_an_event_that_is_no_failure(kind: str
                                                                             ) -> None:
    """A capture's own event (a note, the probe's start, a made-up kind) whose text holds an
    entry's word matched that entry by text alone ("AsyncScheduler's num_output_placeholders
    goes below zero" from ``{"kind": "note", "message": "num_output_placeholders"}``); an
    entry's words are read only in events that mean the engine failed, unless it names
    the kinds."""
    import pandas as pd

    from forensics.known.evidence import Evidence
    from forensics.known.matching import match_entry

    events = [{"kind": kind, "step": 1, "message": "num_output_placeholders logits_processor",
               "error": "num_output_placeholders"}]
    for ident in ("output-placeholders-underflow", "logits-processors-see-placeholders"):
        evidence = Evidence(pd.DataFrame(), "upstream", {"async_scheduling": True}, events)
        assert not match_entry(_entry(ident), evidence).matched
        events_of_a_crash = [{**events[0], "kind": "engine_exception"}]
        evidence = Evidence(pd.DataFrame(), "upstream", {"async_scheduling": True},
                            events_of_a_crash)
        assert match_entry(_entry(ident), evidence).matched


def test_known_takes_the_runner_from_the_sites_a_capture_holds() -> None:
    """A V1 capture whose manifest names no runner, with one token substituted: it matched
    "Model Runner V2 embeds zeros" (runner unknown). The token streams were rebuilt from
    V1's own sites, so the runner is v1 and the V2 entry is contradicted."""
    from types import SimpleNamespace

    import pandas as pd

    from forensics.known.evidence import evidence_of
    from forensics.known.matching import match_entry

    result = _check(_v1([11, 22]), MANIFEST)
    table = with_continuity(pd.DataFrame(), result.findings, ["upstream"],
                            np.zeros((0, 4), dtype=np.int64))
    replayed = SimpleNamespace(findings=table, variants=["upstream"], capture=None,
                               continuity=result)
    match = match_entry(_entry("v2-zeros-embedded"), evidence_of(replayed))  # type: ignore[arg-type]
    assert not match.matched and match.contradicted == ["runner is v1, not v2"]
    unjudged = SimpleNamespace(**{**vars(replayed), "continuity": _check(
        [r for r in _v1([11, 22]) if r.site == SINK], MANIFEST)})
    assert "runner" not in evidence_of(unjudged).facts  # type: ignore[arg-type]


@pytest.mark.parametrize(("read", "clamped"), [(0, True), (5, False), (-1, False)])
def test_a_placeholder_is_called_clamped_only_where_the_model_read_the_clamps_zero(
        read: int, clamped: bool) -> None:
    """The staging wrote -1 for ``a``, vLLM 0.33 with drafts clamps it to 0: "the model read
    token 0" was said even where the embedding recorded 5 (another id than the clamp's: the
    race check's unwritten input) -- a wrong sentence. It is said only where it read 0."""
    spec = {"versions": {"vllm": "0.33.0"}, "model": {"num_speculative_tokens": 2}}
    found = _check(_v1([read, 21], written=[-1, 21]), spec).findings
    assert [f["kind"] for f in found] == (["clamped_placeholder"] if clamped else [])
    if clamped:
        assert "the model read token 0 instead of token 11" in describe(found[0])


@pytest.mark.parametrize("count", ["x", [1], float("inf"), True])
def test_a_draft_count_that_is_no_int_is_read_from_the_records(count: Any) -> None:
    """``model.num_speculative_tokens`` of ``"x"``, ``[1]`` or infinity: ValueError,
    TypeError, OverflowError (an internal error of ``replay``). The staging records say."""
    manifest = {"versions": {"vllm": "0.33.0"}, "model": {"num_speculative_tokens": count}}
    result = _check(_v1([11, 22]), manifest)
    assert result.clamps is False  # the records' prev_num_spec_tokens: 0, no drafter
    assert [f["req_id"] for f in result.findings] == ["b"]


@pytest.mark.parametrize(("key", "value"), [("model", [1]), ("versions", "0.33.0"),
                                            ("process", 7)])
def test_a_manifest_section_that_is_no_object_is_refused_in_one_line(
        tmp_path: Any, key: str, value: Any) -> None:
    """``"model": [1]`` or ``"versions": "abc"``: every reader of the manifest took them for
    objects (AttributeError: an internal error of ``replay``); the reader refuses them."""
    import json

    from forensics.errors import CaptureFormatError
    from forensics.store.reader import load
    from forensics.store.writer import write_capture

    path = write_capture(tmp_path / "c.capture", [Record(SINK, 1, 0, {
        "input_ids": np.array([1, 2]), "num_embeddings": 10})])
    manifest = json.loads((path / "manifest.json").read_text())
    manifest[key] = value
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CaptureFormatError, match=f"'{key}' must be an object, got "):
        load(path)


def test_a_capture_whose_every_token_is_wrong_is_counted_not_listed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every token substituted: a row per token, for every variant (1,000 steps of 64
    requests: 287,396 findings, 1.7 GB). The check counts them all and keeps the first
    (here 10) for the table; the sentence and ``replay --json`` give the count."""
    from forensics.judge import continuity

    monkeypatch.setattr(continuity, "MAX_FINDINGS", 10)
    result = _alternating(60)()
    assert (len(result.findings), result.counts, result.verdict) == (
        10, {SUBSTITUTED: 30}, "violation")
    assert result.summary()["found"] == 30 and result.summary()["listed"] == 10
    assert result.sentence().startswith("Token continuity: 30 wrong token(s) fed (30 "
                                        "substituted); the first: ")
    assert result.sentence().endswith("(29 more; the findings table lists the first 10).")


def test_past_the_cap_the_first_wrong_token_of_each_site_and_role_is_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Wrong drafts fill the cap, then a wrong verified token: it is kept (the site's verdict
    is read from the table: it must say violation, as the check does)."""
    from forensics.judge import continuity
    from forensics.judge.continuity import DRAFT, VERIFIED, Fed, Recorded, Stream, check

    monkeypatch.setattr(continuity, "MAX_FINDINGS", 2)
    stream = Stream("v1", clamps=False)
    stream.proposed[(0, 2, "a")] = ([5, 5, 5, 5], PREPARE, 2, "draft_token_ids", 0, 1)
    stream.accept(0, "a", 7, Recorded(9, PREPARE, 2, "prev_sampled_token_ids", "[0, 0]", 1))
    stream.fed += [Fed(2, 0, SINK, "input_ids", 1 + j, "a", 8 + j, 6, DRAFT, j, 0, 6, 100)
                   for j in range(4)]
    stream.fed.append(Fed(2, 0, SINK, "input_ids", 0, "a", 7, 8, VERIFIED, -1, 0, 8, 100))
    result = check(stream)
    assert [f["effect"] for f in result.findings] == [DRAFT, DRAFT, VERIFIED]
    assert result.counts == {SUBSTITUTED: 5} and result.verdict == "violation"


@pytest.mark.parametrize(("kind", "value", "given", "label"), [
    ("substituted", 78, None, "not the request's token"),
    ("clamped_placeholder", -1, "placeholder", "placeholder"),
    ("unwritten_input", 5, None, "not the id written"),
    ("misattributed", 3, None, "another request's row"),
    ("out_of_bounds", -1, None, "-1")])
def test_a_triage_group_names_a_wrong_token_for_what_it_is(kind: str, value: int,
                                                           given: str | None,
                                                           label: str) -> None:
    """Triage titled every finding that is not out of bounds "`another request's row`": a
    substituted token ("`another request's row` substituted in input_ids at embedding"), a
    clamped placeholder, an unwritten input -- a wrong sentence for all but misattributed."""
    from forensics.fleet.signature import value_class

    first = {"kind": kind, "value": value, "value_class": given, "lower": 0, "upper": 100,
             "tensor": "input_ids", "site": SINK}
    assert value_class(first) == label


def test_drafts_fed_at_step_zero_are_proposed_at_no_step_before_it() -> None:
    """A capture whose first step is 0 with drafts fed: "proposed at step -1" (a step that
    does not exist) in the sentence and the ``expected_step`` column. Such drafts are not
    judged."""
    records = [Record(CHANGE, 0, 0, {"valid_sampled_token_count": np.array([1]),
                                     "prev_req_ids": ["a"]}),
               Record(PREPARE, 0, 0, {"prev_sampled_token_ids": np.array([[7]]),
                                      "cu_num_tokens": np.array([3]),
                                      "num_draft_tokens": np.array([2]), "req_ids": ["a"],
                                      "draft_token_ids": np.array([[30, 31]]),
                                      "prev_num_spec_tokens": 2}),
               Record(SINK, 0, 0, {"input_ids": np.array([7, 30, 32]), "num_embeddings": 100,
                                   "positions": np.array([5, 6, 7])})]
    result = _check(records, MANIFEST)
    assert all(f["expected_step"] is None or f["expected_step"] >= 0 for f in result.findings)
    assert result.findings == []
