"""``.pt`` dumps: a dict or a list of dicts, loaded with ``torch.load(weights_only=True)``.

Nothing in the file executes: the weights-only unpickler refuses any global that is not a
tensor or plain container, and that refusal becomes :class:`UnsafeInputError`. Before torch
is imported, the archive and its pickle are read and held to the limits
(:mod:`forensics.importers.pickle_scan`: the values it makes, a record's keys).
"""

from __future__ import annotations

import pickle
import sys
import warnings
import zipfile
from pathlib import Path
from typing import Any, BinaryIO

from forensics.errors import CaptureFormatError, ForensicsError, UnsafeInputError, reason
from forensics.escaping import terminal
from forensics.importers import Imported
from forensics.importers.common import (
    MAX_VALUES,
    check_members,
    nothing_to_import,
    open_archive,
    read_member,
    record_from_dict,
    show,
    where_of,
)
from forensics.importers.pickle_scan import count_made as _count_made
from forensics.importers.pt_storages import check_storages
from forensics.store.guarded import MAX_DECODED, MAX_MEMBER, open_file
from forensics.validate import check_field_count

MAX_PICKLE = 16 << 20
#: the bytes a view may materialise past what its storage holds (a scalar broadcast to a
#: short row); beyond, an expanded or overlapping view is refused, never copied out
MAX_REPEATED = 64 << 10


def read(path: Path) -> Imported:
    """Read the records of a ``.pt`` file.

    Raises:
        UnsafeInputError: the file carries pickled code (refused, never run).
        CaptureFormatError: not a torch file, or a record that fails its site's schema.
    """
    obj = _load(path)
    items = obj if isinstance(obj, (list, tuple)) else [obj]
    if not isinstance(obj, (dict, list, tuple)):
        raise CaptureFormatError(f"'{terminal(path)}': expected a dict or a list of dicts, "
                                 f"got {type(obj).__name__}")
    if not obj:
        raise nothing_to_import(path, f"an empty {type(obj).__name__}")
    budget = _Budget(f"'{terminal(path)}'")
    for i, item in enumerate(items):
        if isinstance(item, dict):
            check_field_count(len(item), where_of(path.name, i))
    try:
        records = [record_from_dict(_plain(item, where_of(path.name, i), budget),
                                    where_of(path.name, i)) for i, item in enumerate(items)]
    except RecursionError:
        raise CaptureFormatError(f"'{terminal(path)}': containers nested too deeply") from None
    return Imported(records=records)


def _load(path: Path) -> Any:
    try:
        with open_file(path, "torch file") as handle:
            _check_archive(handle, path)
            handle.seek(0)
            import torch  # after the checks: 1.6 s and 680 MB of its own (T93b)

            with warnings.catch_warnings():  # torch's own notes on what it loads (a sparse
                warnings.simplefilter("ignore")  # tensor's check) are no line of ours
                return torch.load(handle, map_location="cpu", weights_only=True)
    except ForensicsError:
        raise
    except ImportError as exc:
        if "torch" not in sys.modules:  # no torch here: its own error, as before the checks
            raise  # moved ahead of its import
        raise _unreadable(path, exc) from None
    except pickle.UnpicklingError as exc:
        text = str(exc)
        if "Weights only load failed" in text or "Unsupported" in text:
            first = next((line.strip() for line in text.splitlines()
                          if "Unsupported" in line or "GLOBAL" in line), "a non-tensor global")
            raise UnsafeInputError(
                f"'{terminal(path)}' carries pickled code or objects ({first}); refused, nothing "
                "was run. Re-save plain tensors, ints and lists (e.g. torch.save of a dict of "
                "tensors) or use .safetensors"
            ) from None
        raise CaptureFormatError(f"'{terminal(path)}' is not a readable torch file: "
                                 f"{reason(exc, 200)}") from None
    except Exception as exc:  # torch raises many types on corrupt archives
        raise _unreadable(path, exc) from None


def _unreadable(path: Path, exc: Exception) -> CaptureFormatError:
    """The line of a file torch could not read (``exc``: what it raised)."""
    return CaptureFormatError(f"'{terminal(path)}' is not a readable torch file "
                              f"({type(exc).__name__}: {reason(exc, 200)})")


def _check_archive(handle: BinaryIO, path: Path) -> None:
    """Refuse before loading: a file that is not torch's zip format, storages that would
    unpack past the limits (their sizes are read from the archive, not trusted from the
    pickle), a pickle past the scan's (:func:`~forensics.importers.pickle_scan.count_made`),
    and a storage torch would allocate past the budget
    (:func:`~forensics.importers.pt_storages.check_storages`)."""
    try:
        archive = open_archive(handle, path, exact=True)
    except zipfile.BadZipFile:
        raise UnsafeInputError(f"'{terminal(path)}' is not a torch zip archive but a bare or "
                               "legacy pickle: refused unread (it may carry pickled code, and its "
                               "storage sizes cannot be checked before they inflate). Re-save "
                               "it with torch.save (torch >= 1.6) or use .safetensors") from None
    with archive:  # a member zipfile cannot read past here: the file is unreadable (_load)
        check_members(archive, path)
        # torch's zip reader (miniz) finds ``data.pkl`` ignoring ASCII case: ``DATA.PKL``
        pickles = [i for i in archive.infolist() if i.filename.lower().endswith(".pkl")]
        if any(i.file_size > MAX_PICKLE for i in pickles):
            raise CaptureFormatError(f"'{terminal(path)}': its pickle is over {MAX_PICKLE} "
                                     "bytes; save tensors, not long Python lists")
        made = 0
        for info in pickles:
            made = _count_made(read_member(archive, info, crc=False), made, path)
        check_storages(archive, pickles, path)


class _Budget:
    """Counts the values and tensor bytes one file turns into, against the limits; a
    container the pickle shares is converted once and counted at its every use."""

    def __init__(self, where: str) -> None:
        self.where, self.values, self.bytes = where, 0, 0
        self.seen: dict[int, tuple[Any, int]] = {}

    def add(self, values: int) -> None:
        self.values += values
        if self.values > MAX_VALUES:
            raise CaptureFormatError(f"{self.where}: more than {MAX_VALUES} values (or shared "
                                     "containers nested to blow up); save tensors instead")

    def tensor(self, nbytes: int) -> None:
        self.bytes += nbytes
        if nbytes > MAX_MEMBER or self.bytes > MAX_DECODED:
            raise CaptureFormatError(f"{self.where}: tensors would take more than "
                                     f"{MAX_DECODED} bytes ({MAX_MEMBER} each); split the dump")


def _plain(value: Any, where: str, budget: _Budget | None = None) -> Any:
    """Tensors to numpy arrays, containers recursively; everything else unchanged."""
    budget = budget or _Budget(where)
    if not isinstance(value, (dict, list, tuple)):
        budget.add(1)
        return _leaf(value, where, budget)
    known = budget.seen.get(id(value))
    if known is not None:
        budget.add(known[1])
        return known[0]
    start = budget.values
    budget.add(1)
    if isinstance(value, dict):
        out: Any = {k: _plain(v, f"{where}, field {show(k)}", budget) for k, v in value.items()}
    else:
        out = [_plain(v, where, budget) for v in value]
    budget.seen[id(value)] = (out, budget.values - start)
    return out


def _leaf(value: Any, where: str, budget: _Budget) -> Any:
    """A tensor as a numpy array (or a Python scalar when 0-d); other values unchanged."""
    import torch

    if not isinstance(value, torch.Tensor):
        return value
    if value.layout != torch.strided or value.is_quantized or value.is_complex():
        raise CaptureFormatError(f"{where}: tensor of layout {value.layout} and dtype "
                                 f"{value.dtype} is not supported; save dense int tensors")
    if value.device.type == "meta":
        raise CaptureFormatError(f"{where}: a tensor on the meta device holds no values; save "
                                 "the tensor itself (from the CPU or a GPU)")
    _check_stored(value, where)
    budget.tensor(value.numel() * value.element_size())
    try:
        array = value.detach().cpu().numpy()
    except (TypeError, RuntimeError):
        raise CaptureFormatError(f"{where}: a tensor of dtype {value.dtype} cannot be "
                                 "read; expected an integer tensor") from None
    return array if array.ndim else array.item()


def _check_stored(value: Any, where: str) -> None:
    """Refuse a tensor whose elements need more bytes than its storage holds (past
    :data:`MAX_REPEATED`): a stride-0 (expanded) or overlapping view of a few stored bytes
    would be copied out to its claimed shape; and hold what is materialised to the allocation
    budget (:func:`forensics.budget.require_alloc`).

    Raises CaptureFormatError (AllocationBudgetError past the budget) naming ``where``."""
    from forensics.budget import require_alloc

    needed = value.numel() * value.element_size()
    stored = value.untyped_storage().nbytes()
    if needed > max(stored, MAX_REPEATED):
        raise CaptureFormatError(f"{where}: a tensor of shape {list(value.shape)} and strides "
                                 f"{list(value.stride())} needs {needed} bytes, more than the "
                                 f"{stored} its storage holds; save it with .contiguous() (an "
                                 "expanded or overlapping view is not copied out)")
    require_alloc(needed, where, "shape", list(value.shape))
