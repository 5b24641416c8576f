"""The ``vllm`` variant: the installed vLLM 0.33.x code itself, called on CPU."""

from __future__ import annotations

# Filled in by the real-vLLM work; ends with registry.register("vllm", VllmVariant)
