"""vLLM's crash dump in an engine log: ``dump_engine_exception`` (vLLM 0.32/0.33).

After an exception in ``execute_model`` vLLM logs, at ERROR level, three lines from
``vllm/logging_utils/dump_input.py``: ``Dumping input data for V1 LLM engine (vX) with config:
...``, ``Dumping scheduler output for model execution: SchedulerOutput(...)`` (tensors print as
shapes, token ids as counts) and ``Dumping scheduler stats: ...``, then the exception's
traceback. :func:`read` reads the log as :mod:`forensics.importers.logs` does and adds one
``crash_dump`` event per dump (and an ``engine_exception`` event for a fatal engine error logged
without a dump, with its exception and source line), carrying:

- ``scheduled_spec_decode_tokens``: request id -> the draft token ids scheduled;
- ``num_scheduled_tokens`` (the batch: request id -> tokens), ``total_num_scheduled_tokens``,
  ``req_ids`` (of the cached requests) and ``new_req_ids``;
- ``config``: the vLLM version, model, speculative method and tokens, tensor parallel size;
- ``exception``: the first ``...Error: ...`` line after the dump, ``location``: the last
  ``File ...`` line of its traceback, and ``source_line``: the source line under it (e.g. an
  ``assert``).

Every value is data: parsed with regular expressions, never evaluated.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from forensics.importers import Imported
from forensics.importers import logs as plain_logs
from forensics.store.guarded import iter_lines

#: vLLM's log prefix: ``(EngineCore pid=1) ERROR 12-02 10:46:44 [dump_input.py:72] ``
PREFIX_RE = re.compile(r"^(?:\([^)]*\)\s+)?(?:[A-Z]+\s+\d\d-\d\d\s+[\d:]+\s+\[[^\]]*\]\s?)?")
CONFIG_RE = re.compile(r"Dumping input data for V1 LLM engine \(v(?P<version>[^)\s]+)\) with "
                       r"config: (?P<config>.*)")
OUTPUT_RE = re.compile(r"Dumping scheduler output for model execution: (?P<dump>.*)")
DICT_RE = r"{name}=\{{(?P<body>[^{{}}]*)\}}"
IDS_RE = re.compile(r"\[(?P<ids>[-\d,\s]*)\]?")
INT_RE = re.compile(r"-?\d{1,18}")
QUOTED_RE = re.compile(r"'([^']*)'")
EXCEPTION_RE = re.compile(r"^(?:[\w.]+\.)?(?P<type>\w*(?:Error|Exception))(?::\s*(?P<text>.*))?$")
SOURCE_RE = re.compile(r"^\s{4}\S")
CONFIG_FIELDS = {"model": re.compile(r"^model='(?P<v>[^']*)'"),
                 "speculative": re.compile(r"SpeculativeConfig\(method='(?P<v>[^']*)'"),
                 "num_speculative_tokens": re.compile(r"num_spec_tokens=(?P<v>\d+)"),
                 "tensor_parallel_size": re.compile(r"tensor_parallel_size=(?P<v>\d+)")}
FATAL = "EngineCore encountered a fatal error"
MAX_IDS = 1 << 16  # draft ids kept per dump (a dump lists a handful per request)


def read(path: Path) -> Imported:
    """Read ``path`` as a plain log and add one ``crash_dump`` event per vLLM crash dump.

    Raises CaptureFormatError as :func:`forensics.importers.logs.read` does.
    """
    imported = plain_logs.read(path)
    dumps = _Dumps(path.name)
    for number, line, _complete in iter_lines(path, "log", max_line=plain_logs.MAX_LINE):
        dumps.line(number, line.decode("utf-8", errors="replace").rstrip("\r\n"))
    imported.events += dumps.events
    return imported


class _Dumps:
    """Collects dumps line by line: config, scheduler output, then the exception."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.events: list[dict[str, Any]] = []
        self.config: dict[str, Any] = {}
        self.open: dict[str, Any] | None = None  # a dump still waiting for its exception

    def line(self, number: int, raw: str) -> None:
        text = PREFIX_RE.sub("", raw, count=1)
        config, output = CONFIG_RE.search(text), OUTPUT_RE.search(text)
        if config is not None:
            self.config = parse_config(config["version"], config["config"])
        elif output is not None:
            self.open = {"kind": "crash_dump", "source": self.source, "line": number,
                         "step": None, "config": self.config,
                         **parse_scheduler_output(output["dump"])}
            self.open["message"] = _message(self.open)
            self.events.append(self.open)
            self.config = {}
        elif self.open is None and FATAL in text:
            self.open = {"kind": "engine_exception", "source": self.source, "line": number,
                         "step": None, "message": text.strip()[:500]}
            self.events.append(self.open)
        elif self.open is not None:
            self._exception_line(text)

    def _exception_line(self, text: str) -> None:
        """Keep the traceback's last source line and the first exception line."""
        assert self.open is not None
        if text.strip().startswith("File "):
            self.open["location"] = text.strip()[:500]
            return
        if SOURCE_RE.match(text):
            self.open["source_line"] = text.strip()[:500]
            return
        found = EXCEPTION_RE.match(text.strip())
        if found is not None and "exception" not in self.open:
            self.open["exception"] = text.strip()[:500]
            if self.open["kind"] == "crash_dump":
                self.open["message"] = _message(self.open)
            else:
                self.open["message"] = f"engine exception: {self.open['exception']}"
            self.open = None


def parse_config(version: str, text: str) -> dict[str, Any]:
    """The facts of a ``VllmConfig`` string: version, model, speculative method and tokens,
    tensor parallel size (absent fields left out)."""
    facts: dict[str, Any] = {"vllm": version}
    for name, pattern in CONFIG_FIELDS.items():
        found = pattern.search(text)
        if found is not None:
            value = found["v"]
            facts[name] = int(value) if value.isdigit() else value
    return facts


def parse_scheduler_output(text: str) -> dict[str, Any]:
    """The batch and the scheduled spec-decode tokens of a dumped ``SchedulerOutput``."""
    spec = _dict(text, "scheduled_spec_decode_tokens", "], ", _ids)
    counts = _dict(text, "num_scheduled_tokens", ", ", _count)
    total = re.search(r"total_num_scheduled_tokens=(\d+)", text)
    cached = re.search(r"CachedRequestData\(req_ids=\[(?P<ids>[^\]]*)\]", text)
    return {"scheduled_spec_decode_tokens": spec, "num_scheduled_tokens": counts,
            "total_num_scheduled_tokens": int(total.group(1)) if total else None,
            "req_ids": QUOTED_RE.findall(cached["ids"]) if cached else [],
            "new_req_ids": re.findall(r"NewRequestData\(req_id=([^,]*),", text)}


def _dict(text: str, name: str, separator: str, value: Any) -> dict[str, Any]:
    """``{key: value(text)}`` of a dumped dict ``name={k: v, ...}`` (keys unquoted, as vLLM's
    dump prints them); split on ``separator`` in linear time, entries that do not parse
    left out."""
    found = re.search(DICT_RE.format(name=name), text)
    if found is None:
        return {}
    entries: dict[str, Any] = {}
    for piece in found["body"].split(separator):
        key, colon, rest = piece.rpartition(": ")
        parsed = value(rest) if colon and key.strip() else None
        if parsed is not None:
            entries[key.strip()] = parsed
    return entries


def _ids(text: str) -> list[int] | None:
    found = IDS_RE.fullmatch(text.strip())
    if found is None:
        return None
    return [int(v) for v in re.findall(r"-?\d+", found["ids"])[:MAX_IDS]
            if len(v.lstrip("-")) <= plain_logs.MAX_DIGITS]


def _count(text: str) -> int | None:
    return int(text) if INT_RE.fullmatch(text.strip()) else None


def _message(dump: dict[str, Any]) -> str:
    """One line: requests, drafts that are -1, and the exception when known."""
    spec = dump["scheduled_spec_decode_tokens"]
    flat = [t for ids in spec.values() for t in ids]
    text = (f"vLLM crash dump: {len(dump['num_scheduled_tokens'])} request(s) scheduled, "
            f"{sum(t == -1 for t in flat)} of {len(flat)} spec-decode token(s) -1")
    if dump.get("exception"):
        text += f"; {dump['exception']}"
    return text[:500]
