"""Which tensors of a recorded launch share memory (the ``storage_id`` and ``storage_at`` of
each tensor record, :mod:`forensics.kernels.format`): the check a reader applies, and the
memory blocks a replay gives them. Tensors of one ``storage_id`` share memory: views of one
storage (``storage_at`` 0 each), or storages that partly overlap (each starting ``storage_at``
bytes into the memory the id spans). Every byte two tensors of one id both record (storages
recorded whole, views by their elements) is one value (:func:`check_bytes`,
:func:`check_elements`). A record without the fields (written before them) says nothing of
sharing: unknown. numpy only."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from forensics.errors import CaptureFormatError


@dataclass
class Block:
    """One memory block of a replay: ``size`` bytes, the tensors in it (name, byte of the
    block where its storage starts), in record order."""

    size: int
    members: list[tuple[str, int]]


#: the reader's error of (where, field, what is wrong): :func:`forensics.kernels.format._fail`
Fail = Callable[[str, str, str], CaptureFormatError]


def blocks(tensors: dict[str, tuple[int | None, int, int]]) -> list[Block]:
    """The blocks of a launch's tensors (name -> (``storage_id``, ``storage_at``, storage
    bytes)); each tensor its own block when the record says nothing of sharing."""
    out: dict[object, Block] = {}
    for name, (ident, at, size) in tensors.items():
        key: object = ("own", name) if ident is None else ident
        block = out.setdefault(key, Block(0, []))
        block.members.append((name, at))
        block.size = max(block.size, at + size)
    return list(out.values())


def check_groups(tensors: dict[str, tuple[int | None, int, int]], where: str,
                 fail: Fail) -> None:
    """Refuse a sharing no memory can hold: ``storage_id`` on some tensors of the launch only
    (each has one, or none does), one id's storages not one span of memory (a storage
    starting past the bytes the id's others cover: they share none), or none of them at the
    id's byte 0."""
    idents = [ident for ident, _, _ in tensors.values()]
    if any(i is None for i in idents) and any(i is not None for i in idents):
        name = next(n for n, (i, _, _) in tensors.items() if i is None)
        raise fail(f"{where} tensor {name!r}", "storage_id",
                   "is missing where the launch's other tensors have one (every tensor has "
                   "one, or none does)")
    groups: dict[int, list[tuple[int, int, str]]] = {}
    for name, (ident, at, size) in tensors.items():
        if ident is not None:
            groups.setdefault(ident, []).append((at, size, name))
    for ident, members in groups.items():
        members.sort()
        reach = members[0][0] + members[0][1]
        if members[0][0]:
            raise fail(f"{where} tensor {members[0][2]!r}", "storage_at",
                       f"is {members[0][0]}, yet no storage of storage_id {ident} starts at "
                       "byte 0 (the id's memory starts where its first storage does)")
        for at, size, name in members[1:]:
            if at > reach or (at == reach and size):
                raise fail(f"{where} tensor {name!r}", "storage_at",
                           f"puts its storage at bytes {at}..{at + size}, apart from the rest "
                           f"of storage_id {ident} (bytes 0..{reach}): storages of one id "
                           "overlap; give it an id of its own")
            reach = max(reach, at + size)


def check_bytes(stored: dict[str, tuple[int, int, bytes]], what: str, where: str,
                fail: Fail) -> None:
    """Refuse two recorded storages of one memory (name -> (``storage_id``, ``storage_at``,
    every byte of the storage)) that disagree on a byte they share: one memory holds one
    value (``what``: the field, ``data`` or ``after``). Linear in the bytes: each is compared
    with the span its id's storages before it cover."""
    by_id: dict[int, list[tuple[int, str, bytes]]] = {}
    for name, (ident, at, raw) in stored.items():
        by_id.setdefault(ident, []).append((at, name, raw))
    for ident, members in by_id.items():
        members.sort(key=lambda m: m[0])
        start, span = 0, bytearray()
        for at, name, raw in members:
            if at > start + len(span):
                start, span = at, bytearray()
            shared = span[at - start:at - start + len(raw)]
            differ = np.flatnonzero(np.frombuffer(shared, dtype=np.uint8)
                                    != np.frombuffer(raw[:len(shared)], dtype=np.uint8))
            if len(differ):
                raise fail(f"{where} tensor {name!r}", what,
                           f"holds byte {int(differ[0])} of its storage unlike the storage "
                           f"of storage_id {ident} it shares it with: one memory holds one "
                           "value")
            span += raw[len(shared):]


def check_elements(stored: dict[str, tuple[int, int, bytes]],
                   views: dict[str, tuple[int, np.ndarray, int, bytes]], what: str,
                   where: str, fail: Fail) -> None:
    """Refuse a tensor recorded by its elements (``views``: name -> (``storage_id``, the byte
    of its id's memory where each element starts, bytes an element, its elements' bytes)) that
    holds a byte of its id's memory unlike a storage recorded whole (``stored``, as
    :func:`check_bytes` takes them, already agreeing) or another such tensor: the replay
    writes the elements over the whole copy, so a forged disagreement was replayed as written
    (``what``: the field, ``data`` or ``after``). Each byte once, sorted: n log n."""
    for ident in sorted({i for i, _, _, _ in views.values()}):
        names, places, values, elements = [], [], [], []
        for name, (i, at, raw) in stored.items():
            if i == ident:
                names.append(name)
                places.append(at + np.arange(len(raw), dtype=np.int64))
                values.append(np.frombuffer(raw, dtype=np.uint8))
                elements.append(np.full(len(raw), -1, dtype=np.int64))
        for name, (i, starts, size, raw) in views.items():
            if i == ident:
                names.append(name)
                places.append((starts[:, None] + np.arange(size, dtype=np.int64)).ravel())
                values.append(np.frombuffer(raw, dtype=np.uint8))
                elements.append(np.repeat(np.arange(len(starts), dtype=np.int64), size))
        _first_unlike(ident, names, places, values, elements, what, where, fail)


def _first_unlike(ident: int, names: list[str], places: list[np.ndarray],
                  values: list[np.ndarray], elements: list[np.ndarray], what: str, where: str,
                  fail: Fail) -> None:
    """Refuse the first byte of memory ``ident`` two of its tensors (``names``, their bytes'
    ``places``, ``values`` and ``elements``: -1 for a storage recorded whole) hold unlike."""
    owner = np.concatenate([np.full(len(p), k, dtype=np.int64) for k, p in enumerate(places)])
    place, value = np.concatenate(places), np.concatenate(values)
    element = np.concatenate(elements)
    order = np.lexsort((owner, place))
    place, value, owner, element = place[order], value[order], owner[order], element[order]
    unlike = np.flatnonzero((place[1:] == place[:-1]) & (value[1:] != value[:-1]))
    if not len(unlike):
        return
    i = int(unlike[0])
    a, b = (i, i + 1) if element[i + 1] >= 0 else (i + 1, i)  # b: an element's, named
    raise fail(f"{where} tensor {names[owner[b]]!r}", what,
               f"holds element {int(element[b])} unlike {names[owner[a]]!r} at byte "
               f"{int(place[b])} of storage_id {ident}, which both hold: one memory holds "
               "one value")
