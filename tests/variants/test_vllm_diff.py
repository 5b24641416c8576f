"""The diff applier and the ``vllm+PATH.diff`` variant, with the two shipped patches."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np
import pytest
from _builders import STALE_DIFF, VOCAB_DIFF, a32, a64, col, prep, rec

from forensics.errors import CaptureFormatError, ForensicsError, PatchApplyError
from forensics.outcome import INDEX_ERROR, OK
from forensics.variants import registry
from forensics.variants.agreement import outcome_of
from forensics.variants.unidiff import apply_hunks, parse_diff
from forensics.variants.vllm_diff import PatchedVllmVariant, load_patched, vllm_root

I32 = np.int32
TEXT = "".join(f"line {i}\n" for i in range(1, 21))


def one_file(body: str, path: str = "pkg/mod.py") -> str:
    return f"--- a/{path}\n+++ b/{path}\n{body}"


# --- the pure-Python applier --------------------------------------------------------------------

def test_apply_changes_insertions_and_offsets() -> None:
    diff = one_file("@@ -2,3 +2,3 @@\n line 2\n-line 3\n+LINE 3\n line 4\n"
                    "@@ -9,2 +9,4 @@\n line 9\n+new a\n+new b\n line 10\n"
                    "@@ -14,0 +17,1 @@\n+after 14\n")
    [patch] = parse_diff(diff)
    assert patch.path == "pkg/mod.py" and len(patch.hunks) == 3
    out = apply_hunks(TEXT, patch).splitlines()
    assert out[1:4] == ["line 2", "LINE 3", "line 4"]
    assert out[8:12] == ["line 9", "new a", "new b", "line 10"]
    assert out[15:18] == ["line 14", "after 14", "line 15"]


def test_apply_finds_a_hunk_at_an_offset() -> None:
    diff = one_file("@@ -5,2 +5,2 @@\n line 8\n-line 9\n+LINE 9\n")
    out = apply_hunks(TEXT, parse_diff(diff)[0]).splitlines()
    assert out[8] == "LINE 9" and len(out) == 20


def test_timestamps_and_leading_text_are_ignored() -> None:
    diff = ("a description\n\n--- a/pkg/mod.py\t2024-01-01 00:00:00\n"
            "+++ b/pkg/mod.py\t2024-01-01 00:00:01\n@@ -1 +1 @@\n-line 1\n+LINE 1\n")
    assert apply_hunks(TEXT, parse_diff(diff)[0]).startswith("LINE 1\nline 2\n")


def test_a_hunk_that_does_not_match_names_diff_file_and_hunk() -> None:
    diff = one_file("@@ -1 +1 @@\n-line 1\n+LINE 1\n@@ -3 +3 @@\n-nope\n+x\n")
    with pytest.raises(PatchApplyError, match=r"my\.diff: hunk 2 of pkg/mod\.py does not apply"):
        apply_hunks(TEXT, parse_diff(diff, "my.diff")[0], "my.diff")


@pytest.mark.parametrize(("diff", "pattern"), [
    ("not a diff at all\n", "no unified-diff hunks"),
    ("@@ -1 +1 @@\n-a\n+b\n", "hunk before any"),
    (one_file("@@ -1,3 +1,3 @@\n-line 1\n+LINE 1\n"), "hunk 1 of pkg/mod.py does not parse"),
])
def test_malformed_diffs_are_refused(diff: str, pattern: str) -> None:
    with pytest.raises(PatchApplyError, match=pattern):
        parse_diff(diff, "bad.diff")


# --- the variant: errors ------------------------------------------------------------------------

def test_registry_builds_a_patched_variant_named_after_the_diff() -> None:
    variant = registry.create(f"vllm+{VOCAB_DIFF}")
    assert isinstance(variant, PatchedVllmVariant) and variant.name == f"vllm+{VOCAB_DIFF}"


def test_missing_diff_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.diff"
    with pytest.raises(CaptureFormatError, match="nope.diff"):
        PatchedVllmVariant(missing).load()


def write(tmp_path: Path, text: str, name: str = "x.diff") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_diff_not_against_the_installed_vllm_names_file_target_and_hunk(tmp_path: Path) -> None:
    text = VOCAB_DIFF.read_text().replace(" if not new_ids:\n", " if not new_ids_other:\n")
    path = write(tmp_path, text, "stale.diff")
    with pytest.raises(PatchApplyError,
                       match=r"stale\.diff: hunk 1 of vllm/v1/worker/gpu_input_batch\.py"):
        registry.create(f"vllm+{path}")  # fails when the variant is built, before any run


@pytest.mark.parametrize(("text", "pattern"), [
    ("--- /dev/null\n+++ b/vllm/new.py\n@@ -0,0 +1 @@\n+x = 1\n", "creates or deletes"),
    ("--- a/other/mod.py\n+++ b/other/mod.py\n@@ -1 +1 @@\n-a\n+b\n", "not a module of"),
    ("--- a/vllm/nope.py\n+++ b/vllm/nope.py\n@@ -1 +1 @@\n-a\n+b\n", "does not exist"),
])
def test_diffs_touching_other_files_are_refused(tmp_path: Path, text: str, pattern: str) -> None:
    with pytest.raises(PatchApplyError, match=pattern):
        load_patched(write(tmp_path, text))


def test_a_patched_module_that_fails_to_import_is_a_patch_error(tmp_path: Path) -> None:
    bad = VOCAB_DIFF.read_text().replace("+            num_sampled_ids = next(",
                                         "+            num_sampled_ids = next((")
    with pytest.raises(PatchApplyError, match="fails to import"):
        load_patched(write(tmp_path, bad, "syntax.diff"))


def test_errors_are_forensics_errors() -> None:
    assert issubclass(PatchApplyError, ForensicsError)


# --- the shipped patches: loading leaves the installed vLLM alone -------------------------------

TOUCHED = ("vllm/v1/spec_decode/utils.py", "vllm/v1/worker/gpu_model_runner.py",
           "vllm/v1/worker/gpu_input_batch.py")


def digests() -> dict[str, str]:
    root = vllm_root()
    return {p: hashlib.sha256((root / p).read_bytes()).hexdigest() for p in TOUCHED}


def test_patches_load_privately_and_leave_installed_vllm_untouched(vllm_variant) -> None:
    import vllm.v1.spec_decode.utils as utils

    before, original = digests(), utils.update_num_computed_tokens_for_batch_change
    stale, vocab = load_patched(STALE_DIFF), load_patched(VOCAB_DIFF)
    assert digests() == before
    assert utils.update_num_computed_tokens_for_batch_change is original
    assert set(stale) == {"vllm.v1.spec_decode.utils", "vllm.v1.worker.gpu_model_runner"}
    assert set(vocab) == {"vllm.v1.worker.gpu_input_batch"}
    for name, module in {**stale, **vocab}.items():
        assert module.__name__ != name and module.__name__.startswith(name.rpartition(".")[0])
        assert module.__package__ == name.rpartition(".")[0]
        assert module is not sys.modules[name]
        assert module.__file__ is not None and not module.__file__.startswith(str(vllm_root()))
    assert stale["vllm.v1.worker.gpu_model_runner"].PIN_MEMORY is False
    assert load_patched(STALE_DIFF)["vllm.v1.spec_decode.utils"] is stale[
        "vllm.v1.spec_decode.utils"]


# --- the shipped patches: the guards ------------------------------------------------------------

def test_stale_diff_batch_change_falls_back_to_cpu(stale_variant, vllm_variant) -> None:
    record = rec("batch_change", prev_positions=a64(0, 3, -1, 5),
                 valid_sampled_token_count=a32(4, 5, 6),
                 num_computed_tokens=a32(10, 20, 30, 40, 50),
                 num_accepted_tokens=a32(1, 1, 1, 1),
                 prev_num_draft_tokens=a32(2, 2, 2, 2, 2, 2),
                 cpu_num_computed_tokens=a32(7, 8, 9, 11))
    assert outcome_of(vllm_variant, record).status == INDEX_ERROR
    out = stale_variant.run(record).outputs
    assert out["num_computed_tokens"].tolist() == [14, 8, 9, 11, 50]
    assert out["num_accepted_tokens"].tolist() == [4, 1, 1, 1]


def test_stale_diff_batch_change_empty_valid_counts_all_new(stale_variant) -> None:
    record = rec("batch_change", prev_positions=a64(-1, -1), valid_sampled_token_count=a32(),
                 num_computed_tokens=a32(10, 20), num_accepted_tokens=a32(1, 1),
                 prev_num_draft_tokens=a32(2, 2), cpu_num_computed_tokens=a32(7, 8))
    assert stale_variant.run(record).outputs["num_computed_tokens"].tolist() == [7, 8]


def test_stale_diff_prepare_skips_stale_rows(stale_variant) -> None:
    record = prep(a64(1, 4), col(5, 6), a32(-1, -1, -1), a32(1, 3), a32(0, 1), spec=1,
                  input_ids_device=a32(90, 91, 92))
    # row 1 is stale: skipped like a new row, so the CPU staging (-1s) is copied first
    assert stale_variant.run(record).outputs["input_ids_device"].tolist() == [6, -1, -1]


def test_stale_diff_keeps_the_draft_overrun(stale_variant) -> None:
    record = prep(a64(1, 0), col(5, 6), a32(-1, -1, -1), a32(2, 3), a32(1, 0), spec=1,
                  draft_token_ids=np.array([[11]], dtype=I32))
    assert outcome_of(stale_variant, record).status == INDEX_ERROR


def test_vocab_diff_stops_at_the_first_id_outside_the_vocabulary(vocab_variant,
                                                                 vllm_variant) -> None:
    record = rec("async_output", req_ids=["a", "b"], prev_req_ids=["a", "b"],
                 sampled_token_ids_cpu=np.array([[7, 100, -1, 100], [100, 3, 4, 5]], dtype=I32),
                 output_token_ids=[[-1, -1, -1, -1], [9, -1]], vocab_size=100)
    assert vllm_variant.run(record).outputs["output_token_ids"] == [[7, 100, -1, 100], [9, 100]]
    assert vocab_variant.run(record).outputs["output_token_ids"] == [[7], [9]]


def test_vocab_diff_leaves_the_other_sites_alone(vocab_variant) -> None:
    record = prep(a64(1, 4), col(5, 6), a32(-1, -1, -1), a32(1, 3), a32(0, 1))
    assert outcome_of(vocab_variant, record).status == INDEX_ERROR
    emb = rec("embedding", input_ids=a32(0, 3), num_embeddings=4)
    assert outcome_of(vocab_variant, emb).status == OK
