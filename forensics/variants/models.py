"""The model variants ``upstream`` and ``patched`` (the project's own reading of vLLM 0.33.0)."""

from __future__ import annotations

# Filled in by the sites-and-replay work: classes UpstreamVariant / PatchedVariant, then:
# registry.register("upstream", UpstreamVariant); registry.register("patched", PatchedVariant)
