"""A ``.pt`` file's pickle read before torch is imported or loads it: its opcodes, parsed one
by one with ``pickletools.genops`` (nothing is built, nothing runs), and what they would make
counted against the limits: the values (:data:`~forensics.importers.common.MAX_VALUES`), a
least estimate of their bytes (the allocation budget, :func:`forensics.budget.max_alloc`), and
the keys put into a dict where a record goes (the field cap,
:func:`forensics.validate.max_fields`).

The scan keeps a model of the unpickler's stack: a dict's keys are counted while it is on the
stack (a dict fetched again from the memo is not followed: its keys are left to the field
count after loading).
"""

from __future__ import annotations

import pickletools
from pathlib import Path
from typing import Any

from forensics.budget import MAX_ALLOC_ENV, max_alloc, require_alloc
from forensics.errors import CaptureFormatError
from forensics.escaping import terminal
from forensics.importers.common import MAX_VALUES
from forensics.validate import max_fields

#: pickle opcodes that hold nothing more (appends into a container made before, the stack's
#: pops); every other one makes an object or a reference, a memo entry or, a ``MARK``, a list
BOOKKEEPING = frozenset({"STOP", "POP", "POP_MARK", "PROTO", "FRAME", "APPEND", "APPENDS",
                         "SETITEM", "SETITEMS", "ADDITEMS"})
#: the least bytes any value the unpickler makes takes (an object's header), past its text's
VALUE_BYTES = 16
#: the opcodes that fill the container below what they pop, leaving it on the stack
_FILL = frozenset({"APPEND", "APPENDS", "SETITEM", "SETITEMS"})
#: the scan's stack holds, for each item the unpickler's would: a mark, a list, a dict (1 and
#: the keys it was given), or anything else
_MARK, _LIST, _OTHER, _DICT = -2, -1, 0, 1


def count_made(data: bytes, made: int, path: Path) -> int:
    """``made`` plus the objects, references and memo entries the pickle ``data`` makes (every
    opcode but :data:`BOOKKEEPING`), read without running any before torch's unpickler does
    (16 MiB of 1-byte ``EMPTY_LIST`` made 16 million lists: 1.1 GiB and a minute before
    anything was counted; 8 MiB of ``MARK``, 560 MiB and 20 s); a dict where a record goes
    given more keys than any record holds is refused at once (a dict of 900,000 keys took 6 s
    and 800 MB in torch before the field count saw it).

    Raises CaptureFormatError past :data:`MAX_VALUES` or the field cap, AllocationBudgetError
    past the budget; a pickle that does not parse is left to the loader to refuse."""
    return _Scan(path, made).read(data)


class _Scan:
    """The counts of one file's pickles and the model of the stack of the one being read."""

    def __init__(self, path: Path, made: int) -> None:
        self.path, self.made, self.bytes = path, made, 0
        self.cap, self.budget = max_fields(), max_alloc()
        self.stack: list[int] = []
        self.marks: list[int] = []  # where the stack's marks are
        self.appended = 0  # the items appended to a list at the bottom of the stack
        self.modelled = True  # False once the stack model is lost: the loader refuses it

    def read(self, data: bytes) -> int:
        """The values counted after ``data``'s opcodes (refused past the limits)."""
        try:
            for opcode, arg, _pos in pickletools.genops(data):
                if opcode.name not in BOOKKEEPING:
                    self.made += 1
                    self.bytes += VALUE_BYTES + (len(arg) if isinstance(arg, (str, bytes))
                                                 else 0)
                    if self.made > MAX_VALUES:
                        raise CaptureFormatError(
                            f"'{terminal(self.path)}': its pickle makes more than {MAX_VALUES} "
                            "values; save tensors, not long Python lists")
                    if self.bytes > self.budget:
                        self._over_budget()
                if self.modelled:
                    self._step(opcode)
        except CaptureFormatError:  # a ValueError too: ours, not genops'
            raise
        except ValueError:  # not a pickle: the loader refuses it
            pass
        return self.made

    def _over_budget(self) -> None:
        require_alloc(self.bytes, f"'{terminal(self.path)}'", "pickle",
                      f"{self.made} values and their texts",
                      fix=f"save tensors, not long Python lists, or raise {MAX_ALLOC_ENV}")

    def _step(self, opcode: Any) -> None:
        """Move the stack model past ``opcode`` (by its documented stack effect)."""
        stack, name, before = self.stack, opcode.name, opcode.stack_before
        if name == "MARK":
            self.marks.append(len(stack))
            stack.append(_MARK)
            return
        if before == opcode.stack_after and name not in _FILL:  # the memo's, the frame's
            return
        if pickletools.markobject in before:
            if not self.marks:
                self.modelled = False
                return
            top = self.marks.pop()
            items = len(stack) - top - 1
            del stack[top:]
            below = 0 if name in _FILL else before.index(pickletools.markobject)
        else:
            items = below = len(before) - (name in _FILL)
        if len(stack) - below < (self.marks[-1] + 1 if self.marks else 0) + (name in _FILL):
            self.modelled = False  # past a mark or the bottom: the loader refuses it
            return
        del stack[len(stack) - below:]
        if name in _FILL:
            self._filled(name, items)
            return
        for _ in opcode.stack_after:
            stack.append(_DICT if name == "EMPTY_DICT" else _LIST if name in (
                "EMPTY_LIST", "LIST") else _DICT + items // 2 if name == "DICT" else _OTHER)
        if name == "DICT":
            self._check_keys()

    def _filled(self, name: str, items: int) -> None:
        """Count what ``name`` put into the container on top of the stack: ``items`` items."""
        stack = self.stack
        if name.startswith("SETITEM") and stack[-1] >= _DICT:
            stack[-1] += items // 2 if name == "SETITEMS" else 1
            self._check_keys()
        elif stack[-1] == _LIST and len(stack) == 1:
            self.appended += items

    def _check_keys(self) -> None:
        """Refuse the dict on top of the stack, where a record goes, past the field cap."""
        keys = self.stack[-1] - _DICT
        if keys <= self.cap:
            return
        place = self._place()
        if place is not None:
            index, where = place
            raise CaptureFormatError(
                f"'{terminal(self.path)}': its pickle puts at least {keys} keys into the dict "
                f"{where} (record {index} of a file torch.save wrote), before anything is "
                f"loaded: past the {self.cap} names any site declares (with site, step, rank "
                "and summary); write one record's fields, one record per file")

    def _place(self) -> tuple[int, str] | None:
        """Which record the dict on top of the stack is, where torch.save puts records: the
        bottom of the stack, or an item of a list or tuple there; None elsewhere."""
        stack, marks, at = self.stack, self.marks, len(self.stack) - 1
        if at == 0:
            return 0, "at the bottom of its stack"
        if stack[0] == _LIST and (marks == [1] or (at == 1 and not marks)):
            index = self.appended + (at - 2 if marks else 0)
            return index, f"that is item {index} of the list at the bottom of its stack"
        if marks == [0] or (not marks and at <= 2 and all(c >= _DICT for c in stack[:at])):
            index = at - 1 if marks else at
            return index, f"that is item {index} of a tuple begun at the bottom of its stack"
        return None
