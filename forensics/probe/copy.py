"""Copies of the tensors a record holds: CPU tensors at once, device tensors asynchronously.

A device tensor is copied with ``non_blocking=True`` into a pinned host buffer on the current
stream; one event recorded after the call's copies tells, through ``query()``, when the buffers
are ready. Nothing on the recording path calls ``synchronize()``: only a final flush (exit,
SIGTERM, an exception, a guard finding) waits for events.

:meth:`Copier.join` copies several integer tensors of one call at once: one ``torch.cat`` of
their flat values (wider dtypes viewed as the narrowest one, the *carrier*) into a new tensor,
plus, for device tensors, one non-blocking copy of that into pinned memory. The calling thread
builds no numpy array (``Tensor.numpy()`` costs ~2 us a call): the writer thread splits the
joined values back into each field's dtype and shape (:meth:`Joined.arrays`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from forensics.records import Record

if TYPE_CHECKING:
    import torch


@dataclass
class Deferred:
    """A host buffer filled by an asynchronous device-to-host copy (valid once its event is)."""

    buffer: Any

    def value(self) -> np.ndarray:
        """Return the buffer's contents as a numpy array (call only once the event completed)."""
        return self.buffer.numpy().copy()


def _is_device(tensor: torch.Tensor) -> bool:
    return not tensor.is_cpu


def _empty_pinned(tensor: torch.Tensor) -> torch.Tensor:
    import torch

    return torch.empty(tuple(tensor.shape), dtype=tensor.dtype, pin_memory=True)


def _new_event() -> Any:
    import torch

    return torch.cuda.Event()


class Copier:
    """Takes copies of tensors for records; the three hooks exist so tests can fake a device."""

    def __init__(self, *, is_device: Callable[[Any], bool] = _is_device,
                 empty_pinned: Callable[[Any], Any] = _empty_pinned,
                 new_event: Callable[[], Any] = _new_event) -> None:
        self.is_device = is_device
        self._real = is_device is _is_device  # no hook faking a device
        self.empty_pinned = empty_pinned
        self.new_event = new_event

    def take(self, tensor: torch.Tensor) -> np.ndarray | Deferred:
        """Return a copy of ``tensor``: a numpy array (host), or a Deferred (device, async).

        A host tensor costs one copy (``numpy().copy()``, no Python work per element).
        """
        if self.is_device is _is_device:
            if tensor.is_cpu:
                if tensor.requires_grad:
                    tensor = tensor.detach()
                return tensor.numpy().copy()
        elif not self.is_device(tensor):
            return tensor.detach().numpy().copy()
        tensor = tensor.detach()
        buffer = self.empty_pinned(tensor)
        buffer.copy_(tensor, non_blocking=True)
        return Deferred(buffer)

    def take_all(self, tensors: Sequence[torch.Tensor]) -> list[np.ndarray | Deferred]:
        """Copies of ``tensors`` as :meth:`take` gives them, in order (host tensors without
        a grad inline, one ``numpy().copy()`` each: no call per tensor)."""
        if self.is_device is not _is_device:
            return [self.take(tensor) for tensor in tensors]
        return [tensor.numpy().copy() if tensor.is_cpu and not tensor.requires_grad
                else self.take(tensor) for tensor in tensors]

    def join(self, tensors: Sequence[torch.Tensor]) -> Joined:
        """One copy of several integer tensors of one call (see the module docstring): host
        tensors give a host :class:`Joined` at once, device tensors a deferred one. Tensors of
        other dtypes, or on different devices, are copied one by one (``parts``).

        The usual case (integer tensors of a known plan that ``torch.cat`` joins as they are,
        after a view of the wider ones) costs those views and the ``cat``; a one-dimensional
        result tells that every tensor was one-dimensional (``Joined.flat``: ``torch.cat``
        joins tensors of one rank only, or skips an empty ``(0,)``)."""
        plan = _join_plan(tuple(map(_DTYPE, tensors)))
        shapes = tuple(map(_SHAPE, tensors))
        if plan is None:
            return Joined(None, None, shapes, self.take_all(tensors))
        try:
            if plan.views:
                parts = list(tensors)
                for i in plan.views:
                    parts[i] = parts[i].view(plan.carrier)
                data = _TORCH.cat(parts)
            else:
                data = _TORCH.cat(tensors)
        except RuntimeError:  # other dimensions, strides or devices: each flattened
            data = _cat_flat(tensors, plan)
            if data is None:  # tensors on different devices: one by one
                return Joined(None, None, shapes, self.take_all(tensors))
            flat = set(map(len, shapes)) == {1}
        else:
            flat = data.ndim == 1
            if not flat:  # tensors of several dimensions joined along the first one
                data = data.reshape(-1)
        if self._real and data.is_cpu:  # host tensors: the joined copy is the record's
            return Joined(data, plan, shapes, flat=flat)
        taken = self.take(data)  # device tensors: a non-blocking copy into pinned memory
        return Joined(taken if type(taken) is Deferred else _TORCH.from_numpy(taken), plan,
                      shapes, flat=flat)

    def seal(self) -> Any:
        """Record and return an event after the copies enqueued so far on the current stream."""
        event = self.new_event()
        event.record()
        return event


class Joined:
    """The values of several tensors of one call in one flat buffer of the carrier dtype.

    ``data``: a host tensor, or a :class:`Deferred` pinned buffer (device tensors), or a
    numpy array (records rebuilt by the writer process, :mod:`forensics.probe.frames`), or None
    when the tensors could not be joined (then ``parts`` holds one copy per tensor, as
    :meth:`Copier.take` gives them). ``plan`` maps the fields back (a :class:`JoinPlan`, or
    the writer process's :class:`~forensics.probe.frames.ChildPlan`: dtypes and ratios).
    ``shapes``: each tensor's shape (a ``torch.Size``, or any tuple of ints). ``flat``: True
    when every tensor is known to be one-dimensional (each shape is its length alone).
    """

    __slots__ = ("data", "parts", "plan", "shapes", "flat")

    def __init__(self, data: Any, plan: Any, shapes: tuple[Any, ...],
                 parts: list[np.ndarray | Deferred] | None = None, *, flat: bool = False) -> None:
        self.data, self.plan, self.shapes, self.parts = data, plan, shapes, parts
        self.flat = flat

    def deferred(self) -> bool:
        """True when the values wait for a device copy."""
        if self.parts is not None:
            return Deferred in map(type, self.parts)
        return type(self.data) is Deferred

    def arrays(self) -> list[np.ndarray]:
        """Each tensor's values as a numpy array of its dtype and shape (views of one buffer;
        call only once the copy completed)."""
        if self.parts is not None:
            return [p.value() if isinstance(p, Deferred) else p for p in self.parts]
        data = self.data
        if type(data) is Deferred:
            flat = data.value()
        else:  # a host tensor, or a numpy array (rebuilt by the writer process)
            flat = data if type(data) is np.ndarray else data.detach().numpy()
        plan = self.plan
        assert plan is not None
        out, pos = [], 0
        for dtype, ratio, shape in zip(plan.dtypes, plan.ratios, self.shapes, strict=True):
            count = ratio * _numel(shape)
            out.append(flat[pos:pos + count].view(dtype).reshape(shape))
            pos += count
        return out


def _numel(shape: tuple[int, ...]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


class JoinPlan:
    """How tensors of given dtypes join: the carrier dtype (the narrowest), each field's numpy
    dtype, how many carrier items one of its items spans, and whether it joins as it is (of
    the carrier dtype) or through a view."""

    __slots__ = ("carrier", "dtypes", "ratios", "plain", "views")

    def __init__(self, torch_dtypes: tuple[Any, ...]) -> None:
        import torch

        sizes = [d.itemsize for d in torch_dtypes]
        narrow = [d for d in torch_dtypes if d.itemsize == min(sizes)]
        self.carrier = max(narrow, key=narrow.count)  # the most common narrowest dtype
        self.dtypes = tuple(np.dtype(torch.empty(0, dtype=d).numpy().dtype)
                            for d in torch_dtypes)
        self.ratios = tuple(size // self.carrier.itemsize for size in sizes)
        self.plain = tuple(d == self.carrier for d in torch_dtypes)
        self.views = tuple(i for i, plain in enumerate(self.plain) if not plain)


_INTEGER_DTYPES: frozenset[Any] | None = None
_TORCH: Any = None  # the torch module, once a plan was made
_SHAPE, _DTYPE = attrgetter("shape"), attrgetter("dtype")


def _join_plan(dtypes: tuple[Any, ...]) -> JoinPlan | None:
    """The plan for tensors of ``dtypes`` (cached), or None when some dtype is not an
    integer one (such tensors are copied one by one)."""
    plan = _PLANS.get(dtypes, _MISSING)
    if plan is _MISSING:
        import torch

        global _INTEGER_DTYPES, _TORCH
        _TORCH = torch
        if _INTEGER_DTYPES is None:
            _INTEGER_DTYPES = frozenset((torch.int8, torch.int16, torch.int32, torch.int64,
                                         torch.uint8, torch.uint16, torch.uint32,
                                         torch.uint64))
        plan = JoinPlan(dtypes) if dtypes and set(dtypes) <= _INTEGER_DTYPES else None
        _PLANS[dtypes] = plan
    return plan  # type: ignore[return-value]


_MISSING = object()
_PLANS: dict[tuple[Any, ...], JoinPlan | None] = {}


def _cat_flat(tensors: Sequence[torch.Tensor], plan: JoinPlan) -> torch.Tensor | None:
    """The values of ``tensors`` ``torch.cat`` refuses as they are, each flattened (a copy
    only where needed), joined; None when they are on different devices."""
    try:
        return _TORCH.cat([_flat_as(t.reshape(-1), plan.carrier) for t in tensors])
    except RuntimeError:
        return None


def _flat_as(flat: torch.Tensor, carrier: Any) -> torch.Tensor:
    """The values of the one-dimensional ``flat`` seen as ``carrier`` items (a copy only
    where the tensor is strided and its items are wider than the carrier's)."""
    if flat.dtype == carrier:
        return flat
    try:
        return flat.view(carrier)
    except RuntimeError:  # strided: wider items cannot be viewed as narrower ones
        return flat.contiguous().view(carrier)


class PendingRecord:
    """A record whose device copies may still be in flight.

    ``fields``: values by name; ``events``: device copy events (a tuple: no list per host
    record); ``seq``: its number among the session's records (set when queued); ``joined``:
    joined copies, (the fields' names, their values), spelled out by :meth:`to_record`. A
    plain class with slots: one is built per recorded call."""

    __slots__ = ("site", "step", "rank", "fields", "events", "seq", "joined")

    def __init__(self, site: str, step: int, rank: int,
                 fields: dict[str, Any] | None = None) -> None:
        self.site, self.step, self.rank = site, step, rank
        self.fields: dict[str, Any] = {} if fields is None else fields
        self.events: tuple[Any, ...] = ()
        self.seq = 0
        self.joined: list[tuple[tuple[str, ...], Joined]] = []

    def __repr__(self) -> str:
        return f"PendingRecord({self.site!r}, step={self.step}, rank={self.rank}, seq={self.seq})"

    def deferred(self) -> bool:
        """True when some field waits for a device copy."""
        for _, joined in self.joined:
            if joined.deferred():
                return True
        return bool(self.fields) and Deferred in map(type, self.fields.values())

    def ready(self) -> bool:
        """True when every device copy completed (``event.query()``, never a wait)."""
        return all(event.query() for event in self.events)

    def wait(self) -> None:
        """Block until the device copies completed (only on a final flush)."""
        for event in self.events:
            event.synchronize()

    def to_record(self) -> Record:
        """Return the Record, device buffers read into numpy arrays (it takes over the
        fields dict when no value waits for a device copy and nothing was joined)."""
        fields = self.fields
        if self.joined or Deferred in map(type, fields.values()):
            fields = {name: value.value() if isinstance(value, Deferred) else value
                      for name, value in fields.items()}
        for names, joined in self.joined:
            fields.update(zip(names, joined.arrays(), strict=True))
        return Record(self.site, self.step, self.rank, fields)
