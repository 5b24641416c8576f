"""``redact(capture, out)``: a capture fit to share, with the same evidence.

What changes, and what never does:

- **token ids** (:data:`TOKEN_FIELDS`: sampled, input, device, draft and output ids, their
  ``_after`` copies, and the ``min``/``max`` of token summary records) in ``[0, D)`` go through
  one keyed random permutation of ``[0, D)``, where ``D`` is the smallest token bound in the
  capture (every ``vocab_size`` and ``num_embeddings``): the same id maps to the same id
  everywhere, so equalities survive. The permutation is a single cycle, so no id maps to itself.
  Negative values (``-1`` placeholders), values at or past ``D`` (out-of-range ids, bounds such
  as a ``vocab_size`` sentinel) stay exactly as they were. Positions and counts are never
  touched. The key is drawn at random for each run and never written.
- **request ids** become pseudonyms ``anon-<n>``, numbered in order of first appearance, the
  same everywhere in the capture.
- **manifest** (:func:`scrub_manifest`): numbers and booleans stay (``pid``s go); strings stay
  only under the keys of :data:`SAFE_STRING_KEYS` and only when they hold no path; host names,
  paths, model names and notes go, unless named with ``keep`` (a dotted field such as
  ``model.name``). A ``redaction`` entry says what was done and which fields were dropped.
- **events**: the same rule (``events.message`` etc. in ``keep`` keeps an event field).
- summary records keep their integer fields and ``tensor``; other string fields go.
"""

from __future__ import annotations

import itertools
import os
import secrets
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from forensics.evidence import Evidence, evidence_of, publish, reference
from forensics.records import Record

if TYPE_CHECKING:
    from forensics.api_types import CaptureArg

#: per site: the fields that hold token ids (their ``<field>_after`` copies too)
TOKEN_FIELDS: dict[str, tuple[str, ...]] = {
    "batch_change": (),
    "prepare_input_ids": ("prev_sampled_token_ids", "input_ids", "input_ids_device",
                          "draft_token_ids"),
    "async_output": ("sampled_token_ids_cpu", "output_token_ids", "output_tail"),
    "embedding": ("input_ids",),
}
#: fields that hold request ids
REQUEST_FIELDS = ("req_ids", "prev_req_ids", "prev_req_id_to_index")
#: fields that bound token ids
TOKEN_BOUNDS = ("vocab_size", "num_embeddings")
#: manifest and event keys whose string values are kept (when they hold no path)
SAFE_STRING_KEYS = frozenset({
    "creator", "created", "python", "forensics", "vllm", "torch", "method", "mode", "sites",
    "scenario", "speculative", "kind", "site", "function", "kv_cache_dtype", "hardware",
    "variants"})
#: numeric keys that identify a process or a machine: dropped
DROPPED_NUMBER_KEYS = frozenset({"pid", "ppid", "uid", "gid", "port"})
PSEUDONYM = "anon-{}"


@dataclass
class RedactResult:
    """What :func:`redact` wrote."""

    path: Path
    records: int
    token_domain: int
    request_ids: int
    dropped: list[str]
    seconds: float
    evidence: Evidence


def redact(capture: CaptureArg, out: str | os.PathLike[str], keep_manifest: Sequence[str] = (),
           variants: Sequence[str] | None = None, *, force: bool = False,
           progress: bool = False) -> RedactResult:
    """Write at ``out`` a redacted copy of ``capture`` (see the module docstring) whose replay
    through ``variants`` (default ``upstream`` and ``patched``) gives the same verdicts and
    first findings.

    ``keep_manifest``: dotted manifest fields (``model.name``) or event fields
    (``events.message``) kept as they are.

    Returns:
        A :class:`RedactResult`.
    Raises:
        CaptureFormatError: ``capture`` is not a readable capture.
        OutputExistsError: ``out`` exists without ``force``, or is the input capture.
        EvidenceChangedError: the redacted capture would not replay to the same evidence.
    """
    start = time.perf_counter()
    cap, names, result = reference(capture, out, variants, force, progress)
    expected = evidence_of(result)
    redactor = Redactor(token_domain(cap), keep=keep_manifest)
    manifest = redactor.manifest(cap.manifest)
    events = [redactor.event(e) for e in cap.events]
    path = publish(out, redactor.records(cap), manifest, events, expected, names, force,
                   progress)
    return RedactResult(path, len(cap), redactor.domain, len(redactor.pseudonyms),
                        sorted(redactor.dropped), time.perf_counter() - start, expected)


def token_domain(records: Iterable[Record]) -> int:
    """The smallest token bound of ``records``: ids below it are in range at every site.

    Returns 0 (nothing is permuted) when no record carries a token bound.
    """
    bounds = [int(r[name]) for r in records for name in TOKEN_BOUNDS if name in r]
    return max(0, min(bounds, default=0))


def cyclic_permutation(size: int, key: bytes) -> np.ndarray:
    """A random single-cycle permutation of ``[0, size)`` drawn from ``key`` (no fixed point
    when ``size >= 2``): ``order[i] -> order[i + 1]`` around a random order."""
    order = np.random.default_rng(int.from_bytes(key, "big")).permutation(size)
    table = np.empty(size, dtype=np.int64)
    table[order] = np.roll(order, -1)
    return table


@dataclass
class Redactor:
    """One redaction: the permutation of ``[0, domain)``, the pseudonyms, the kept fields."""

    domain: int
    keep: Sequence[str] = ()
    key: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)
    pseudonyms: dict[str, str] = field(default_factory=dict)
    dropped: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.table = cyclic_permutation(self.domain, self.key)

    def ids(self, values: Any) -> Any:
        """Token ids mapped: an array keeps its dtype and shape; a (ragged) list stays a list;
        values outside ``[0, domain)`` are unchanged."""
        if isinstance(values, list):
            return self._ragged(values)
        if isinstance(values, (int, np.integer)):
            return int(self.table[values]) if 0 <= values < self.domain else int(values)
        array = np.asarray(values)
        inside = (array >= 0) & (array < self.domain)
        mapped = array.copy()
        mapped[inside] = self.table[array[inside]].astype(array.dtype)
        return mapped

    def _ragged(self, lists: list[list[int]]) -> list[list[int]]:
        """Lists of ids mapped through one flat array (a Python call per list, not per id)."""
        lengths = [len(row) for row in lists]
        flat = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int64,
                           count=sum(lengths))
        mapped = self.ids(flat).tolist()
        out, at = [], 0
        for n in lengths:
            out.append(mapped[at:at + n])
            at += n
        return out

    def request(self, rid: str | None) -> str | None:
        """The pseudonym of request id ``rid`` (None stays None)."""
        if rid is None:
            return None
        if rid not in self.pseudonyms:
            self.pseudonyms[rid] = PSEUDONYM.format(len(self.pseudonyms))
        return self.pseudonyms[rid]

    def records(self, records: Iterable[Record]) -> Iterator[Record]:
        """``records`` redacted, one by one (the originals are not modified)."""
        for record in records:
            yield self.record(record)

    def record(self, record: Record) -> Record:
        """One record redacted: token ids permuted, request ids pseudonymised."""
        if record.summary:
            return Record(record.site, record.step, record.rank, self._summary(record), True)
        names = token_fields(record.site)
        tokens = {*names, *(f"{name}_after" for name in names)}
        fields = {}
        for name, value in record.fields.items():
            base = name.removesuffix("_after")
            if name in tokens:
                value = self.ids(value)
            elif base in REQUEST_FIELDS:
                value = self._requests(value)
            fields[name] = value
        return Record(record.site, record.step, record.rank, fields)

    def _requests(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {self.request(k): v for k, v in value.items()}
        return [self.request(v) for v in value]

    def _summary(self, record: Record) -> dict[str, Any]:
        """Integer fields and ``tensor`` kept; ``min``/``max`` permuted on token sites."""
        from forensics.sites import get_site

        token_site = get_site(record.site).summary_bound in TOKEN_BOUNDS
        fields = {}
        for name, value in record.fields.items():
            if name in ("min", "max") and token_site:
                fields[name] = self.ids(value)
            elif isinstance(value, (int, np.integer)) or name == "tensor":
                fields[name] = value
            else:
                self.dropped.add(f"records.{record.site}.{name}")
        return fields

    def manifest(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """``manifest`` scrubbed, with a ``redaction`` entry (never the key)."""
        kept = scrub(manifest, self.keep, "", self.dropped)
        kept["redaction"] = {
            "redacted": True, "creator": "forensics redact",
            "token_ids": f"ids in [0, {self.domain}) mapped by a keyed random single-cycle "
                         "permutation (key not stored); ids < 0 or >= the bound unchanged",
            "request_ids": "consistent pseudonyms anon-<n>, in order of first appearance",
            "manifest_and_events": "host names, paths, pids and free text dropped",
            "dropped": sorted(self.dropped),
            "kept_on_request": sorted(self.keep),
        }
        return kept

    def event(self, event: dict[str, Any]) -> dict[str, Any]:
        """An event scrubbed like the manifest (its fields are ``events.KEY``)."""
        return scrub(event, self.keep, "events.", self.dropped)


def scrub(entries: dict[str, Any], keep: Sequence[str], prefix: str,
          dropped: set[str]) -> dict[str, Any]:
    """``entries`` with only shareable values (see the module docstring); the dotted names of
    what went are added to ``dropped``."""
    out: dict[str, Any] = {}
    for key, value in entries.items():
        name = f"{prefix}{key}"
        if name in keep:
            out[key] = value
        elif isinstance(value, dict):
            out[key] = scrub(value, keep, f"{name}.", dropped)
        elif _shareable(key, value):
            out[key] = value
        else:
            dropped.add(name)
    return out


def _shareable(key: str, value: Any) -> bool:
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, (int, float)):
        return key not in DROPPED_NUMBER_KEYS
    if isinstance(value, str):
        return key in SAFE_STRING_KEYS and not _looks_like_path(value)
    if isinstance(value, list):
        return all(_shareable(key, v) for v in value)
    return False


def _looks_like_path(text: str) -> bool:
    return "/" in text or "\\" in text or text.startswith("~")


def token_fields(site: str) -> tuple[str, ...]:
    """The fields of ``site`` that hold token ids: :data:`TOKEN_FIELDS`, else the
    ``TOKEN_ID_FIELDS`` its own module declares (Model Runner V2's sites).

    Raises:
        KeyError: the site declares none (a redaction must never leave ids unpermuted).
    """
    import importlib

    from forensics.sites import get_site

    if site in TOKEN_FIELDS:
        return TOKEN_FIELDS[site]
    module = importlib.import_module(get_site(site).upstream.__module__)
    return tuple(module.TOKEN_ID_FIELDS)
