"""A toy third-party variant, registered only through an entry point (test_plugins)."""

from __future__ import annotations

from forensics.variants.models import ModelVariant


class ToyFix(ModelVariant):
    """The patched model of every site, as a plugin variant."""

    name = "toy_fix"
    kind = "patched"
