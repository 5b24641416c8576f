"""The variant registry: named ways to run a site on a record.

A variant is any object with a ``name`` and ``run(record) -> Outcome`` (see
:mod:`forensics.outcome`); it may also offer ``run_many(site, records) -> list[Outcome]`` for a
vectorised path. Variants run and never judge.

Built-ins are registered here, plugins after them; ``resolve_variant`` also accepts
``vllm+PATH.diff`` and wraps user callables.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any, Protocol, cast

from forensics.errors import CaptureFormatError, ConfigurationError, UnknownVariantError
from forensics.outcome import Outcome
from forensics.plugins import VARIANTS_GROUP
from forensics.records import Record
from forensics.registry import Registry


class Variant(Protocol):
    """What the replay needs from a variant."""

    name: str

    def run(self, record: Record) -> Outcome: ...


def as_factory(loaded: object) -> Callable[[], Variant]:
    """``loaded`` (what a ``forensics.variants`` entry point names) as a variant factory.

    Raises:
        TypeError: it cannot be called with no argument to build a variant.
    """
    if not callable(loaded):
        raise TypeError(f"it names {type(loaded).__name__}, not a variant factory; point the "
                        f"entry point at a class or function called with no argument that "
                        f"returns an object with 'name' and 'run(record)'")
    return cast("Callable[[], Variant]", loaded)


class VariantRegistry(Registry[Callable[[], Variant]]):
    """Name -> factory of a variant; the factories are called lazily (heavy imports inside).
    Third-party factories come from the entry-point group ``forensics.variants``, after the
    built-ins."""

    def __init__(self) -> None:
        super().__init__("variant", UnknownVariantError, group=VARIANTS_GROUP,
                         accept=as_factory, hint=" or 'vllm+PATH.diff'")

    def create(self, name: str) -> Variant:
        """Build the variant ``name``; ``vllm+PATH.diff`` builds a patched real-code variant
        (so does a diff's shared name inside :func:`diffs_named`, named so).

        Raises:
            UnknownVariantError: the name is neither registered nor ``vllm+PATH``.
        """
        if isinstance(name, str) and name.startswith("vllm+") and self.find(name) is None:
            from forensics.variants.vllm_diff import PatchedVllmVariant

            path = _NAMED_DIFFS.get({}).get(name)  # a shared name, inside diffs_named
            return PatchedVllmVariant(name[len("vllm+"):]) if path is None else \
                PatchedVllmVariant(path, name)
        return self.get(name)()


registry = VariantRegistry()
#: the variants a replay, a check and a shrink run when none is named
DEFAULT_VARIANTS = ("upstream", "patched")


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


def shared_diffs(names: list[str]) -> tuple[list[str], dict[str, str]]:
    """``names`` with each ``vllm+PATH.diff`` as its shared name
    (:func:`forensics.variants.vllm_diff.shared_name`: file name and digest), other names
    unchanged; and each shared name -> its diff's path, for :func:`diffs_named`: a report,
    made to be shared, names a diff so and never the user's folders. A diff that cannot be
    read (missing, not a regular file, past the diff file's cap) keeps its name (building its
    variant says why). Each diff file is read once here.

    Raises:
        ConfigurationError: two of ``names`` hold one diff (:func:`refuse_one_diff_twice`).
    """
    shared = _shared_names(names)
    _refuse_twice(shared)
    shown = [shared.get(name, name) for name in names]
    return shown, {shared[name]: name[len("vllm+"):] for name in shared}


def refuse_one_diff_twice(names: Sequence[str]) -> None:
    """Refuse two ``vllm+PATH.diff`` of ``names`` at different paths that hold one diff (the
    same file name and content: one shared name, :func:`shared_diffs`). A report or summary
    named both so and refused them as "replay needs distinct variant names", naming neither
    path; a replay ran the same code twice. A diff that cannot be read is left to its variant.

    Raises:
        ConfigurationError: naming both variants, the diff's shared name and the fix.
    """
    _refuse_twice(_shared_names(names))


def _shared_names(names: Sequence[str]) -> dict[str, str]:
    """Each ``vllm+PATH`` of ``names`` whose diff can be read -> its shared name, in order
    (a registered name, or a shared name whose diff this context read already, is none)."""
    from forensics.variants.vllm_diff import shared_name

    shared: dict[str, str] = {}
    for name in names:
        if not isinstance(name, str) or not name.startswith("vllm+") or registry.find(name) \
                or name in _NAMED_DIFFS.get({}) or name in shared:
            continue
        with contextlib.suppress(OSError, CaptureFormatError):  # not a diff to read
            shared[name] = shared_name(name[len("vllm+"):])
    return shared


def _refuse_twice(shared: Mapping[str, str]) -> None:
    """Raise ConfigurationError for two variants of ``shared`` (name -> shared name) that hold
    one diff, naming both variants, the diff's shared name and the fix."""
    from forensics.escaping import terminal

    seen: dict[str, str] = {}
    for name, one in shared.items():
        first = seen.setdefault(one, name)
        if first != name:
            raise ConfigurationError(
                f"the variants '{terminal(first)}' and '{terminal(name)}' hold the same diff "
                f"('{terminal(one)}'): give it once, or rename one of the files to "
                "replay it under two names")


@contextlib.contextmanager
def diffs_named(diffs: Mapping[str, str]) -> Iterator[None]:
    """While inside, and in this context only (this thread, a process forked from it), each
    shared name of ``diffs`` (:func:`shared_diffs`) builds the variant of its diff, so named.
    The registry is not changed: another thread, or this one after, does not know the names."""
    token = _NAMED_DIFFS.set({**_NAMED_DIFFS.get({}), **diffs})
    try:
        yield
    finally:
        _NAMED_DIFFS.reset(token)


@contextlib.contextmanager
def diffs_read_once(names: Sequence[str]) -> Iterator[list[str]]:
    """``names`` with each ``vllm+PATH.diff`` as its shared name (:func:`shared_diffs`), each
    known so while inside (:func:`diffs_named`): every replay inside runs the diff as it was
    when named, or is refused (PatchApplyError, naming it). A command that replays many times
    (shrink, redact) read the diff again each time: one edited meanwhile changed the code
    between two replays. One name given alone (a ``str``) is that name, as ``replay`` takes it:
    ``shrink(..., variants="patched")`` said "unknown variant 'p'"."""
    shown, diffs = shared_diffs([names] if isinstance(names, str) else list(names))
    with diffs_named(diffs):
        yield shown


#: the diffs known by their shared names in this context (:func:`diffs_named`): name -> path
_NAMED_DIFFS: ContextVar[Mapping[str, str]] = ContextVar("forensics_named_diffs")


def _register_builtins() -> None:
    """The built-in variants, then those of the ``forensics.variants`` entry points."""
    from forensics.variants.models import PatchedVariant, UpstreamVariant
    from forensics.variants.vllm_real import VllmVariant

    for name, factory in (("upstream", UpstreamVariant), ("patched", PatchedVariant),
                          ("vllm", VllmVariant)):
        registry.register(name, factory)
    registry.load_plugins()


_register_builtins()
