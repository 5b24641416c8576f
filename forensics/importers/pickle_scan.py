"""A ``.pt`` file's pickle read before torch is imported or loads it: its opcodes, parsed one
by one with ``pickletools.genops`` (nothing is built, nothing runs), and what they would make
counted against the limits: the values (:data:`~forensics.importers.common.MAX_VALUES`), a
least estimate of their bytes (the allocation budget, :func:`forensics.budget.max_alloc`), and
the keys put into a dict where a record goes (the field cap,
:func:`forensics.validate.max_fields`), and into any dict (a field's:
:func:`~forensics.validate.most_keys`), and the lists, dicts and tuples each one holds,
at every depth (:data:`~forensics.records.MAX_CONTAINERS`, one record's: the list or
tuple of records saved is exempt).

The scan keeps a model of the weights-only loader's stack and memo, in which each dict, list
and tuple is numbered (one fetched again from the memo is the same one): the keys set in each
dict are counted, a dict where torch.save puts a record is refused as soon as they pass the
cap, and at ``STOP`` the object the loader would return (a dict, or a list or tuple of them)
is judged whatever the pickle did before, a record a call (``REDUCE``) makes by the most keys
its arguments could give it (``OrderedDict(d)``, ``Counter(text)``). An opcode that loader
refuses, or a pop past a mark, ends the model (the loader refuses the file); the counts go on.
"""

from __future__ import annotations

import pickletools
from array import array
from bisect import bisect_left
from pathlib import Path
from typing import Any

from forensics.budget import MAX_ALLOC_ENV, max_alloc, require_alloc
from forensics.errors import CaptureFormatError
from forensics.escaping import terminal
from forensics.importers.common import MAX_VALUES, show, where_of
from forensics.records import MAX_CONTAINERS, MAX_FIELD_KEYS
from forensics.validate import max_fields, most_keys

#: pickle opcodes that hold nothing more (appends into a container made before, the stack's
#: pops); every other one makes an object or a reference, a memo entry or, a ``MARK``, a list
BOOKKEEPING = frozenset({"STOP", "POP", "POP_MARK", "PROTO", "FRAME", "APPEND", "APPENDS",
                         "SETITEM", "SETITEMS", "ADDITEMS"})
#: the least bytes any value the unpickler makes takes (an object's header), past its text's
VALUE_BYTES = 16
#: what an object of the model is: a dict (or an object that is given keys: an ``OrderedDict``
#: that ``REDUCE`` made), a list, a tuple, or another object ``REDUCE`` or ``NEWOBJ`` made
_DICT, _LIST, _TUPLE, _MADE = 1, 2, 3, 4
#: on the model's stack, beside an object's number: a mark, and anything not followed; a
#: string of ``n`` characters is ``_TEXT - n`` (a call may make a key of each: ``Counter``)
_MARK, _OTHER, _TEXT = -2, -1, -3
#: the flag (of ``_Scan.fetched``) of an object a call made
_CALLED = 4
#: the kinds of object counted as containers (:data:`~forensics.records.MAX_CONTAINERS`)
_CONTAINERS = (_DICT, _LIST, _TUPLE)
#: the longest key the model names, and the most keys (and memo texts) it keeps to name them
_NAMED_TEXT, _MOST_NAMED = 256, 1 << 16
#: opcodes torch's weights-only loader takes that push a value not followed
_VALUES = frozenset({"NONE", "NEWTRUE", "NEWFALSE", "BININT", "BININT1", "BININT2", "BINFLOAT",
                     "LONG1", "EMPTY_TUPLE", "EMPTY_SET", "GLOBAL"})


class _Lost(Exception):
    """The model cannot follow the pickle here (a pop past a mark, an opcode torch's
    weights-only loader refuses): the loader refuses the file itself."""


def count_made(data: bytes, made: int, path: Path) -> int:
    """``made`` plus the objects, references and memo entries the pickle ``data`` makes (every
    opcode but :data:`BOOKKEEPING`), read without running any before torch's unpickler does
    (16 MiB of 1-byte ``EMPTY_LIST`` made 16 million lists: 1.1 GiB and a minute before
    anything was counted; 8 MiB of ``MARK``, 560 MiB and 20 s); a record's dict given more
    keys than any record holds is refused: at once where torch.save puts records, else once
    the pickle's top object is known (a dict of 900,000 keys took 6.4 s and 800 MB in torch
    before the field count saw it).

    Raises CaptureFormatError past :data:`MAX_VALUES` or the field cap, AllocationBudgetError
    past the budget; a pickle that does not parse is left to the loader to refuse."""
    return _Scan(path, made).read(data)


class _Scan:
    """The counts of one file's pickles, and a model of the loader's stack and memo for the
    one being read: the objects that may hold records, numbered, with the keys each was given
    (a list its items' count) and the dicts among a list's or tuple's items."""

    def __init__(self, path: Path, made: int) -> None:
        self.path, self.made, self.bytes = path, made, 0
        self.cap, self.budget, self.most = max_fields(), max_alloc(), most_keys()
        # arrays of 8-byte numbers: a pickle of millions of objects is 8 bytes each here
        self.stack = array("q")
        # where the stack's values that are no dict are (torch.save's records are dicts: a
        # dict above one, a global or a key, is a call's argument or a value, no record)
        self.plain = array("q")
        self.marks = array("q")  # where the stack's marks are
        self.memo = array("q")  # by memo index, as torch.save numbers them (0, 1, ...)
        self.sparse: dict[int, int] = {}  # the memo's entries past those
        self.kinds = bytearray()  # by object number
        # by object number: 1 once fetched again from the memo, 2 once given keys past the
        # cap where torch.save puts no record, or where it may be the BUILD state of the
        # record below it (judged at BUILD or STOP), 4 when made by a call
        self.fetched = bytearray()
        self.sizes = array("q")  # keys given, items appended (by object number)
        # the most keys a call (REDUCE) given the object could make (a dict's keys, a list's or
        # tuple's items or those of any item, a string's characters; by object number), and
        # the most of an object changed once fetched again from the memo (inside others then)
        self.reach, self.late = array("q"), 0
        self.items: dict[int, array[int]] = {}  # a list's or tuple's dicts: place, number, ...
        # by object number: the lists, dicts and tuples it holds, at every depth (each use of a
        # shared one counted, as the values are)
        self.inner = array("q")
        # what names a field: the text on top of the stack (its place), the texts memoized,
        # and by object number the record it is in and the key of that record's field it is
        # (in) (-1: not known; a key's number in ``keys``, at most _MOST_NAMED of them)
        self.text: tuple[int, str] | None = None
        self.memo_texts: dict[int, str] = {}
        self.record, self.field = array("q"), array("i")
        self.keys: dict[str, int] = {}
        self.modelled = True

    def read(self, data: bytes) -> int:
        """The values counted after ``data``'s opcodes (refused past the limits)."""
        try:
            for opcode, arg, _pos in pickletools.genops(data):
                name = opcode.name
                if name not in BOOKKEEPING:
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
                    try:
                        self._step(name, arg)
                    except _Lost:
                        self.modelled = False
        except CaptureFormatError:  # a ValueError too: ours, not genops'
            raise
        except ValueError:  # not a pickle: the loader refuses it
            pass
        return self.made

    def _over_budget(self) -> None:
        require_alloc(self.bytes, f"'{terminal(self.path)}'", "pickle",
                      f"{self.made} values and their texts",
                      fix=f"save tensors, not long Python lists, or raise {MAX_ALLOC_ENV}")

    def _step(self, name: str, arg: Any) -> None:
        """Move the model past the opcode ``name`` (of argument ``arg``), as torch's
        weights-only loader would."""
        stack = self.stack
        if name in _VALUES:
            self._push(_OTHER)
        elif name in ("BINUNICODE", "SHORT_BINSTRING"):
            self._push(_TEXT - len(arg))
            self._text(arg)
        elif name == "MARK":
            self.marks.append(len(stack))
            stack.append(_MARK)
        elif name in ("EMPTY_DICT", "EMPTY_LIST"):
            self._push(self._new(_DICT if name == "EMPTY_DICT" else _LIST))
        elif name in ("BINPUT", "LONG_BINPUT"):
            self._put(arg)
        elif name in ("BINGET", "LONG_BINGET"):
            got = self.memo[arg] if arg < len(self.memo) else self.sparse.get(arg, _OTHER)
            self._push(got)
            self._text(self.memo_texts.get(arg))
            if got >= 0:
                self.fetched[got] |= 1
        elif name in ("TUPLE", "TUPLE1", "TUPLE2", "TUPLE3"):
            items = self._pop_mark() if name == "TUPLE" else self._pop(int(name[-1]))
            self._push(self._new(_TUPLE, items))
        elif name in ("APPEND", "APPENDS"):
            self._append(self._pop_mark() if name == "APPENDS" else self._pop(1))
        elif name in ("SETITEM", "SETITEMS"):
            pairs = self._pop_mark() if name == "SETITEMS" else self._pop(2)
            self._give_keys(len(pairs) // 2)
            self._contain(self._top(), pairs[1::2], len(self.stack) - 1)
        elif name in ("REDUCE", "NEWOBJ", "BINPERSID"):
            args = self._pop(1 if name == "BINPERSID" else 2)[-1]
            self._push(_OTHER if name == "BINPERSID" else self._made(args))
        elif name == "BUILD":
            self._build(self._pop(1)[0])  # its state; the object stays
        elif name == "STOP":
            self._check_top_object()
        elif name != "PROTO":
            raise _Lost  # an opcode torch's weights-only loader refuses

    def _push(self, value: int) -> None:
        """Push ``value`` on the stack, noting where when it is no dict."""
        if value < 0 or self.kinds[value] not in (_DICT, _MADE):
            self.plain.append(len(self.stack))
        self.stack.append(value)
        self.text = None  # a text pushed says so after (:meth:`_text`)

    def _cut(self, at: int) -> None:
        """Take the stack's items from place ``at`` on off it."""
        del self.stack[at:]
        while self.plain and self.plain[-1] >= at:
            self.plain.pop()
        if self.text is not None and self.text[0] >= at:
            self.text = None

    def _text(self, text: Any) -> None:
        """Note ``text``, just pushed, as the text on top of the stack (a key names what is
        made above it: :meth:`_new`)."""
        self.text = (len(self.stack) - 1, text) if isinstance(text, str) and \
            len(text) <= _NAMED_TEXT else None

    def _put(self, index: int) -> None:
        """``BINPUT``: the memo's entry ``index`` is the object on top of the stack (only the
        objects followed are kept; a text, to name a key fetched again, while few)."""
        top = self._top()
        if self.text is not None and self.text[0] == len(self.stack) - 1 and \
                len(self.memo_texts) < _MOST_NAMED:
            self.memo_texts[index] = self.text[1]
        if index == len(self.memo):
            self.memo.append(top)
        elif index < len(self.memo):
            self.memo[index] = top
        elif top != _OTHER:
            self.sparse[index] = top
        else:
            self.sparse.pop(index, None)

    def _new(self, kind: int, items: array[int] | None = None) -> int:
        """Number a new object of ``kind`` (a tuple of ``items``)."""
        number = len(self.kinds)
        self.kinds.append(kind)
        self.fetched.append(0)
        self.sizes.append(0)
        self.reach.append(0)
        self.inner.append(0)
        record, field = self._enclosing()
        self.record.append(record)
        self.field.append(field)
        if items:
            self._add_items(number, items)
            self._contain(number, items, len(self.stack))
        return number

    def _made(self, args: int) -> int:
        """Number the object a call (``REDUCE``, ``NEWOBJ``) on ``args`` makes: it may hold as
        many keys as ``args`` reach (``OrderedDict(d)``, ``Counter(text)``), or as any object
        changed since it was put inside others."""
        number = self._new(_MADE)
        self.fetched[number] = _CALLED
        self.reach[number] = max(self._reach(args), self.late)
        return number

    def _reach(self, value: int) -> int:
        """The most keys a call could make of the stack's ``value``."""
        return self.reach[value] if value >= 0 else _TEXT - value if value <= _TEXT else 0

    def _top(self) -> int:
        """The object on top of the stack (above its last mark)."""
        if len(self.stack) <= (self.marks[-1] + 1 if self.marks else 0):
            raise _Lost
        return self.stack[-1]

    def _pop(self, count: int) -> array[int]:
        """Take ``count`` items off the stack (above its last mark)."""
        if len(self.stack) - count < (self.marks[-1] + 1 if self.marks else 0):
            raise _Lost
        items = self.stack[len(self.stack) - count:]
        self._cut(len(self.stack) - count)
        return items

    def _pop_mark(self) -> array[int]:
        """Take the items above the last mark, and the mark, off the stack."""
        if not self.marks:
            raise _Lost
        at = self.marks.pop()
        items = self.stack[at + 1:]
        self._cut(at)
        return items

    def _add_items(self, number: int, items: array[int]) -> None:
        """Note which of ``items``, appended to list or tuple ``number``, may be records."""
        kinds, place = self.kinds, self.sizes[number]
        found = [(place + i, item) for i, item in enumerate(items)
                 if item >= 0 and kinds[item] in (_DICT, _MADE)]
        if found:
            self.items.setdefault(number, array("q")).extend(x for pair in found for x in pair)
        self.sizes[number] += len(items)
        self._reached(number, max(self.sizes[number], *map(self._reach, items)))

    def _reached(self, number: int, reach: int) -> None:
        """Object ``number`` (given keys or items) may now make ``reach`` keys in a call."""
        self.reach[number] = max(self.reach[number], reach)
        if self.fetched[number] & 1:
            self.late = max(self.late, reach)

    def _append(self, items: array[int]) -> None:
        """``APPEND``/``APPENDS`` of ``items`` to the list on top of the stack."""
        target = self._top()
        if target >= 0 and self.kinds[target] == _LIST:
            self._add_items(target, items)
            self._contain(target, items, len(self.stack) - 1)

    def _contain(self, number: int, items: array[int], at: int) -> None:
        """Object ``number`` (at place ``at`` of the stack) now holds ``items`` too: its
        containers counted (:data:`_CONTAINERS`, each with those it holds), and refused past
        :data:`~forensics.records.MAX_CONTAINERS` unless it is the list or tuple
        saved (of records, each held to the cap on its own)."""
        if number < 0 or self.kinds[number] not in _CONTAINERS:
            return
        kinds, inner = self.kinds, self.inner
        self.inner[number] += sum(1 + inner[i] for i in items if i >= 0 and kinds[i] in _CONTAINERS)
        if inner[number] <= MAX_CONTAINERS or (at == 0 and kinds[number] != _DICT):
            return
        raise CaptureFormatError(
            f"{self._contained(number, at)}, counted before anything is loaded: past the "
            f"{MAX_CONTAINERS} one record holds (four fields of {MAX_FIELD_KEYS} rows); save "
            "long lists as tensors")

    def _owner(self, at: int) -> int | None:
        """The place of the dict whose key's value is at place ``at`` of the stack (``MARK``,
        its keys and values, as ``SETITEMS`` takes them), or None."""
        below = bisect_left(self.marks, at)
        mark = self.marks[below - 1] if below else 0
        if mark < 1 or (at - mark) % 2:
            return None
        owner = self.stack[mark - 1]
        return mark - 1 if owner >= 0 and self.kinds[owner] in (_DICT, _MADE) else None

    def _enclosing(self) -> tuple[int, int]:
        """``(record, field)`` of an object made now (pushed next): a record's value under the
        key on top of the stack is that record's field of that key; else it is in the record
        and field of what it goes into (the list below it, an item made before it, the object
        below its mark); ``-1`` where not known."""
        stack, top = self.stack, len(self.stack) - 1
        if top < 0:
            return -1, -1
        if self.text is not None and self.text[0] == top and \
                (owner := self._owner(top + 1)) is not None:
            place = self._place(owner)
            if place is not None:
                return place[0], self._key(self.text[1])
            return self.record[stack[owner]], self.field[stack[owner]]
        below = bisect_left(self.marks, top + 1)
        into = stack[top] if stack[top] >= 0 else \
            stack[self.marks[below - 1] - 1] if below and self.marks[below - 1] > 0 else -1
        return (self.record[into], self.field[into]) if into >= 0 else (-1, -1)

    def _key(self, text: str) -> int:
        """The number of the key ``text`` (-1 past :data:`_MOST_NAMED` keys kept)."""
        if text not in self.keys and len(self.keys) < _MOST_NAMED:
            self.keys[text] = len(self.keys)
        return self.keys.get(text, -1)

    def _contained(self, number: int, at: int) -> str:
        """``record I in 'FILE': ... in field 'NAME'`` of the object ``number`` at place
        ``at``: a record (its fields together), else the record and field it is in (one not
        known said so)."""
        place = self._place(at) if self.kinds[number] == _DICT else None
        if place is not None:
            return f"{where_of(self.path.name, place[0])}: its pickle puts at least " \
                f"{self.inner[number]} lists, dicts and tuples in that record's fields together"
        record, field = self.record[number], self.field[number]
        name = next((key for key, n in self.keys.items() if n == field), None)
        where = where_of(self.path.name, record) if record >= 0 else \
            f"'{terminal(self.path.name)}' (which record, not known)"
        return (f"{where}: its pickle puts at least {self.inner[number]} lists, dicts and tuples "
                f"in {'a field not known' if name is None else 'field ' + show(name)}")

    def _give_keys(self, pairs: int) -> None:
        """``SETITEM``/``SETITEMS`` of ``pairs`` keys to the dict on top of the stack."""
        target = self._top()
        if target < 0 or self.kinds[target] not in (_DICT, _MADE):
            return  # the loader refuses a target that is no dict
        self.kinds[target] = _DICT
        self.sizes[target] += pairs
        self._reached(target, self.sizes[target])
        if self.sizes[target] > self.most:
            raise CaptureFormatError(
                f"'{terminal(self.path)}': its pickle sets keys {self.sizes[target]} times in "
                f"one dict, before anything is loaded: past the {self.most} any dict of a "
                f"record holds ({MAX_FIELD_KEYS} in a field's dict, one per request of a "
                "batch, and its fields); write one record's fields, one record per file, long "
                "lists as tensors")
        if self.sizes[target] <= self.cap or self.fetched[target] & ~_CALLED:
            return  # a dict fetched again from the memo, or placed elsewhere: judged at STOP
        place = self._place()
        if place is None or self._may_be_state():
            self.fetched[target] |= 2
        else:
            index, saved = place
            raise CaptureFormatError(
                f"'{terminal(self.path)}': its pickle sets keys {self.sizes[target]} times in "
                f"the dict at place {len(self.stack) - 1} of its stack, where torch.save puts "
                f"record {index} ({saved}), before anything is loaded: past the {self.cap} "
                "names any site declares (with site, step, rank and summary); write one "
                "record's fields, one record per file")

    def _may_be_state(self) -> bool:
        """Whether the dict on top of the stack may be the ``BUILD`` state of the object
        just below it (above the last mark), one a call made: an ``OrderedDict`` record, whose
        attributes torch sets from it; which it is, the pickle says later."""
        stack, at = self.stack, len(self.stack) - 2
        return at >= (self.marks[-1] + 1 if self.marks else 0) and stack[at] >= 0 \
            and bool(self.fetched[stack[at]] & _CALLED)

    def _build(self, state: int) -> None:
        """``BUILD`` of ``state`` into the object on top of the stack: a dict given more keys
        than a record holds is refused where torch.save puts a record (torch sets them as
        that ``OrderedDict``'s attributes)."""
        self._top()
        if state < 0 or self.kinds[state] != _DICT or self.sizes[state] <= self.cap:
            return
        place = self._place()
        if place is not None:
            index, saved = place
            raise CaptureFormatError(
                f"'{terminal(self.path)}': its pickle sets keys {self.sizes[state]} times in "
                f"the BUILD state of the object at place {len(self.stack) - 1} of its stack, "
                f"where torch.save puts record {index} ({saved}): attributes torch would set "
                f"on that record, before anything is loaded: past the {self.cap} names any "
                "site declares (with site, step, rank and summary); write one record's fields, "
                "one record per file")

    def _place(self, at: int | None = None) -> tuple[int, str] | None:
        """Which record torch.save puts where the dict on top of the stack (or at place
        ``at``) is (the object saved, at the bottom of the stack, or an item of a list or tuple
        saved), and what it is there; None elsewhere."""
        stack, at = self.stack, len(self.stack) - 1 if at is None else at
        marked = bisect_left(self.marks, at)  # the marks below it
        kinds = [self.kinds[n] if n >= 0 else n for n in stack[:3]]
        if at == 0:
            return 0, "the object saved"
        below = self.marks[0] if marked == 1 else -1 if marked else None  # the one mark
        plain = bisect_left(self.plain, at)  # the values no dict below it
        if below is not None and plain and self.plain[plain - 1] > below:
            return None  # a value no record is below it: a call's argument, a field's value
        if kinds[0] == _LIST and (below == 1 or (at == 1 and below is None)):
            index = self.sizes[stack[0]] + (at - 2 if marked else 0)
            return index, f"item {index} of the list saved"
        if below == 0 or (below is None and at <= 2 and all(k == _DICT for k in kinds[:at])):
            index = at - 1 if marked else at
            return index, f"item {index} of the tuple saved"
        return None

    def _check_top_object(self) -> None:
        """At ``STOP``: refuse the object it returns, when a dict given more keys than a record
        holds, or a list or tuple of which such a dict is an item."""
        top = self._top()
        if top < 0:
            return
        records = self.items.get(top, array("q")) if self.kinds[top] in (_LIST, _TUPLE) else \
            array("q", [0, top])
        for index, number in zip(records[::2], records[1::2], strict=True):
            if self.kinds[number] == _DICT and self.sizes[number] > self.cap:
                raise CaptureFormatError(
                    f"{where_of(self.path.name, index)}: its pickle sets keys "
                    f"{self.sizes[number]} times in that record's dict, before anything is "
                    f"loaded: past the {self.cap} names any site declares (with site, step, "
                    "rank and summary); write one record's fields, one record per file")
            if self.reach[number] > self.cap:
                raise CaptureFormatError(
                    f"{where_of(self.path.name, index)}: its pickle makes that record by a call "
                    f"(REDUCE) on {self.reach[number]} items or characters, before anything is "
                    f"loaded: past the {self.cap} names any site declares (with site, step, "
                    "rank and summary); write one record's fields as a dict, one record per "
                    "file")
