"""Token continuity: a token fed in range but not the request's own is found (issue 40)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from forensics.judge.clamp import clamps
from forensics.judge.continuity import CLAMPED, DRAFT, SUBSTITUTED, VERIFIED, describe
from forensics.judge.streams import continuity_of, v1_sites
from forensics.records import Record

SINK, PREPARE, CHANGE = v1_sites()


def _step(step: int, fed: list[int], positions: list[int], *, prev_last: int, count: int,
          drafts: list[int], written: list[int] | None = None) -> list[Record]:
    """One V1 step of one request ``req-a`` fed ``fed``: 3 scheduled ids (the last two
    drafts), then padding."""
    prepare: dict[str, Any] = {
        "prev_positions": np.array([0]), "prev_sampled_token_ids": np.array([[prev_last]]),
        "input_ids": np.array(fed[:3]), "cu_num_tokens": np.array([3]),
        "num_draft_tokens": np.array([2]), "prev_num_spec_tokens": 2,
        "draft_token_ids": np.array([drafts]), "vocab_size": 100, "req_ids": ["req-a"]}
    if written is not None:
        prepare["input_ids_device_after"] = np.array(written)
    return [Record(CHANGE, step, 0, {"valid_sampled_token_count": np.array([count]),
                                     "prev_req_ids": ["req-a"]}),
            Record(PREPARE, step, 0, prepare),
            Record(SINK, step, 0, {"input_ids": np.array(fed), "num_embeddings": 100,
                                   "positions": np.array(positions + [0] * (len(fed) - 3))})]


def _run(step2_fed: list[int], written: list[int] | None = None,
         positions: bool = True) -> Any:
    """Step 1 feeds 10 at position 5 and drafts 11, 12; one draft is accepted, so step 2's
    verified id is the last sampled (77, at 5 + 2) and its drafts the ones proposed (30, 31)."""
    records = (_step(1, [10, 11, 12], [5, 6, 7], prev_last=10, count=1, drafts=[11, 12])
               + _step(2, step2_fed, [7, 8, 9], prev_last=77, count=2, drafts=[30, 31],
                       written=written))
    if not positions:
        for r in records:
            r.fields.pop("positions", None)
    manifest = {"versions": {"vllm": "0.33.0"}, "model": {"num_speculative_tokens": 2}}
    return continuity_of(lambda site: [r for r in records if r.site == site],
                         {r.site for r in records}, manifest)


def test_the_tokens_the_request_had_are_continuous() -> None:
    result = _run([77, 30, 31])
    assert (result.verdict, result.findings, result.judged) == ("ok", [], 5)  # 2 + 3 ids


def test_a_wrong_verified_token_is_substituted_and_a_violation() -> None:
    result = _run([78, 30, 31])
    (found,) = result.findings
    assert {k: found[k] for k in ("site", "step", "element", "tensor", "kind", "value",
                                  "req_id", "position", "expected", "expected_at",
                                  "expected_step", "effect")} == {
        "site": SINK, "step": 2, "element": 0, "tensor": "input_ids", "kind": SUBSTITUTED,
        "value": 78, "req_id": "req-a", "position": 7, "expected": 77,
        "expected_at": f"{PREPARE} step 2 prev_sampled_token_ids[0, 0]", "expected_step": 1,
        "effect": VERIFIED}
    assert result.verdict == "violation"
    assert describe(found) == (
        "`input_ids[0] = 78` (step 2, request 'req-a', position 7) was fed token 78 where the "
        "request had token 77 (sampled at step 1, recorded at prepare_input_ids step 2 "
        "prev_sampled_token_ids[0, 0]); the output of this request is corrupt from this "
        "token on")


def test_a_wrong_draft_is_substituted_and_a_suspect() -> None:
    result = _run([77, 30, 29])
    (found,) = result.findings
    assert (found["element"], found["value"], found["expected"], found["effect"]) == (
        2, 29, 31, DRAFT)
    assert found["expected_at"] == f"{PREPARE} step 2 draft_token_ids[0, 1]"
    assert result.verdict == "suspect"


def test_a_placeholder_clamped_before_the_embedding_is_named_with_the_token_it_replaced(
        ) -> None:
    """vLLM 0.33 clamps: the staging wrote -1, the embedding read 0, the request had 77."""
    result = _run([0, 30, 31], written=[-1, 30, 31])
    (found,) = result.findings
    assert (found["kind"], found["site"], found["tensor"], found["value"], found["expected"],
            found["effect"]) == (CLAMPED, PREPARE, "out.input_ids_device", -1, 77, VERIFIED)
    assert describe(found).startswith(
        "`out.input_ids_device[0] = -1` (step 2, request 'req-a', position 7) was clamped to "
        "token 0 before the embedding: the model read token 0 instead of token 77, sampled "
        "at step 1")


def test_a_placeholder_that_reached_the_embedding_unclamped_is_not_called_clamped() -> None:
    """The capture shows -1 at the embedding itself: the bounds check reports that, not this."""
    result = _run([-1, 30, 31], written=[-1, 30, 31])
    assert result.findings == []


def test_padding_is_a_note_not_a_finding() -> None:
    records_fed = [77, 30, 31, -1]
    result = _run(records_fed)
    assert result.findings == [] and result.verdict == "ok"
    (note,) = result.notes
    assert (note["element"], note["effect"]) == (3, "padding")


def test_a_capture_without_positions_is_not_judged_never_ok() -> None:
    result = _run([78, 30, 31], positions=False)
    assert result.findings == []
    assert result.verdict == "not judged: needs embedding.positions"
    assert result.sentence() == "Token continuity not judged: needs embedding.positions."


def test_input_ids_alone_are_not_judged() -> None:
    """An imported tensor of input ids alone (the sink only): every other field is named."""
    only = [Record(SINK, 1, 0, {"input_ids": np.array([1, 2]), "num_embeddings": 10})]
    result = continuity_of(lambda site: [r for r in only if r.site == site], {SINK}, {})
    assert result.verdict.startswith("not judged: needs ")
    assert f"{PREPARE} (rows, drafts and sampled ids)" in result.needs


@pytest.mark.parametrize(("version", "runner", "speculative", "expected"), [
    ("0.33.0", "v1", True, True), ("0.32.0", "v1", True, True),
    ("0.33.0", "v1", False, False), ("0.33.0", "v2", True, False),
    ("0.20.1", "v1", True, None)])
def test_whether_vllm_clamps_is_read_not_assumed(version: str, runner: str, speculative: bool,
                                                 expected: bool | None) -> None:
    assert clamps(version, runner, speculative)[0] is expected


@pytest.mark.parametrize("scenario", ["clean", "v2-clean"])
def test_a_clean_simulated_run_has_no_substitution(scenario: str) -> None:
    from forensics.simulator.runs import simulate

    records = simulate(scenario, steps=60, seed=3)
    result = continuity_of(lambda site: [r for r in records if r.site == site],
                           {r.site for r in records}, None)
    assert result.needs == [] and result.judged > 100
    assert result.findings == [] and result.verdict == "ok"


def test_a_misattributed_row_feeds_another_requests_tokens() -> None:
    """batch_change's misattribution copies another request's in-range tokens: substituted."""
    from forensics.simulator.runs import simulate

    records = simulate("misattribution", steps=60, seed=0)
    result = continuity_of(lambda site: [r for r in records if r.site == site],
                           {r.site for r in records}, None)
    assert result.verdict == "violation"
    assert {f["kind"] for f in result.findings} == {SUBSTITUTED}
    assert {f["effect"] for f in result.findings} == {VERIFIED, DRAFT}


def test_the_replay_judges_a_substitution_under_every_variant() -> None:
    """One verified token replaced in a clean run: a violation at the sink for each variant,
    the finding in the table, the sentence in the conclusion."""
    import forensics
    from forensics.present.conclusion import conclude
    from forensics.simulator.runs import simulate

    records = simulate("clean", steps=12, seed=1)
    sink = [r for r in records if r.site == SINK and r.step == 10][0]
    ids = np.array(sink["input_ids"], copy=True)
    true = int(ids[0])
    ids[0] = (true + 1) % 32000
    sink.fields["input_ids"] = ids
    result = forensics.replay(records)
    mine = result.findings[result.findings["kind"] == SUBSTITUTED]
    assert sorted(mine["variant"]) == ["patched", "upstream"]
    assert set(mine["step"]) == {10} and set(mine["expected"]) == {true}
    assert result.verdicts["upstream"][SINK] == "violation"
    expected_text = ("Token continuity: 1 wrong token(s) fed (1 substituted); the first: "
                     "`input_ids[0] = ")
    assert expected_text in conclude(result).paragraph()


def test_a_step_without_a_staging_record_is_skipped_not_a_missing_field() -> None:
    """The probe records prepare_input_ids only at steps that carry ids over from the previous
    step (a first, prefill-only step has none): such a step's embedding is not judged, and the
    check is not "not judged: needs num_draft_tokens" for the whole capture."""
    first = [Record(SINK, 0, 0, {"input_ids": np.array([1, 2, 3, 4, 10]), "num_embeddings": 100,
                                 "positions": np.array([0, 1, 2, 3, 4]),
                                 "req_ids": ["req-a"], "cu_num_tokens": np.array([5])})]
    records = first + _step(1, [10, 11, 12], [5, 6, 7], prev_last=10, count=1,
                            drafts=[11, 12]) + _step(2, [77, 30, 31], [7, 8, 9], prev_last=77,
                                                     count=2, drafts=[30, 31])
    manifest = {"versions": {"vllm": "0.33.0"}, "model": {"num_speculative_tokens": 2}}
    result = continuity_of(lambda site: [r for r in records if r.site == site],
                           {r.site for r in records}, manifest)
    assert (result.verdict, result.findings, result.needs) == ("ok", [], [])
    assert result.judged == 5
