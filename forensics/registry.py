"""One registry shape for sites, variants, importers and commands: name -> entry.

A :class:`Registry` keeps its entries in registration order, answers an unknown name with the
registry's own error listing the valid names, and, when given an entry-point group, adds the
entries of that group's plugins once (:mod:`forensics.plugins`): each loaded object goes
through ``accept``, which returns the entry or raises ``ValueError`` / ``TypeError`` saying what
the object lacks; a refused or broken plugin is skipped with a warning, never fatal.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar, cast

T = TypeVar("T")


class Registry(Generic[T]):
    """Named entries of one kind (``kind``: "site", "variant", ...), in registration order."""

    def __init__(self, kind: str, error: Callable[[str], Exception], *,
                 group: str | None = None, accept: Callable[[object], T] | None = None,
                 name_of: Callable[[T], str] | None = None, plugins_before: str | None = None,
                 hint: str = "") -> None:
        """``error``: the exception type raised for an unknown name; ``group``/``accept``:
        the entry-point group of third-party entries and the check that turns a loaded
        object into an entry; ``name_of``: the name a plugin entry is registered under (else
        its entry point's name); ``plugins_before``: a name plugins are placed before (else
        after every built-in); ``hint``: appended to the unknown-name message."""
        self.kind, self._error, self._hint = kind, error, hint
        self._group, self._accept, self._before = group, accept, plugins_before
        self._name_of = name_of
        self._entries: dict[str, T] = {}
        self._loaded = group is None

    def register(self, name: str, entry: T) -> None:
        """Register ``entry`` under ``name`` (a later registration of a name replaces it)."""
        self._entries[name] = entry

    def get(self, name: str) -> T:
        """The entry ``name``; raises the registry's error listing the valid names."""
        found = self.find(name)
        if found is None:
            raise self._error(f"unknown {self.kind} {name!r}; expected one of "
                              f"{self.names()}{self._hint}")
        return found

    def find(self, name: str) -> T | None:
        """The entry ``name``, or None."""
        self.load_plugins()
        try:
            return self._entries.get(name)
        except TypeError:  # an unhashable name
            return None

    def names(self) -> list[str]:
        """The registered names, in order."""
        self.load_plugins()
        return list(self._entries)

    def items(self) -> list[tuple[str, T]]:
        """``(name, entry)`` pairs, in order."""
        self.load_plugins()
        return list(self._entries.items())

    def values(self) -> list[T]:
        """The entries, in order."""
        self.load_plugins()
        return list(self._entries.values())

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.find(name) is not None

    def __len__(self) -> int:
        return len(self.names())

    def load_plugins(self) -> None:
        """Add the entries of the entry-point group, once (a no-op without a group)."""
        if self._loaded:
            return
        self._loaded = True
        from forensics.plugins import entry_points

        assert self._group is not None
        after = self._split_before()
        for name, loaded in entry_points(self._group):
            self._add_plugin(name, loaded)
        self._entries.update(after)

    def _split_before(self) -> dict[str, T]:
        """Take out (and return) the entries from ``plugins_before`` on."""
        names = list(self._entries)
        tail = names[names.index(self._before):] if self._before in self._entries else []
        return {name: self._entries.pop(name) for name in tail}

    def _add_plugin(self, name: str, loaded: object) -> None:
        """Register one loaded plugin object, or warn why it is skipped."""
        try:
            entry = self._accept(loaded) if self._accept is not None else cast(T, loaded)
        except (TypeError, ValueError) as exc:
            warnings.warn(f"forensics: skipping the {self._group} plugin {name!r}: {exc}",
                          stacklevel=4)
            return
        key = name if self._name_of is None else self._name_of(entry)  # type: ignore[arg-type]
        if key in self._entries or key == self._before:
            warnings.warn(f"forensics: skipping the {self._group} plugin {name!r}: the "
                          f"{self.kind} name {key!r} is taken", stacklevel=4)
            return
        self._entries[key] = entry
