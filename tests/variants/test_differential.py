"""Differential tests (DESIGN.md, agreement rule): our models against the real vLLM code.

``upstream`` against ``vllm``, and ``patched`` against ``vllm+`` the equivalent shipped diff, on
at least 500 generated records per site: the same outputs, or the same kind of error.
"""

from __future__ import annotations

import numpy as np
import pytest
from _builders import I32, I64, STALE_DIFF, VOCAB_DIFF, a32, a64, col, prep, rec
from _site_records import STRATEGIES
from hypothesis import HealthCheck, given, settings

from forensics.records import Record
from forensics.sites import SITES
from forensics.variants.agreement import disagreement, outcome_of
from forensics.variants.models import PatchedVariant, UpstreamVariant

RECORDS_PER_SITE = 500
#: the sites whose real code is Python (Model Runner V2's Triton kernels: test_v2_kernels.py)
PYTHON_SITES = [site for site in SITES if site in STRATEGIES]
#: The shipped diff that implements ``patched``'s guard of each site (embedding has none).
EQUIVALENT_DIFF = {"batch_change": STALE_DIFF, "prepare_input_ids": STALE_DIFF,
                   "async_output": VOCAB_DIFF, "embedding": STALE_DIFF}
SETTINGS = settings(max_examples=RECORDS_PER_SITE, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def check_agreement(model: object, real: object, site: str) -> int:
    """Run hypothesis over ``site``'s records; fail on the first disagreement with the record
    and both outcomes; return how many records were checked."""
    seen: list[Record] = []

    @SETTINGS
    @given(record=STRATEGIES[site])
    def agree_on(record: Record) -> None:
        seen.append(record)
        a, b = outcome_of(model, record), outcome_of(real, record)
        why = disagreement(a, b)
        assert why is None, (f"{model.name} vs {real.name} disagree: {why}\nrecord: {record}\n"
                             f"{model.name}: {a.status} {a.message} {a.outputs}\n"
                             f"{real.name}: {b.status} {b.message} {b.outputs}")

    agree_on()
    return len(seen)


@pytest.mark.parametrize("site", PYTHON_SITES)
def test_upstream_agrees_with_vllm(site: str, vllm_variant) -> None:
    assert check_agreement(UpstreamVariant(), vllm_variant, site) >= RECORDS_PER_SITE


@pytest.mark.parametrize("site", PYTHON_SITES)
def test_patched_agrees_with_the_equivalent_diff(site: str, stale_variant, vocab_variant) -> None:
    real = {STALE_DIFF: stale_variant, VOCAB_DIFF: vocab_variant}[EQUIVALENT_DIFF[site]]
    assert check_agreement(PatchedVariant(), real, site) >= RECORDS_PER_SITE


def _odd_records() -> dict[str, Record]:
    """Records outside vLLM's own dtypes and shapes: both sides must still fail or pass alike."""
    return {
        "slow path, int64 prev_sampled_token_ids": prep(
            a64(1, 0), np.array([[5], [6]], dtype=I64), a32(-1, -1, -1), a32(2, 3), a32(1, 0),
            spec=1),
        "fast path, int64 prev_sampled_token_ids": prep(
            a64(0, 1), np.array([[5], [6]], dtype=I64), a32(-1, -1), a32(1, 2), a32(0, 0)),
        "slow path, int64 input_ids": prep(
            a64(1, 0), col(5, 6), np.array([-1, -1, -1], dtype=I64), a32(2, 3), a32(1, 0),
            spec=1),
        "int64 draft_token_ids": prep(
            a64(1, 0), col(5, 6), a32(-1, -1, -1), a32(2, 3), a32(1, 0), spec=1,
            draft_token_ids=np.array([[7], [8]], dtype=I64)),
        "input_ids longer than the scheduled tokens": prep(
            a64(-1, 0), col(5, 6), a32(1, -1, -1, 9, 9), a32(1, 2), a32(0, 0),
            input_ids_device=a32(0, 0, 0, 3, 3)),
        "batch_change buffer shorter than the rows": rec(
            "batch_change", prev_positions=a64(0, -1, -1), valid_sampled_token_count=a32(1),
            num_computed_tokens=a32(5, 5), num_accepted_tokens=a32(1, 1, 1),
            prev_num_draft_tokens=a32(1, 1), cpu_num_computed_tokens=a32(1, 2, 3)),
        "batch_change int64 buffers": rec(
            "batch_change", prev_positions=a64(0, -1),
            valid_sampled_token_count=np.array([3], dtype=I64),
            num_computed_tokens=np.array([5, 5], dtype=I64), num_accepted_tokens=a32(1, 1),
            prev_num_draft_tokens=np.array([1, 1], dtype=I64), cpu_num_computed_tokens=a32(1, 2)),
        "embedding id past int32": rec("embedding", input_ids=np.array([2**40], dtype=I64),
                                       num_embeddings=4),
        "async_output negative previous index": rec(
            "async_output", req_ids=["a"], prev_req_id_to_index={"a": -1},
            sampled_token_ids_cpu=np.array([[7, -1], [8, -1]], dtype=I32),
            output_token_ids=[[-1]], vocab_size=100),
    }


ODD = _odd_records()


@pytest.mark.parametrize("name", list(ODD))
def test_upstream_agrees_with_vllm_beyond_real_dtypes(name: str, vllm_variant) -> None:
    a, b = outcome_of(UpstreamVariant(), ODD[name]), outcome_of(vllm_variant, ODD[name])
    assert disagreement(a, b) is None, (a, b)
