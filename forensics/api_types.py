"""The types of the public API's arguments (for annotations; nothing here is imported at run
time by the functions that use them, and importing this module stays light)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

from forensics.records import Record

if TYPE_CHECKING:
    from forensics.store.reader import Capture
    from forensics.variants import Variant

#: a capture: an open Capture or the path of a capture directory
CaptureArg: TypeAlias = "Capture | str | os.PathLike[str]"
#: what ``replay`` reads: a capture, or records in memory (validated by the replay)
ReplaySource: TypeAlias = "Capture | str | os.PathLike[str] | Iterable[Record]"
#: one variant of a mapping: None (the registered variant of that name), another name, a
#: callable ``record -> outputs`` (a user variant) or a variant object
VariantSpec: TypeAlias = "str | Variant | Callable[[Record], Any] | None"
#: the variants of a replay: a name or variant, several of them, or a mapping name -> spec
VariantsArg: TypeAlias = "str | Variant | Iterable[str | Variant] | Mapping[str, VariantSpec]"

__all__ = ["CaptureArg", "ReplaySource", "VariantSpec", "VariantsArg"]
