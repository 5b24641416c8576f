"""A dataclass field given as its value or as a function that builds it, built on first read
(:class:`BuiltOnRead`): the replay's large tables are built only when a caller reads them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")
#: a :class:`BuiltOnRead` field without a default
_NO_DEFAULT = object()


class BuiltOnRead(Generic[T]):
    """A field of :class:`~forensics.replaying.ReplayResult` given as its value or as a
    function that builds it (the large tables): built on first read, then kept; assigning a
    value replaces it. A dataclass field of this type has ``default`` as its default (none
    when not given)."""

    def __init__(self, default: Any = _NO_DEFAULT) -> None:
        self.default = default

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_" + name

    @overload
    def __get__(self, result: None, owner: type | None = None) -> Any: ...

    @overload
    def __get__(self, result: object, owner: type | None = None) -> T: ...

    def __get__(self, result: object | None, owner: type | None = None) -> Any:
        if result is None:  # the dataclass asks for the field's default
            if self.default is _NO_DEFAULT:
                raise AttributeError(self.slot)
            return self.default
        value = getattr(result, self.slot)
        if callable(value):
            value = value()
            setattr(result, self.slot, value)
        return value

    def __set__(self, result: object, value: T | Callable[[], T]) -> None:
        setattr(result, self.slot, value)
