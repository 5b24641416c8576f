"""Per-process event sidecars: ``events-<process>.jsonl``, one JSON object per line, fsynced."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from forensics.errors import CaptureFormatError
from forensics.store.paths import EVENTS_RE, check_within

MAX_EVENTS_BYTES = 256 * 1024 * 1024


def events_filename(process: str) -> str:
    """The sidecar file name of ``process``."""
    return f"events-{process}.jsonl"


class EventLog:
    """Appends events to one process's sidecar; each line is written and fsynced at once."""

    def __init__(self, root: Path, process: str) -> None:
        self.path = root / events_filename(process)
        self._fd: int | None = None

    def append(self, event: dict[str, Any]) -> None:
        """Write ``event`` as one JSON line and fsync it.

        Raises CaptureFormatError when ``event`` is not a JSON-serialisable dict.
        """
        if not isinstance(event, dict):
            raise CaptureFormatError(f"an event must be a dict, got {type(event).__name__}")
        try:
            line = json.dumps(event, sort_keys=True, allow_nan=False).encode() + b"\n"
        except (TypeError, ValueError) as exc:
            raise CaptureFormatError(f"event is not JSON-serialisable: {exc}") from None
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(self._fd, line)
        os.fsync(self._fd)

    def close(self) -> None:
        """Close the sidecar (appending again reopens it)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def read_events(root: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Read every events sidecar of the capture at ``root``.

    Returns:
        (events in file-name then line order, each with ``process`` added when absent;
        names of sidecars whose last line was cut short and ignored).
    Raises:
        CaptureFormatError: a complete line that is not a JSON object, or an oversized file.
        UnsafeInputError: a sidecar that is a symlink out of the capture.
    """
    events: list[dict[str, Any]] = []
    truncated: list[str] = []
    for name in sorted(os.listdir(root)):
        match = EVENTS_RE.fullmatch(name)
        if match is None:
            continue
        path = root / name
        check_within(root, path)
        if _read_one(path, match["process"], events):
            truncated.append(name)
    return events, truncated


def _read_one(path: Path, process: str, out: list[dict[str, Any]]) -> bool:
    try:
        if path.stat().st_size > MAX_EVENTS_BYTES:
            raise CaptureFormatError(f"events file '{path}' exceeds {MAX_EVENTS_BYTES} bytes")
        data = path.read_bytes()
    except OSError as exc:
        raise CaptureFormatError(f"events file '{path}' cannot be read: {exc}") from None
    lines = data.split(b"\n")
    cut = lines.pop() != b""  # a last line without newline: a write cut short
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            event = json.loads(line.decode("utf-8"))
        except (ValueError, RecursionError) as exc:
            raise CaptureFormatError(f"events file '{path}' line {number}: not JSON ({exc})"
                                     ) from None
        if not isinstance(event, dict):
            raise CaptureFormatError(f"events file '{path}' line {number}: expected a JSON "
                                     f"object, got {type(event).__name__}")
        event.setdefault("process", process)
        out.append(event)
    return cut
