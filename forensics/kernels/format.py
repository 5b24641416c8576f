"""The ``kernel_launch`` event: one recorded launch of a Triton kernel (docs/import-format.md).

A launch is one JSON object in the capture's events sidecar (written through the probe's
writer, like every event), with ``kind = "kernel_launch"``, ``format = 1`` and:

- ``kernel``: ``{"module", "name", "source_sha256"}`` (the hash of the kernel's source text);
- ``step``, ``rank``, ``ordinal`` (the launch's number within its step, in this process),
  ``path`` (``compiled`` or ``interpreter``);
- ``grid``: up to three non-negative ints; ``args``: the kernel's parameter names in order;
- ``constexprs`` and ``scalars``: name -> int, float, bool, string or null;
- ``tensors``: name -> ``{"dtype", "shape", "strides", "offset", "storage", "contents",
  "data", "after", "reason", "pointer_of", "pointer_index"}`` where ``offset`` and
  ``strides`` count elements, ``storage`` is the storage's size in bytes, ``contents`` says
  what ``data`` holds (``storage``: every byte of the storage; ``view``: the tensor's elements
  in row-major order; ``none``: nothing, ``reason`` says why), ``data`` and ``after`` are
  base64 of little-endian bytes (``after``: the same span after the launch, present only when
  the launch changed it). A tensor a table of raw pointers points into is recorded under
  ``NAME[i]`` with ``pointer_of`` (the table's argument) and ``pointer_index``. ``storage_id``
  and ``storage_at`` (every tensor has them, or none: a record written before them, whose
  sharing is unknown) say which tensors share memory: those of one id (views of one storage,
  ``storage_at`` 0; storages that partly overlap, each starting ``storage_at`` bytes into the
  memory the id spans; see :mod:`forensics.kernels.sharing`);
- ``unrecorded``: name -> why an argument was not recorded (another type).

:func:`check_launch` is the one check a reader applies; it raises CaptureFormatError naming the
field and the fix.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from forensics.digits import plain_int
from forensics.errors import CaptureFormatError
from forensics.escaping import terminal

KIND = "kernel_launch"
SUMMARY_KIND = "kernel_summary"
FORMAT = 1
CONTENTS = ("storage", "view", "none")
#: the launch paths a probe records
PATHS = ("compiled", "interpreter")
#: the parameters the contracts read as ints, wherever a record holds them (scalars or
#: constexprs): a bool there ran the kernel with 1 and held nothing to the bound
INT_PARAMETERS = ("max_num_reqs", "cp_rank", "CP_SIZE", "CP_INTERLEAVE")
#: the dtypes a record may name (numpy names; bfloat16 is carried as its bits, ``bfloat16``)
DTYPES = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "bfloat16", "float32", "float64")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[\d+\])?")


def numpy_dtype(name: str) -> np.dtype[Any]:
    """The numpy dtype holding ``name``'s bytes (bfloat16 as little-endian uint16)."""
    return np.dtype("<u2") if name == "bfloat16" else np.dtype(name).newbyteorder("<")


def readable(raw: np.ndarray, dtype: str) -> np.ndarray:
    """``raw`` (a record's elements as :func:`numpy_dtype` holds them) as the numbers they are:
    bfloat16's bits widened to the float32 of the same value (read as bits, a bfloat16 ``1.0``
    was said to hold 16256), other dtypes as they are."""
    if dtype != "bfloat16":
        return raw
    return (raw.astype("<u4") << 16).view("<f4")


def source_hash(fn: Any) -> str:
    """The sha256 of a kernel function's source from its ``def`` line on (dedented; the
    decorators left out, as ``JITFunction.src`` holds it), or "" when it has none."""
    import inspect
    import textwrap

    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return ""
    start = re.search(r"^def\s+\w+\s*\(", source, re.MULTILINE)
    source = source[start.start():] if start else source
    return hashlib.sha256(source.encode()).hexdigest()


def encode_bytes(data: bytes) -> str:
    """``data`` as base64 text."""
    return base64.b64encode(data).decode("ascii")


@dataclass
class TensorArg:
    """One recorded tensor argument (see the module)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    storage: int
    contents: str
    data: bytes = b""
    after: bytes | None = None
    reason: str = ""
    pointer_of: str | None = None
    pointer_index: int | None = None
    #: the memory it shares with the launch's other tensors of the id (None: unknown, a record
    #: written before the field), its storage starting ``storage_at`` bytes into it
    storage_id: int | None = None
    storage_at: int = 0

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return numpy_dtype(self.dtype).itemsize

    @property
    def elements(self) -> int:
        """Elements in the storage."""
        return self.storage // self.itemsize

    def array(self, which: str = "data") -> np.ndarray:
        """``data`` (or ``after``) as a flat array of the tensor's dtype (its whole elements:
        a storage need not be a whole number of them)."""
        raw = self.data if which == "data" else (self.after or b"")
        return np.frombuffer(raw, dtype=numpy_dtype(self.dtype),
                             count=len(raw) // self.itemsize)


@dataclass
class Launch:
    """One recorded launch (see the module); ``index``: its position among the capture's."""

    module: str
    name: str
    source_sha256: str
    step: int
    rank: int
    ordinal: int
    path: str
    grid: tuple[int, ...]
    args: list[str]
    constexprs: dict[str, Any]
    scalars: dict[str, Any]
    tensors: dict[str, TensorArg]
    unrecorded: dict[str, str] = field(default_factory=dict)
    index: int = 0

    @property
    def sharing_known(self) -> bool:
        """Whether the record says which tensors share memory (each has a ``storage_id``)."""
        return bool(self.tensors) and all(a.storage_id is not None
                                          for a in self.tensors.values())

    @property
    def where(self) -> str:
        """``kernel at step S rank R launch L`` (for messages: the ranks of one engine number
        their launches alike, so a launch is named by its rank too)."""
        return f"{self.name} at step {self.step} rank {self.rank} launch {self.ordinal}"


def _fail(where: str, key: str, what: str) -> CaptureFormatError:
    return CaptureFormatError(f"{where}: field {key!r} {what}; fix or delete the event line")


def _int(value: Any, where: str, key: str, low: int = 0) -> int:
    if not plain_int(value) or not low <= value < 2**63:
        raise _fail(where, key, f"must be an int >= {low}")
    return value


def _ints(value: Any, where: str, key: str, low: int = 0, most: int = 8) -> tuple[int, ...]:
    if not isinstance(value, list) or len(value) > most:
        raise _fail(where, key, f"must be a list of at most {most} ints")
    return tuple(_int(v, where, key, low) for v in value)


def _text(value: Any, where: str, key: str) -> str:
    if not isinstance(value, str) or len(value) > 300:
        raise _fail(where, key, "must be a string of at most 300 characters")
    return value


def _plain(value: Any, where: str, key: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(where, key, "must be an object")
    for name, item in value.items():
        if not _NAME.fullmatch(name) or not (item is None or isinstance(
                item, (bool, int, float, str))):
            raise _fail(where, key, f"holds {name!r}, not a name -> int/float/bool/str/null")
    return value


def _b64(value: Any, where: str, key: str) -> bytes:
    if not isinstance(value, str):
        raise _fail(where, key, "must be base64 text")
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise _fail(where, key, "is not valid base64") from None


def _inside_storage(arg: TensorArg, here: str) -> None:
    """Refuse a view (``shape``, ``strides``, ``offset``) reaching outside its ``storage``: a
    torch tensor's never does, and the contracts read the recorded storage through it."""
    # a stride over a dimension of one element, or of an empty view, steps over nothing: it is
    # read as 0 (in bytes, up to 2**62 elements times the item size, it passed numpy's int64
    # and ended `forensics kernels` in an internal error)
    empty = 0 in arg.shape
    arg.strides = tuple(0 if empty or d < 2 else s
                        for s, d in zip(arg.strides, arg.shape, strict=True))
    if empty:
        return
    reach = [s * (d - 1) for s, d in zip(arg.strides, arg.shape, strict=True)]
    low = arg.offset + sum(r for r in reach if r < 0)
    high = arg.offset + sum(r for r in reach if r > 0)
    if low < 0 or (high + 1) * arg.itemsize > arg.storage:
        raise _fail(here, "shape", f"(with 'strides' {list(arg.strides)} and 'offset' "
                                   f"{arg.offset}) reaches elements {low}..{high}, outside its "
                                   f"storage of {arg.elements} {arg.dtype} element(s)")


def _tensor(name: str, raw: Any, where: str) -> TensorArg:
    here = f"{where} tensor {name!r}"
    if not isinstance(raw, dict) or not _NAME.fullmatch(name):
        raise _fail(where, "tensors", f"holds {name!r}, not a name -> object")
    dtype = raw.get("dtype")
    if dtype not in DTYPES:
        raise _fail(here, "dtype", f"must be one of {', '.join(DTYPES)}")
    contents = raw.get("contents")
    if contents not in CONTENTS:
        raise _fail(here, "contents", f"must be one of {', '.join(CONTENTS)}")
    shape = _ints(raw.get("shape"), here, "shape")
    strides = _ints(raw.get("strides"), here, "strides", low=-(2**62))
    if len(strides) != len(shape):
        raise _fail(here, "strides", "must have one entry per dimension of 'shape'")
    arg = TensorArg(name, dtype, shape, strides, _int(raw.get("offset"), here, "offset"),
                    _int(raw.get("storage"), here, "storage"), contents,
                    reason=_text(raw.get("reason", ""), here, "reason"))
    _inside_storage(arg, here)
    if contents != "none":
        arg.data = _b64(raw.get("data"), here, "data")
        # math.prod: exact, where numpy's product of a forged shape wraps to a small size
        expected = arg.storage if contents == "storage" else math.prod(shape) * arg.itemsize
        if len(arg.data) != expected:
            raise _fail(here, "data", f"holds {len(arg.data)} bytes; its 'contents' "
                                      f"({contents}) needs {expected}")
        if raw.get("after") is not None:
            arg.after = _b64(raw["after"], here, "after")
            if len(arg.after) != expected:
                raise _fail(here, "after", f"holds {len(arg.after)} bytes, not {expected}")
    if raw.get("storage_id") is not None:
        arg.storage_id = _int(raw["storage_id"], here, "storage_id")
        arg.storage_at = _int(raw.get("storage_at", 0), here, "storage_at")
        if arg.storage_at + arg.storage >= 2**63:
            raise _fail(here, "storage_at", "puts its storage past 2**63 bytes")
        if arg.storage_at % arg.itemsize:
            raise _fail(here, "storage_at", f"is {arg.storage_at}, no whole number of {dtype} "
                                            f"elements ({arg.itemsize} bytes each) into the "
                                            "memory it shares")
    elif raw.get("storage_at") is not None:
        raise _fail(here, "storage_at", "needs a 'storage_id' (the memory it is a byte of)")
    if raw.get("pointer_of") is not None:
        arg.pointer_of = _text(raw["pointer_of"], here, "pointer_of")
        if not _NAME.fullmatch(arg.pointer_of):
            raise _fail(here, "pointer_of", "must name the argument of the pointer table")
        arg.pointer_index = _int(raw.get("pointer_index"), here, "pointer_index")
    return arg


def _check_sharing(tensors: dict[str, TensorArg], where: str) -> None:
    """Refuse a sharing of memory among the launch's tensors no memory can hold
    (:mod:`forensics.kernels.sharing`): ids on some tensors only, one id's storages apart, or
    two tensors of one memory recorded unlike on a byte they share (storages recorded whole,
    or a tensor recorded by its elements against either)."""
    from forensics.kernels import sharing

    sharing.check_groups({n: (a.storage_id, a.storage_at, a.storage)
                          for n, a in tensors.items()}, where, _fail)
    shared = {n: (i, a) for n, a in tensors.items() if (i := a.storage_id) is not None}
    stored = {n: (i, a) for n, (i, a) in shared.items() if a.contents == "storage"}
    views = {n: (i, a) for n, (i, a) in shared.items() if a.contents == "view"}
    for what in ("data", "after"):
        sharing.check_bytes({n: (i, a.storage_at, _held(a, what))
                             for n, (i, a) in stored.items()}, what, where, _fail)
    for what in ("data", "after") if views else ():
        sharing.check_elements(
            {n: (i, a.storage_at, _held(a, what)) for n, (i, a) in stored.items()},
            {n: (i, element_starts(a), a.itemsize, _held(a, what))
             for n, (i, a) in views.items()}, what, where, _fail)


def _held(arg: TensorArg, what: str) -> bytes:
    """What ``arg``'s record says its span held before the launch (``what`` ``data``) or
    after it (``after``: its ``data`` when it recorded no change)."""
    return arg.data if what == "data" or arg.after is None else arg.after


def element_starts(arg: TensorArg) -> np.ndarray:
    """The byte of its ``storage_id``'s memory where each element of ``arg``'s view starts,
    in row-major order (the order a ``view`` record holds them). An empty view has none: its
    other dimensions are sized by nothing it holds (a ``[0, 2**28]`` view of no bytes once
    ranged over its 2**28 first, 2 GiB past the allocation budget)."""
    if 0 in arg.shape:
        return np.zeros(0, dtype=np.int64)
    starts = np.full(1, arg.offset, dtype=np.int64)
    for size, stride in zip(arg.shape, arg.strides, strict=True):
        starts = (starts[:, None] + np.arange(size, dtype=np.int64) * stride).ravel()
    return arg.storage_at + starts * arg.itemsize


def check_launch(event: dict[str, Any], where: str, index: int = 0) -> Launch:
    """The Launch of a ``kernel_launch`` event, checked field by field.

    Raises:
        CaptureFormatError: naming ``where``, the field and the fix.
    """
    if event.get("format") != FORMAT:
        raise _fail(where, "format", f"must be {FORMAT} (this version reads format {FORMAT})")
    kernel = event.get("kernel")
    if not isinstance(kernel, dict):
        raise _fail(where, "kernel", "must be an object {module, name, source_sha256}")
    module, name = (_text(kernel.get(k), where, f"kernel.{k}") for k in ("module", "name"))
    if not _NAME.fullmatch(name) or not all(_NAME.fullmatch(p) for p in module.split(".")):
        raise _fail(where, "kernel", "must name a Python module and function")
    args = event.get("args")
    if not isinstance(args, list) or not all(isinstance(a, str) and _NAME.fullmatch(a)
                                             for a in args):
        raise _fail(where, "args", "must be the kernel's parameter names")
    tensors = event.get("tensors")
    if not isinstance(tensors, dict):
        raise _fail(where, "tensors", "must be an object name -> tensor")
    unrecorded = event.get("unrecorded", {})
    if not isinstance(unrecorded, dict) or not all(
            _NAME.fullmatch(k) and isinstance(v, str) and len(v) <= 300
            for k, v in unrecorded.items()):
        raise _fail(where, "unrecorded", "must be an object name -> reason (a string of at "
                                         "most 300 characters)")
    found = {n: _tensor(n, t, where) for n, t in tensors.items()}
    _check_sharing(found, where)
    constexprs = _plain(event.get("constexprs", {}), where, "constexprs")
    scalars = _plain(event.get("scalars", {}), where, "scalars")
    _check_once(args, {"tensors": found, "constexprs": constexprs, "scalars": scalars,
                       "unrecorded": unrecorded}, where)
    _check_int_parameters({"constexprs": constexprs, "scalars": scalars}, where)
    return Launch(
        module, name, _text(kernel.get("source_sha256", ""), where, "kernel.source_sha256"),
        _int(event.get("step"), where, "step"), _int(event.get("rank", 0), where, "rank"),
        _int(event.get("ordinal"), where, "ordinal"),
        _path(event.get("path", "compiled"), where),
        _ints(event.get("grid"), where, "grid", most=3), list(args), constexprs, scalars,
        found, {str(k): v for k, v in unrecorded.items()}, index)


def _check_once(args: list[str], parts: dict[str, dict[str, Any]], where: str) -> None:
    """Refuse a parameter ``args`` names twice, or one two of the record's ``parts`` hold (a
    tensor, a constexpr, a scalar, an argument not recorded): a launch passes each parameter
    one value, and the recorder notes it in one part. The contracts read a ``max_num_reqs``
    scalar while the replay ran the kernel with a constexpr of the name (the replay's
    arguments took the last part's), so a finding's bound was not the replay's."""
    named: set[str] = set()
    for arg in args:
        if arg in named:
            raise _fail(where, "args", f"names the parameter {arg!r} twice")
        named.add(arg)
    owner: dict[str, str] = {}
    for part, names in parts.items():
        for name in names:
            if name in owner:
                raise _fail(where, part, f"holds {name!r}, which {owner[name]!r} holds too: a "
                                         "launch passes each parameter one value")
            owner[name] = part


def _path(value: Any, where: str) -> str:
    """``value`` when it is a launch path the probe records (:data:`PATHS`)."""
    if value not in PATHS:
        raise _fail(where, "path", f"must be {' or '.join(map(repr, PATHS))} (how the launch "
                                   "ran)")
    return str(value)


def _check_int_parameters(parts: dict[str, dict[str, Any]], where: str) -> None:
    """Refuse a bool where ``parts`` hold a parameter the contracts read as an int
    (:data:`INT_PARAMETERS`): Python's bool is an int, so ``true`` was replayed as 1."""
    for part, values in parts.items():
        for name in INT_PARAMETERS:
            if isinstance(values.get(name), bool):
                raise _fail(where, part, f"holds {name!r} as {str(values[name]).lower()}, a "
                                         "bool: the kernel's parameter is an int")


def launches_of(events: list[dict[str, Any]], capture: str,
                places: Sequence[str] = ()) -> list[Launch]:
    """The capture's launches (its ``kernel_launch`` events), in file and line order
    (``places``: where each of ``events`` is, named by the line of a bad field)."""
    found = _of_kind(events, places, KIND)
    return [check_launch(e, _where(capture, place, KIND, i), i)
            for i, (e, place) in enumerate(found)]


def _of_kind(events: list[dict[str, Any]], places: Sequence[str],
             kind: str) -> list[tuple[dict[str, Any], str]]:
    """The events of ``kind``, each with its place ("" where ``places`` does not say)."""
    placed = zip(events, places, strict=True) if places else ((e, "") for e in events)
    return [(e, place) for e, place in placed if e.get("kind") == kind]


def _where(capture: str, place: str, kind: str, number: int) -> str:
    """How a line names the ``number``-th event of ``kind``: its capture, its file and line
    (a capture of many events files says which), and its rank among the events of its kind."""
    at = f" {place}," if place else ""
    return f"capture '{terminal(capture)}'{at} {kind} event {number}"


def check_summary(event: dict[str, Any], where: str) -> dict[str, Any]:
    """``event`` (a ``kernel_summary``) when the fields the sanitizer reads hold what they
    say: ``graph_only`` a list of ``module.kernel`` names, ``kernels_seen`` and
    ``graph_launches`` (absent from older probes' events) name -> count.

    Raises:
        CaptureFormatError: naming ``where``, the field and the fix.
    """
    graph_only = event.get("graph_only", [])
    if not isinstance(graph_only, list) or not all(
            isinstance(k, str) and len(k) <= 300 for k in graph_only):
        raise _fail(where, "graph_only", "must be a list of 'module.kernel' names")
    for name in ("kernels_seen", "graph_launches"):
        counts = event.get(name, {})
        if not isinstance(counts, dict) or not all(
                plain_int(n) and 0 <= n < 2**63
                for n in counts.values()):
            raise _fail(where, name, "must be an object 'module.kernel' -> launches seen (an "
                                      "int >= 0)")
    _check_counts(event, where)
    return event


def _check_counts(event: dict[str, Any], where: str) -> None:
    """Refuse counts no probe writes: ``kernels_seen`` counts every launch, those during a CUDA
    graph capture too, so a kernel's ``graph_launches`` are at most its ``kernels_seen`` and
    a kernel ``graph_only`` lists was seen at least once (coverage once said a kernel of 3
    such launches and none seen was "never launched", and one of 0 seen was "launched 0
    time(s) ..., some while a CUDA graph was being captured")."""
    seen = event.get("kernels_seen", {})
    for key, count in event.get("graph_launches", {}).items():
        if count > seen.get(key, 0):
            raise _fail(where, "graph_launches", f"counts {count} launch(es) of "
                                                 f"{terminal(str(key))!r} during a CUDA graph "
                                                 f"capture, more than the {seen.get(key, 0)} "
                                                 "'kernels_seen' counts (it counts every "
                                                 "launch)")
    for key in event.get("graph_only", []):
        if not seen.get(key, 0):
            raise _fail(where, "graph_only", f"lists {terminal(key)!r}, a kernel "
                                             "'kernels_seen' counts no launch of")


def summaries_of(events: list[dict[str, Any]], capture: str,
                 places: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The capture's ``kernel_summary`` events (kernels seen, seen only in a graph), checked
    (:func:`check_summary`; ``places`` as :func:`launches_of`'s)."""
    found = _of_kind(events, places, SUMMARY_KIND)
    return [check_summary(e, _where(capture, place, SUMMARY_KIND, i))
            for i, (e, place) in enumerate(found)]


#: the section of docs/import-format.md on kernel records (appended by ``forensics schema``)
MARKDOWN = """## Kernel records (`kernel_launch` events)

The flight recorder (`FORENSICS_KERNELS=all`, or a comma list of kernel names or globs;
`FORENSICS_KERNELS_KEEP` steps kept, default 32, `all` for every step;
`FORENSICS_KERNELS_BUDGET` bytes of float contents per launch, default 65536) writes each
recorded launch of a `@triton.jit` kernel of vLLM's worker, sampling and speculative-decoding
packages as one line of the capture's `events-<process>.jsonl`. Another tool can write the
same lines; `forensics kernels CAPTURE` replays them.

| key | type | meaning |
|---|---|---|
| `kind` | `"kernel_launch"` | |
| `format` | `1` | |
| `step`, `rank` | int >= 0 | the engine step and rank of the launch |
| `ordinal` | int >= 0 | the launch's number within its step, in its process |
| `kernel` | `{module, name, source_sha256}` | the kernel (sha256 of its source from `def` on) |
| `path` | `compiled` or `interpreter` | the launch path it was recorded on |
| `grid` | list of <= 3 ints | the launch grid |
| `args` | list of str | the kernel's parameter names, in order |
| `constexprs`, `scalars` | name -> int, float, bool, str or null | the non-tensor arguments |
| `tensors` | name -> tensor (below) | the tensor arguments |
| `unrecorded` | name -> str | arguments not recorded, and why (such a launch is not replayable) |

A tensor: `dtype` (`bool`, `int8`..`int64`, `uint8`..`uint64`, `float16`, `bfloat16`,
`float32`, `float64`), `shape`, `strides` and `offset` (in elements), `storage` (the size of
its storage, in bytes), `contents` (`storage`: `data` holds every byte of the storage;
`view`: the tensor's elements in row-major order; `none`: nothing, `reason` says why),
`data` and `after` (base64 of little-endian bytes; `after`: the same span after the launch,
present only when the launch changed it). Integer and boolean storages are recorded whole (up
to 4 MiB, else the view); floats within the launch's budget. A table of raw pointers
(an int64 argument named `*_ptrs`) has each tensor it points into recorded under
`NAME[i]`, with `pointer_of` (the table's argument) and `pointer_index` (`i`).
`storage_id` (int >= 0) and `storage_at` (int >= 0, default 0, a whole number of the tensor's
elements) say which tensors share memory:
those of one `storage_id` do (views of one storage, each `storage_at` 0; storages that partly
overlap, each starting `storage_at` bytes into the memory the id spans, one of them at 0).
Every tensor of a launch has a `storage_id`, or none does (sharing unknown: the replay gives
each tensor memory of its own). One id's storages must overlap, and two tensors of one id must
agree on each byte they both record (storages recorded whole, and views recorded by their
elements, each element at its byte of the id's memory).

A `kernel_summary` event follows each write: `kernels_seen` (`module.name` -> launches seen),
`graph_launches` (`module.name` -> launches seen while a CUDA graph was being captured: never
recorded), `graph_only` (kernels whose every launch seen was one; an older probe listed there
every kernel seen at least once in a capture),
`dropped_steps` (steps older than the kept ones), `launches_written` (by this write),
`handed_off` (launches handed to the writer one by one as they returned, with
`FORENSICS_KERNELS_KEEP=all`) and `reason`.
"""
