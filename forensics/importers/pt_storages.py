"""A ``.pt`` archive's storages held to the allocation budget before torch reads any.

torch's zip reader allocates each storage it loads at its member's size (``data/N``), read
from the archive, before anything of ours sees the tensor: a member past the budget
(:func:`forensics.budget.max_alloc`) is refused from the zip directory, naming the member and,
where the pickle puts that storage's tensor under a dict key as torch.save writes it
(:func:`storage_fields`), the key.
"""

from __future__ import annotations

import pickletools
import zipfile
from pathlib import Path
from typing import Any, cast

from forensics.budget import MAX_ALLOC_ENV, max_alloc
from forensics.errors import AllocationBudgetError
from forensics.escaping import terminal
from forensics.importers.common import read_member, show

#: on the model's stack: a mark, and the tensor (or its storage) of the storage looked for
_MARK, _HIT = object(), object()
#: the longest text the model keeps (a storage key is a short number)
_LONGEST_TEXT = 256
#: the most keys a refusal names
_NAMED = 3
#: the most texts and tuples the model keeps in its memo (torch.save memoizes a few per
#: tensor); past them it names no key: a pickle of millions would take gigabytes here
_MOST_KEPT = 1 << 16


def check_storages(archive: zipfile.ZipFile, pickles: list[zipfile.ZipInfo], path: Path
                   ) -> None:
    """Refuse the archive's first member past the allocation budget (every member but its
    ``pickles``: torch reads a storage at whatever name miniz matches), before torch reads it;
    the pickles are read again only then, to name its key.

    Raises AllocationBudgetError naming the file, the member, the key of its tensor where the
    pickle says it, the bytes and the budget."""
    budget = max_alloc()
    over = next((i for i in archive.infolist()
                 if not i.filename.lower().endswith(".pkl") and i.file_size > budget), None)
    if over is None:
        return
    fields = storage_fields([read_member(archive, info, crc=False) for info in pickles],
                            storage_key(over.filename))
    whose = (f"the storage of the tensor under key {' and '.join(map(show, fields[:_NAMED]))}"
             if fields else "which tensor's storage it is, if any, not known")
    raise AllocationBudgetError(
        f"'{terminal(path)}': member {show(over.filename)} ({whose}) holds {over.file_size} "
        f"bytes, which torch allocates whole when a tensor names it, before anything checks "
        f"the tensor: past the "
        f"allocation budget of {budget} bytes; save it in smaller tensors, or raise "
        f"{MAX_ALLOC_ENV} if this machine has the memory for it")


def storage_key(member: str) -> str:
    """The key torch.save gives the storage of ``member`` (``archive/data/KEY``; miniz
    matches names ignoring ASCII case); the name itself when it is no such member."""
    at = member.lower().rfind("/data/")
    return member[at + len("/data/"):] if at >= 0 else member


def storage_fields(pickles: list[bytes], key: str) -> list[str]:
    """The dict keys under which ``pickles`` put a tensor of storage ``key`` (a persistent id
    ``('storage', type, key, ...)`` rebuilt by a call, set by ``SETITEM``/``SETITEMS``), in
    order; what the model cannot follow names nothing."""
    fields: list[str] = []
    for data in pickles:
        try:
            _follow(data, key, fields)
        except (ValueError, IndexError, TypeError):  # not a pickle the model follows, or
            continue  # one of more texts and tuples than it keeps
    return fields[:_NAMED]


def _follow(data: bytes, key: str, fields: list[str]) -> None:
    """Add to ``fields`` the keys ``data`` sets to a tensor of storage ``key``."""
    model, memo = _Stack(), dict[int, Any]()
    for opcode, given, _pos in pickletools.genops(data):
        name, arg = opcode.name, cast(Any, given)
        if name in ("BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8", "UNICODE"):
            model.push(arg if isinstance(arg, str) and len(arg) <= _LONGEST_TEXT else None)
        elif name in ("BINPUT", "LONG_BINPUT", "PUT", "MEMOIZE"):
            top = model.pop(1)[0]
            model.push(top)
            if top is not None:
                memo[len(memo) if name == "MEMOIZE" else arg] = top
                if len(memo) > _MOST_KEPT:
                    raise ValueError("more texts and tuples than the model keeps")
        elif name in ("BINGET", "LONG_BINGET", "GET"):
            model.push(memo.get(arg))
        elif name in ("TUPLE", "TUPLE1", "TUPLE2", "TUPLE3"):
            items = model.pop_mark() if name == "TUPLE" else model.pop(int(name[-1]))
            model.push(tuple(items) if any(item is not None for item in items) else None)
        elif name == "BINPERSID":
            pid = model.pop(1)[0]
            model.push(_HIT if isinstance(pid, tuple) and len(pid) > 2
                       and pid[0] == "storage" and pid[2] == key else None)
        elif name in ("REDUCE", "NEWOBJ"):
            args = model.pop(2)[1]
            model.push(_HIT if isinstance(args, tuple) and _HIT in args else None)
        elif name in ("SETITEM", "SETITEMS"):
            items = model.pop_mark() if name == "SETITEMS" else model.pop(2)
            fields.extend(k for k, v in zip(items[::2], items[1::2], strict=False)
                          if v is _HIT and isinstance(k, str))
            if len(fields) >= _NAMED:
                return
        else:
            model.other(opcode)


class _Stack:
    """The unpickler's stack as the model keeps it: the values followed (texts, tuples, the
    tensor looked for), None for the others, and where its marks are."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.marks: list[int] = []

    def push(self, value: Any) -> None:
        """Put ``value`` on the stack."""
        if value is _MARK:
            self.marks.append(len(self.items))
        self.items.append(value)

    def pop(self, count: int) -> list[Any]:
        """Take ``count`` items off the stack (above its last mark)."""
        at = len(self.items) - count
        if at < (self.marks[-1] + 1 if self.marks else 0):
            raise IndexError("a pop past a mark")
        taken = self.items[at:]
        del self.items[at:]
        return taken

    def pop_mark(self) -> list[Any]:
        """Take the items above the last mark, and the mark, off the stack."""
        at = self.marks.pop()
        taken = self.items[at + 1:]
        del self.items[at:]
        return taken

    def other(self, opcode: Any) -> None:
        """Any other opcode: what it takes off the stack, then what it puts on it, neither
        followed (a mark it puts is kept)."""
        before = opcode.stack_before
        if pickletools.stackslice in before:
            self.pop_mark()
            before = before[:before.index(pickletools.markobject)]
        self.pop(len(before))
        for item in opcode.stack_after:
            self.push(_MARK if item is pickletools.markobject else None)
