"""vLLM's crash dump in an engine log: ``dump_engine_exception`` (vLLM 0.32/0.33).

After an exception in ``execute_model`` vLLM logs, at ERROR level, three lines from
``vllm/logging_utils/dump_input.py``: ``Dumping input data for V1 LLM engine (vX) with config:
...``, ``Dumping scheduler output for model execution: SchedulerOutput(...)`` (tensors print as
shapes, token ids as counts) and ``Dumping scheduler stats: ...``, then the exception's
traceback. :func:`read` reads the log as :mod:`forensics.importers.logs` does (each exception
chain one event, :mod:`forensics.importers.tracebacks`) and adds one ``crash_dump`` event per
dump, which takes in the exception chain after it (one crash, one event; none that ends after
a later dump of its process or of the chain's: that dump's; a chain of a process that dumped
is first its own dumps'), carrying:

- ``scheduled_spec_decode_tokens``: request id -> the draft token ids scheduled;
- ``num_scheduled_tokens`` (the batch: request id -> tokens), ``total_num_scheduled_tokens``,
  ``req_ids`` (of the cached requests) and ``new_req_ids``;
- ``config``: the vLLM version, model, speculative method and tokens, tensor parallel size;
- ``exception``: the root exception of the chain after the dump (``final``: the chain's last),
  ``location``: the last ``File ...`` line of its traceback, and ``source_line``: the source
  line under it (e.g. an ``assert``).

Every value is data: parsed with regular expressions, never evaluated.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

from forensics.errors import CaptureFormatError
from forensics.importers import Imported
from forensics.importers import logs as plain_logs
from forensics.importers.common import show
from forensics.importers.quoted import quoted_list
from forensics.manifest_facts import UNKNOWN

CONFIG_RE = re.compile(r"Dumping input data for V1 LLM engine \(v(?P<version>[^)\s]+)\) with "
                       r"config: (?P<config>.*)")
OUTPUT_RE = re.compile(r"Dumping scheduler output for model execution: (?P<dump>.*)")
#: the close of a dumped dict: its ``}``, then the next field of the object (or its end)
CLOSE_RE = re.compile(r"\}(?:,\s*+(?:\w++=|\))|\)|\s*+$)")
#: a draft id list's text in a dumped dict (no ``:``, ``[`` or ``]`` inside: linear)
LIST_RE = re.compile(r"\[[^\[\]:]*\]")
IDS_RE = re.compile(r"\[(?P<ids>[-\d,\s]*)\]?")
NUMBER_RE = re.compile(r"-?[0-9]+")
CONFIG_FIELDS = {"model": re.compile(r"^model='(?P<v>[^']*)'"),
                 "speculative": re.compile(r"SpeculativeConfig\(method='(?P<v>[^']*)'"),
                 "num_speculative_tokens": re.compile(r"(?<!\w)num_spec_tokens=(?P<v>\d+)"),
                 "tensor_parallel_size": re.compile(r"(?<!\w)tensor_parallel_size=(?P<v>\d+)")}
#: the text naming each field of :data:`CONFIG_FIELDS` that vLLM prints once in its config (a
#: model's path or name may spell one too: ``model='/m/num_spec_tokens=9/x'``)
CONFIG_NAMES = {"speculative": re.compile(r"SpeculativeConfig\(method="),
                "num_speculative_tokens": re.compile(r"(?<!\w)num_spec_tokens="),
                "tensor_parallel_size": re.compile(r"(?<!\w)tensor_parallel_size=")}
#: what a dump takes from the exception chain after it
CHAIN_KEYS = ("exception", "final", "links", "location", "source_line", "engine_dead", "died")
#: a log line's process tag: vLLM's ``(EngineCore_DP0 pid=196)`` before its level
PROCESS_RE = re.compile(r"\([^)]*\)")
MAX_IDS = 1 << 16  # draft ids kept per dump (a dump lists a handful per request)
#: the processes whose config line is kept until their scheduler output comes (an engine's
#: data-parallel ranks, each a process: a few)
MAX_PENDING = 256
#: the texts naming the fields of a dumped ``SchedulerOutput`` its batch is read from (each
#: found by its name: vLLM prints each once)
COUNTED_FIELDS = ("scheduled_spec_decode_tokens=", "num_scheduled_tokens=",
                  "total_num_scheduled_tokens=", "CachedRequestData(req_ids=")
#: the batch fields of a dump (:func:`parse_scheduler_output`'s)
BATCH_KEYS = ("scheduled_spec_decode_tokens", "num_scheduled_tokens",
              "total_num_scheduled_tokens", "req_ids", "new_req_ids")


def read(path: Path) -> Imported:
    """Read ``path`` as a plain log and add one ``crash_dump`` event per vLLM crash dump; the
    exception chain after a dump is that dump's (its event joins the dump's).

    Raises CaptureFormatError as :func:`forensics.importers.logs.read` does (a dump's batch
    that cannot be read, a request named twice or a number past int64, is unknown, saying why:
    a client's request id may spell such an entry, and refusing the log lost all its crashes).
    """
    imported = plain_logs.read(path)
    dumps = _Dumps(path.name, {e["last_line"] for e in imported.events if "exception" in e})
    for number, text, cut in plain_logs.text_lines(path):
        dumps.line(number, text.rstrip("\r\n"), cut)
    _join_chains(dumps, imported.events)
    imported.events = sorted(imported.events + dumps.events,
                             key=lambda e: e.get("first_line", e["line"]))
    return imported


class _Dumps:
    """Collects dumps line by line: the config line, then the scheduler output line."""

    def __init__(self, source: str, ends: set[int]) -> None:
        self.source = source
        self.events: list[dict[str, Any]] = []
        #: each process tag's (:data:`PROCESS_RE`) last config line, until its scheduler
        #: output takes it (two engines' dumps interleave: one took the other's config)
        self.config: dict[str, dict[str, Any]] = {}
        self.ends = ends  # the last lines of the exception chains
        #: the process tag (:data:`PROCESS_RE`) of each dump's line and chain's last line
        self.tags: dict[int, str] = {}

    def line(self, number: int, raw: str, cut: bool = False) -> None:
        """Read one log line; ``cut``: it is the first part of a longer line
        (:data:`~forensics.importers.logs.MAX_LINE`): a scheduler output's batch is then
        unknown, and a config's number that reaches the cut is left out."""
        if number in self.ends:
            self.tags[number] = process_tag(raw)
        text = plain_logs.crash_body(raw)
        if text is None or plain_logs.quotes_requests(raw):
            return  # a prompt quoting a dump is no dump: a dump's line is vLLM's ERROR line
        config, output = CONFIG_RE.match(text), OUTPUT_RE.match(text)
        if config is not None:
            self._config_line(process_tag(raw), parse_config(config["version"],
                                                              config["config"], cut))
        elif output is not None:
            dump = {"kind": "crash_dump", "source": self.source, "line": number, "step": None,
                    "config": self.config.pop(process_tag(raw), {}),
                    **self._batch(output["dump"], cut)}
            dump["message"] = _message(dump)
            self.events.append(dump)
            self.tags[number] = process_tag(raw)

    def _config_line(self, tag: str, config: dict[str, Any]) -> None:
        """Keep the config line of the process ``tag`` for its next scheduler output: of the
        latest :data:`MAX_PENDING` processes whose output has not come (the oldest dropped)."""
        self.config.pop(tag, None)
        self.config[tag] = config
        if len(self.config) > MAX_PENDING:
            del self.config[next(iter(self.config))]

    def _batch(self, text: str, cut: bool) -> dict[str, Any]:
        """The batch of a scheduler output line; each field ``unknown`` for a cut line (what
        its part holds is not what the line held: a dict it opens is not closed, or holds
        fewer entries), with ``cut`` saying why, and for one read wrong (:func:`misread`: a
        request id told apart from the dicts' text wrong), with ``unread`` saying why."""
        if cut:
            return {**dict.fromkeys(BATCH_KEYS, UNKNOWN), "cut": plain_logs.CUT}
        twice = spelled_twice(text)
        if twice is not None:
            return {**dict.fromkeys(BATCH_KEYS, UNKNOWN), "unread": (
                f"its line spells {twice} more than once: a request id holds that text, so "
                "which is the dump's own field is not known")}
        try:
            batch = parse_scheduler_output(text)
        except CaptureFormatError as exc:  # a client's request id may spell such an entry
            return {**dict.fromkeys(BATCH_KEYS, UNKNOWN), "unread": (
                f"{exc}, so its batch is not read: a request id in it may hold that text")}
        why = misread(batch)
        if why is not None:
            return {**dict.fromkeys(BATCH_KEYS, UNKNOWN), "unread": (
                f"{why}: a request id in it is not told apart from the dicts' text")}
        return batch


def misread(batch: dict[str, Any]) -> str | None:
    """Why the batch read from a dump (:func:`parse_scheduler_output`) cannot be the one vLLM
    dumped, or None: its requests' counts do not add up to its total, one is below 1 (vLLM
    lists only requests it schedules a token of: an id ``a: 0, b`` split one request into
    two, "3 request(s) scheduled" of 2, the total still met; ``a: -1, b`` and ``c: 1, d``
    likewise), or its drafts name a request its counts do not (it drafts only for requests it
    schedules)."""
    total, counts = batch["total_num_scheduled_tokens"], batch["num_scheduled_tokens"]
    if total is not None and sum(counts.values()) != total:
        return (f"the {len(counts)} request(s) read of its num_scheduled_tokens schedule "
                f"{sum(counts.values())} tokens, not its total_num_scheduled_tokens {total}")
    below = next((count for count in counts.values() if count < 1), None)
    if below is not None:
        return (f"a request read of its num_scheduled_tokens schedules {below} tokens (vLLM "
                "lists only the requests it schedules a token or more of)")
    unscheduled = len(set(batch["scheduled_spec_decode_tokens"]) - set(counts))
    for key, field in (("req_ids", "CachedRequestData(req_ids=[...])"),
                       ("new_req_ids", "NewRequestData(req_id=...)")):
        listed = len(set(batch[key]) - set(counts))
        if listed:
            return (f"{listed} request(s) read of its {field} are not among those read of "
                    "its num_scheduled_tokens (vLLM lists there only the requests it schedules)")
    if unscheduled:
        return (f"{unscheduled} request(s) read of its scheduled_spec_decode_tokens are not "
                "among those read of its num_scheduled_tokens (vLLM schedules drafts only for "
                "requests it schedules)")
    return None


def process_tag(raw: str) -> str:
    """The process tag a log line begins with (``(EngineCore_DP0 pid=196)``), or ""."""
    found = PROCESS_RE.match(raw)
    return found.group(0) if found else ""


def _join_chains(found: _Dumps, events: list[dict[str, Any]]) -> None:
    """Move into each dump the first exception chain that ends after its line (its exception,
    location, source line; a CUDA assert's condition it joined), taking that chain's event
    out of ``events``: one crash, one event; none when a later dump of its process, or of the
    chain's, comes before that chain ends (the chain is that later dump's: the engine ran on
    after the first). A chain logged by a process that dumped is first its own dumps' (two
    engines' tracebacks may come in another order than their dumps), then what is left is
    matched in line order. Linear: one pass over each process's dumps and chains, one more."""
    dumps, tags = found.events, found.tags
    lines: dict[str, list[int]] = {}  # process tag -> the lines of its dumps, in order
    of: dict[str, list[dict[str, Any]]] = {}  # process tag -> its dumps, in order
    for dump in dumps:
        lines.setdefault(tags[dump["line"]], []).append(dump["line"])
        of.setdefault(tags[dump["line"]], []).append(dump)
    chains: dict[str, list[int]] = {}  # process tag -> the indices of its chains, in order
    for k, event in enumerate(events):
        if "exception" in event and tags.get(event["last_line"], "") in lines:
            chains.setdefault(tags[event["last_line"]], []).append(k)
    taken: dict[int, int] = {}  # chain index -> the line of the dump that took it
    for tag, own in chains.items():
        _match(events, of[tag], own, (tags, lines), taken)
    given = set(taken.values())
    _match(events, [d for d in dumps if d["line"] not in given],
           [k for k, event in enumerate(events) if "exception" in event and k not in taken],
           (tags, lines), taken)
    events[:] = [event for k, event in enumerate(events) if k not in taken]


def _match(events: list[dict[str, Any]], dumps: list[dict[str, Any]], chains: list[int],
           where: tuple[dict[int, str], dict[str, list[int]]], taken: dict[int, int]) -> None:
    """Give each dump of ``dumps`` (in line order) the first chain of ``chains`` (indices into
    ``events``, in order) that ends after it, unless a later dump of its process, or of the
    chain's, comes before that chain ends (``where``: each line's process tag, each tag's dump
    lines); each chain given is added to ``taken``. One pass over both lists."""
    tags, lines = where
    at = 0
    for dump in dumps:
        while at < len(chains) and events[chains[at]]["last_line"] <= dump["line"]:
            at += 1
        if at == len(chains):
            break
        chain = events[chains[at]]
        own = {tags[dump["line"]], tags.get(chain["last_line"], "")}
        if any(_dumped_between(lines.get(tag, []), dump["line"], chain["last_line"])
               for tag in own):
            continue  # a later dump's chain
        dump.update({key: chain[key] for key in CHAIN_KEYS if key in chain})
        if chain["kind"] == "cuda_assert":
            dump["assertion"] = chain.get("detail")
        dump.update(last_line=chain["last_line"], message=_message(dump))
        taken[chains[at]] = dump["line"]
        at += 1


def _dumped_between(lines: list[int], first: int, last: int) -> bool:
    """Whether a line of ``lines`` (in order) lies after ``first`` and before ``last``."""
    from bisect import bisect_right

    at = bisect_right(lines, first)
    return at < len(lines) and lines[at] < last


def parse_config(version: str, text: str, cut: bool = False) -> dict[str, Any]:
    """The facts of a ``VllmConfig`` string: version, model, speculative method and tokens,
    tensor parallel size (absent fields left out; with ``cut``, ``text`` is a cut line's
    first part, and a value reaching its end, which may go on past the cut, is left out; one
    the line spells more than once, its own and a model path's or name's, is unknown)."""
    facts: dict[str, Any] = {"vllm": version}
    for name, pattern in CONFIG_FIELDS.items():
        if name in CONFIG_NAMES and len(CONFIG_NAMES[name].findall(text)) > 1:
            facts[name] = UNKNOWN  # read first, a draft model's path said 9 of a dump of 4
            continue
        found = pattern.search(text)
        if found is None or (cut and found.end() == len(text)):
            continue
        value = found["v"]
        number = _int(value) if value.isdigit() else value
        if number is not None:
            facts[name] = number
    return facts


def spelled_twice(text: str) -> str | None:
    """The first text of :data:`COUNTED_FIELDS` (``NAME=``: a field of a dumped
    ``SchedulerOutput`` the batch is read from) that ``text`` spells more than once, or None.
    vLLM prints each once; a client's request id (``X-Request-Id``), printed unquoted as a
    dict's key and quoted in its lists, may spell one too: read first,
    ``scheduled_spec_decode_tokens={}`` in an id said "0 of 0 spec-decode token(s) -1" of a
    batch whose drafts were all -1."""
    for name in COUNTED_FIELDS:
        if len(re.findall(rf"\b{re.escape(name)}", text)) > 1:
            return name
    return None


def parse_scheduler_output(text: str) -> dict[str, Any]:
    """The batch and the scheduled spec-decode tokens of a dumped ``SchedulerOutput``."""
    spec = _dict(text, "scheduled_spec_decode_tokens", LIST_RE, _ids)
    counts = _dict(text, "num_scheduled_tokens", NUMBER_RE, _count)
    total = re.search(r"total_num_scheduled_tokens=(\d+)", text)
    return {"scheduled_spec_decode_tokens": spec, "num_scheduled_tokens": counts,
            "total_num_scheduled_tokens": _int(total.group(1)) if total else None,
            "req_ids": _cached_ids(text),
            "new_req_ids": list(between(text, "NewRequestData(req_id=", ","))}


def _cached_ids(text: str) -> list[str]:
    """The ids of ``CachedRequestData(req_ids=[...])`` as ``repr`` printed them (an id holding
    ``'`` in double quotes; none: ``[]``).

    Raises CaptureFormatError when the list is not one of printed strings."""
    opener = "CachedRequestData(req_ids=["
    at = text.find(opener)
    if at < 0:
        return []
    ids = quoted_list(text, at + len(opener))
    if ids is None:
        raise CaptureFormatError("its CachedRequestData(req_ids=[...]) is not a list of "
                                 "quoted request ids")
    return ids


def between(text: str, opener: str, closer: str) -> Iterator[str]:
    """Each text between an ``opener`` and the next ``closer`` after it, left to right, the
    next search starting after that ``closer`` (what ``re.findall(opener + "([^closer]*)" +
    closer)`` finds, for a one-character ``closer``), in time linear in ``text``: a regex
    retries every opener when no closer follows and rescans the rest of the text each time."""
    at = text.find(opener)
    while at >= 0:
        start = at + len(opener)
        end = text.find(closer, start)
        if end < 0:
            return  # no closer after this opener, so none after any later one
        yield text[start:end]
        at = text.find(opener, end + len(closer))


def _dict(text: str, name: str, shape: re.Pattern[str], value: Any) -> dict[str, Any]:
    """``{key: value(text)}`` of a dumped dict ``name={k: v, ...}`` (keys unquoted, as vLLM's
    dump prints them, each kept as spelled: ``r1`` and ``r1 `` are two requests); read in
    linear time, entries that do not parse left out (:func:`_entries`).

    Raises CaptureFormatError naming ``name`` and a key it names twice (a Python dict prints
    each key once: a second entry would hide the first's value, its ``-1`` drafts)."""
    found = re.search(rf"\b{name}=\{{", text)
    if found is None:
        return {}
    entries: dict[str, Any] = {}
    for key, parsed in _entries(text, found.end(), shape, value):
        if isinstance(parsed, str):  # a number the dump prints that no int64 holds, or too many
            raise CaptureFormatError(f"the crash dump's {name} for request {show(key)} holds "
                                     f"{parsed} (vLLM prints int64 counts and ids)")
        if key in entries:
            raise CaptureFormatError(f"the crash dump's {name} names request {show(key)} "
                                     "twice (vLLM prints each request once)")
        entries[key] = parsed
    return entries


def _entries(text: str, at: int, shape: re.Pattern[str], value: Any) -> Iterator[
        tuple[str, Any]]:
    """The ``(key, value(v))`` entries of the dumped dict whose body begins at ``at``, to its
    ``}`` (:data:`CLOSE_RE`). A key is a client's request id, which may hold ``}``, ``, `` or
    ``: ``: an entry ends at a ``: `` followed by a value of ``shape`` that parses, then ``, ``
    or the dict's close; any other ``: `` is the key's (a brace in an id closed the dict
    early: "0 request(s) scheduled" of a batch of -1 drafts). Linear in ``text``."""
    key = at
    close = CLOSE_RE.search(text, at)  # the next close at or after ``at`` (searched on from it)
    while close is not None and close.start() > key:
        colon = text.find(": ", at)
        if colon < 0 or close.start() < colon:
            return  # the dict closed (or never does) before another entry
        at = colon + 2
        found = shape.match(text, at)
        parsed = value(found.group(0)) if found else None  # a key may be blank: " " is an id
        end = found.end() if found else at
        if parsed is None or not (text.startswith(", ", end) or CLOSE_RE.match(text, end)):
            continue  # this ": " is the key's
        yield text[key:colon], parsed
        key = at = end + (2 if text.startswith(", ", end) else 0)
        if close.start() < key:
            close = CLOSE_RE.search(text, key)


def _ids(text: str) -> list[int] | str | None:
    """The draft ids of one request's list; None when it is no list; why, when an id is past
    int64 or there are more than :data:`MAX_IDS` (dropping them made "2 of 2 drafts -1" of a
    list of three)."""
    found = IDS_RE.fullmatch(text.strip())
    if found is None:
        return None
    numbers = re.findall(r"-?\d+", found["ids"])
    if len(numbers) > MAX_IDS:
        return f"{len(numbers)} draft ids, more than {MAX_IDS}"
    ids = [_int(v) for v in numbers]
    if None in ids:
        return "a draft id past int64"
    return cast(list[int], ids)


def _count(text: str) -> int | str | None:
    """One request's scheduled tokens; None when it is no number; why, when it is past int64."""
    if not NUMBER_RE.fullmatch(text.strip()):
        return None
    count = _int(text.strip())
    return "a count past int64" if count is None else count


def _int(text: str) -> int | None:
    """The integer ``text`` when within int64, else None (left out, as a value that does not
    parse; a number of thousands of digits is never converted)."""
    value = plain_logs.number_of(text)
    return value if abs(value) <= plain_logs.MAX_INT else None


def _message(dump: dict[str, Any]) -> str:
    """One line: requests, drafts that are -1 (unknown, and why, for a cut line), and the
    exception when known."""
    spec = dump["scheduled_spec_decode_tokens"]
    if spec == UNKNOWN:
        text = (f"vLLM crash dump: requests scheduled and spec-decode tokens unknown "
                f"({dump.get('cut') or dump.get('unread')})")
    else:
        flat = [t for ids in spec.values() for t in ids]
        text = (f"vLLM crash dump: {len(dump['num_scheduled_tokens'])} request(s) scheduled, "
                f"{sum(t == -1 for t in flat)} of {len(flat)} spec-decode token(s) -1")
    if dump.get("exception"):
        text += f"; {dump['exception']}"
    return text[:500]
