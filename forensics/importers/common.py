"""Turning plain dicts of foreign dumps into validated records (shared by the importers)."""

from __future__ import annotations

import copy
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from forensics.digits import plain_int
from forensics.errors import CaptureFormatError, UnknownSiteError
from forensics.escaping import terminal
from forensics.records import INT64_MAX, MAX_CONTAINERS, MAX_FIELD_KEYS, Record
from forensics.sites import SITES
from forensics.store.guarded import MAX_DECODED, MAX_MEMBER
from forensics.validate import (
    META_KEYS,
    check_field_count,
    most_keys,
    validate_record,
)

MAX_DEPTH = 4  # ragged lists are two deep, a dict of ints one
MAX_MEMBERS = 4096
#: the largest central directory of a zip archive read (bytes; a member's entry is 46 bytes
#: and its name)
MAX_DIRECTORY = MAX_MEMBERS * 1024
#: values (containers, scalars, strings) one source may turn into: a compressed member or a
#: pickle's shared containers can describe millions from a few KiB
MAX_VALUES = 5_000_000
#: the zip methods a member may be compressed with: stored and deflated (the stdlib's bzip2
#: and LZMA readers inflate each 4 KiB they read at once, whatever the member's declared size:
#: gigabytes from a 1.5 KB ``.npz``)
PLAIN_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
#: the longest JSON text of one field (characters); an ``.npz``'s JSON texts hold at most this
#: many together
MAX_JSON = 16 << 20


def where_of(path: Any, index: int) -> str:
    """The source position used in messages: ``record I in 'FILE'``."""
    return f"record {index} in '{terminal(path)}'"


def nothing_to_import(path: Path, held: str) -> CaptureFormatError:
    """The one line of a tensor file holding no record, ``held`` saying what it holds: an empty
    ``.pt`` list was imported as a capture of 0 records, exit 0."""
    return CaptureFormatError(f"'{terminal(path)}' holds no record ({held}): nothing to import; "
                              "save one record (its 'site', 'step' and the site's fields)")


def record_from_dict(raw: Any, where: str) -> Record:
    """Build and validate a record from a dict with ``site``, ``step``, optional ``rank`` and
    ``summary``, and the site's fields.

    Raises CaptureFormatError (UnknownSiteError for an unknown site) naming ``where``.
    """
    if not isinstance(raw, dict):
        raise CaptureFormatError(f"{where}: expected a dict with 'site', 'step' and the site's "
                                 f"fields, got {type(raw).__name__}")
    check_field_count(len(raw), where)
    bad = [k for k in raw if not isinstance(k, str)]
    if bad:
        raise CaptureFormatError(f"{where}: field names must be strings, got {show(bad[0])}")
    site = _scalar(raw.get("site"))
    if not isinstance(site, str):
        raise CaptureFormatError(f"{where}: missing or non-string 'site' ({show(site)}); "
                                 f"expected one of {list(SITES)}")
    at = f"{where} (site {show(site)})"
    step, rank = _int_meta(raw, "step", at, None), _int_meta(raw, "rank", at, 0)
    summary = _scalar(raw.get("summary", False))
    if not isinstance(summary, (bool, np.bool_)):
        raise CaptureFormatError(f"{where}: 'summary' must be true or false, got "
                                 f"{show(summary)}")
    fields = {k: v for k, v in raw.items() if k not in META_KEYS}
    for name, value in fields.items():
        _check_ints(value, f"{at}: field {name!r}")
    from forensics.store.arrow_codec import check_texts  # the store's own check, named here

    record = Record(site, step, rank, fields, bool(summary))
    try:
        return check_texts(validate_record(record, where), where)
    except UnknownSiteError as exc:
        raise UnknownSiteError(f"{where}: {exc}") from None


def open_archive(handle: BinaryIO, path: Any, exact: bool = False) -> zipfile.ZipFile:
    """The zip archive in ``handle``, after its end record's claims: at most
    :data:`MAX_MEMBERS` members in a central directory of at most :data:`MAX_DIRECTORY` bytes
    (zipfile builds an object per member it lists, about ten times the bytes that list it:
    a 1 GiB archive of empty members would take gigabytes before any count is checked); with
    ``exact``, only where another zip reader reads the members zipfile reads
    (:func:`_check_exact`).

    Raises CaptureFormatError naming the file and the claim; zipfile.BadZipFile for a file
    that is not a zip archive.
    """
    end = zipfile._EndRecData(handle)  # type: ignore[attr-defined]  # the stdlib's own reader
    if end is not None and exact:
        _check_exact(handle, end, path)
    if end is not None:
        members = end[zipfile._ECD_ENTRIES_TOTAL]  # type: ignore[attr-defined]
        size = end[zipfile._ECD_SIZE]  # type: ignore[attr-defined]
        if members > MAX_MEMBERS or size > MAX_DIRECTORY:
            raise CaptureFormatError(f"'{terminal(path)}' lists {members} members in {size} "
                                     f"bytes; at most {MAX_MEMBERS} members in {MAX_DIRECTORY} "
                                     "bytes")
    handle.seek(0)
    return zipfile.ZipFile(handle)


def _check_exact(handle: BinaryIO, end: list[Any], path: Any) -> None:
    """Refuse an archive another zip reader (torch's, miniz) reads otherwise than zipfile: an
    end record not at the file's end, bytes before the archive or between its central directory
    and end records (zipfile reads the directory just before them, shifting every member by as
    much; miniz the one the end record names), a zip64 locator that names another zip64 end
    record than the one zipfile reads. torch.save writes none of these.

    Raises CaptureFormatError naming the file and the fix."""
    zf: Any = zipfile  # the stdlib's own names for a zip's end records
    location = end[zf._ECD_LOCATION]
    record64 = location - zf.sizeEndCentDir64Locator - zf.sizeEndCentDir64
    handle.seek(max(location - zf.sizeEndCentDir64Locator, 0))
    locator = handle.read(zf.sizeEndCentDir64Locator)
    named = int.from_bytes(locator[8:16], "little") if locator[:4] == b"PK\x06\x07" else None
    zip64 = end[zf._ECD_SIGNATURE] == zf.stringEndArchive64
    directory_end = end[zf._ECD_OFFSET] + end[zf._ECD_SIZE]
    if location != handle.seek(0, 2) - zf.sizeEndCentDir or zip64 != (named is not None) \
            or named not in (None, record64) or directory_end != (record64 if zip64 else location):
        raise CaptureFormatError(f"'{terminal(path)}': its zip directory is not where its end "
                                 "record names it (bytes before or after the archive, or a second "
                                 "directory): zip readers differ on its members; save it again "
                                 "with torch.save")


def check_members(archive: zipfile.ZipFile, path: Any, suffix: str | None = None,
                  member_limit: int = MAX_MEMBER) -> None:
    """Refuse a zip archive (``.npz``, ``.pt``) that names a member twice or whose members
    would decompress past the limits, before any is read: at most :data:`MAX_MEMBERS` members,
    each at most
    ``member_limit`` bytes, :data:`MAX_DECODED` in all; with ``suffix``, every member's name
    ends in it. The zip reader stops each member at its declared size.

    Raises CaptureFormatError naming the file, the member and the limit.
    """
    infos = archive.infolist()
    unpacked = [i for i in infos if i.compress_type not in PLAIN_METHODS]
    if unpacked:
        raise CaptureFormatError(
            f"'{terminal(path)}': member {show(unpacked[0].filename)} is compressed with zip "
            f"method {unpacked[0].compress_type}, not stored or deflated (numpy.savez and "
            "torch.save write no other): refused unread; save it again with numpy or torch")
    if len(infos) > MAX_MEMBERS:
        raise CaptureFormatError(f"'{terminal(path)}' holds {len(infos)} members; at most "
                                 f"{MAX_MEMBERS}")
    total = 0
    seen: set[str] = set()
    for info in infos:
        name = show(info.filename)
        if info.filename in seen:
            raise CaptureFormatError(f"'{terminal(path)}': member {name} is there twice (one "
                                     "reader takes the first, another the last); save each field "
                                     "once")
        seen.add(info.filename)
        if suffix is not None and not info.filename.endswith(suffix):
            raise CaptureFormatError(f"'{terminal(path)}': member {name} is not a {suffix} "
                                     "array; save every field with numpy.savez (names end in "
                                     f"{suffix})")
        if info.file_size > member_limit:
            raise CaptureFormatError(f"'{terminal(path)}': member {name} unpacks to "
                                     f"{info.file_size} bytes; at most {member_limit} per member")
        total += info.file_size
        if total > MAX_DECODED:
            raise CaptureFormatError(f"'{terminal(path)}': members unpack to more than "
                                     f"{MAX_DECODED} bytes in all; split the dump")


def check_containers(text: bytes | str, where: str | Callable[[], str], before: int = 0) -> int:
    """``before`` plus the JSON lists and objects ``text`` holds (each ``[`` or ``{`` counted,
    in strings too), when at most :data:`MAX_CONTAINERS`, counted before it is parsed.
    ``where``: the text's place, or what makes it (only when refused).

    Raises CaptureFormatError naming ``where``, the count and the fix."""
    opened = before + (text.count(b"[") + text.count(b"{") if isinstance(text, bytes)
                       else text.count("[") + text.count("{"))
    if opened > MAX_CONTAINERS:
        place = where if isinstance(where, str) else where()
        raise CaptureFormatError(f"{place} holds {opened} JSON lists and objects, past the "
                                 f"{MAX_CONTAINERS} one record needs; save long lists as "
                                 "tensors")
    return opened


def check_keys(text: str, where: str | Callable[[], str], before: int = 0) -> int:
    """``before`` plus the keys of ``text``'s JSON objects (its colons outside strings:
    :func:`~forensics.store.json_in.keys_in`), when at most :func:`most_keys`, counted before
    it is parsed. ``where``: the text's place, or what makes it (only when refused).

    Raises CaptureFormatError naming ``where``, the count and the fix."""
    from forensics.store.json_in import keys_in

    keys = before + keys_in(text)
    if keys > most_keys():
        place = where if isinstance(where, str) else where()
        raise CaptureFormatError(f"{place} holds {keys} JSON object keys, past the "
                                 f"{most_keys()} one record holds ({MAX_FIELD_KEYS} in a "
                                 "field's dict, one per request of a batch, and its fields), "
                                 "counted before they are parsed; write one record's fields, "
                                 "long lists as tensors")
    return keys


def read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, crc: bool = True) -> bytes:
    """The bytes of the member ``info``, at most the size its directory entry declares, read
    in bounded pieces (``ZipFile.read`` inflates a deflated member at once, up to 2 GiB,
    whatever size it declares, before cutting it to that size); without ``crc``, its CRC-32
    unchecked, as torch's reader reads it (torch.save writes 0 where told not to compute it)."""
    if not crc:
        info = copy.copy(info)
        del info.CRC  # zipfile checks the CRC of an entry that has one
    with archive.open(info) as member:
        return member.read(info.file_size)


def check_disjoint(meta: dict[str, Any], fields: Any, path: Any, what: str) -> None:
    """Refuse a ``__metadata__`` key that is also a ``what`` (member, tensor) of the file: two
    values of one field. Raises CaptureFormatError naming the field."""
    both = sorted(set(meta) & set(fields))
    if both:
        raise CaptureFormatError(f"'{terminal(path)}': field {show(both[0])} is both a {what} "
                                 "and a __metadata__ key; give each field once")


def _scalar(value: Any) -> Any:
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return value.item()
    return value


def _int_meta(raw: dict[str, Any], key: str, where: str, default: int | None) -> Any:
    value = _scalar(raw.get(key, default))
    if value is None or isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
            or not 0 <= value <= INT64_MAX:
        fix = "give each record its engine step" if key == "step" else "give the TP rank"
        raise CaptureFormatError(f"{where}: {key!r} must be a non-negative integer "
                                 f"(int64), got {show(value)}; {fix}")
    return int(value)


def _check_ints(value: Any, where: str, depth: int = 0) -> None:
    """Raise CaptureFormatError for a Python int, or an unsigned array's element, outside
    int64 anywhere in ``value`` (lists and dicts of a field), before anything converts it."""
    if plain_int(value):
        if not -INT64_MAX - 1 <= value <= INT64_MAX:
            raise CaptureFormatError(f"{where} holds an integer outside int64 "
                                     f"({show(value)}); values are int64 at most")
    elif isinstance(value, np.ndarray) and value.dtype.kind == "u" and value.size \
            and int(value.max()) > INT64_MAX:
        raise CaptureFormatError(f"{where} holds an integer outside int64 "
                                 f"({int(value.max())}, an unsigned tensor); values are int64 "
                                 "at most")
    elif isinstance(value, (list, tuple, dict)):
        if depth > MAX_DEPTH:
            raise CaptureFormatError(f"{where} is nested more than {MAX_DEPTH} deep")
        for item in value.values() if isinstance(value, dict) else value:
            _check_ints(item, where, depth + 1)


def show(value: Any) -> str:
    """A short, safe text of a value read from a file, for a one-line message (a huge
    integer is not converted to decimal)."""
    if plain_int(value) and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value) if isinstance(value, (str, int, float, bool, type(None))) else \
        f"a {type(value).__name__}"
    return text if len(text) <= 80 else text[:77] + "..."
