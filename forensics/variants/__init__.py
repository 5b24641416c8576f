"""The variant registry: named ways to run a site on a record.

A variant is any object with a ``name`` and ``run(record) -> Outcome`` (see
:mod:`forensics.outcome`); it may also offer ``run_many(site, records) -> list[Outcome]`` for a
vectorised path. Variants run and never judge.

Built-ins are registered at the bottom of their own modules; ``resolve_variant`` also accepts
``vllm+PATH.diff`` and wraps user callables.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from forensics.errors import UnknownVariantError
from forensics.outcome import Outcome
from forensics.records import Record


class Variant(Protocol):
    """What the replay needs from a variant."""

    name: str

    def run(self, record: Record) -> Outcome: ...


class VariantRegistry:
    """Name -> factory of a variant; the factories are called lazily (heavy imports inside)."""

    def __init__(self) -> None:
        self._factories: dict[str, Callable[[], Variant]] = {}

    def register(self, name: str, factory: Callable[[], Variant]) -> None:
        """Register ``factory`` (called with no argument on first use) under ``name``."""
        self._factories[name] = factory

    def names(self) -> list[str]:
        """Registered names, in registration order."""
        return list(self._factories)

    def create(self, name: str) -> Variant:
        """Build the variant ``name``; ``vllm+PATH.diff`` builds a patched real-code variant.

        Raises:
            UnknownVariantError: the name is neither registered nor ``vllm+PATH``.
        """
        if name in self._factories:
            return self._factories[name]()
        if name.startswith("vllm+"):
            from forensics.variants.vllm_diff import PatchedVllmVariant

            return PatchedVllmVariant(name[len("vllm+"):])
        raise UnknownVariantError(
            f"unknown variant {name!r}; expected one of {self.names()} or 'vllm+PATH.diff'"
        )


registry = VariantRegistry()


def resolve_variant(name: str, spec: Any = None) -> Variant:
    """Return a variant: ``spec`` if it already is one, a callable wrapped as a user variant, or
    the registered / ``vllm+PATH.diff`` variant called ``name``."""
    if spec is None:
        return registry.create(name)
    if hasattr(spec, "run"):
        return spec
    if callable(spec):
        from forensics.variants.user import UserVariant

        return UserVariant(name, spec)
    raise UnknownVariantError(f"variant {name!r} must be a name, a variant or a callable, "
                              f"got {type(spec).__name__}")


def _register_builtins() -> None:
    """The built-in variants, then those of the ``forensics.variants`` entry points."""
    from forensics.plugins import VARIANTS_GROUP, entry_points
    from forensics.variants import models, vllm_real  # noqa: F401  (each registers itself)

    for name, factory in entry_points(VARIANTS_GROUP):
        registry.register(name, factory)


_register_builtins()
