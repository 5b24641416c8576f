"""Text logs: probe lines become summary records, crash lines become timeline events.

- a site's probe line (its ``Site.log_line``: the line's pattern and the record's fields,
  declared in the site's module; e.g. the SM70 fork's ``SM70-TEMB: rows=R input=(T,) ...``
  for the embedding) -> a summary record of that site; a line is read by the first site in
  pipeline order whose pattern it matches, where the line's text begins (:data:`TAG_RE`);
- CUDA asserts (``Assertion `...` failed``), device-side assert errors, illegal memory access,
  ``EngineDeadError`` and vLLM's report of a worker or engine process that died
  (:data:`DIED_RE`: a SIGSEGV's ``exit code: -11``) -> events with their line numbers
  (consecutive repeats collapse into one event with a ``count``); a line is one by its form
  (:data:`CRASH_LEVELS`: its level, and its crash words where its text begins), never by words
  a prompt another logger quotes holds. A report of the engine's death (``EngineDeadError``, a
  process that died) after a crash event, with no probe line of another step or engine start
  between, is that crash's (its ``engine_dead``, its ``died``; every such report kept or
  counted: :func:`~forensics.importers.tracebacks.report`), no crash of its own.

Steps follow line order (each probe line is the next step) unless a line names one
(``step=N``); ``rank=N`` on a line sets its rank (a negative one is refused, never read as
naming none). The lines naming no step say so
(``Imported.ordinal``): imported beside a dump, they keep their order after the dump's steps
(:func:`forensics.importers.combined`). A crash event takes the step of the probe line before
it (null before any); after a line naming none, that step is only the line's order, and the
event says so (``"step_known": false``): its readers say "at an unknown step (line N of the
log)", never the number.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from forensics.errors import CaptureFormatError
from forensics.escaping import terminal
from forensics.importers import Imported
from forensics.importers.common import show, where_of
from forensics.importers.tracebacks import CRASH_LEVELS, PREFIX_RE, REPORTS, Chains, ends, report
from forensics.importers.wide import PREFIX_BYTES, refuse_wide, refuse_wide_line
from forensics.records import Record
from forensics.sites import SITES, get_site
from forensics.sites.base import LogLine
from forensics.store.events import MAX_EVENTS
from forensics.store.guarded import iter_lines, read_prefix
from forensics.validate import validate_record

#: a probe line's ``step=N`` and ``rank=N``: the number, then what follows it in its word (none
#: for an integer; ``e3`` of ``step=1e3`` or ``.9`` of ``step=7.9`` is refused, never cut off)
STEP_RE = re.compile(r"\bstep[=:]\s*(-?\d+)([\w.]*)")
RANK_RE = re.compile(r"\brank[=:]\s*(-?\d+)([\w.]*)")
# the assert line is taken apart in linear time (one regex with .*? and .+? backtracked
# cubically on long lines): "Assertion" and "failed" by search, the file prefix anchored
ASSERTION_RE = re.compile(r"Assertion\s+")
FILE_RE = re.compile(r"(?P<file>[\w./-]+\.cu):(?P<line>\d+):\s*")
WORD_RE = re.compile(r"\w+")
QUOTES = "`'\""
#: a crash is told by its line's form, never by words a prompt can quote: its logger's level
#: (after vLLM's prefix) is ERROR or CRITICAL, or the line has none (the device's and the
#: C++ runtime's own stderr), and its words begin the line: after torch.distributed's
#: ``[rankN]:``, then c10's own log prefix at its error or fatal level (``[E1206 08:00:00.1
#: ProcessGroupNCCL.cpp:1895]``), an exception's name (``RuntimeError: ``) or C++'s
#: ``what():``, and NCCL's watchdog's ``[PG ...] Process group watchdog thread terminated with
#: exception:`` (each part possessive: linear in the line)
RANK_HEAD_RE = re.compile(r"\s*+(?:\[rank\d+\]:\s*+)?")
NAME_HEAD_RE = re.compile(r"(?:\[[EF]\d{4}\s[^\]]*+\]\s*+)?"
                          r"(?:what\(\):\s*+|(?:[A-Za-z_]\w*+\.)*+\w*?(?:Error|Exception):\s++)?"
                          r"(?:\[PG [^\]]*+\]\s*+)?"
                          r"(?:Process group watchdog thread terminated with exception:\s*+)?")
#: a CUDA error's text after the head: torch's and vLLM's ``CUDA error: ``, Triton's
#: ``Triton Error [CUDA]: ``, NCCL's ``Cuda failure 'NAME'``
CUDA_HEAD = r"(?:CUDA error:\s*|Triton Error \[CUDA\]:\s*|Cuda failure\s+(?:\d+\s+)?'?)?"
#: vLLM's report of a process of the engine that died (its multiproc executor's ``Worker proc
#: NAME died unexpectedly (exit code: -11)``, its Ray executor's ``RayWorkerProc rank=N died
#: unexpectedly``, the API server's ``Engine core process NAME died unexpectedly.`` and
#: ``Process NAME (PID: N) died with exit code N``, an older core client's ``Engine core proc
#: NAME died unexpectedly``), and CPython's faulthandler's ``Fatal Python error: Segmentation
#: fault`` (the process aborts; an engine in one process logs no report of its death; not its
#: ``... at interpreter shutdown, possibly due to daemon threads``, which a process that had
#: finished its work and was exiting prints after vLLM's "Killing local vLLM worker processes"): the
#: engine died, though no exception of it was logged (a SIGSEGV, a SIGKILL); after a crash event
#: with no probe line of another step between them it is that crash's (its ``died``), no crash
#: of its own (:func:`~forensics.importers.tracebacks.ends`)
DIED_RE = re.compile(r"Fatal Python error: (?!.*\bat interpreter shutdown\b)"
                     r"|(?:Worker proc|Engine core proc(?:ess)?)\s++\S++\s++died unexpectedly\b"
                     r"|RayWorkerProc rank=\d++ died unexpectedly\b"
                     r"|Process \S++ \(PID: \d++\) died with exit code\b")
#: vLLM's engine core's line at its start (``vllm/v1/engine/core.py``): a report of an engine's
#: death after it is not that of a crash before it (a server restarted, its log appended to)
ENGINE_START_RE = re.compile(r"Initializing a V1 LLM engine \(v")
EVENT_PATTERNS = (
    ("illegal_memory_access", re.compile(CUDA_HEAD + r"(?:an\s+)?illegal memory access", re.I)),
    ("engine_dead", re.compile(r"(?:[A-Za-z_]\w*+\.)*+EngineDeadError\b")),
    ("cuda_error", re.compile(CUDA_HEAD + r"device-side assert triggered", re.I)),
    ("process_died", DIED_RE),
)
#: what may come before ``Assertion`` on a CUDA device's or C runtime's assert line:
#: ``[PROGRAM: ][FILE:LINE: ][FUNCTION: ][block: [..], thread: [..] ]`` (each part possessive:
#: linear in the line)
ASSERT_HEAD_RE = re.compile(r"(?:[^\s:]++:\s++)?(?:[^\s:]++:\d++:\s*+)?(?:[^\s:]++:?\s++)?"
                            r"(?:block:\s*+\[[\d,\s]*+\],?\s*+thread:\s*+\[[\d,\s]*+\]\s*+)?")
#: a probe line is the probe's print: a line without a logger's level whose text (after vLLM's
#: process tag) begins with the probe's words, or with one tag word before them (the fork's
#: ``SM70-OUTPROBE: OUT-PATH ...``); a logger's line quoting a prompt that spells one is none
TAG_RE = re.compile(r"[\w-]++:\s++")
#: the messages of vLLM's request logger (``vllm/entrypoints/logger.py``) and of a request's
#: lifecycle: they quote a client's prompt, the model's output or a request id a client may
#: choose (``X-Request-Id``), text anyone who sends a request writes into the log, so none of
#: them is a crash, a probe line or a crash dump
REQUEST_LOG_RE = re.compile(r"(?:Received request|Added request|Aborted request|Finished request"
                            r"|Generated response|Request \S+ (?:details|prompt))\b")
MAX_LINE = 1 << 16
#: an event's ``cut``: its line was longer than :data:`MAX_LINE` and only its first part read
CUT = f"its line was longer than {MAX_LINE} bytes; only its first {MAX_LINE} were read"
MAX_INT = 2**63 - 1
MAX_DIGITS = 20  # longer numbers are outside int64 and are not converted
MAX_RECORDS = 1_000_000  # summary records one log may yield (each held until written)


def read(path: Path) -> Imported:
    """Parse a text log into summary records and events.

    Raises CaptureFormatError when the file cannot be read or a probe line holds a value
    outside int64.
    """
    parser = _LogParser(path)
    for number, text, cut in text_lines(path):
        parser.line(number, text, cut)
    return parser.result


def text_lines(path: Path) -> Iterator[tuple[int, str, bool]]:
    """The lines of the UTF-8 log ``path``, numbered (a byte that is not UTF-8 read as
    U+FFFD, a UTF-8 byte-order mark dropped), each with whether it was longer than
    :data:`MAX_LINE` bytes and cut there (its first :data:`MAX_LINE` bytes given).

    Raises CaptureFormatError when the log's first bytes are UTF-16 or UTF-32 text, with a
    byte-order mark (a log saved by PowerShell's ``>``) or without (:mod:`.wide`): read as
    UTF-8, none of its lines would match, and its crashes would be imported as none."""
    refuse_wide(path, read_prefix(path, "log", PREFIX_BYTES))
    before, last = b"", 0  # the line before (empty lines are not given) and its number
    for number, line, _complete, cut in iter_lines(path, "log", max_line=MAX_LINE,
                                                   cr_ends=True):
        if not last and line.startswith(codecs.BOM_UTF8):
            line = line[len(codecs.BOM_UTF8):]
        refuse_wide_line(path, number, line,
                         None if number == 1 else before if number == last + 1 else b"")
        before, last = line, number
        yield number, line.decode("utf-8", errors="replace"), cut


class _LogParser:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.result = Imported()
        self.next_step = 0
        self.last_step: int | None = None
        self.last_named = True  # whether the probe line before named its step
        self.probes = probe_lines()
        self.chains = Chains(self.result.events, path.name, kind_of, self._stands_alone,
                             lambda text: bool(self._probe(text)), MAX_LINE)

    def line(self, number: int, text: str, cut: bool = False) -> None:
        """Read one line; ``cut``: it was longer than :data:`MAX_LINE` and is its first
        part (a crash event of it says so; a probe line is refused: its values may be cut)."""
        held = len(self.result.events)
        self._line(number, text, cut)
        if not self.last_named:  # the events it opened: at a step only the lines' order gave
            for event in self.result.events[held:]:
                event["step_known"] = False

    def _line(self, number: int, text: str, cut: bool) -> None:
        """:meth:`line`, its events' steps those of the probe line before them."""
        if self.chains.take(number, text, self.last_step, cut):
            self._check_events(number)
            return
        if quotes_requests(text):
            return
        if self.result.events and starts_engine(text):
            self.chains.closed.add(id(self.result.events[-1]))  # a death after it is another's
            return
        for site, match in self._probe(text):
            if cut:
                raise CaptureFormatError(f"log '{terminal(self.path)}' line {number}: a probe "
                                         f"line of site {site} longer than {MAX_LINE} bytes "
                                         "(its values past that would be lost); a probe line is "
                                         "short: cut the line's excess or remove it")
            self._record(number, text, site, self.probes[site].fields(match, number_of))
            return
        self._event(number, text, cut)

    def _probe(self, text: str) -> list[tuple[str, re.Match[str]]]:
        """The first site whose probe line ``text`` is, with its match (or none): the probe's
        own print (:data:`TAG_RE`), never a logger's line quoting one."""
        prefix = PREFIX_RE.match(text)
        if prefix is None or prefix["level"] is not None:
            return []
        tag = TAG_RE.match(text, prefix.end())
        starts = (prefix.end(),) if tag is None else (prefix.end(), tag.end())
        for site, probe in self.probes.items():
            for start in starts:
                match = probe.pattern.match(text, start)
                if match is not None:
                    return [(site, match)]
        return []

    def _stands_alone(self, text: str) -> bool:
        """Whether the line is an event or a record by itself (it ends a chain whose exception
        is read)."""
        return bool(self._probe(text)) or _classify(text) is not None

    def _check_events(self, number: int) -> None:
        if len(self.result.events) > MAX_EVENTS:
            raise CaptureFormatError(f"log '{terminal(self.path)}' line {number}: more than "
                                     f"{MAX_EVENTS} crash events; split the log and import each "
                                     "part")

    def _record(self, number: int, text: str, site: str, fields: dict[str, Any]) -> None:
        named = STEP_RE.search(text)
        step = number_of(named.group(1)) if named else self.next_step
        if named is None:
            self.result.ordinal.add(len(self.result.records))
        rank_match = RANK_RE.search(text)
        rank = number_of(rank_match.group(1)) if rank_match else 0
        where = f"{where_of(self.path.name, len(self.result.records))} (line {number})"
        for name, found in (("step", named), ("rank", rank_match)):
            if found is not None and found.group(2):
                raise CaptureFormatError(f"{where}: its {name} {show(found.group(0)[:40])} is "
                                         f"not an integer; give {name}=N, N an integer")
        if any(abs(v) > MAX_INT for v in (step, rank, *fields.values()) if isinstance(v, int)):
            raise CaptureFormatError(f"{where}: a number is outside int64")
        fields["line"] = number
        if len(self.result.records) >= MAX_RECORDS:
            raise CaptureFormatError(f"log '{terminal(self.path)}' line {number}: more than "
                                     f"{MAX_RECORDS} probe lines; split the log (e.g. by time) "
                                     "and import each")
        record = validate_record(Record(site, step, rank, fields, summary=True), where)
        self.result.records.append(record)
        self.last_step, self.last_named = step, named is not None
        self.next_step = max(self.next_step, step + 1)

    def _event(self, number: int, text: str, cut: bool) -> None:
        event = _classify(text)
        if event is None:
            return
        events = self.result.events
        last = events[-1] if events else None
        key = REPORTS.get(event["kind"])
        if key is not None and ends(last, self.last_step, self.chains.closed):
            assert last is not None
            report(last, key, number, text, CUT if cut else None)
            return  # vLLM's report of the death of the crash before: that crash's
        if last is not None and (last["kind"], last.get("detail")) == (event["kind"],
                                                                       event.get("detail")) \
                and last["last_line"] == number - 1 and "links" not in last:
            last["count"] += 1
            last["last_line"] = number
            if cut:
                last["cut"] = CUT
            return
        if len(events) >= MAX_EVENTS:
            raise CaptureFormatError(f"log '{terminal(self.path)}' line {number}: more than "
                                     f"{MAX_EVENTS} crash events; split the log and import each "
                                     "part")
        event.update(source=self.path.name, line=number, last_line=number, count=1,
                     step=self.last_step, message=text.strip()[:500])
        if cut:
            event["cut"] = CUT
        events.append(event)


def cut_note(events: list[dict[str, Any]]) -> str | None:
    """One line naming the events read from a line cut at :data:`MAX_LINE` (a crash dump's
    batch unknown), or None when there is none."""
    cut = [e for e in events if e.get("cut")]
    if not cut:
        return None
    where = ", ".join(f"'{terminal(e.get('source'))}' line {e.get('line')}" for e in cut[:5])
    more = f" and {len(cut) - 5} more" if len(cut) > 5 else ""
    return (f"{len(cut)} event(s) from a log line longer than {MAX_LINE} bytes, read only to "
            f"that length (a crash dump's batch there is unknown): {where}{more}")


def quotes_requests(text: str) -> bool:
    """Whether the log line ``text`` is vLLM's request logger's (:data:`REQUEST_LOG_RE`, after
    the logger's prefix): a prompt that says "illegal memory access" is no crash."""
    prefix = PREFIX_RE.match(text)
    return REQUEST_LOG_RE.match(text, prefix.end() if prefix else 0) is not None


def starts_engine(text: str) -> bool:
    """Whether the log line ``text`` is vLLM's engine core's ``INFO`` line at its start
    (:data:`ENGINE_START_RE`, after the logger's prefix)."""
    prefix = PREFIX_RE.match(text)
    return prefix is not None and prefix["level"] == "INFO" \
        and ENGINE_START_RE.match(text, prefix.end()) is not None


def probe_lines() -> dict[str, LogLine]:
    """Site -> its probe line, for every registered site that reads one, in pipeline order."""
    return {name: line for name in SITES if (line := get_site(name).log_line) is not None}


def kind_of(text: str) -> str | None:
    """The event kind a line names by itself, or None."""
    event = _classify(text)
    return None if event is None else str(event["kind"])


def number_of(text: str) -> int:
    """The integer ``text``; one past int64 for a text too long to be an int64 (refused by
    the caller with the line's position; never converted, however many digits)."""
    return int(text) if len(text.lstrip("-")) <= MAX_DIGITS else MAX_INT + 1


def crash_body(text: str) -> str | None:
    """The text of the log line ``text`` after vLLM's prefix when the line may be a crash's
    (its level ERROR or CRITICAL, or none: :data:`CRASH_LEVELS`), else None."""
    prefix = PREFIX_RE.match(text)
    if prefix is None:
        return text
    return text[prefix.end():] if prefix["level"] in CRASH_LEVELS else None


def _classify(text: str) -> dict[str, Any] | None:
    """The event the line ``text`` is by its form (:data:`CRASH_LEVELS`), or None."""
    body = crash_body(text)
    if body is None:
        return None
    rank = RANK_HEAD_RE.match(body)
    body = body[rank.end():] if rank else body
    head = ASSERTION_RE.search(body)
    if head is not None and ASSERT_HEAD_RE.fullmatch(body, 0, head.start()):
        event = _assertion(body)
        if event is not None:
            return event
    name = NAME_HEAD_RE.match(body)
    assert name is not None  # every part optional
    for kind, pattern in EVENT_PATTERNS:
        if pattern.match(body, 0 if kind == "engine_dead" else name.end()):
            return {"kind": kind, "detail": None}
    return None


def _assertion(text: str) -> dict[str, Any] | None:
    """A CUDA assert line (``[FILE.cu:LINE: ]FUNC ... Assertion `COND` failed``), or None."""
    head = ASSERTION_RE.search(text)
    if head is None:
        return None
    end = _failed_at(text, head.end() + 1)
    if end is not None:
        cond = text[head.end():end].rstrip()
    elif head.end() - head.start() >= len("Assertion") + 3 and \
            text.startswith("failed", head.end()):
        cond = ""  # "Assertion", three or more spaces, "failed": the condition is a space
    else:
        return None
    cond = cond[1:] if cond[:1] in QUOTES and len(cond) > 1 else cond
    cond = cond[:-1] if cond[-1:] in QUOTES and len(cond) > 1 else cond
    where = FILE_RE.match(text, 0, head.start())
    func = WORD_RE.match(text, where.end() if where else 0, head.start())
    return {"kind": "cuda_assert", "detail": cond.strip()[:500],
            "location": f"{where['file']}:{where['line']}" if where else None,
            "function": func.group(0) if func else None}


def _failed_at(text: str, start: int) -> int | None:
    """Where the whitespace before the first ``failed`` at or after ``start`` begins."""
    at = text.find("failed", start)
    while at >= 0 and not text[at - 1].isspace():
        at = text.find("failed", at + 1)
    return None if at < 0 else at
