"""The ``vllm`` variant: the installed vLLM 0.33.0 code on CPU, one test per path of DESIGN.md."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from _builders import I32, VOCAB_DIFF, a32, a64, col, prep, rec

from forensics.errors import CaptureFormatError, MissingDependencyError, UnsupportedVersionError
from forensics.outcome import ERROR, INDEX_ERROR, OK
from forensics.records import Record
from forensics.variants import registry, vllm_adapters
from forensics.variants.agreement import outcome_of
from forensics.variants.vllm_real import VllmVariant


def assert_out(outputs: dict, name: str, expected: np.ndarray) -> None:
    got = outputs[name]
    assert isinstance(got, np.ndarray) and got.dtype == expected.dtype, (name, got)
    assert got.tolist() == expected.tolist(), (name, got)


# --- registry, lazy import, dependency errors ---------------------------------------------------

def test_import_and_building_variants_import_neither_torch_nor_vllm() -> None:
    code = ("import sys, forensics, forensics.variants, forensics.variants.vllm_real, "
            "forensics.variants.vllm_diff; "
            "from forensics.variants import registry; "
            f"registry.create('vllm'); registry.create('vllm+{VOCAB_DIFF}'); "
            "print(sorted(m for m in ('torch', 'vllm') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_registry_builds_the_vllm_variant() -> None:
    variant = registry.create("vllm")
    assert isinstance(variant, VllmVariant) and variant.name == "vllm"


def test_missing_vllm_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm_adapters, "vllm_version", lambda: None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'vllm-forensics\[vllm\]'"):
        VllmVariant()


def test_other_vllm_version_names_the_supported_range(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm_adapters, "vllm_version", lambda: "0.34.1")
    with pytest.raises(UnsupportedVersionError, match=r"0\.34\.1.*0\.33\.x"):
        VllmVariant()


def test_installed_version_is_supported() -> None:
    assert vllm_adapters.require_vllm().startswith("0.33.")


def test_runner_module_sees_pin_memory_false(vllm_variant: VllmVariant) -> None:
    runner = sys.modules["vllm.v1.worker.gpu_model_runner"]
    assert runner.PIN_MEMORY is False


def test_summary_records_are_refused(vllm_variant: VllmVariant) -> None:
    summary = Record("embedding", 0, fields={"min": 0, "max": 9, "num_embeddings": 4},
                     summary=True)
    with pytest.raises(CaptureFormatError, match="summary"):
        vllm_variant.run(summary)


# --- batch_change -------------------------------------------------------------------------------

def batch(prev: np.ndarray, valid: np.ndarray, drafts: np.ndarray | None = None) -> Record:
    n = len(prev)
    return rec("batch_change", prev_positions=prev, valid_sampled_token_count=valid,
               num_computed_tokens=a32(10, 20, 30, 40),
               num_accepted_tokens=np.ones(n, dtype=I32),
               prev_num_draft_tokens=a32(2, 0, 3, 1) if drafts is None else drafts,
               cpu_num_computed_tokens=np.arange(7, 7 + n, dtype=I32))


def test_batch_change_previous_rows_with_drafts_take_gpu_plus_valid(vllm_variant) -> None:
    out = vllm_variant.run(batch(a64(2, -1, 1, 0), a32(4, 5, 6))).outputs
    # row 0: prev 2 had drafts -> 30 + 6; row 1 new -> cpu 8; row 2: prev 1 had none -> cpu 9;
    # row 3: prev 0 had drafts -> 10 + 4.
    assert_out(out, "num_computed_tokens", a32(36, 8, 9, 14))
    assert_out(out, "num_accepted_tokens", a32(6, 1, 1, 4))


def test_batch_change_stale_positive_row_is_an_index_error(vllm_variant) -> None:
    outcome = outcome_of(vllm_variant, batch(a64(0, 3), a32(4, 5, 6)))
    assert outcome.status == INDEX_ERROR and "out of bounds" in outcome.message


def test_batch_change_empty_valid_counts_fail_even_when_all_rows_are_new(vllm_variant) -> None:
    assert outcome_of(vllm_variant, batch(a64(-1, -1), a32())).status == INDEX_ERROR


def test_batch_change_no_rows_is_ok(vllm_variant) -> None:
    out = vllm_variant.run(batch(a64(), a32())).outputs
    assert_out(out, "num_computed_tokens", a32(10, 20, 30, 40))
    assert_out(out, "num_accepted_tokens", a32())


# --- prepare_input_ids --------------------------------------------------------------------------

def test_prepare_fast_path_copies_one_slice(vllm_variant) -> None:
    record = prep(a64(0, 1, -1), col(5, 6, 7), a32(-1, -1, 42), a32(1, 2, 3), a32(0, 0, 0),
                  input_ids_device=a32(90, 91, 92))
    # a new row -> the CPU staging is copied first; then slots 0..1 <- sampled rows 0..1
    assert_out(vllm_variant.run(record).outputs, "input_ids_device", a32(5, 6, 42))


def test_prepare_fast_path_broadcasts_a_one_row_source_silently(vllm_variant) -> None:
    record = prep(a64(0, 1), col(5), a32(-1, -1), a32(1, 2), a32(0, 0))
    assert_out(vllm_variant.run(record).outputs, "input_ids_device", a32(5, 5))


def test_prepare_fast_path_short_source_is_a_size_error_not_an_index_error(vllm_variant) -> None:
    record = prep(a64(0, 1, 2), col(5, 6), a32(-1, -1, -1), a32(1, 2, 3), a32(0, 0, 0))
    assert outcome_of(vllm_variant, record).status == ERROR


def test_prepare_slow_path_scatters_samples_and_drafts(vllm_variant) -> None:
    record = prep(a64(1, 0), col(5, 6), a32(-1, -1, -1, -1, -1), a32(2, 5), a32(1, 2), spec=2,
                  draft_token_ids=np.array([[11, 12], [13, 14]], dtype=I32),
                  input_ids_device=a32(90, 91, 92, 93, 94))
    # every row common, no copy: row 0 <- sampled[1]=6 at slot 0, drafts[1,0]=13 at slot 1;
    # row 1 <- sampled[0]=5 at slot 2, drafts[0,:]=11,12 at slots 3,4.
    assert_out(vllm_variant.run(record).outputs, "input_ids_device", a32(6, 13, 5, 11, 12))


def test_prepare_without_draft_tensor_keeps_slots_unwritten(vllm_variant) -> None:
    record = prep(a64(1, 0), col(5, 6), a32(-1, -1, -1, -1, -1), a32(2, 5), a32(1, 2), spec=2,
                  input_ids_device=a32(90, 91, 92, 93, 94))
    assert_out(vllm_variant.run(record).outputs, "input_ids_device", a32(6, 91, 5, 93, 94))


def test_prepare_skipped_new_row_keeps_its_cpu_placeholder(vllm_variant) -> None:
    record = prep(a64(-1, 0), col(5), a32(-1, -1, -1), a32(1, 3), a32(0, 1), spec=1,
                  input_ids_device=a32(90, 91, 92))
    # not every row is common: CPU staging copied first; row 1 (slot 1) <- 5; no draft tensor
    assert_out(vllm_variant.run(record).outputs, "input_ids_device", a32(-1, 5, -1))


def test_prepare_stale_row_past_sampled_rows_is_an_index_error(vllm_variant) -> None:
    record = prep(a64(1, 4), col(5, 6), a32(-1, -1, -1), a32(1, 3), a32(0, 1))
    assert outcome_of(vllm_variant, record).status == INDEX_ERROR


def test_prepare_draft_tensor_with_fewer_rows_is_an_index_error(vllm_variant) -> None:
    record = prep(a64(1, 0), col(5, 6), a32(-1, -1, -1), a32(2, 3), a32(1, 0), spec=1,
                  draft_token_ids=np.array([[11]], dtype=I32))
    assert outcome_of(vllm_variant, record).status == INDEX_ERROR


def test_prepare_draft_overrun_reads_the_next_requests_drafts(vllm_variant) -> None:
    record = prep(a64(0,), col(5, 6), a32(-1, -1, -1), a32(3,), a32(2,), spec=1,
                  draft_token_ids=np.array([[11], [12]], dtype=I32))
    # two drafts but one per previous row: the second comes from row 1's drafts
    assert_out(vllm_variant.run(record).outputs, "input_ids_device", a32(5, 11, 12))


def test_prepare_no_common_rows_copies_the_cpu_staging(vllm_variant) -> None:
    record = prep(a64(-1, -1), col(5), a32(3, 4), a32(1, 2), a32(0, 0),
                  input_ids_device=a32(90, 91))
    assert_out(vllm_variant.run(record).outputs, "input_ids_device", a32(3, 4))


# --- async_output -------------------------------------------------------------------------------

def test_async_output_replaces_placeholders(vllm_variant) -> None:
    record = rec("async_output", req_ids=["a", "b", "c"], prev_req_ids=["b", None, "a"],
                 sampled_token_ids_cpu=np.array([[1, 2, -1], [8, 8, 8], [3, -1, -1]], dtype=I32),
                 output_token_ids=[[4, -1, -1], [5, -1, -1, -1], [6, -1]], vocab_size=100)
    out = vllm_variant.run(record).outputs
    # a <- row 2 (one id, two placeholders: shrinks); b <- row 0 (two ids); c absent: kept
    assert out["output_token_ids"] == [[4, 3], [5, 1, 2], [6, -1]]


def test_async_output_writes_a_vocab_sentinel_before_the_first_placeholder(vllm_variant) -> None:
    record = rec("async_output", req_ids=["a"], prev_req_id_to_index={"a": 0},
                 sampled_token_ids_cpu=np.array([[7, 100, -1, 100]], dtype=I32),
                 output_token_ids=[[-1, -1, -1, -1]], vocab_size=100)
    # the last id is not -1: the whole row counts, sentinels included
    assert vllm_variant.run(record).outputs["output_token_ids"] == [[7, 100, -1, 100]]


def test_async_output_leaves_rows_without_trailing_placeholder(vllm_variant) -> None:
    record = rec("async_output", req_ids=["a", "b"], prev_req_ids=["a", "b"],
                 sampled_token_ids_cpu=np.array([[7, -1], [8, -1]], dtype=I32),
                 output_token_ids=[[4, -1, 5], []], vocab_size=100)
    assert vllm_variant.run(record).outputs["output_token_ids"] == [[4, -1, 5], []]


def test_async_output_previous_row_past_the_sampled_rows_is_an_index_error(vllm_variant) -> None:
    record = rec("async_output", req_ids=["a"], prev_req_id_to_index={"a": 2},
                 sampled_token_ids_cpu=np.array([[7, -1], [8, -1]], dtype=I32),
                 output_token_ids=[[-1]], vocab_size=100)
    assert outcome_of(vllm_variant, record).status == INDEX_ERROR


def test_async_output_tails_come_back_as_tails_and_lengths(vllm_variant) -> None:
    record = rec("async_output", req_ids=["a", "b"], prev_req_ids=["a", "b"],
                 sampled_token_ids_cpu=np.array([[7, -1], [8, 9]], dtype=I32),
                 output_tail=[[-1, -1], [3, -1]], output_len=a32(10, 4), vocab_size=100)
    out = vllm_variant.run(record).outputs
    assert out["output_tail"] == [[7], [3, 8]]
    assert_out(out, "output_len", a32(9, 4))


# --- embedding ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("ids", "tp", "status"), [
    ((0, 3), None, OK), ((0, 4), None, INDEX_ERROR), ((-1,), 1, INDEX_ERROR), ((), None, OK),
    ((0, 4, -1), 2, OK),  # tensor parallel: masked, zeroed, no crash
])
def test_embedding_bounds(vllm_variant, ids: tuple[int, ...], tp: int | None,
                          status: str) -> None:
    extra = {} if tp is None else {"tp_size": tp}
    record = rec("embedding", input_ids=a32(*ids), num_embeddings=4, **extra)
    outcome = outcome_of(vllm_variant, record)
    assert outcome.status == status and outcome.outputs == {}
