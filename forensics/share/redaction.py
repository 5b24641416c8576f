"""``redact(capture, out)``: a capture fit to share, with the same evidence.

What changes, and what never does:

- **token ids** (:func:`token_fields`, the fields each site's schema flags
  ``token_ids``: sampled, input, device, draft and output ids, their
  ``_after`` copies, and a summary record's ``min``/``max`` of a tensor of token ids) in
  ``[0, D)`` go through
  one keyed random permutation of ``[0, D)``, where ``D`` is the smallest token bound in the
  capture (every field flagged ``token_bound``): the same id maps to the same id
  everywhere, so equalities survive. The permutation is a single cycle over ``[1, D)``, so no
  id but 0 maps to itself. Token 0 stays, as negative values (``-1`` placeholders) and values
  at or past ``D`` (out-of-range ids, bounds such as a ``vocab_size`` sentinel) do: vLLM's own
  code writes it (V1's clamp of a ``-1`` placeholder before the embedding), and a permuted 0
  read as a token nobody wrote (``unwritten_input``) where the original showed the clamp
  (``clamped_placeholder``). Positions and counts are never
  touched. The key is drawn at random for each run and never written. Redaction never fails
  open: a domain too small to permute (``D < 3``), or bounds that disagree across records (two
  values of one bound, or fewer embedding rows than vocabulary), refuse
  (:class:`RedactionRefusedError`).
- **request ids** become pseudonyms ``anon-<n>``, numbered in order of first appearance, the
  same everywhere in the capture.
- **manifest** (:func:`scrub`), by an allow-list of values (:mod:`forensics.share.shareable`): a
dict
  key at any depth stays only when it is one the toolkit writes, and a string only when it is
  in a closed vocabulary (event kinds, site names, vLLM's speculative methods, strict version
  strings...); numbers and booleans stay (``pid``s go); host names, paths, model names, notes,
  hardware and build tags go, unless named with ``keep`` (a dotted field such as
  ``model.name``). A ``redaction`` entry says what was done and which fields were dropped
  (an unknown key is listed as ``*``, never by name). A fact the writer would fill in from
  this machine (``created``, ``creator``, the versions of Python, forensics, vLLM and torch)
  that went, or was never there, is ``unknown`` (:func:`unfilled`), never this machine's.
- **events**: the same rule (``events.message`` etc. in ``keep`` keeps an event field),
  except the process that wrote each, which becomes a pseudonym ``process-<n>`` (one per
  process, so a process that died without the probe's stop still reads so), and vLLM's and
  torch's own error text (:func:`public_error_text`: the assert, the
  exception type and message in :data:`PUBLIC_ERROR_FIELDS`), which maintainers search for:
  it is kept with paths, hosts, addresses and ids stripped out of it, and only as far as its
  words are vLLM's, torch's and CUDA's own (:mod:`forensics.share.error_text`).
- summary records keep their token ids permuted (their ``min``/``max`` where the tensor they
  describe holds ids, as the site's schema declares; the pair in its order, :func:`in_order`),
  the integers of a name the toolkit
  knows as they are (the bound, the importer's ``line``, the probe line's counts and
  positions), and a ``tensor`` that names a known field; an integer of another name goes
  (it may be an id, and a count permuted would be a false number), as other strings do.
- the flight recorder's ``kernel_launch`` and ``kernel_summary`` events go (a launch holds
  its tensors' contents, token ids among them), listed with the dropped fields (as
  ``kernel_launch events``); the manifest is written again once every record and event is,
  so its list names what went from them too.
- the records of a site this install does not know (a plugin's) go (which of their fields
  hold token ids is not known), listed with the dropped fields, with their count.
"""

from __future__ import annotations

import itertools
import math
import os
import re
import secrets
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from forensics.digits import plain_int
from forensics.errors import ForensicsError
from forensics.escaping import terminal
from forensics.importers.tracebacks import REPORTS
from forensics.known.guard_bounds import GUARD_EVENT_KINDS
from forensics.manifest_facts import UNKNOWN
from forensics.records import Record
from forensics.share.error_text import (
    PSEUDONYM,
    PUBLIC_ERROR_FIELDS,
    error_words,
    public_error_text,
)
from forensics.share.evidence import Evidence, evidence_of, publish, reference
from forensics.share.guard_echo import guard_echoes, said_value
from forensics.share.shareable import (
    REQUEST_FIELDS,
    WRITTEN,
    id_keys,
    shareable_key,
    shareable_tensor,
    shareable_value,
    site_field_names,
)
from forensics.sites import SITES
from forensics.sites import get_site as site_schema

if TYPE_CHECKING:
    from forensics.api_types import CaptureArg

#: the pseudonym of a process that wrote events
PROCESS_PSEUDONYM = "process-{}"
class RedactionRefusedError(ForensicsError, ValueError):
    """The capture cannot be redacted without leaving token ids as they are."""


def token_fields(site: str) -> tuple[str, ...]:
    """The fields of ``site`` that hold token ids (their ``<field>_after`` copies too): the one
    place redaction reads them."""
    return tuple(site_schema(site).token_fields)
#: numeric keys that identify a process or a machine: dropped
DROPPED_NUMBER_KEYS = frozenset({"pid", "ppid", "uid", "gid", "port"})
#: the kind of an event whose own kind was not shareable
REDACTED_KIND = "redacted"
#: the versions the writer (:func:`forensics.store.manifest.build_manifest`) fills in from this
#: machine when a manifest names none, as it does ``created`` and ``creator``
FILLED = ("python", "forensics", "vllm", "torch")
#: a guard event's integers (:meth:`Redactor.guard_fields`): the batch row, the value out of
#: range and the bound it was held to
GUARD_FIELDS = ("row", "value", "bound")


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
        OutputExistsError: ``out`` exists without ``force``.
        ConfigurationError: ``out`` is the input capture or lies inside it; a field of
            ``keep_manifest`` names no field of the capture's manifest or events.
        EvidenceChangedError: the redacted capture would not replay to the same evidence.
        PatchApplyError: a ``vllm+PATH.diff`` changed while it ran (each is named by its file
            name and digest: :func:`forensics.variants.diffs_read_once`).
    """
    from forensics.variants import DEFAULT_VARIANTS, diffs_read_once

    kept = [keep_manifest] if isinstance(keep_manifest, str) else keep_manifest  # one, not 'm'
    with diffs_read_once(variants or DEFAULT_VARIANTS) as names:  # one diff, both replays
        return _redact(capture, out, kept, names, force, progress)


def _redact(capture: CaptureArg, out: str | os.PathLike[str], keep_manifest: Sequence[str],
            variants: Sequence[str], force: bool, progress: bool) -> RedactResult:
    """:func:`redact`, each variant as its replays name it."""
    start = time.perf_counter()
    cap, names, result = reference(capture, out, variants, force, progress,
                                   check=lambda cap: refuse_unkept(cap, keep_manifest))
    expected = shareable_evidence(evidence_of(result, crash=True), result)
    redactor = Redactor(token_domain(cap, f"capture '{terminal(cap.path)}'"), keep=keep_manifest)
    # the flight recorder's launches hold tensor contents (token ids among them): not shared
    redactor.dropped.update(f"{e['kind']} events" for e in cap.kernel_events)
    # a site this install does not know: which of its fields hold token ids is not known
    redactor.dropped.update(f"{count} record(s) of site {site!r} (not known to this install)"
                            for site, count in cap.unknown_sites.items())
    if cap.truncated:  # a cut tail was never read: nothing of it can be kept
        redactor.dropped.add(f"the ends of {len(cap.truncated)} file(s) cut short (not read)")
    redactor.not_judged = not_kept(cap)
    manifest = redactor.manifest(cap.manifest)
    # events are redacted as publish writes them, after every record: by then the redactor
    # knows every request id of the capture, and takes each out of the events' error text;
    # the manifest is written again then, naming what went from the events and records too
    events = (redactor.event(e) for e in cap.events)
    path = publish(out, redactor.records(cap), manifest, events, expected, names, force,
                   progress, final=lambda: redactor.manifest(cap.manifest))
    return RedactResult(path, len(cap), redactor.domain, len(redactor.pseudonyms),
                        sorted(redactor.dropped), time.perf_counter() - start, expected)


def not_kept(cap: Any) -> dict[str, Any]:
    """What ``cap`` held that no variant judged and a redaction cannot keep, for the redacted
    capture's readers to say (:func:`~forensics.store.unjudged.redacted_unjudged`): the
    records of sites not known here (which fields hold token ids is not known) and the number
    of files cut short (their names hold hosts and pids), with what ``cap`` says its own
    original held so; ``{}`` when there is none."""
    from forensics.store.unjudged import redacted_unjudged

    before = redacted_unjudged(cap.manifest) or {"not_known": {}, "cut": 0}
    sites = dict(before["not_known"])
    for site, count in cap.unknown_sites.items():
        sites[site] = sites.get(site, 0) + count
    cut = before["cut"] + len(cap.truncated)
    return {"not_known": sites, "cut": cut} if sites or cut else {}


def refuse_unkept(cap: Any, keep: Sequence[str]) -> None:
    """Refuse a field of ``keep`` that keeps nothing of ``cap``'s manifest or events (a
    misspelt ``model.nme``, a field under one redaction drops whole): the redacted manifest's
    ``kept_on_request`` named it as kept, and the field meant went.

    Raises:
        ConfigurationError: naming the field, the capture and the fields it may name.
    """
    from forensics.errors import ConfigurationError

    matched: set[str] = set()
    for entries, prefix in itertools.chain([(cap.manifest, "")],
                                           ((event, "events.") for event in cap.events)):
        scrub(entries, keep, prefix, set(), matched)
    for name in (name for name in keep if name not in matched):
        raise ConfigurationError(
            f"--keep-manifest '{terminal(name)}' names no field of the manifest or events of "
            f"capture '{terminal(cap.path)}' that redaction reaches, so nothing would be kept "
            f"for it; name a dotted manifest field such as "
            f"{_fields_like(name, cap.manifest)} or an event field such as 'events.message'")


def _fields_like(name: str, manifest: dict[str, Any]) -> str:
    """The dotted manifest fields closest to ``name`` (up to 3, quoted), else 'model.name'."""
    import difflib

    fields = list(itertools.islice(_dotted(manifest, ""), 100_000))
    close = difflib.get_close_matches(name, fields, n=3) or ["model.name"]
    return " or ".join(f"'{terminal(field)}'" for field in close)


def _dotted(entries: dict[str, Any], prefix: str) -> Iterator[str]:
    """The dotted names of ``entries``' fields, nested dicts' fields included."""
    for key, value in entries.items():
        yield f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _dotted(value, f"{prefix}{key}.")


def shareable_evidence(evidence: Evidence, result: Any) -> Evidence:
    """``evidence`` (of the replay ``result``) as the redacted capture gives it: a summary
    record's ``tensor`` that is not a known field name (dropped by :meth:`Redactor.record`)
    reads as its site's default. A full record's finding keeps its tensor, whatever it names
    (a buffer no record holds, such as V2's ``output_bin_counts``): redaction changes none."""
    from forensics.judge.findings import first_finding
    from forensics.sites import get_site

    first = {variant: finding if finding is None or known_tensor(finding["tensor"])
             or not _of_summary(result, first_finding(result.findings, variant, ("record",)))
             else {**finding, "tensor": get_site(finding["site"]).summary_tensor}
             for variant, finding in evidence.first.items()}
    return Evidence(evidence.verdicts, first, evidence.crash_verdict)


def _of_summary(result: Any, first: dict[str, Any] | None) -> bool:
    """Whether the first finding ``first`` (its ``record`` key) is of a summary record of the
    replay ``result`` (True where it names no record: the summary's default is kept)."""
    at = None if first is None else first.get("record")
    if not isinstance(at, int):
        return True
    return bool(result.records[at].summary)


def known_tensor(name: object) -> bool:
    """Whether ``name`` is a field name the toolkit knows (``out.<field>`` included)."""
    return isinstance(name, str) and shareable_key(name.removeprefix("out."))


def token_domain(records: Iterable[Record], where: str = "the capture") -> int:
    """The smallest token bound of ``records``: ids below it are in range at every site.

    Returns 0 (nothing to permute) when no record carries a token bound.
    Raises:
        RedactionRefusedError: a bound below 2 (nothing could be permuted), two values of one
            bound, or fewer embedding rows than vocabulary: ids would ship unchanged.
    """
    seen: dict[str, set[int]] = {}
    for record in records:
        for name in site_schema(record.site).token_bounds:
            if name in record:
                seen.setdefault(name, set()).add(int(record[name]))
    for name, values in seen.items():
        if len(values) > 1:
            raise RedactionRefusedError(
                f"{where}: records disagree on {name} ({sorted(values)[:4]}); token ids could "
                f"not be permuted consistently: fix or drop the records with the wrong {name}")
    vocab, rows = seen.get("vocab_size", set()), seen.get("num_embeddings", set())
    if vocab and rows and min(rows) < max(vocab):
        raise RedactionRefusedError(
            f"{where}: num_embeddings {min(rows)} is below vocab_size {max(vocab)}; ids between "
            f"them would ship unchanged: fix the records' num_embeddings")
    bounds = [v for values in seen.values() for v in values]
    if bounds and min(bounds) < 3:
        raise RedactionRefusedError(
            f"{where}: a token bound of {min(bounds)} (vocab_size/num_embeddings) leaves no ids "
            f"to permute besides token 0, which stays, so token ids would ship unchanged; fix "
            f"the records' bounds")
    return min(bounds, default=0)


def cyclic_permutation(size: int, key: bytes) -> np.ndarray:
    """A random single-cycle permutation of ``[0, size)`` drawn from ``key`` (no fixed point
    when ``size >= 2``): ``order[i] -> order[i + 1]`` around a random order."""
    order = np.random.default_rng(int.from_bytes(key, "big")).permutation(size)
    table = np.empty(size, dtype=np.int64)
    table[order] = np.roll(order, -1)
    return table


def token_table(domain: int, key: bytes) -> np.ndarray:
    """The map of token ids ``[0, domain)``: 0 to itself (vLLM's clamp writes it), the rest
    one random single cycle drawn from ``key`` (:func:`cyclic_permutation`)."""
    if domain == 0:
        return np.empty(0, dtype=np.int64)
    return np.concatenate([np.zeros(1, dtype=np.int64), 1 + cyclic_permutation(domain - 1, key)])


@dataclass
class Redactor:
    """One redaction: the permutation of ``[0, domain)``, the pseudonyms, the kept fields."""

    domain: int
    keep: Sequence[str] = ()
    key: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)
    pseudonyms: dict[str, str] = field(default_factory=dict)
    #: the pseudonym of each process that wrote events (its host and pid are private)
    processes: dict[str, str] = field(default_factory=dict)
    dropped: set[str] = field(default_factory=set)
    #: what the capture held unjudged that its redaction cannot keep (:func:`not_kept`)
    not_judged: dict[str, Any] = field(default_factory=dict)
    _finder: IdFinder | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.table = token_table(self.domain, self.key)

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
        tokens = set(token_fields(record.site))
        fields = {}
        for name, value in record.fields.items():
            base = name.removesuffix("_after")
            if name in tokens:
                value = self.ids(value)
            elif base in REQUEST_FIELDS:
                value = self._requests(value)
            fields[name] = value
        return Record(record.site, record.step, record.rank, fields)

    def finder(self) -> IdFinder:
        """The :class:`IdFinder` of every request id seen so far (:meth:`request`)."""
        if self._finder is None or self._finder.size != len(self.pseudonyms):
            self._finder = IdFinder(self.pseudonyms)
        return self._finder

    def _requests(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {self.request(k): v for k, v in value.items()}
        return [self.request(v) for v in value]

    def _summary(self, record: Record) -> dict[str, Any]:
        """A summary record's fields by what they are: its token ids permuted (those its site's
        schema declares, :meth:`~forensics.schema.SiteSchema.summary_ids`), the other integers
        of a name the toolkit knows (the bound, the importer's ``line``, the probe line's
        counts and positions, :attr:`~forensics.sites.base.LogLine.counts`) kept as they are,
        ``tensor`` kept when it names a known field; an integer of another name dropped (it
        may be an id, and a count permuted would be a false number), as a process's or a
        machine's number (:data:`DROPPED_NUMBER_KEYS`) and every other value are."""
        schema = site_schema(record.site)
        ids = schema.summary_ids(record.get("tensor"))
        plain = schema.log_line.counts if schema.log_line is not None else ()
        fields: dict[str, Any] = {}
        for name, value in record.fields.items():
            number = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
            if number and name in ids:
                fields[name] = self.ids(value)
            elif number and name not in DROPPED_NUMBER_KEYS and (shareable_key(name)
                                                                 or name in plain):
                fields[name] = value
            elif name == "tensor" and known_tensor(value):
                fields[name] = value
            else:
                known = shareable_key(name) or name in DROPPED_NUMBER_KEYS
                self.dropped.add(f"records.{record.site}.{name if known else '*'}")
        return in_order(record.fields, fields)

    def manifest(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """``manifest`` scrubbed, with a ``redaction`` entry (never the key)."""
        kept = unfilled(scrub(manifest, self.keep, "", self.dropped))
        kept["redaction"] = {
            "redacted": True, "creator": "forensics redact",
            "token_ids": self.token_text(),
            "request_ids": "consistent pseudonyms anon-<n>, in order of first appearance",
            "manifest_and_events": "host names, paths, pids and free text dropped",
            "dropped": sorted(self.dropped),
            "kept_on_request": sorted(self.keep),
        }
        if self.not_judged:
            kept["redaction"]["not_judged"] = self.not_judged
        return kept

    def token_text(self) -> str:
        """What was done to the token ids; that there were none when no record holds a token
        bound (``[1, 0)`` was said to be permuted)."""
        if not self.domain:
            return "none: no record holds token ids"
        return (f"ids in [1, {self.domain}) mapped by a keyed random single-cycle permutation "
                "(key not stored); ids <= 0 or >= the bound unchanged")

    def event(self, event: dict[str, Any]) -> dict[str, Any]:
        """An event scrubbed like the manifest (its fields are ``events.KEY``), its public
        error text kept without the capture's request ids (their pseudonyms instead: call it
        after :meth:`records`; dropped when the ids have more than :data:`MAX_ID_LENGTHS`
        lengths), paths, hosts and ids (:func:`public_error_text`); a ``kind`` outside the
        vocabulary becomes ``redacted``; a crash's reports of its death (``died``,
        ``engine_dead``) keep their lines, counts and public error text."""
        finder = self.finder()  # ids of too many lengths: the text goes, as any private one
        public: dict[str, Any] = {key: public_error_text(finder.replace(value))
                                  for key, value in event.items()
                                  if key in PUBLIC_ERROR_FIELDS and isinstance(value, str)
                                  and f"events.{key}" not in self.keep and finder.searchable}
        public.update({key: _public_report(value, finder) for key, value in event.items()
                       if key in REPORTS.values() and isinstance(value, dict)
                       and f"events.{key}" not in self.keep and finder.searchable})
        if "process" in event and "events.process" not in self.keep:
            public["process"] = self.process(event["process"])
        guarded = event.get("kind") in GUARD_EVENT_KINDS
        fields = self.guard_fields(event)
        public.update({**fields, **self._guard_text(event, public, fields)})
        rest = {key: value for key, value in event.items() if key not in public
                and not (guarded and key in GUARD_FIELDS and f"events.{key}" not in self.keep)}
        kept = {**scrub(rest, self.keep, "events.", self.dropped), **public}
        kept.setdefault("kind", REDACTED_KIND)
        return kept

    def guard_fields(self, event: dict[str, Any]) -> dict[str, Any]:
        """A guard event's :data:`GUARD_FIELDS` (none of another event): its ``row`` and
        ``bound`` as they are, its ``value`` permuted as the records' token ids are where its
        tensor holds them (a site's token field, or ``out.`` before one) and kept where the
        tensor is another of the site's; what is no int (or null), or the value of a tensor
        not known, goes, named in ``dropped``."""
        if event.get("kind") not in GUARD_EVENT_KINDS:
            return {}
        fields: dict[str, Any] = {}
        for key in (k for k in GUARD_FIELDS if k in event and f"events.{k}" not in self.keep):
            value = event[key]
            if value is not None and not plain_int(value):
                self.dropped.add(f"events.{key}")
            elif key != "value" or value is None:
                fields[key] = value
            elif (known := self._guard_value(event, value)) is not None:
                fields[key] = known
            else:
                self.dropped.add("events.value")
        return fields

    def _guard_text(self, event: dict[str, Any], public: dict[str, Any],
                    fields: dict[str, Any]) -> dict[str, str]:
        """A guard event's public text (its ``message``) saying its ``value`` as its field
        does where the field was mapped or dropped (:func:`said_value`); another event's, each
        guard message it echoes (the guard's raise) saying its value so; nothing otherwise."""
        value, texts = event.get("value"), {key: text for key, text in public.items()
                                            if key in PUBLIC_ERROR_FIELDS and isinstance(text, str)}
        if "events.value" in self.keep:
            return {}
        if event.get("kind") not in GUARD_EVENT_KINDS:
            return {key: self._echoed(text) for key, text in texts.items()}
        if not plain_int(value) or fields.get("value") == value:
            return {}
        return {key: said_value(text, event, fields.get("value")) for key, text in texts.items()}

    def _echoed(self, text: str) -> str:
        """``text`` with the value of each guard message in it said as its event would say it."""
        for said in guard_echoes(text):
            if (shown := self._guard_value(said, said["value"])) != said["value"]:
                text = said_value(text, said, shown)
        return text

    def _guard_value(self, event: dict[str, Any], value: int) -> int | None:
        """A guard event's value as the records' redaction maps it: permuted in one of its
        site's token fields (``out.`` before one, ``[i]`` after it), as it is in another of
        the site's tensors, None (it goes) in a tensor the site does not name."""
        site, tensor = event.get("site"), event.get("tensor")
        found = _ELEMENT.fullmatch(tensor) if isinstance(tensor, str) else None
        if site not in SITES or found is None:
            return None
        schema = site_schema(str(site))
        outputs = [str(getattr(spec, "name", spec)) for spec in schema.output_fields or ()]
        name = found["name"].removeprefix("out.")
        if name in token_fields(str(site)):
            return int(self.ids(value))
        known = site_field_names(schema) if found["name"] == name else outputs
        return value if name in known else None

    def process(self, name: object) -> str:
        """The pseudonym (``process-<n>``, in order of first appearance) of the process that
        wrote an event: dropped, every process's events read as one process's (a stop of one
        hid the death of another, and the redacted capture was refused)."""
        return self.processes.setdefault(str(name), PROCESS_PSEUDONYM.format(len(self.processes)))


_WORD = re.compile(r"\w")
#: a tensor a guard event names: ``NAME``, ``out.NAME``, with an element (``[5]``) or not
_ELEMENT = re.compile(r"(?P<name>[\w.]{1,100})(?:\[\d{1,20}\])?")


#: the most distinct lengths of request ids whose error text :class:`IdFinder` searches (real
#: ids have a few); past it the text is dropped
MAX_ID_LENGTHS = 64


class IdFinder:
    """Finds known ids (request ids) standing as words of their own in a text (no letter,
    digit or ``_`` on both sides of either end), in time linear in the text: at each place a
    word may start, one look-up per id length (at most :data:`MAX_ID_LENGTHS`; else
    ``searchable`` is false) that ends where a word may end, never a scan of every id. An id
    that is a word of vLLM's, torch's or CUDA's public vocabulary (:func:`error_words`: a
    request named ``gdn``) is not looked for: in the text that word is theirs (``in gdn
    fused_recurrent kernel`` became ``in anon-0 ...``, and ``known`` no longer matched it)."""

    def __init__(self, names: dict[str, str]) -> None:
        vocabulary = error_words()  # an id that is vLLM's own word (gdn) is that word there
        self.size = len(names)
        self.names = {rid: name for rid, name in names.items() if rid.lower() not in vocabulary}
        self.lengths = sorted({len(rid) for rid in names if rid}, reverse=True)
        self.searchable = len(self.lengths) <= MAX_ID_LENGTHS

    def replace(self, text: str) -> str:
        """``text`` with each id found replaced by its name (the longest id at a place)."""
        out, at, start = [], 0, 0
        while at < len(text):
            rid = self._at(text, at) if self._splits(text, at) else None
            if rid is None:
                at += 1
                continue
            out += [text[start:at], self.names[rid]]
            at = start = at + len(rid)
        return "".join([*out, text[start:]])

    def _at(self, text: str, at: int) -> str | None:
        """The longest known id that starts at ``at`` and ends where a word may end."""
        for length in self.lengths:
            end = at + length
            if end <= len(text) and self._splits(text, end) and text[at:end] in self.names:
                return text[at:end]
        return None

    @staticmethod
    def _splits(text: str, at: int) -> bool:
        """Whether a word may start or end at ``at`` (not between two word characters)."""
        return not (0 < at < len(text) and _WORD.match(text, at - 1) is not None
                    and _WORD.match(text, at) is not None)

def _public_report(report: dict[str, Any], finder: IdFinder) -> dict[str, Any]:
    """A crash's report of its death (its ``died``, ``engine_dead``:
    :func:`forensics.importers.tracebacks.report`): its line numbers and count, its messages'
    public error text (:func:`public_error_text`), as an event's own message is kept, and the
    note of a report read from a line cut short (its ``cut``, public text too: without it the
    redacted capture said the report whole)."""
    def said(entry: Any) -> dict[str, Any]:
        entry = entry if isinstance(entry, dict) else {}
        out = {key: entry[key] for key in ("line", "count")
               if type(entry.get(key)) is int}
        out.update({key: public_error_text(finder.replace(entry[key]))
                    for key in ("message", "cut") if isinstance(entry.get(key), str)})
        return out

    more = report.get("more")
    listed = [said(entry) for entry in more] if isinstance(more, list) else []
    return {**said(report), **({"more": listed} if listed else {})}


def scrub(entries: dict[str, Any], keep: Sequence[str], prefix: str,
          dropped: set[str], kept: set[str] | None = None) -> dict[str, Any]:
    """``entries`` with only shareable values (see the module docstring), no ids
    (:func:`~forensics.share.shareable.id_keys`); the dotted names of what went are added to
    ``dropped``, the names of ``keep`` that kept a field to ``kept``."""
    out: dict[str, Any] = {}
    for key, value in entries.items():
        name = f"{prefix}{key}"
        if name in keep:
            out[key] = value
            if kept is not None:
                kept.add(name)
        elif not shareable_key(key):  # a name of ours is named; another may be private
            dropped.add(name if key in WRITTEN else f"{prefix}*")
        elif key in id_keys():  # token or request ids outside a record: unmapped, so they go
            dropped.add(name)
        elif isinstance(value, dict):
            out[key] = scrub(value, keep, f"{name}.", dropped, kept)
        elif _shareable(key, value):
            out[key] = value
        else:
            dropped.add(name)
    return out


def in_order(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """A summary record's redacted fields ``after`` with its ``min`` and ``max`` in the order
    they had ``before`` (two ids permuted one by one: ``5, 900`` became ``672, 608``, a least
    value above the greatest)."""
    low, high = after.get("min"), after.get("max")
    if plain_int(low) and plain_int(high) and low > high and before["min"] <= before["max"]:
        after["min"], after["max"] = high, low
    return after


def unfilled(kept: dict[str, Any]) -> dict[str, Any]:
    """``kept`` with each fact the writer fills in from this machine when absent (the time,
    the creator, the installed versions: :data:`FILLED`) said ``unknown`` where it went (a
    dropped ``versions.vllm`` was written as the installed vLLM's)."""
    for key in ("created", "creator"):
        kept.setdefault(key, UNKNOWN)
    versions = kept.setdefault("versions", {})
    if isinstance(versions, dict):
        for name in FILLED:
            versions.setdefault(name, UNKNOWN)
    return kept


def _shareable(key: str, value: Any) -> bool:
    """Whether ``value`` (under ``key``) holds only public values: finite numbers (not process
    ids), booleans, and strings of a closed vocabulary
    (:func:`forensics.share.shareable.shareable_value`); under ``tensor``, a tensor a site's
    guard names (:func:`~forensics.share.shareable.shareable_tensor`)."""
    if key == "tensor" and shareable_tensor(value):
        return True
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, float) and not math.isfinite(value):
        return False  # NaN and infinities: no JSON holds them
    if isinstance(value, (int, float)):
        return key not in DROPPED_NUMBER_KEYS
    if isinstance(value, str):
        return shareable_value(value)
    if isinstance(value, list):
        return all(_shareable(key, v) for v in value)
    return False
