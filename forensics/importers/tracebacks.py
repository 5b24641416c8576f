"""Python tracebacks in a log: one exception chain is one crash event.

A chain starts at ``Traceback (most recent call last):`` and runs through its frames, its
exception line (the first line after the frames that is not indented), the message's further
lines, and any ``During handling of the above exception ...`` / ``The above exception was the
direct cause ...`` link into the next traceback. vLLM logs a traceback with its logger's prefix
(``(EngineCore_DP0 pid=1) ERROR 12-02 10:46:44 [core.py:866] ``) on every line: a chain holds
the lines of its own prefix; a line of another prefix, or of none (another process's plain
stderr), pauses it (two processes' tracebacks interleave line by line: vLLM writes each line by
itself), its next line goes on with it (a chain of no prefix, plain stderr's, is paused so by a
prefixed line while it is in its frames or at a link, and ended by one once its exception is
read), and a line of its prefix that is not its own ends it; a traceback logged at a level
that is no crash's (:data:`CRASH_LEVELS`: a warning's) opens none. A chain, of a prefix or of
none (plain stderr), ends at a line of its prefix that is an event by itself (a CUDA assert, a
probe line) once its exception is read, or at a new traceback without a link; a probe line is
never a chain's (a record, read as one wherever it stands).

The event carries its own line: ``line`` and ``message`` are the root exception's line (the
``Traceback`` line until one is read), ``first_line``/``last_line`` span the chain, and it
holds ``exception`` (the root), ``final`` (the last exception of the chain), ``links``,
``location`` (the root traceback's last ``File`` line) and ``source_line`` (the source under
it); ``cut`` (and its message) names a line of it longer than the log's line bound, read only
to it (what named the error past it unread). Two chains join what they belong to instead of
counting a second crash: a chain right after a CUDA assert event (nothing else in between) is
that assert's exception (the first such chain alone: another worker's interleaved with it is a
crash of its own), and an ``EngineDeadError`` chain, or one rooted in vLLM's report of a
process that died, after a crash (no probe line of another step between them: :func:`ends`)
is the API server's report of that crash (:data:`REPORTS`), as the same report on a line of
its own is (:mod:`forensics.importers.logs`); every report of one crash is kept or counted
(:func:`report`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import Any

from forensics.store.events import is_count

#: vLLM's log prefix: ``(EngineCore pid=1) ERROR 12-02 10:46:44 [dump_input.py:72] ``
PREFIX_RE = re.compile(r"(?:\([^)]*\)\s+)?"
                       r"(?:(?P<level>[A-Z]+)\s+\d\d-\d\d\s+[\d:]+\s+\[[^\]]*\]\s?)?")
#: the levels of vLLM's logger at which a line may be a crash's (``logger.error``,
#: ``exception``, ``critical``; None: a line without a level, stderr's): a traceback logged at
#: another level (``logger.warning(..., exc_info=True)``) is no crash, nor what it quotes
CRASH_LEVELS = (None, "ERROR", "CRITICAL")
TRACEBACK = "Traceback (most recent call last):"
LINKS = ("During handling of the above exception, another exception occurred:",
         "The above exception was the direct cause of the following exception:")
#: the event kinds of a crash (a report of the engine's death after one of them joins it: an
#: ``EngineDeadError``, by a chain or a line, or a process's death; the API server logs one
#: ``EngineDeadError`` per request it fails, so a report after an ``engine_dead`` is its)
CRASH_KINDS = ("cuda_assert", "cuda_error", "illegal_memory_access", "engine_exception",
               "process_died", "engine_dead")
TEXT = 500  # characters kept of a line
#: the kinds of a chain that reports the crash before it (the API server's ``EngineDeadError``,
#: its ``RuntimeError: Engine core process NAME died unexpectedly.``), each with the key of the
#: crash's event that keeps it: one death, one crash event
REPORTS = {"engine_dead": "engine_dead", "process_died": "died"}
#: the later reports of one crash's death kept, each with its line (:func:`report`: the rest
#: counted): the API server logs one ``EngineDeadError`` per request it fails
MORE_REPORTS = 16
#: the chains of other log prefixes kept open while another prefix's lines come (vLLM writes
#: each process's lines one by one: the tracebacks of tensor-parallel workers failing together
#: interleave), the latest kept: an engine's processes, a few (one dropped says so:
#: :meth:`Chains._drop`)
MAX_PAUSED = 256
#: the state of one open chain (:class:`Chains`' attributes of that name)
STATE = ("event", "holder", "tag", "in_frames", "linked", "root", "own_frames")


class Chains:
    """Groups the lines of a log into exception chains, each one event of ``events``.

    ``kind_of(text)`` is the event kind a line names by itself (None for none): the root
    exception's kind names the chain's (``engine_exception`` when it names none);
    ``stands_alone(text)`` says whether a line is an event of its own (it ends a chain once
    its exception is read); ``is_record(text)`` whether it is a probe line (a record, never a
    chain's line); ``max_line``: the bound a line given ``cut`` was cut at.
    """

    def __init__(self, events: list[dict[str, Any]], source: str,
                 kind_of: Callable[[str], str | None],
                 stands_alone: Callable[[str], bool], is_record: Callable[[str], bool],
                 max_line: int) -> None:
        self.events = events
        self.source = source
        self.kind_of = kind_of
        self.stands_alone = stands_alone
        self.is_record = is_record
        self.max_line = max_line
        self.event: dict[str, Any] | None = None  # the open chain's event
        #: the event of :attr:`events` the open chain's lines belong to (another's, joined)
        self.holder: dict[str, Any] | None = None
        self.tag = ""  # the open chain's log prefix
        self.in_frames = False  # between a Traceback line and its exception line
        self.linked = False  # a link line since the last exception line
        self.root = True  # still in the chain's first traceback
        self.own_frames = True  # frames name the event's location (not so for an assert's)
        #: the ids of the events a later engine's start closed (no report after joins them)
        self.closed: set[int] = set()
        #: log prefix -> the state (:data:`STATE`) of its chain, open while a line of another
        #: prefix came: its next line of that prefix goes on with it
        self.paused: dict[str, tuple[Any, ...]] = {}
        #: the prefixes whose paused chains were dropped (:meth:`_drop`; one per event at
        #: most), each as its :func:`digest` (a prefix kept whole held the log in memory)
        self.dropped: set[bytes] = set()

    def take(self, number: int, text: str, step: int | None, cut: bool = False) -> bool:
        """Whether the line belongs to a chain (it opens, continues or ends one); False: the
        line is not a chain's, and any open chain has ended before it. ``cut``: the line is
        the first :attr:`max_line` bytes of a longer one (the chain's event says so)."""
        if self.is_record(text):
            self._passed(text)
            return False
        prefix = PREFIX_RE.match(text)
        tag = prefix.group(0) if prefix else ""
        body = text[len(tag):].rstrip("\r\n")
        self._switch(tag)
        if self.event is not None and self._continues(number, text, tag, body):
            self._cut(number, cut)
            return True
        self.event = None
        key = digest(tag) if self.dropped else b""
        if key in self.dropped and not body.strip().startswith(TRACEBACK):
            return True  # a line of a chain dropped from the paused ones (:meth:`_drop`)
        self.dropped.discard(key)
        if body.strip().startswith(TRACEBACK) and (prefix is None
                                                  or prefix["level"] in CRASH_LEVELS):
            self._open(number, text, tag, step)
            self._cut(number, cut)
            return True
        return False

    def _passed(self, text: str) -> None:
        """A probe line ``text`` (a record, never a chain's line: it was read as the exception
        of a chain in its frames, and as a further line of the message of a prefixed chain's
        exception or of a dropped chain, the record lost) ends a chain of its process, or of
        no prefix, whose exception is read, as any line that is an event by itself (or, of
        another process, any line) does; a chain in its frames, or of another process, goes on
        after it."""
        prefix = PREFIX_RE.match(text)
        if self.event is not None and not self.in_frames and not self.linked \
                and self.tag in ("", prefix.group(0) if prefix else ""):
            self.event = None

    def _switch(self, tag: str) -> None:
        """Pause the open chain where a line of another log prefix, or of none, comes (two
        processes' tracebacks interleaved line by line; another process's plain stderr, an
        NCCL line, between a worker's lines), and go on with ``tag``'s paused chain, if any:
        each line was read as the end of the other's chain, every traceback of two workers
        failing together cut into events of their lines ("5 crash event(s)" of 2)."""
        if tag == self.tag and self.event is not None:
            return
        if self.event is not None and (self.tag or self.in_frames or self.linked):
            self.paused[self.tag] = tuple(getattr(self, name) for name in STATE)
            if len(self.paused) > MAX_PAUSED:
                self._drop(next(iter(self.paused)))
        self.event = None
        resumed = self.paused.pop(tag, None)
        if resumed is not None:
            for name, value in zip(STATE, resumed, strict=True):
                setattr(self, name, value)

    def _drop(self, tag: str) -> None:
        """Drop the paused chain of ``tag`` (:data:`MAX_PAUSED` others opened since): its event
        says its later lines were not read, and they are read as no one's (until a new
        traceback of ``tag``); each was an event of its own, its exception line a crash."""
        holder = self.paused.pop(tag)[STATE.index("holder")]
        self.dropped.add(digest(tag))
        if holder is not None and "unread" not in holder:
            holder["unread"] = (f"its lines after line {holder['last_line']} were not read: "
                                f"more than {MAX_PAUSED} other tracebacks were open at once")
            holder["message"] = f"{holder.get('message') or ''} ({holder['unread']})"

    def _cut(self, number: int, cut: bool) -> None:
        """Say on the event the chain's lines belong to that line ``number`` was cut (the
        first such line of it), in its ``cut`` and its message."""
        holder = self.holder if self.event is not None else None
        if not cut or holder is None or "cut" in holder:
            return
        holder["cut"] = (f"its line {number} was longer than {self.max_line} bytes; only its "
                         f"first {self.max_line} were read")
        _say_cut(holder)

    def _open(self, number: int, text: str, tag: str, step: int | None) -> None:
        last = self.events[-1] if self.events else None
        self.tag, self.in_frames, self.linked, self.root = tag, True, False, True
        self.own_frames = True
        if last is not None and last.get("kind") == "cuda_assert" and "links" not in last:
            # the exception of the assert before, unless a chain took it already (another
            # worker's, interleaved: a second would make two workers' crashes one)
            self.event, self.own_frames = last, False
            self.event.update(links=0, last_line=number)
            self.holder = self.event
            return
        self.event = {"kind": "engine_exception", "source": self.source, "line": number,
                      "first_line": number, "last_line": number, "count": 1, "step": step,
                      "message": text.strip()[:TEXT], "links": 0}
        self.holder = self.event  # the event of the events its lines belong to
        self.events.append(self.event)

    def _continues(self, number: int, text: str, tag: str, body: str) -> bool:
        """Read one more line into the open chain; False when the line is not the chain's."""
        stripped = body.strip()
        if tag != self.tag or (not self.in_frames and self.stands_alone(text)):
            return False
        if stripped.startswith(TRACEBACK):
            if not self.in_frames and not self.linked:
                return False  # a new chain
            self.in_frames, self.linked, self.root = True, False, False
        elif stripped in LINKS:
            self.linked = True
        elif self.in_frames and stripped and body[:1].isspace():
            self._frame(body, stripped)
        elif self.in_frames and stripped:
            self._exception(number, text, stripped)
        assert self.event is not None
        self.event["last_line"] = number
        return True

    def _frame(self, body: str, stripped: str) -> None:
        """Keep the root traceback's last ``File`` line and the source line under it."""
        assert self.event is not None
        if not (self.root and self.own_frames):
            return
        if stripped.startswith("File "):
            self.event["location"] = stripped[:TEXT]
            self.event.pop("source_line", None)
        elif body.startswith("    ") and "location" in self.event \
                and not stripped.startswith(("^", "~")):
            self.event.setdefault("source_line", stripped[:TEXT])

    def _exception(self, number: int, text: str, stripped: str) -> None:
        """An exception line: the root's (the event's line) or a later link's (``final``)."""
        event = self.event
        assert event is not None
        self.in_frames = False
        event["links"] = event.get("links", 0) + 1
        event["final"] = stripped[:TEXT]
        if "exception" in event:
            return
        event["exception"] = stripped[:TEXT]
        if event["kind"] != "engine_exception":
            return  # joined to its assert: the assert's line stays the event's
        kind = self.kind_of(text)
        key = REPORTS.get(kind or "")
        at = (self._place(event) or 0) if key is not None else 0
        before = self.events[at - 1] if at else None
        if key is not None and before is not None and ends(before, event["step"], self.closed):
            del self.events[at]  # the API server's report of the crash before: that crash's
            self._closes(event, before)
            report(before, key, number, text)
            carry(event, before)  # the reports that joined this chain while it was open
            if "cut" in event:
                before.setdefault("cut", event["cut"])
                _say_cut(before)
            self.event, self.own_frames = dict(event), False  # its other lines are read, not kept
            self.holder = before
            return
        event.update(kind=kind or "engine_exception", line=number, message=text.strip()[:TEXT])
        _say_cut(event)

    def _closes(self, event: dict[str, Any], crash: dict[str, Any]) -> None:
        """Move the mark of an engine's start after ``event`` (a report's chain, removed as it
        joins ``crash``) to ``crash``: a removed event's id is freed for a later crash's event
        to take (its report then stood as a crash of its own), and the start came after
        ``crash`` too (a death reported after it is another crash's)."""
        if id(event) in self.closed:
            self.closed.discard(id(event))
            self.closed.add(id(crash))

    def _place(self, event: dict[str, Any]) -> int | None:
        """Where ``event`` is in :attr:`events`: after it, at most the events of the chains
        of other prefixes opened while it was (:data:`MAX_PAUSED`, and what they joined), or
        None. A report's chain interleaved with a worker's traceback opened after it was
        never the crash before's: "3 crash event(s)" of 2 crashes, one an ``engine_dead``."""
        for at in range(len(self.events) - 1, max(-1, len(self.events) - MAX_PAUSED - 3), -1):
            if self.events[at] is event:
                return at
        return None


def digest(tag: str) -> bytes:
    """16 bytes that tell the log prefix ``tag`` from any other (a prefix is up to a line's
    64 KiB: a dropped chain's, kept whole, held about the log's size in memory)."""
    return hashlib.blake2b(tag.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def ends(crash: dict[str, Any] | None, step: int | None, closed: set[int]) -> bool:
    """Whether a report of the engine's death read at ``step`` (the step of the last probe
    line before it) is the crash event ``crash``'s: ``crash`` is a crash's, no probe line of
    another step was read since it (an engine that ran on after it died of another crash), and
    no engine started since it (``closed``: the ids of the events an engine's start closed)."""
    return crash is not None and crash.get("kind") in CRASH_KINDS \
        and crash.get("step") == step and id(crash) not in closed


def report(crash: dict[str, Any], key: str, number: int, text: str,
           cut: str | None = None) -> None:
    """Keep in ``crash``'s ``key`` (:data:`REPORTS`) the report of its death on line ``number``:
    the first as its ``line`` and ``message``; each later one counted in its ``count`` (every
    report) and, up to :data:`MORE_REPORTS`, listed in its ``more`` (line and message), so that
    a second report (another worker's death an hour later) is not lost; ``cut``: why the line
    was read only in part (kept with it). An ``engine_dead`` or ``process_died`` event is a
    report of a death itself: its own line is its ``engine_dead``'s or ``died``'s first, so
    that ``count`` counts every line reporting a death (a crash's reports are all after it).
    It counts lines, not deaths: another process's death and a second report of the same one
    read alike."""
    said: dict[str, Any] = {"line": number, "message": text.strip()[:TEXT]}
    if cut:
        said["cut"] = cut
    if REPORTS.get(str(crash.get("kind"))) == key and key not in crash:
        crash[key] = {k: crash[k] for k in ("line", "message", "cut") if k in crash}
    first = crash.get(key)
    if first is None:
        crash[key] = said
        return
    first["count"] = first.get("count", 1) + 1
    more = first.setdefault("more", [])
    if len(more) < MORE_REPORTS:
        more.append(said)


def carry(chain: dict[str, Any], crash: dict[str, Any]) -> None:
    """Keep in ``crash`` the reports that joined ``chain`` while its exception was not read
    (another API server's report, interleaved with it), now that ``chain`` is a report of
    ``crash``: each counted, listed as :func:`report` lists them (two servers' reports
    interleaved were counted as one)."""
    for key in set(REPORTS.values()):
        said = chain.get(key)
        if not isinstance(said, dict):
            continue
        kept = [said, *said.get("more", [])]
        for one in kept:
            report(crash, key, one["line"], one["message"], one.get("cut"))
        crash[key]["count"] = crash[key].get("count", 1) + said.get("count", 1) - len(kept)


def death_lines(event: dict[str, Any]) -> str:
    """``"2 lines report a death (lines, not deaths)"`` for an event holding reports of a death
    (:data:`REPORTS`: their ``count``, 1 when it has none or one that is no positive int64:
    a capture's two counts of 4,300 digits summed to one no text can hold); ``""`` for one
    holding none."""
    lines = 0
    for key in set(REPORTS.values()):
        said = event.get(key)
        if isinstance(said, dict):
            count = said.get("count", 1)
            lines += count if is_count(count) and count > 0 else 1
    if not lines:
        return ""
    return f"{lines} line{'s' if lines > 1 else ''} report{'' if lines > 1 else 's'} a death " \
        "(lines, not deaths)"


def _say_cut(event: dict[str, Any]) -> None:
    """End ``event``'s message with its ``cut``, when it has one the message does not say."""
    cut = event.get("cut")
    message = str(event.get("message") or "")
    if cut and not message.endswith(f"({cut})"):
        event["message"] = f"{message} ({cut})"
