"""Fixtures of the variant tests: the real-code variants, built once per session (importing
vLLM's runner takes tens of seconds on a CPU)."""

from __future__ import annotations

import pytest
from _builders import STALE_DIFF, VOCAB_DIFF

from forensics.variants.vllm_diff import PatchedVllmVariant
from forensics.variants.vllm_real import VllmVariant


@pytest.fixture(scope="session")
def vllm_variant() -> VllmVariant:
    """The ``vllm`` variant, loaded."""
    variant = VllmVariant()
    variant.load()
    return variant


@pytest.fixture(scope="session")
def stale_variant(vllm_variant: VllmVariant) -> PatchedVllmVariant:
    """``vllm+data/patches/stale-prev-rows.diff``, loaded."""
    variant = PatchedVllmVariant(STALE_DIFF)
    variant.load()
    return variant


@pytest.fixture(scope="session")
def vocab_variant(vllm_variant: VllmVariant) -> PatchedVllmVariant:
    """``vllm+data/patches/vocab-guard.diff``, loaded."""
    variant = PatchedVllmVariant(VOCAB_DIFF)
    variant.load()
    return variant
