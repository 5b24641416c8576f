"""Site ``rejection_drafts`` (Model Runner V2): the drafts ``gather_draft_sampled`` hands to the
rejection kernels, its reads of the step's token buffers and ``prefill_len``, the placeholders
it writes, and the patch that rejects a draft outside the vocabulary as a negative one is."""

from __future__ import annotations

import numpy as np
from site_records import i32
from v2_records import VOCAB, drafts

from forensics.judge.findings import judge_record
from forensics.sites import get_site
from forensics.sites.rejection_drafts import SITE as site


def _found(rec, out) -> list[tuple]:  # type: ignore[no-untyped-def]
    return [(f["tensor"], f["row"], f["element"], f["value"], f["lower"], f["upper"],
             f["req_id"]) for f in judge_record(rec, out)]


def test_gathers_the_token_and_position_of_each_logits_row() -> None:
    out = site.upstream(drafts())
    assert out.status == "ok"
    assert out.outputs["draft_sampled"].tolist() == [5, 9, 3, 8]
    assert out.outputs["pos"].tolist() == [7, 8, 9, 6]
    assert (out.outputs["draft_sampled"].dtype, out.outputs["pos"].dtype) == (
        np.int32, np.int64)
    assert _found(drafts(), out) == []


def test_a_draft_past_the_vocabulary_is_handed_on_and_found_at_its_request() -> None:
    rec = drafts(draft=VOCAB + 2)
    out = site.upstream(rec)
    assert out.status == "ok" and out.outputs["draft_sampled"].tolist() == [5, VOCAB + 2, 3, 8]
    assert _found(rec, out) == [("draft_sampled", 0, 1, VOCAB + 2, 0, VOCAB, "a")]
    (finding,) = judge_record(rec, out)
    assert (finding["index_tensor"], finding["indexed"]) == ("draft_sampled", "target_logits")


def test_a_negative_draft_is_rejected_by_the_kernels_and_no_finding() -> None:
    rec = drafts(draft=-1)
    out = site.upstream(rec)
    assert out.outputs["draft_sampled"].tolist() == [5, -1, 3, 8] and _found(rec, out) == []


def test_the_first_logits_row_of_a_request_is_no_draft() -> None:
    rec = drafts(input_ids=i32(VOCAB, 9, 3, -4, 99))
    assert _found(rec, site.upstream(rec)) == []


def test_a_step_starting_within_the_prompt_gets_placeholders() -> None:
    rec = drafts(prefill_len=i32(5, 9))  # "a" starts at 7 - 0 < 9: rows 1 and 2 in the prompt
    assert site.upstream(rec).outputs["draft_sampled"].tolist() == [5, -1, -1, 8]
    rec = drafts(prefill_len=i32(5, 8))  # row 1: 8 - 1 < 8; row 2: 9 - 2 < 8
    assert site.upstream(rec).outputs["draft_sampled"].tolist() == [5, -1, -1, 8]
    rec = drafts(prefill_len=i32(5, 7))  # 8 - 1 = 7 and 9 - 2 = 7 are past the prompt of 7
    assert site.upstream(rec).outputs["draft_sampled"].tolist() == [5, 9, 3, 8]


def test_the_patch_rejects_a_draft_outside_the_vocabulary() -> None:
    rec = drafts(draft=VOCAB)
    out = site.patched(rec)
    assert out.outputs["draft_sampled"].tolist() == [5, -1, 3, 8] and _found(rec, out) == []
    assert site.patched(drafts()).outputs["draft_sampled"].tolist() == [5, 9, 3, 8]
    rec = drafts(draft=-7)  # any negative id: a placeholder to the patch
    assert site.patched(rec).outputs["draft_sampled"].tolist() == [5, -1, 3, 8]


def test_a_token_index_past_the_step_is_an_illegal_read() -> None:
    rec = drafts(logits_indices=np.array([0, 1, 5, 3], np.int64))
    out = site.upstream(rec)
    assert out.status == "index_error" and "input_ids position 5" in out.message
    assert _found(rec, out) == [("input_ids", 0, 2, 5, 0, 5, "a"),
                                ("positions", 0, 2, 5, 0, 5, "a")]


def test_a_slot_outside_prefill_len_is_an_illegal_read() -> None:
    rec = drafts(expanded_idx_mapping=np.array([1, 1, 1, -1], np.int64))
    out = site.upstream(rec)
    assert out.status == "index_error" and "prefill_len slot -1" in out.message
    assert _found(rec, out) == [("prefill_len", 1, 3, -1, 0, 2, "b")]


def test_the_columnar_run_is_the_record_by_record_run() -> None:
    """Records of different sizes in one batch: each record's checks and status are its own."""
    records = [drafts(), drafts(draft=VOCAB), drafts(logits_indices=np.array([0, 1, 9, 3]))]
    spec = get_site(site.name)
    run = spec.run_records(records, False)
    assert run is not None
    assert run.status.tolist() == [0, 0, 1]
    by_record = run.checks.findings([r.get("req_ids") for r in records])
    for i, rec in enumerate(records):
        assert [(f["tensor"], f["element"], f["value"]) for f in by_record.get(i, [])] == [
            (f["tensor"], f["element"], f["value"]) for f in judge_record(rec, spec.upstream(rec))]
