"""Copies of the tensors a record holds: CPU tensors at once, device tensors asynchronously.

A device tensor is copied with ``non_blocking=True`` into a pinned host buffer on the current
stream; one event recorded after the call's copies tells, through ``query()``, when the buffers
are ready. Nothing on the recording path calls ``synchronize()``: only a final flush (exit,
SIGTERM, an exception, a guard finding) waits for events.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
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

    def seal(self) -> Any:
        """Record and return an event after the copies enqueued so far on the current stream."""
        event = self.new_event()
        event.record()
        return event


@dataclass
class PendingRecord:
    """A record whose device copies may still be in flight."""

    site: str
    step: int
    rank: int
    fields: dict[str, Any] = field(default_factory=dict)
    events: list[Any] = field(default_factory=list)
    seq: int = 0  #: its number among the session's records (set when queued)

    def deferred(self) -> bool:
        """True when some field waits for a device copy."""
        return Deferred in map(type, self.fields.values())

    def ready(self) -> bool:
        """True when every device copy completed (``event.query()``, never a wait)."""
        return all(event.query() for event in self.events)

    def wait(self) -> None:
        """Block until the device copies completed (only on a final flush)."""
        for event in self.events:
            event.synchronize()

    def to_record(self) -> Record:
        """Return the Record, device buffers read into numpy arrays (it takes over the
        fields dict when no value waits for a device copy)."""
        fields = self.fields
        if self.deferred():
            fields = {name: value.value() if isinstance(value, Deferred) else value
                      for name, value in fields.items()}
        return Record(self.site, self.step, self.rank, fields)
