"""``.pt`` dumps: a dict or a list of dicts, loaded with ``torch.load(weights_only=True)``.

Nothing in the file executes: the weights-only unpickler refuses any global that is not a
tensor or plain container, and that refusal becomes :class:`UnsafeInputError`.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from forensics.errors import CaptureFormatError, UnsafeInputError
from forensics.importers import Imported
from forensics.importers.common import record_from_dict, where_of


def read(path: Path) -> Imported:
    """Read the records of a ``.pt`` file.

    Raises:
        UnsafeInputError: the file carries pickled code (refused, never run).
        CaptureFormatError: not a torch file, or a record that fails its site's schema.
    """
    obj = _load(path)
    items = obj if isinstance(obj, (list, tuple)) else [obj]
    if not isinstance(obj, (dict, list, tuple)):
        raise CaptureFormatError(f"'{path}': expected a dict or a list of dicts, "
                                 f"got {type(obj).__name__}")
    try:
        records = [record_from_dict(_plain(item, where_of(path.name, i)), where_of(path.name, i))
                   for i, item in enumerate(items)]
    except RecursionError:
        raise CaptureFormatError(f"'{path}': containers nested too deeply") from None
    return Imported(records=records)


def _load(path: Path) -> Any:
    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        text = str(exc)
        if "Weights only load failed" in text or "Unsupported" in text:
            first = next((line.strip() for line in text.splitlines()
                          if "Unsupported" in line or "GLOBAL" in line), "a non-tensor global")
            raise UnsafeInputError(
                f"'{path}' carries pickled code or objects ({first}); refused, nothing was "
                "run. Re-save plain tensors, ints and lists (e.g. torch.save of a dict of "
                "tensors) or use .safetensors"
            ) from None
        raise CaptureFormatError(f"'{path}' is not a readable torch file: {text[:200]}") from None
    except Exception as exc:  # torch raises many types on corrupt archives
        raise CaptureFormatError(f"'{path}' is not a readable torch file "
                                 f"({type(exc).__name__}: {str(exc)[:200]})") from None


def _plain(value: Any, where: str) -> Any:
    """Tensors to numpy arrays, containers recursively; everything else unchanged."""
    import torch

    if isinstance(value, torch.Tensor):
        if value.layout != torch.strided or value.is_quantized or value.is_complex():
            raise CaptureFormatError(f"{where}: tensor of layout {value.layout} and dtype "
                                     f"{value.dtype} is not supported; save dense int tensors")
        try:
            array = value.detach().cpu().numpy()
        except (TypeError, RuntimeError):
            raise CaptureFormatError(f"{where}: a tensor of dtype {value.dtype} cannot be "
                                     "read; expected an integer tensor") from None
        return array if array.ndim else array.item()
    if isinstance(value, dict):
        return {k: _plain(v, where) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, where) for v in value]
    return value
