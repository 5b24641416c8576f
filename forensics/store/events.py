"""Per-process event sidecars: ``events-<process>.jsonl``, one JSON object per line, fsynced."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeGuard

from forensics.digits import plain_int
from forensics.errors import CaptureFormatError, reason
from forensics.escaping import terminal
from forensics.modes import owner_only
from forensics.store.fs import append_whole
from forensics.store.guarded import LIMITS, iter_lines
from forensics.store.json_in import DuplicateKeyError, RefusedJsonError, loads_finite
from forensics.store.paths import EVENTS_RE, WRITTEN_AGAIN

#: the longest event line, and the most events a capture may hold
MAX_LINE = 1 << 20
MAX_EVENTS = 200_000
#: the most JSON lists and objects the events of a capture may hold: 40 per event of
#: MAX_EVENTS (a kernel launch of ten tensors holds about 40), so an empty one, 64 bytes held
#: for 2 bytes read, makes a reader hold at most about 512 MB
MAX_CONTAINERS = 40 * MAX_EVENTS
#: the kinds that say how a process ended: past its share of the caps below, an events file
#: takes only these (a probe's long run of kernel launches or guard findings must not push
#: out its stop, nor make the capture past what a reader opens)
VITAL_KINDS = frozenset({"probe_start", "probe_stop", "engine_exception", "guard_violation",
                         "probe_writer_lost"})
#: what each cap keeps for :data:`VITAL_KINDS` alone in a probe's events file (at most an eighth
#: of the cap; a capture written again, as ``import`` writes one, keeps none: no process of it
#: ends after it): bytes, events (and 40 lists a piece)
RESERVE_BYTES, RESERVE_EVENTS = 4 << 20, 1_000


class EventsFullError(CaptureFormatError):
    """An event that would take its events file past what a reader opens (its bytes, the
    capture's events, their lists and objects)."""


#: what is said of the events a probe left out (its ``probe_stop``'s ``events_dropped``)
LEFT_OUT = "left out by the probe, its events file full"
#: what is said of the events a probe lost as its writer was stalled (``events_unwritten``)
UNWRITTEN_WHY = "the probe's stalled writer could not take them"
#: what is said of the records a probe never wrote (its ``probe_stop``'s ``dropped``, and those
#: its ``records`` counts beyond ``written`` and ``dropped``): the words readers tell them by
NEVER_WRITTEN = "recorded by the probe and never written"
#: why its ``dropped`` were never written (a write that failed: a full disk, ``EFBIG``, a value
#: that could not be framed, a writer process lost, is counted there too)
DROPPED_WHY = "its ring full, or its writer stalled or failing"
#: why the records ``probe_stop`` counts beyond ``written`` and ``dropped`` were never written
UNACCOUNTED_WHY = "counted in its probe_stop's records, yet neither written nor dropped"
#: why some of those were, where its ``probe_stop`` says so (``lost_to_signal``: T131f)
LOST_WHY = ("lost to a signal, its probe_stop says (a handler raised, as KeyboardInterrupt or "
            "SystemExit, as their outputs were copied, or as they were handed to the writer or "
            "waited for room in its ring or for the probe's lock)")


def dropped_by_probe(events: Iterable[dict[str, Any]], field: str = "events_dropped") -> int:
    """The sum of the count ``field`` the ``probe_stop`` events state: ``events_dropped``, the
    events the probe left out of its events files when they were full (:meth:`EventLog._fits`);
    ``dropped``, the records it recorded and never wrote (its ring full, its writer stalled or
    lost). A count that is no non-negative int64 is not counted."""
    return sum(count for event in events if event.get("kind") == "probe_stop"
               and is_count(count := event.get(field)))


def unaccounted_by_probe(events: Iterable[dict[str, Any]]) -> int:
    """The records the ``probe_stop`` events count (``records``) beyond those they say were
    ``written`` or ``dropped``: recorded and never written all the same (a close that ran
    while the call that counted one was interrupted before queueing it). A stop with a count
    that is no non-negative int64 adds none."""
    total = 0
    for event in events:
        records, written, dropped = (event.get(n) for n in ("records", "written", "dropped"))
        if event.get("kind") == "probe_stop" and is_count(records) and is_count(written) \
                and is_count(dropped):
            total += max(0, records - written - dropped)
    return total


def lost_by_probe(events: Iterable[dict[str, Any]]) -> int:
    """The records the ``probe_stop`` events say a signal's handler cut out of their hand-off
    (``lost_to_signal``), each stop's at most those it counts beyond ``written`` and
    ``dropped`` (:func:`unaccounted_by_probe`); a stop with a count that is no non-negative
    int64 adds none."""
    total = 0
    for event in events:
        if event.get("kind") == "probe_stop" and is_count(lost := event.get("lost_to_signal")):
            total += min(lost, unaccounted_by_probe([event]))
    return total


def is_count(value: Any) -> TypeGuard[int]:
    """Whether ``value`` is a non-negative int64 (no bool)."""
    return plain_int(value) and 0 <= value < 2**63


def as_said(event: dict[str, Any]) -> dict[str, Any]:
    """``event`` as shown to a reader: its step ``"unknown"`` where an imported log's lines
    gave it only their order (``step_known`` false: a number there would be one the log
    never said)."""
    return {**event, "step": "unknown"} if event.get("step_known") is False else event


def events_filename(process: str) -> str:
    """The sidecar file name of ``process``."""
    return f"events-{process}.jsonl"


class EventLog:
    """Appends events to one process's sidecar; each line is written and fsynced at once.

    The sidecar is made new (``O_EXCL``, ``O_NOFOLLOW``, mode 0600); one already there is
    appended to only when it is a plain file of this user with no other link (another writer
    of the same process in this capture made it), never through a symlink, a FIFO or a hard
    link someone planted."""

    def __init__(self, root: Path, process: str) -> None:
        self.path = root / events_filename(process)
        self.process = process
        self._fd: int | None = None
        #: what the file holds: bytes, events, lists and objects (counted as a reader does)
        self._held = [0, 0, 0]
        #: the events left out by :meth:`_fits` (a probe's ``probe_stop`` says how many)
        self.dropped = 0

    def append(self, event: dict[str, Any]) -> None:
        """Write ``event`` as one JSON line and fsync it (a ``probe_stop`` after events were
        left out says how many: ``events_dropped``).

        Raises CaptureFormatError when ``event`` is not a JSON-serialisable dict;
        EventsFullError past a reader's caps (:meth:`_fits`).
        """
        if not isinstance(event, dict):
            raise CaptureFormatError(f"an event must be a dict, got {type(event).__name__}")
        try:
            line = json.dumps(event, sort_keys=True, allow_nan=False).encode() + b"\n"
        except (TypeError, ValueError, RecursionError) as exc:
            raise CaptureFormatError(f"event is not JSON-serialisable: {reason(exc)}") from None
        if len(line) > MAX_LINE:
            raise CaptureFormatError(f"an event of {len(line)} bytes, past {MAX_LINE}; an event "
                                     "is one short JSON object")
        check_event(event, "an event")  # what the reader would refuse is never written
        if self._fd is None:
            self._fd = open_sidecar(self.path)
            self._held = _held(self._fd)
        if event.get("kind") == "probe_stop" and self.dropped and "events_dropped" not in event:
            return self.append({**event, "events_dropped": self.dropped})
        size = [len(line), 1, line.count(b"[") + line.count(b"{")]
        self._fits(event, size)
        append_whole(self._fd, line)  # a line the disk cuts short is cut off again
        self._held = [a + b for a, b in zip(self._held, size, strict=True)]

    def _fits(self, event: dict[str, Any], size: list[int]) -> None:
        """Refuse an event that would take the file past a reader's caps (each less its
        reserve for :data:`VITAL_KINDS`, unless the event is one or the capture is written
        again): a capture past them is refused whole by every command. A probe's event is
        counted in :attr:`dropped`; a capture written again (every process's events in one
        file) fails in one line.

        Raises:
            EventsFullError: naming the file and the cap.
        """
        caps = (LIMITS["events file"], MAX_EVENTS, MAX_CONTAINERS)
        reserves = ((0, 0, 0) if event.get("kind") in VITAL_KINDS or self.process == WRITTEN_AGAIN
                    else tuple(min(r, c // 8) for r, c in zip(
                        (RESERVE_BYTES, RESERVE_EVENTS, 40 * RESERVE_EVENTS), caps, strict=True)))
        if all(h + s <= c - r for h, s, c, r in zip(self._held, size, caps, reserves,
                                                     strict=True)):
            return
        again = self.process == WRITTEN_AGAIN  # a capture built under a temporary name
        if not again:
            self.dropped += 1
        raise EventsFullError(
            ("the events of the capture being written (shrink, redact: the input capture's, "
             "each written again, its non-ASCII text escaped) are full" if again else
             f"events file '{terminal(self.path)}' is full") +
            f": {self._held[0]} bytes and {self._held[1]} events written, and a reader opens "
            f"at most {caps[0]} bytes, {caps[1]} events and {caps[2]} lists and objects; " +
            ("keep fewer events in the input capture, or shorten their text" if again else
             "keep fewer events (for a probe: fewer kernel steps, FORENSICS_KERNELS_KEEP)"))

    def close(self) -> None:
        """Close the sidecar (appending again reopens it)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # once, even when it fails (the descriptor is gone either way)


def _held(fd: int) -> list[int]:
    """What the events file open as ``fd`` holds (bytes, events, lists and objects): nothing
    when made new; counted once, line by line, when a writer of the capture made it before."""
    held = [os.fstat(fd).st_size, 0, 0]
    offset = 0
    while offset < held[0]:
        chunk = os.pread(fd, 1 << 20, offset)
        if not chunk:
            break
        offset += len(chunk)
        held[1] += chunk.count(b"\n")
        held[2] += chunk.count(b"[") + chunk.count(b"{")
    return held


_APPEND = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
#: a sidecar made before is opened to read its last line too (:func:`end_on_a_line`)
_REOPEN = _APPEND & ~os.O_WRONLY | os.O_RDWR


def open_sidecar(path: Path) -> int:
    """A descriptor appending to the sidecar ``path``: made new, or one a writer of this
    capture made before (see :class:`EventLog`), its last line whole. Raises OSError naming
    what is in the way."""
    try:
        return owner_only(os.open(path, _APPEND | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass
    fd = os.open(path, _REOPEN)  # a symlink: ELOOP; a FIFO: not a plain file below
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_uid != os.getuid():
            raise PermissionError(f"'{terminal(path)}' is in the way: not a plain file of this "
                                  "user with one link; the events go nowhere rather than into it")
        end_on_a_line(fd, st.st_size, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def end_on_a_line(fd: int, size: int, path: Path) -> None:
    """Cut off the last line of the sidecar ``fd`` of ``size`` bytes when it was cut short (a
    writer killed or a disk full as it wrote it), or end it when it is a whole event lacking
    only its line end (:func:`whole_event`: a writer killed before the newline; a reader reads
    it): the next event starts a line of its own. Raises PermissionError when no line ends in
    its last :data:`MAX_LINE` bytes."""
    tail = os.pread(fd, min(size, MAX_LINE + 1), max(0, size - MAX_LINE - 1))
    if not tail or tail.endswith(b"\n"):
        return
    end = tail.rfind(b"\n")
    if end < 0 and size > len(tail):
        raise PermissionError(f"'{terminal(path)}' ends in a line longer than {MAX_LINE} bytes: "
                              "not an events file of this capture's writers; the events go nowhere")
    if whole_event(tail[end + 1:]):
        append_whole(fd, b"\n")
    else:
        os.ftruncate(fd, size - len(tail) + end + 1)


def whole_event(line: bytes, containers: int = 0) -> bool:
    """Whether ``line``, a last line without its line end, is one whole event all the same:
    one JSON object a reader takes (:func:`check_event`), its lists and objects with
    ``containers`` (those read before it) within :data:`MAX_CONTAINERS`, counted before it is
    parsed. A line cut inside its object is no JSON object (its closing brace is its last
    byte), so it is never taken for whole."""
    if not line.strip() or len(line) > MAX_LINE or \
            containers + line.count(b"[") + line.count(b"{") > MAX_CONTAINERS:
        return False
    try:
        _event(line, Path(), 0)
    except CaptureFormatError:
        return False
    return True


def read_events(root: Path) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """Read every events sidecar of the capture at ``root``, line by line in bounded pieces.

    Returns:
        (events in file-name then line order, each with its ``process``: :func:`owner`;
        names of sidecars whose last line was cut short and ignored; where each event is,
        "events file 'NAME' line N", for the lines that name a bad field of one later).
    Raises:
        CaptureFormatError: a complete line that is not a JSON object, an event whose ``kind``
            is not a string or whose ``step``/``rank`` is not an integer, an oversized file,
            more than :data:`MAX_EVENTS` events or :data:`MAX_CONTAINERS` lists and objects.
        UnsafeInputError: a sidecar that is not a regular file or a symlink out of the capture.
    """
    events: list[dict[str, Any]] = []
    truncated: list[str] = []
    places: list[str] = []
    containers = [0]  # the lists and objects read so far (at most MAX_CONTAINERS)
    files = {match["process"]: name for name in sorted(os.listdir(root))
             if (match := EVENTS_RE.fullmatch(name)) is not None}
    for process, name in files.items():
        start = len(events)
        if _read_one(root, root / name, events, containers, places):
            truncated.append(name)
        for event in events[start:]:
            event["process"] = owner(event, process, files)
    return events, truncated, places


def owner(event: dict[str, Any], process: str, files: Iterable[str]) -> Any:
    """The process an event of ``process``'s events file stands for, ``files`` naming the
    processes with an events file in the capture: the file's own process, unless the event's
    ``process`` field names another process that has no events file of its own and the file
    is that of a capture written again (:data:`~forensics.store.paths.WRITTEN_AGAIN`: it
    holds every process's events, each naming its own). A field naming another process in
    any other file is not believed: a ``probe_stop`` in one process's file claiming another
    process must not hide that process's death."""
    claimed = event.get("process", process)
    if process == WRITTEN_AGAIN and not (isinstance(claimed, str) and claimed in files):
        return claimed
    return process


def _read_one(root: Path, path: Path, out: list[dict[str, Any]], containers: list[int],
              places: list[str]) -> bool:
    """Append the events of one sidecar to ``out`` and where each is to ``places``
    (``containers[0]``: the lists and objects read so far, counted from their opening
    brackets before a line is parsed); True when its last line was cut short (a last line
    lacking only its line end, one whole event, is read: :func:`whole_event`)."""
    for number, line, complete, cut in iter_lines(path, "events file", root, max_line=MAX_LINE):
        if not complete and (cut or not whole_event(line, containers[0])):
            return True
        if not line.strip():
            continue
        if cut:
            raise CaptureFormatError(f"events file '{terminal(path)}' line {number}: longer than "
                                     f"{MAX_LINE} bytes; an event is one short JSON object")
        if len(out) >= MAX_EVENTS:
            raise CaptureFormatError(f"events file '{terminal(path)}': more than {MAX_EVENTS} "
                                     "events in the capture; remove the excess lines")
        containers[0] += line.count(b"[") + line.count(b"{")
        if containers[0] > MAX_CONTAINERS:
            raise CaptureFormatError(f"events file '{terminal(path)}' line {number}: the capture's "
                                     f"events hold more than {MAX_CONTAINERS} JSON lists and "
                                     "objects; an event is one short JSON object: remove the "
                                     "excess lines")
        out.append(_event(line, path, number))
        places.append(f"events file '{terminal(path.name)}' line {number}")
    return False


def _event(line: bytes, path: Path, number: int) -> dict[str, Any]:
    where = f"events file '{terminal(path)}' line {number}"
    try:
        event = loads_finite(line.decode("utf-8"))
    except DuplicateKeyError as exc:
        raise CaptureFormatError(f"{where}: {exc}; keep one of them") from None
    except RefusedJsonError as exc:  # valid JSON, refused alike by every caller
        raise CaptureFormatError(f"{where}: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise CaptureFormatError(f"{where}: not JSON ({reason(exc, 200)})") from None
    if not isinstance(event, dict):
        raise CaptureFormatError(f"{where}: expected a JSON object, got {type(event).__name__}")
    return check_event(event, where)


def check_event(event: dict[str, Any], where: str) -> dict[str, Any]:
    """Return ``event`` when a reader takes it: a string ``kind``, a ``step`` and ``rank``
    that are non-negative int64 or null.

    Raises:
        CaptureFormatError: naming ``where`` and the field.
    """
    if not isinstance(event.get("kind"), str):
        raise CaptureFormatError(f"{where}: field 'kind' must be a string, got "
                                 f"{type(event.get('kind')).__name__}; fix or delete the line")
    for key in ("step", "rank"):
        value = event.get(key)
        if value is not None and (not plain_int(value) or not 0 <= value < 2**63):
            raise CaptureFormatError(f"{where}: field {key!r} must be a non-negative int64 "
                                     "or null; fix or delete the line")
    return event
