"""``.npz`` dumps, one record per file, loaded with ``numpy.load(allow_pickle=False)``.

Integer arrays are tensors, 0-d arrays are scalars (``site`` a 0-d string), 1-d string arrays
are lists of str, and a 0-d string holding JSON carries lists, dicts and ragged lists (an
optional ``__metadata__`` JSON object may carry several fields at once; a field, member or
JSON key given twice is refused). Every member's header
is checked against its stored size before numpy allocates anything.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from forensics.budget import MAX_ALLOC_ENV, require_alloc
from forensics.errors import CaptureFormatError, ForensicsError, UnsafeInputError, reason
from forensics.escaping import terminal
from forensics.importers import Imported
from forensics.importers.common import (
    MAX_CONTAINERS,
    MAX_JSON,
    MAX_VALUES,
    check_containers,
    check_disjoint,
    check_keys,
    check_members,
    nothing_to_import,
    open_archive,
    record_from_dict,
    show,
    where_of,
)
from forensics.store.guarded import open_file
from forensics.store.json_in import (
    DuplicateKeyError,
    KeyCountError,
    strict_json,
    strict_object,
)
from forensics.validate import check_field_count, max_fields


def read(path: Path) -> Imported:
    """Read the one record of an ``.npz`` file.

    Raises:
        UnsafeInputError: an object (pickled) array.
        CaptureFormatError: not an npz archive, a member whose header does not fit its data,
            or a record that fails its site's schema.
    """
    try:
        with open_file(path, "npz archive") as handle:
            _check_members(handle, path)
            handle.seek(0)
            with np.load(handle, allow_pickle=False) as archive:
                arrays = {name: archive[name] for name in archive.files}
    except ForensicsError:
        raise
    except ValueError as exc:
        if "pickle" in str(exc):
            raise UnsafeInputError(f"'{terminal(path)}' holds pickled object arrays; refused. Save "
                                   "integer arrays and JSON strings instead") from None
        raise CaptureFormatError(f"'{terminal(path)}' is not a readable npz archive: "
                                 f"{reason(exc)}") from None
    except Exception as exc:  # zipfile, zlib and numpy raise many types on corrupt input
        raise CaptureFormatError(f"'{terminal(path)}' is not a readable npz archive "
                                 f"({type(exc).__name__}: {reason(exc, 200)})") from None
    if not arrays:
        raise nothing_to_import(path, "no member")
    texts = _texts(arrays, path)
    raw: dict[str, Any] = {}
    meta = arrays.pop("__metadata__", None)
    if meta is not None:
        value = _metadata(meta, path, texts, len(arrays))
        check_field_count(len(value) + len(arrays), f"'{terminal(path)}'")
        check_disjoint(value, arrays, path, "member")
        raw.update(value)
    for name, array in arrays.items():
        raw[name] = _value(name, array, path, texts)
    return Imported(records=[record_from_dict(raw, where_of(path.name, 0))])


def _metadata(meta: np.ndarray, path: Path, texts: dict[str, str], members: int
              ) -> dict[str, Any]:
    """The fields of the ``__metadata__`` member ``meta`` (a JSON object string), beside the
    file's ``members`` other members: an object of more keys than a record's names with them
    is refused after its first keys past them, none of its values past them parsed.

    Raises CaptureFormatError naming the file, the member and the fix."""
    where = f"'{terminal(path)}': member '__metadata__.npy'"
    text = texts.get("__metadata__") if meta.dtype.kind == "U" and meta.ndim == 0 else None
    try:
        value = strict_object(text, max(max_fields() - members, 0)) if text else None
    except KeyCountError as exc:
        raise CaptureFormatError(
            f"{where} holds {exc} (counted before the values past them are parsed), past the "
            f"{max_fields()} names any site declares with the file's {members} other members "
            "(with site, step, rank and summary); write one record's fields, one record per "
            "file") from None
    except DuplicateKeyError as exc:
        raise CaptureFormatError(f"{where}: {exc}; give each key once") from None
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, dict):
        raise CaptureFormatError(f"'{terminal(path)}': __metadata__ must be a JSON object "
                                 "string")
    return value


def _check_members(handle: BinaryIO, path: Path) -> None:
    try:
        with open_archive(handle, path) as archive:
            check_members(archive, path, ".npy")
            for info in archive.infolist():
                with archive.open(info) as member:
                    _check_header(member, info, path)
    except CaptureFormatError:
        raise
    except Exception as exc:
        raise CaptureFormatError(f"'{terminal(path)}' is not a readable npz archive "
                                 f"({type(exc).__name__}: {reason(exc, 200)})") from None


def _check_header(member: Any, info: zipfile.ZipInfo, path: Path) -> None:
    fmt = np.lib.format
    version = fmt.read_magic(member)
    reader = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}.get(version)
    if reader is None:
        raise CaptureFormatError(f"'{terminal(path)}': member {info.filename!r} has npy version "
                                 f"{version}")
    shape, _fortran, dtype = reader(member)
    if dtype.hasobject:
        raise UnsafeInputError(f"'{terminal(path)}': member {info.filename!r} is an object array "
                               "(pickled data); refused")
    count = 1
    for size in shape:
        count *= size
    # an element of zero bytes (``<U0``, ``|V0``) is still one Python object per element
    if count * max(dtype.itemsize, 1) > info.file_size:
        raise CaptureFormatError(f"'{terminal(path)}': member {info.filename!r} claims shape "
                                 f"{shape} of {dtype} but stores {info.file_size} bytes")
    # numpy allocates the whole array before it reads a byte of it
    require_alloc(count * dtype.itemsize, f"'{terminal(path)}': member {show(info.filename)}",
                  info.filename.removesuffix(".npy"), f"an array of shape {list(shape)} of "
                  f"{dtype}", fix=f"save it in smaller arrays, or raise {MAX_ALLOC_ENV} if this "
                  "machine has the memory for it")


def _value(name: str, array: np.ndarray, path: Path, texts: dict[str, str]) -> Any:
    """The field value of member ``name``: ``texts[name]`` for a 0-d string (parsed as JSON
    but for ``site``), a list of str for a 1-d one, a Python scalar for a 0-d number, else the
    array."""
    if array.dtype.kind == "U":
        if array.ndim == 0:
            text = texts[name]
            if name == "site":
                return text
            try:
                return strict_json(text)
            except DuplicateKeyError as exc:
                raise CaptureFormatError(f"'{terminal(path)}': member {show(name + '.npy')}: "
                                         f"{exc}; give each key once") from None
            except (ValueError, RecursionError):
                return text
        if array.ndim > 1:  # a list of str is one dimension: rows of ids flattened lose a row
            raise CaptureFormatError(
                f"'{terminal(path)}': member {show(name + '.npy')} is a string array of shape "
                f"{list(array.shape)}; a list of strings is 1-d: save it as a 1-d array")
        return [str(v) for v in array]
    if array.dtype.kind in "mM":  # .item() is a date, or an int when out of its range
        raise CaptureFormatError(f"'{terminal(path)}': member {show(name + '.npy')} is a "
                                 f"{array.dtype} (a time, not a number); save it as an integer "
                                 "array")
    if array.ndim == 0:
        return array.item()
    return array


def _texts(arrays: dict[str, np.ndarray], path: Path) -> dict[str, str]:
    """The 0-d string members of ``arrays`` as text, when the string members together stay
    within what one record holds: at most :data:`MAX_CONTAINERS` strings in each 1-d one (a
    list field, one per request of a batch) and :data:`MAX_VALUES` in all, and
    :data:`MAX_JSON` characters holding :data:`MAX_CONTAINERS` JSON lists and objects in the
    0-d ones, holding :func:`~forensics.validate.most_keys` JSON object keys,
    counted before any is parsed (a compressed member of a few KiB unpacks to
    millions of Python objects: a string is ~50 bytes, thirteen times its 4 in the array; each
    member was held to these alone, so six members of a 351 KB file took 2.4 GiB).

    Raises CaptureFormatError naming the file, the member past a limit and the fix."""
    texts: dict[str, str] = {}
    strings = chars = containers = keys = 0
    for name, array in arrays.items():
        if array.dtype.kind != "U":
            continue
        where = f"'{terminal(path)}': member {show(name + '.npy')}"
        if array.ndim and array.size > MAX_CONTAINERS:
            raise CaptureFormatError(
                f"{where} holds {array.size} strings, past the {MAX_CONTAINERS} a list field of "
                "one record holds (one per request of a batch), counted before they are made; "
                "save ids as integer arrays")
        if array.ndim:
            strings += array.size
        else:
            chars += array.dtype.itemsize // 4
        if strings > MAX_VALUES or chars > MAX_JSON:
            raise CaptureFormatError(
                f"{where} holds {array.size} strings of {array.dtype.itemsize // 4} characters, "
                f"{strings} strings and {chars} characters of JSON text with the members before "
                f"it; the string members of one file hold at most {MAX_VALUES} strings and "
                f"{MAX_JSON} characters of JSON text; save ids as integer arrays")
        if not array.ndim:
            texts[name] = str(array.item())
            containers = check_containers(texts[name], f"{where} (with the members before it)",
                                          containers)
            keys = check_keys(texts[name], f"{where} (with the members before it)", keys)
    return texts
