"""``vllm+PATH.diff`` on Model Runner V2's sites: the diff's kernels, in a worker of their own,
in Triton's interpreter. The guard's diff (``data/patches/v2-index-guard.diff``) is the
``patched`` models on generated records, out-of-range ones included; a diff that does not
apply, or does not change the file a site's kernels live in, is a clear PatchApplyError."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _builders import PATCHES, VOCAB_DIFF
from test_v2_kernels import EXAMPLES, agree, combine_record, generated, post_record

from forensics.errors import PatchApplyError
from forensics.sites import get_site
from forensics.variants import registry, triton_kernels
from forensics.variants.agreement import disagreement, outcome_of
from forensics.variants.vllm_diff import PatchedVllmVariant, vllm_root

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sites"))
from v2_records import combine, post  # noqa: E402

GUARD_DIFF = PATCHES / "v2-index-guard.diff"
KERNELS = "vllm/v1/worker/gpu/input_batch.py"


@pytest.fixture(scope="module")
def guard() -> Iterator[PatchedVllmVariant]:
    """``vllm+data/patches/v2-index-guard.diff``; its kernel worker ends with the module."""
    variant = PatchedVllmVariant(GUARD_DIFF)
    yield variant
    triton_kernels.close_worker(variant.kernel_patch)


@pytest.mark.parametrize("build", [combine_record, post_record], ids=["combine", "post"])
def test_the_patched_model_of_each_v2_kernel_is_the_guard_diff(build: Any,
                                                               guard: PatchedVllmVariant) -> None:
    records = generated(build)
    seen: dict[str, int] = {}
    kernels = triton_kernels.run_kernels(records, guard.kernel_patch)
    for record, kernel in zip(records, kernels, strict=True):
        agree(record, kernel, seen, patched=True)
    assert sum(seen.values()) >= EXAMPLES
    assert seen.get("ok", 0) > 100 and seen.get("index_error", 0) > 50, seen
    site = get_site(records[0].site)
    changed = sum(disagreement(site.upstream(r), site.patched(r)) is not None for r in records)
    assert changed > 50, changed  # the diff changes what the kernel does on these records


def test_the_guard_diff_rejects_a_negative_draft_and_vllm_does_not(
        guard: PatchedVllmVariant) -> None:
    record = combine(draft=(7, -1))
    assert guard.run(record).outputs["input_ids"].tolist()[:3] == [11, 7, 0]
    assert triton_kernels.run_kernel(record).outputs["input_ids"].tolist()[:3] == [11, 7, -1]


def test_the_guard_diff_checks_the_ids_it_reads_past_a_row(guard: PatchedVllmVariant) -> None:
    """``num_sampled`` past the row's width reads the next row's ids, as the kernel does: the
    count stops at the first of them outside the vocabulary."""
    record = post(sampled=(5, 6, 7), num_sampled=4, sampled_tokens=np.array(
        [(5, 6, 7), (50, -1, -1)], np.int32))
    kernel, model = outcome_of(guard, record), get_site("post_update").patched(record)
    assert kernel.status == model.status == "ok"
    assert disagreement(kernel, model) is None
    assert kernel.outputs["last_sampled_tokens"].tolist()[3] == 7


def test_the_installed_kernels_are_left_alone(guard: PatchedVllmVariant) -> None:
    digest = hashlib.sha256((vllm_root() / KERNELS).read_bytes()).hexdigest()
    guard.run(combine(draft=(7, -1)))
    assert hashlib.sha256((vllm_root() / KERNELS).read_bytes()).hexdigest() == digest


def test_a_v2_diff_that_does_not_apply_names_diff_file_and_hunk(tmp_path: Path) -> None:
    stale = tmp_path / "stale-v2.diff"
    stale.write_text(GUARD_DIFF.read_text().replace(
        " draft_tokens_ptr + req_state_idx * draft_tokens_stride + block,",
        " draft_tokens_ptr + req_state_idx * draft_stride + block,"))
    with pytest.raises(PatchApplyError, match=r"stale-v2\.diff: hunk 1 of "
                       r"vllm/v1/worker/gpu/input_batch\.py does not apply"):
        registry.create(f"vllm+{stale}")  # when the variant is built, before any worker starts


def test_a_diff_that_misses_the_kernels_file_names_diff_file_and_fix() -> None:
    variant = PatchedVllmVariant(VOCAB_DIFF)  # V1's diff: gpu_input_batch.py only
    try:
        with pytest.raises(PatchApplyError, match=(
                r"vocab-guard\.diff: site 'post_update' runs Model Runner V2's kernels in "
                r"vllm/v1/worker/gpu/input_batch\.py, which the diff does not change .*"
                r"put the kernel's fix in that file, or replay this site with 'vllm'")):
            outcome_of(variant, post())
    finally:
        triton_kernels.close_worker(variant.kernel_patch)


def test_patched_kernels_that_fail_to_import_are_a_patch_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.diff"
    broken.write_text(GUARD_DIFF.read_text().replace(
        "+        draft_tokens = tl.where(draft_tokens < 0, 0, draft_tokens)",
        "+        draft_tokens = tl.where(draft_tokens < 0, 0, draft_tokens"))
    variant = PatchedVllmVariant(broken)
    try:
        with pytest.raises(PatchApplyError, match=r"broken\.diff: .*fail to import.*fix the diff"):
            variant.run(combine())
    finally:
        triton_kernels.close_worker(variant.kernel_patch)


def test_the_worker_finds_patched_modules_and_packages_by_their_own_names(tmp_path: Path) -> None:
    """The finder serves a patched file under its module's name; a patched package keeps the
    installed submodules; any other module is the installed one."""
    import vllm.v1.worker

    from forensics.variants.triton_worker import PatchedFinder

    (tmp_path / "vllm/v1/worker/gpu").mkdir(parents=True)
    for name in ("__init__.py", "input_batch.py"):
        (tmp_path / "vllm/v1/worker/gpu" / name).write_text("x = 1\n")
    finder, installed = PatchedFinder(tmp_path), vllm_root() / "vllm/v1/worker/gpu"
    package = finder.find_spec("vllm.v1.worker.gpu", list(vllm.v1.worker.__path__))
    assert package is not None
    assert package.origin == str(tmp_path / "vllm/v1/worker/gpu/__init__.py")
    assert list(package.submodule_search_locations or []) == [str(installed)]
    module = finder.find_spec("vllm.v1.worker.gpu.input_batch", [str(installed)])
    assert module is not None and module.submodule_search_locations is None
    assert module.origin == str(tmp_path / KERNELS)
    assert finder.find_spec("vllm.v1.worker.gpu.states", [str(installed)]) is None
    assert finder.find_spec("numpy", None) is None
