"""The six incident shapes of issue 4, each on a small in-memory capture."""

from __future__ import annotations

import numpy as np
from incident_records import SPEC, VOCAB, by_site, clean_step

import forensics
from forensics.records import Record
from forensics.variants.models import PatchedVariant, UpstreamVariant


def test_1_vocab_size_sentinel_written_by_async_output_reaches_the_embedding() -> None:
    reqs = ["a", "b"]
    step5 = clean_step(5, reqs)
    out = by_site(step5, "async_output", 5)
    out.fields["sampled_token_ids_cpu"] = np.array(
        [[100, VOCAB, -1, -1, -1], [110, 111, -1, -1, -1]], np.int32)
    out.fields["output_token_ids"] = [[7] + [-1] * (1 + SPEC), [8] + [-1] * (1 + SPEC)]
    emb = by_site(clean_step(6, reqs), "embedding", 6)
    emb.fields["input_ids"] = np.array([100, VOCAB, 1, 2, 3, 110, 111, 4, 5, 6], np.int64)
    result = forensics.replay([out, emb])

    written = UpstreamVariant().run(out).outputs["output_token_ids"]
    assert written[0] == [7, 100, VOCAB] and VOCAB not in PatchedVariant().run(out).outputs[
        "output_token_ids"][0]
    sink = result.findings[result.findings["site"] == "embedding"].set_index("variant")
    assert sink.loc["upstream", "value"] == VOCAB and sink.loc["upstream", "req_id"] == "a"
    assert sink.loc["upstream", "origin"] == "async_output"
    assert sink.loc["patched", "origin"] == "async_output"
    assert sink.loc["upstream", "resolved"] is False and sink.loc["patched", "resolved"] is True
    assert result.verdicts["upstream"] == {"async_output": "violation", "embedding": "violation"}
    assert result.verdicts["patched"] == {"async_output": "ok", "embedding": "ok"}


def test_2_stale_positive_prev_positions_violate_upstream_only() -> None:
    step = clean_step(3, ["a", "b"])
    bc, pii = by_site(step, "batch_change", 3), by_site(step, "prepare_input_ids", 3)
    bc.fields["prev_positions"] = np.array([0, 5], np.int32)  # 5 >= 2 valid counts
    bc.fields["valid_sampled_token_count"] = np.array([2, 2], np.int32)
    pii.fields["prev_positions"] = np.array([0, 5], np.int64)  # 5 >= 2 sampled rows
    result = forensics.replay([bc, pii])
    assert result.verdicts["upstream"] == {"batch_change": "violation",
                                           "prepare_input_ids": "violation"}
    assert result.verdicts["patched"] == {"batch_change": "ok", "prepare_input_ids": "ok"}
    first = result.first_finding("upstream")
    assert (first["site"], first["row"], first["value"]) == ("batch_change", 1, 5)
    assert result.outcome_counts["upstream"]["index_error"] == 2


def test_3_placeholder_on_a_new_row_survives_both_variants_unresolved() -> None:
    step = clean_step(4, ["a", "b"])
    pii, emb = by_site(step, "prepare_input_ids", 4), by_site(step, "embedding", 4)
    pii.fields["prev_positions"] = np.array([0, -1], np.int64)  # b is absent from last step
    pii.fields["input_ids"] = np.array([0] * 5 + [-1, 0, 0, 0, 0], np.int32)
    emb.fields["input_ids"] = np.array([100, 101, 102, 103, 104, -1, 0, 0, 0, 0], np.int64)
    result = forensics.replay([pii, emb])
    for variant in ("upstream", "patched"):
        mine = result.findings[result.findings["variant"] == variant]
        produced = mine[mine["site"] == "prepare_input_ids"]
        assert produced[["row", "element", "value"]].values.tolist() == [[1, 5, -1]]
        sink = mine[mine["site"] == "embedding"].iloc[0]
        assert (sink["origin"], sink["resolved"], sink["req_id"]) == (
            "prepare_input_ids", False, "b")
        assert result.verdicts[variant]["embedding"] == "violation"


def test_4_in_range_row_of_another_request_is_misattributed() -> None:
    bc = by_site(clean_step(2, ["a", "b"]), "batch_change", 2)
    bc.fields["prev_positions"] = np.array([1, 0], np.int32)  # swapped rows
    result = forensics.replay([bc])
    for variant in ("upstream", "patched"):
        mine = result.findings[result.findings["variant"] == variant]
        assert mine["kind"].tolist() == ["misattributed", "misattributed"]
        assert result.verdicts[variant] == {"batch_change": "suspect"}


def test_5_fast_path_broadcast_of_a_short_source_raises_nothing_yet_is_found() -> None:
    pii = Record("prepare_input_ids", 7, 0, {
        "prev_positions": np.array([0, 1, 2], np.int64),
        "prev_sampled_token_ids": np.array([[42]], np.int32),
        "input_ids": np.zeros(3, np.int32), "cu_num_tokens": np.array([1, 2, 3], np.int32),
        "num_draft_tokens": np.zeros(3, np.int32), "prev_num_spec_tokens": 0,
        "vocab_size": VOCAB})
    result = forensics.replay([pii])
    assert result.outcome_counts["upstream"] == {"ok": 1, "index_error": 0, "error": 0}
    up = result.findings[result.findings["variant"] == "upstream"]
    assert up[["tensor", "kind", "row", "element", "value", "upper"]].values.tolist() == [
        ["prev_sampled_token_ids", "out_of_bounds", 1, 1, 1, 1],
        ["prev_sampled_token_ids", "out_of_bounds", 2, 2, 2, 1]]
    assert result.verdicts["upstream"]["prepare_input_ids"] == "violation"


def test_6_long_clean_run_has_no_findings() -> None:
    records = [r for step in range(60) for r in clean_step(step, ["a", "b", "c"][: 1 + step % 3])]
    result = forensics.replay(records)
    assert result.findings.empty
    assert all(v == "ok" for sites in result.verdicts.values() for v in sites.values())
    assert result.outcome_counts["upstream"]["ok"] == len(records)
    assert result.first_finding("upstream") is None
