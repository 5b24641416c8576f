"""The flight recorder of vLLM's Triton kernel launches (``FORENSICS_KERNELS``).

With ``FORENSICS_KERNELS=all`` (or a comma list of kernel names or globs:
:mod:`forensics.probe.kernel_selection`) every launch of a ``@triton.jit`` kernel defined in vLLM's
worker, sampling and speculative-decoding packages is recorded, on both launch paths: compiled
kernels (``JITFunction.run``) and Triton's interpreter (``InterpretedFunction.run``,
``TRITON_INTERPRET=1``). The launch itself is not changed.

A launch costs one copy of each tensor argument's storage before and, for tensors the launch may
write, after it (integer and boolean storages whole up to :data:`WHOLE_BYTES`; floats within
``FORENSICS_KERNELS_BUDGET`` bytes per launch, else their elements up to the budget, else nothing
and the record says so; a launch's copies, all its tensors together, no more than its one event
line holds). Nothing is encoded on the launch path: the copies wait in the flight recorder, which
keeps the last ``FORENSICS_KERNELS_KEEP`` steps (default 32) and writes them as ``kernel_launch``
events through the probe's writer (:mod:`forensics.kernels.format`) when ``execute_model`` raises,
at exit, on SIGTERM/SIGINT, and on request (:func:`dump`). With ``FORENSICS_KERNELS_KEEP=all`` each
launch is encoded and handed to the writer as soon as it returns (or raises), so a SIGSEGV, SIGABRT
or SIGKILL of the engine loses at most the launch in flight. Launches while a CUDA graph is being
captured are not recorded: the ``kernel_summary`` event counts them apart (``graph_launches``) and
lists as ``graph_only`` the kernels whose every launch was one.
"""

from __future__ import annotations

import inspect
import logging
import os
import signal
import sys
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from forensics.kernels.format import FORMAT, KIND, SUMMARY_KIND, encode_bytes, source_hash
from forensics.probe.held import unless_flushing
from forensics.probe.kernel_selection import (
    ENV_BUDGET,
    budget,
    chosen,
    keep_steps,
    refuse_unused,
    selection,
)
from forensics.probe.launched import counted, launched

LOG = logging.getLogger("forensics.probe")
#: an integer or boolean storage up to this size is recorded whole; a larger one: the view
WHOLE_BYTES = 4 << 20
#: the packages whose kernels are recorded
PACKAGES = ("vllm.v1.worker.", "vllm.v1.sample.", "vllm.v1.spec_decode.")
#: a launch record past this many bytes of encoded contents drops its largest contents
MAX_EVENT_BYTES = 900_000
#: the most bytes of one tensor's contents a launch record can hold (base64: 4 chars for 3)
EVENT_CONTENT_BYTES = MAX_EVENT_BYTES // 4 * 3


class KernelMeta:
    """What the recorder knows of one kernel object: its names, parameters and whether it is
    recorded (``wanted``)."""

    __slots__ = ("module", "name", "sha", "params", "constexprs", "defaults", "wanted", "path",
                 "pointer_params", "key")

    def __init__(self, jit: Any, globs: tuple[str, ...]) -> None:
        fn = getattr(jit, "fn", None)
        self.module = getattr(fn, "__module__", "") or ""
        self.name = getattr(fn, "__name__", "") or ""
        self.key = f"{self.module}.{self.name}"  # as ``kernels_seen`` names it
        self.wanted = self.module.startswith(PACKAGES) and chosen(globs, self.module,
                                                                  self.name)
        self.sha = self.path = ""
        self.params: list[str] = []
        self.constexprs: set[str] = set()
        self.defaults: dict[str, Any] = {}
        self.pointer_params: tuple[str, ...] = ()  # the ``*_ptrs`` parameters
        if self.wanted:
            self._describe(jit, fn)

    def _describe(self, jit: Any, fn: Any) -> None:
        self.sha = source_hash(fn)
        self.path = "interpreter" if type(jit).__name__ == "InterpretedFunction" else "compiled"
        signature = inspect.signature(fn)
        self.params = list(signature.parameters)
        annotations = {k: str(v) for k, v in getattr(fn, "__annotations__", {}).items()}
        self.constexprs = {k for k, v in annotations.items() if "constexpr" in v}
        self.defaults = {k: p.default for k, p in signature.parameters.items()
                         if p.default is not inspect.Parameter.empty}
        self.pointer_params = tuple(p for p in self.params if p.endswith("_ptrs"))


class Pending:
    """One launch whose copies wait to be encoded: the tensors' layouts and host copies."""

    __slots__ = ("meta", "step", "rank", "ordinal", "grid", "constexprs", "scalars",
                 "tensors", "unrecorded", "names", "views", "sizes", "before", "after",
                 "memory", "room")

    def __init__(self, meta: KernelMeta, step: int, rank: int, ordinal: int) -> None:
        self.meta, self.step, self.rank, self.ordinal = meta, step, rank, ordinal
        self.grid: list[int] = []
        self.constexprs: dict[str, Any] = {}
        self.scalars: dict[str, Any] = {}
        self.tensors: dict[str, dict[str, Any]] = {}
        self.unrecorded: dict[str, str] = {}
        self.names: list[str] = []  # the tensors whose contents are copied, in copy order
        self.views: list[Any] = []  # their flat byte views (live memory; until ``after``)
        self.sizes: list[int] = []
        self.before: Any = None  # one host copy of every view joined, before the launch
        self.after: Any = None  # and after it
        self.memory: dict[str, tuple[int, int]] = {}  # per tensor: its storage's address, bytes
        self.room = EVENT_CONTENT_BYTES  # the bytes of contents its one event line still holds


class FlightRecorder:
    """The last ``keep`` steps of launches of one process (see the module)."""

    def __init__(self, globs: tuple[str, ...], keep: int | None, float_budget: int,
                 session: Any = None) -> None:
        self.globs, self.keep, self.budget = globs, keep, float_budget
        self.session = session
        self.steps: deque[tuple[int, list[Pending]]] = deque()
        self.meta: dict[int, KernelMeta] = {}
        self.seen: dict[str, int] = {}  # kernel -> launches seen (recorded or not)
        self.graph_seen: dict[str, int] = {}  # kernel -> launches seen during a graph capture
        self.dropped_steps = 0
        self.errors = 0
        self.written = 0  # launches handed to the writer so far
        self._ordinal = (-1, 0)  # (step, launches of that step so far)
        self._torch: Any = None
        self._capturing: Callable[[], bool] = lambda: False
        self._pid = os.getpid()  # a forked copy records its own launches only (:meth:`own`)
        self.named = 0  # the process whose probe_start named this recorder (:func:`recording`)

    # -- the launch path --------------------------------------------------------------------
    def kernel(self, jit: Any) -> KernelMeta:
        """The KernelMeta of ``jit`` (made once per kernel object)."""
        meta = self.meta.get(id(jit))
        if meta is None:
            meta = self.meta[id(jit)] = KernelMeta(jit, self.globs)
        return meta

    def own(self) -> bool:
        """Whether this process made what the recorder holds: a forked copy (a pool's worker)
        drops the launches and counts it inherited, and writes nothing until it launches."""
        if self._pid != os.getpid():  # a killed copy wrote its parent's steps as its own
            self.steps.clear()
            self.seen, self.graph_seen, self._ordinal, self._pid = {}, {}, (-1, 0), 0
            self.dropped_steps = self.errors = self.written = 0
        return self._pid == os.getpid() or bool(self.seen)

    def before(self, meta: KernelMeta, args: tuple[Any, ...], kwargs: dict[str, Any],
               grid: Any, *, count: bool = True) -> Pending | None:
        """Record a launch's arguments (None when it is captured into a graph); count it too
        unless not ``count`` (the launch path counts it once it ran: :mod:`.launched`)."""
        if not self.own():
            self._pid = os.getpid()  # its first launch: the copy's own from now on
        pending = None if self._capturing() else self._copied(meta, args, kwargs, grid)
        if count:
            launched(self, meta, pending)
        return pending

    def _copied(self, meta: KernelMeta, args: tuple[Any, ...], kwargs: dict[str, Any],
                grid: Any) -> Pending:
        """A launch's arguments, copied, neither counted nor numbered yet."""
        step, rank = self._step_rank()
        pending = Pending(meta, step, rank, 0)
        bound = _bind(meta, args, kwargs)
        self._arguments(pending, bound)
        pending.grid = _grid(grid, bound)
        self._pointer_tables(pending, bound)
        _share(pending)
        pending.before = _join(pending.views)
        return pending

    def after(self, pending: Pending) -> None:
        """Copy the tensors the launch may have written (their storage, once more)."""
        pending.after = _join(pending.views)
        pending.views = []
        if self.hands_off_each_launch:
            self.hand_off(pending)

    @property
    def hands_off_each_launch(self) -> bool:
        """Whether each launch goes to the writer when it returns (``KEEP=all``)."""
        return self.keep is None and self.session is not None

    def hand_off(self, pending: Pending) -> None:
        """Encode ``pending`` and hand it to the probe's writer now (it then survives a crash of
        the engine); a launch that raised goes with its arguments before the launch only."""
        pending.views = []
        self.session.keep_event(KIND, **event_fields(pending))
        self.written += 1

    def _arguments(self, pending: Pending, bound: dict[str, Any]) -> None:
        """Note every argument of a launch: constexprs, tensors (with their contents, within
        the float budget) and scalars; anything else by its type only."""
        tensor_type, constexprs = self._torch.Tensor, pending.meta.constexprs
        floats = self.budget
        for name in pending.meta.params:
            value = bound.get(name)
            if name in constexprs:
                pending.constexprs[name] = _plain(value)
            elif value is None or isinstance(value, (bool, int, float, str)):
                pending.scalars[name] = _plain(value)  # asked first: cheaper than a tensor's
            elif isinstance(value, tensor_type):
                floats = self._tensor(pending, name, value, floats)
            else:
                pending.unrecorded[name] = f"a {type(value).__name__}, not a tensor or scalar"

    def _tensor(self, pending: Pending, name: str, tensor: Any, floats: int,
                extra: dict[str, Any] | None = None) -> int:
        """Note one tensor argument and copy its contents (see the module); return the
        float budget left."""
        dtype, whole, complex_, itemsize = _dtype_facts(tensor.dtype)
        untyped = tensor.untyped_storage()
        storage = untyped.nbytes()
        pending.memory[name] = (untyped.data_ptr(), storage)
        view_bytes = tensor.numel() * itemsize
        contents, reason = "none", ""
        if whole and storage <= WHOLE_BYTES:
            contents = "storage"
        elif whole or view_bytes <= floats:
            contents = "view"
            floats -= 0 if whole else view_bytes
        else:
            reason = (f"float contents of {view_bytes} bytes, past the launch's "
                      f"budget ({self.budget} bytes, {ENV_BUDGET}): shape only")
        if storage <= floats and not whole:
            contents = "storage"
        contents, reason = _within_one_event(contents, reason, storage, view_bytes,
                                             pending.room)
        pending.room -= {"storage": storage, "view": view_bytes}.get(contents, 0)
        if contents != "none" and complex_:
            contents, reason = "none", "a complex tensor"
        info = {"dtype": dtype, "shape": tensor.shape, "strides": tensor.stride(),
                "offset": tensor.storage_offset(), "storage": storage, "contents": contents,
                "reason": reason}
        if extra:
            info.update(extra)
        if contents != "none":
            view = _flat(tensor, contents, storage // itemsize, self._torch)
            pending.names.append(name)
            pending.views.append(view)
            pending.sizes.append(view.numel())
        pending.tensors[name] = info
        return floats

    def _pointer_tables(self, pending: Pending, bound: dict[str, Any]) -> None:
        """Record the tensors a table of raw pointers (``*_ptrs``, int64) points into,
        found among the callers' tensors; a pointer that none holds is said so."""
        torch = self._torch
        for name in pending.meta.pointer_params:
            value = bound.get(name)
            if not (isinstance(value, torch.Tensor)
                    and value.dtype in (torch.int64, torch.uint64) and value.dim() == 1):
                continue  # vLLM 0.32 keeps its pointer tables as uint64, 0.33 as int64
            pointers = [int(p) for p in value.view(torch.int64).cpu().tolist()]
            found = _tensors_holding(pointers, torch)
            for i, pointer in enumerate(pointers):
                target = found.get(pointer)
                if target is None:
                    pending.unrecorded[f"{name}[{i}]"] = (
                        "a raw pointer into no tensor the recorder could find")
                    continue
                self._tensor(pending, f"{name}[{i}]", target, 0,
                             {"pointer_of": name, "pointer_index": i})

    def _step_rank(self) -> tuple[int, int]:
        session = self.session
        if session is None:
            return 0, 0
        return session.step, session.rank

    def _launches(self, step: int) -> list[Pending]:
        """The list of ``step``'s launches (a new step drops the oldest past ``keep``)."""
        steps = self.steps
        if steps and steps[-1][0] == step:
            return steps[-1][1]
        steps.append((step, []))
        while self.keep is not None and len(steps) > self.keep:
            steps.popleft()
            self.dropped_steps += 1
        return steps[-1][1]

    # -- writing ----------------------------------------------------------------------------
    def take(self) -> list[Pending]:
        """The kept launches, oldest first; the recorder is emptied."""
        out = [p for _, launches in self.steps for p in launches]
        self.steps.clear()
        return out

    def summary(self, written: int) -> dict[str, Any]:
        """The fields of the ``kernel_summary`` event."""
        return {"format": FORMAT, "selection": list(self.globs),
                "keep": self.keep if self.keep is not None else "all",
                "launches_written": written, "handed_off": self.written,
                "dropped_steps": self.dropped_steps,
                "kernels_seen": dict(self.seen), "graph_launches": dict(self.graph_seen),
                "graph_only": sorted(k for k, n in self.graph_seen.items()
                                     if n == self.seen.get(k)),
                "recorder_errors": self.errors}


def event_fields(pending: Pending) -> dict[str, Any]:
    """The ``kernel_launch`` event of ``pending`` (:mod:`forensics.kernels.format`)."""
    meta = pending.meta
    tensors: dict[str, dict[str, Any]] = {}
    for name, info in pending.tensors.items():
        out = {**info, "shape": list(info["shape"]), "strides": list(info["strides"])}
        if not out["reason"]:
            del out["reason"]
        tensors[name] = out
    start = 0
    before = _bytes(pending.before) if pending.before is not None else b""
    after = _bytes(pending.after) if pending.after is not None else None
    for name, size in zip(pending.names, pending.sizes, strict=True):
        data = before[start:start + size]
        tensors[name]["data"] = encode_bytes(data)
        if after is not None and after[start:start + size] != data:
            tensors[name]["after"] = encode_bytes(after[start:start + size])
        start += size
    _fit(tensors)
    return {"format": FORMAT, "step": pending.step, "rank": pending.rank,
            "kernel": {"module": meta.module, "name": meta.name, "source_sha256": meta.sha},
            "ordinal": pending.ordinal, "path": meta.path, "grid": pending.grid,
            "args": list(meta.params), "constexprs": pending.constexprs,
            "scalars": pending.scalars, "tensors": tensors, "unrecorded": pending.unrecorded}


def _share(pending: Pending) -> None:
    """Give each tensor of the launch its ``storage_id`` and ``storage_at``
    (:mod:`forensics.kernels.sharing`): the tensors whose storages overlap, by their addresses
    (views of one storage; storages over one allocation), share an id, each storage starting
    ``storage_at`` bytes past the first of them; an empty storage has an id of its own."""
    spans = sorted((ptr, ptr + size, name) for name, (ptr, size) in pending.memory.items()
                   if size)
    ident, base, reach = -1, 0, 0
    for start, end, name in spans:
        if ident < 0 or start >= reach:  # past the memory of the id before
            ident, base, reach = ident + 1, start, end
        reach = max(reach, end)
        pending.tensors[name].update(storage_id=ident, storage_at=start - base)
    for name, (_, size) in pending.memory.items():
        if not size:
            ident += 1
            pending.tensors[name].update(storage_id=ident, storage_at=0)


def _fit(tensors: dict[str, dict[str, Any]]) -> None:
    """Drop the largest contents until the event fits one events line (said in ``reason``)."""
    def size() -> int:
        return sum(len(t.get("data", "")) + len(t.get("after", "")) for t in tensors.values())

    while size() > MAX_EVENT_BYTES:
        name = max(tensors, key=lambda n: len(tensors[n].get("data", "")))
        t = tensors[name]
        t.pop("data", None)
        t.pop("after", None)
        t["contents"] = "none"
        t["reason"] = "contents past the size of one event line: shape only"


# -- tensors ------------------------------------------------------------------------------
def _within_one_event(contents: str, reason: str, storage: int, view_bytes: int,
                      room: int = EVENT_CONTENT_BYTES) -> tuple[str, str]:
    """``contents`` and ``reason`` of a tensor, copying no more of it than the ``room`` its
    launch's one event line has left (:data:`EVENT_CONTENT_BYTES` less the launch's tensors
    copied before it; a larger copy would be dropped when it is written): its storage, else
    its elements, else nothing and the reason says so. A huge view (an expanded tensor of a
    few bytes of storage), or many tensors of one launch, are then never materialised on the
    launch path nor held in the recorder."""
    size = storage if contents == "storage" else view_bytes
    if contents == "none" or size <= room:
        return contents, reason
    if contents == "storage" and view_bytes <= room:
        return "view", reason
    if size <= EVENT_CONTENT_BYTES:
        return "none", (f"contents of {size} bytes, past the {max(room, 0)} bytes one event "
                        f"line still holds after the launch's other tensors "
                        f"({EVENT_CONTENT_BYTES} bytes in all): shape only")
    return "none", (f"contents of {size} bytes, past what one event line holds "
                    f"({EVENT_CONTENT_BYTES} bytes): shape only")


#: per torch dtype: its name, whether it is integer or boolean (copied whole), whether it is
#: complex, its item size
_DTYPE_FACTS: dict[Any, tuple[str, bool, bool, int]] = {}


def _dtype_facts(dtype: Any) -> tuple[str, bool, bool, int]:
    """``dtype``'s name, whether it is integer or boolean, whether it is complex, and its
    item size (kept per dtype: the launch path asks for each tensor)."""
    facts = _DTYPE_FACTS.get(dtype)
    if facts is None:
        whole = not (dtype.is_floating_point or dtype.is_complex)
        facts = (str(dtype).removeprefix("torch."), whole, dtype.is_complex, dtype.itemsize)
        _DTYPE_FACTS[dtype] = facts
    return facts


def _flat(tensor: Any, contents: str, count: int, torch: Any) -> Any:
    """``tensor``'s storage (``storage``: its ``count`` elements) or elements (``view``) as
    flat bytes (a view of the live memory for ``storage``; no copy yet). A one-dimensional
    contiguous tensor that holds them as they are (the usual argument: a whole buffer) is
    viewed as bytes directly, one dispatch instead of three."""
    if (tensor.dim() == 1 and not tensor.requires_grad and tensor.is_contiguous()
            and (contents != "storage"
                 or (tensor.storage_offset() == 0 and tensor.numel() == count))):
        return tensor.view(torch.uint8)
    if contents == "storage":
        whole = torch.as_strided(tensor.detach(), (count,), (1,), 0)
    else:
        whole = tensor.detach().contiguous().reshape(-1)
    return whole.view(torch.uint8)


def _join(views: list[Any]) -> Any:
    """One host copy of ``views``' bytes, joined (None for none)."""
    import torch

    if not views:
        return None
    joined = torch.cat(views)
    return joined if joined.is_cpu else joined.to("cpu")


def _bytes(copy: Any) -> bytes:
    """The bytes of a joined copy (CPU and CUDA hosts are little-endian, as the format)."""
    data: bytes = copy.numpy().tobytes()
    return data


def _bind(meta: KernelMeta, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """A launch's arguments by parameter name (its defaults where it gives none)."""
    bound = dict(zip(meta.params, args, strict=False))
    if kwargs:
        bound.update((k, v) for k, v in kwargs.items() if k in meta.params)
    for name, value in meta.defaults.items():
        bound.setdefault(name, value)
    return bound


def _plain(value: Any) -> Any:
    """``value`` as JSON holds it (a dtype or other object as its text)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    return str(value)[:200]


def _grid(grid: Any, bound: dict[str, Any]) -> list[int]:
    """The launch grid as ints (a callable grid called with the bound arguments)."""
    if callable(grid):
        grid = grid(bound)
    if isinstance(grid, int):
        grid = (grid,)
    return [int(g) for g in tuple(grid)[:3]]


def _tensors_holding(pointers: list[int], torch: Any) -> dict[int, Any]:
    """Pointer -> a tensor (among the callers' locals and their ``self``'s attributes)
    whose storage starts at it."""
    wanted, found = set(pointers), dict[int, Any]()
    frame: Any = sys._getframe(3)
    for _ in range(6):
        if frame is None:
            break
        for value in _candidates(frame.f_locals):
            if isinstance(value, torch.Tensor) and value.data_ptr() in wanted:
                found.setdefault(value.data_ptr(), value)
        frame = frame.f_back
    return found


def _candidates(local: dict[str, Any]) -> list[Any]:
    """Tensors and lists of tensors among ``local`` and its ``self``'s attributes."""
    values = list(local.values())
    owner = local.get("self")
    if owner is not None and hasattr(owner, "__dict__"):
        values += list(vars(owner).values())
    out: list[Any] = []
    for value in values:
        items = list(value[:64]) if isinstance(value, (list, tuple)) else [value]
        for item in items:  # an item holding its tensor (vLLM's StagedWriteTensor.gpu)
            out.append(item)
            if isinstance(value, (list, tuple)) and hasattr(item, "__dict__"):
                out.extend(vars(item).values())
    return out


# -- installing ---------------------------------------------------------------------------
RECORDER: FlightRecorder | None = None
_ORIGINALS: list[tuple[Any, Any]] = []
_PREVIOUS: dict[int, Any] = {}


def wrap_run(original: Callable[..., Any]) -> Callable[..., Any]:
    """``run`` of a Triton kernel class, recording the launch when the kernel is wanted."""
    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        recorder = RECORDER
        if recorder is None or warmup:
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        pending = meta = None
        try:
            meta = recorder.kernel(self)
            if meta.wanted:  # counted once it ran (a signal may cut the copy: launched.py)
                pending = recorder.before(meta, args, kwargs, grid, count=False)
        except Exception as exc:  # the recorder never breaks a launch
            recorder.errors += 1
            LOG.debug("forensics kernels: recording a launch failed: %s", exc)
        try:
            result = original(self, *args, grid=grid, warmup=warmup, **kwargs)
        except BaseException:
            counted(recorder, meta, pending)
            if pending is not None and recorder.hands_off_each_launch:
                _hand_off_raised(recorder, pending)
            dump("a kernel launch raised")
            raise
        counted(recorder, meta, pending)
        if pending is not None:
            try:
                recorder.after(pending)
            except Exception:
                recorder.errors += 1
        return result

    run.__wrapped__ = original  # type: ignore[attr-defined]
    return run


def _hand_off_raised(recorder: FlightRecorder, pending: Pending) -> None:
    """Hand off a launch that raised (never raises itself)."""
    try:
        recorder.hand_off(pending)
    except Exception:
        recorder.errors += 1


def settings(environ: Mapping[str, str] | None = None
             ) -> tuple[tuple[str, ...], int | None, int] | None:
    """The recorder's kernel globs, steps kept and float budget, or None when it is off (the
    probe reads them before it starts anything: see :func:`forensics.probe.plugin.start`).

    Raises:
        ConfigurationError: a bad ``FORENSICS_KERNELS_*`` setting.
    """
    globs = selection(environ)
    if globs is None:
        refuse_unused(environ)
        return None
    return globs, keep_steps(environ), budget(environ)


def install(session: Any, environ: Mapping[str, str] | None = None) -> FlightRecorder | None:
    """Start recording kernel launches when ``FORENSICS_KERNELS`` asks; return the
    recorder (None when off). Wraps both launch paths, ``session.engine_failed``, exit,
    SIGTERM and SIGINT.

    Raises:
        ConfigurationError: a bad ``FORENSICS_KERNELS_*`` setting.
    """
    global RECORDER
    picked = settings(environ)
    if picked is None:
        return None
    recorder = FlightRecorder(*picked, session)
    import torch

    recorder._torch = torch
    recorder._capturing = _graph_capture_check(torch)
    RECORDER = recorder
    _wrap_launchers()
    _hook_session(session)
    import atexit

    atexit.register(dump, "exit")
    for signum in (signal.SIGTERM, signal.SIGINT):
        _chain_signal(signum)
    return recorder


def _graph_capture_check(torch: Any) -> Callable[[], bool]:
    """A call saying whether the current CUDA stream is capturing a graph (False on CPU)."""
    if not torch.cuda.is_available():
        return lambda: False
    return torch.cuda.is_current_stream_capturing


def _wrap_launchers() -> None:
    """Wrap ``JITFunction.run`` and ``InterpretedFunction.run`` (once)."""
    if _ORIGINALS:
        return
    classes = []
    try:
        from triton.runtime.jit import JITFunction

        classes.append(JITFunction)
    except ImportError:
        pass
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    except ImportError:
        pass
    for cls in classes:
        _ORIGINALS.append((cls, cls.run))
        cls.run = wrap_run(cls.run)


def _hook_session(session: Any) -> None:
    """Dump the launches before the session keeps an engine failure or closes, and name the
    recorded kernels in its ``probe_start`` (:func:`recording`)."""
    if session is None:
        return
    session.recording = recording
    failed, close = session.engine_failed, session.close

    def engine_failed(exc: BaseException, where: str) -> None:
        dump(f"an exception left {where}")
        failed(exc, where)

    def closing() -> None:
        dump("the probe closed")
        close()

    session.engine_failed, session.close = engine_failed, closing


def recording() -> list[str] | None:
    """The kernel selection (``FORENSICS_KERNELS`` globs) this process's recorder counts
    launches of and owes a ``kernel_summary`` for (a forked copy's too, launched or not yet),
    or None: no recorder. A ``probe_start`` names it: coverage knows who owes a summary."""
    recorder = RECORDER
    if recorder is None:
        return None
    recorder.named = os.getpid()  # it owes a summary in this process (:func:`dump`)
    return list(recorder.globs)


def _chain_signal(signum: int) -> None:
    """Dump on ``signum``, then hand the signal to the handler that was there."""
    try:
        _PREVIOUS[signum] = signal.getsignal(signum)  # never inside a flush (held.py)
        signal.signal(signum, unless_flushing(lambda: RECORDER and RECORDER.session, _on_signal))
    except ValueError:  # not the main thread: exit still dumps
        pass


def _on_signal(signum: int, frame: Any) -> None:
    dump(f"signal {signal.Signals(signum).name}")
    previous = _PREVIOUS.get(signum)
    if callable(previous):
        previous(signum, frame)
    elif previous == signal.SIG_DFL:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def dump(reason: str = "on request") -> int:
    """Write the kept launches and a ``kernel_summary`` as events; how many (never raises)."""
    recorder = RECORDER
    if recorder is None or recorder.session is None:
        return 0
    if not recorder.own() and recorder.named != os.getpid():
        return 0  # a forked copy that neither launched nor named its recorder: it owes none
    return _write(recorder, reason)


def _write(recorder: FlightRecorder, reason: str) -> int:
    """Write ``recorder``'s kept launches and a summary (see :func:`dump`)."""
    session, written = recorder.session, 0
    try:
        for pending in recorder.take():
            fields = event_fields(pending)
            session.keep_event(KIND, **fields)
            written += 1
        session.keep_event(SUMMARY_KIND, reason=reason, **recorder.summary(written))
    except Exception as exc:
        recorder.errors += 1
        LOG.warning("forensics kernels: writing the recorded launches failed: %s", exc)
    return written


def uninstall() -> None:
    """Stop recording and restore the launch paths (tests)."""
    global RECORDER
    RECORDER = None
    for cls, run in _ORIGINALS:
        cls.run = run
    _ORIGINALS.clear()
    for signum, previous in list(_PREVIOUS.items()):
        try:
            signal.signal(signum, previous)
        except (ValueError, TypeError):
            pass
    _PREVIOUS.clear()
