"""Replay: records x variants -> outcomes (runs, never judges), then hands them to the judge.

Every non-summary record goes through every chosen variant on CPU. A variant's exception becomes
an ``index_error`` outcome (IndexError) or an ``error`` outcome (anything else) with the message
``"<ExceptionType>: <text>"``. Summary records are never replayed: every variant gets the same
bounds finding from them. Origins of sink findings, and the access a real-code ``IndexError``
came from, come from the ``upstream`` model, run here when it is not among the chosen variants.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from forensics.budget import DEFAULT_REPLAY_DEADLINE, in_capture, overall_clock
from forensics.built_on_read import BuiltOnRead
from forensics.collector import collector_paused
from forensics.errors import (
    AllocationBudgetError,
    CaptureFormatError,
    ConfigurationError,
    ForensicsError,
    reason,
)
from forensics.judge import findings as judge
from forensics.judge.sentinel import past_a_known_vocabulary
from forensics.libc import libc_function
from forensics.outcome import STATUSES, Outcome
from forensics.progress import Progress
from forensics.records import Record
from forensics.screening import ScreenUnsure
from forensics.sites import SINK, SITES, get_site, pipeline_key, site_order
from forensics.sites._common import RecordColumns, RunColumns
from forensics.sites.core import BatchRun
from forensics.variants import (
    DEFAULT_VARIANTS,
    Variant,
    refuse_one_diff_twice,
    resolve_variant,
)
from forensics.variants.models import ModelVariant
from forensics.variants.running import run_variant

if TYPE_CHECKING:
    import pandas as pd

    from forensics.api_types import ReplaySource, VariantsArg
    from forensics.judge.continuity import Continuity
    from forensics.judge.race import RaceCheck
    from forensics.store.reader import Capture

OUTCOME_COLUMNS = ("record", "variant", "site", "step", "rank", "status", "message")
#: records read, run and judged together: what is held at once beside the results
CHUNK = 2048

@dataclass
class ReplayResult:
    """What a replay produced. ``records`` are the records in pipeline order (a lazy sequence
    for a capture: each is decoded when accessed); ``outcomes`` holds each variant's status
    and message per record (columns :data:`OUTCOME_COLUMNS`, summary records left out; a
    record's full Outcome is ``variant.run(record)``); ``findings``, ``verdicts`` and
    ``bounds`` are the judge's; ``index`` gives each record's site, step, rank and summary flag
    without decoding it.

    ``outcomes`` and ``bounds``, a row per record and variant and per checked tensor (2 and
    4.5 million rows for a million records through two variants), are built from what the
    replay kept when first read (:class:`BuiltOnRead`): a replay read only for its verdicts
    and findings does not build them."""

    source: str
    records: Sequence[Record]
    variants: list[str]
    findings: pd.DataFrame
    verdicts: dict[str, dict[str, str]]
    outcomes: BuiltOnRead[pd.DataFrame] = BuiltOnRead()
    capture: Capture | None = None
    #: per variant, record and checked tensor: min/max used against [lower, upper) (columns
    #: :data:`forensics.judge.findings.BOUNDS_COLUMNS`), from the ranges the judge kept
    bounds: BuiltOnRead[pd.DataFrame | None] = BuiltOnRead(None)
    #: per record: ``site``, ``step``, ``rank``, ``summary`` (a DataFrame, one row per record)
    index: Any = None
    #: the token continuity check of the records (:mod:`forensics.judge.continuity`; its
    #: findings are in ``findings`` under every variant); None when not run
    continuity: Any = None
    #: the race check (:func:`forensics.judge.race.race_check`; its ``unwritten_input``
    #: findings are in ``findings`` under the baseline variant); None when not run
    race: Any = None
    #: the baseline variant's outputs (name -> array; None: it produced none) at the records
    #: the replay ran it on for presenting (the race check's writer records that kept no
    #: output), by record position: the judge and the conclusion read them, never run it
    baseline_outputs: dict[int, Mapping[str, Any] | None] = dataclasses.field(
        default_factory=dict)
    #: why records were left unjudged (``error`` outcomes ``not judged: ...``) when the
    #: replay's overall deadline cut its kernel worker (:func:`replay`'s ``deadline``); ""
    cut: str = ""
    #: per variant that says what it ran (its ``note()``: a diff's, which files of it ran)
    notes: dict[str, str] = dataclasses.field(default_factory=dict)
    #: per diff variant, the sites whose records ran the installed code (its ``as_installed()``)
    as_installed: dict[str, list[str]] = dataclasses.field(default_factory=dict)

    def shown_verdict(self, variant: str, site: str) -> str:
        """``variant``'s verdict at ``site`` as a table shows it: "(as installed)" beside it
        when the variant ran the installed code there ("" when it judged no such site)."""
        verdict = self.verdicts[variant].get(site, "")
        return f"{verdict} (as installed)" if site in self.as_installed.get(variant, ()) \
            else verdict

    @property
    def outcome_counts(self) -> dict[str, dict[str, int]]:
        """``{variant: {"ok": n, "index_error": n, "error": n}}`` over replayed records."""
        counts = {name: {status: 0 for status in STATUSES} for name in self.variants}
        sizes = self.outcomes.groupby(["variant", "status"]).size()
        for (name, status), n in sizes.items():
            counts[name][status] = int(n)
        return counts

    def first_finding(self, variant: str) -> dict[str, Any] | None:
        """The first finding of ``variant`` (keys ``site, step, rank, row, element, tensor, kind,
        value``), or None."""
        return judge.first_finding(self.findings, variant)

    def to_json(self, first: Mapping[str, dict[str, Any] | None] | None = None
                ) -> dict[str, Any]:
        """The ``forensics replay --json`` object (JSON-ready). Its ``first_finding`` per
        variant is ``first`` when given (``forensics replay`` passes the conclusion's first
        violations, so the JSON and the text tell one story), else the first finding of any
        kind with every findings column (bound, origin, request, ``resolved``)."""
        from forensics.judge.suspects import first_suspects

        keys = [c for c in judge.COLUMNS if c not in ("variant", "record")]
        firsts = ({v: first.get(v) for v in self.variants} if first is not None else
                  {v: judge.first_finding(self.findings, v, keys) for v in self.variants})
        return {"capture": self.source, "records": len(self.records),
                "variants": list(self.variants), "verdicts": self.verdicts,
                "findings": judge.finding_records(self.findings),
                "outcomes": self.outcome_counts, "first_finding": firsts,
                "first_suspect": first_suspects(self), "as_installed": self.as_installed,
                "continuity": None if self.continuity is None else self.continuity.summary()}


def replay(capture: ReplaySource, variants: VariantsArg = DEFAULT_VARIANTS,
           progress: bool = False,
           part_of: Capture | None = None,
           window: Collection[tuple[int, int]] | None = None,
           deadline: float = DEFAULT_REPLAY_DEADLINE) -> ReplayResult:
    """Replay ``capture`` (a Capture, a capture path, or an iterable of Records) through
    ``variants`` (names; variant objects; or a mapping name -> None, name, callable or variant).
    ``part_of``: the Capture the records given are a step range of: they are judged as in a
    replay of all of it (its manifest says whether its vLLM clamps input ids; the race check
    compares the steps a replay of it compares, :func:`forensics.judge.race.window_of`), so
    that a range finds what the whole replay finds there. ``window``: those (step, rank) pairs
    when already worked out (a triage plans them once for all the pieces of a capture), so
    ``part_of`` is not read for them again. ``deadline``: the seconds the kernel worker of
    Model Runner V2's real-code variants may take for all the records together
    (:data:`~forensics.budget.DEFAULT_REPLAY_DEADLINE`; a replay inside another overall
    deadline ends no later than it): the records it leaves are ``error`` outcomes ``not
    judged: the overall deadline of N s passed``, and ``cut`` says so.

    Returns:
        A :class:`ReplayResult`.
    Raises:
        CaptureFormatError: a record is malformed (in-memory records are validated here).
        UnknownVariantError, MissingDependencyError: a variant cannot be built.
        ConfigurationError: no variant, or a variant name given twice.
        AllocationBudgetError: a record's size past the allocation budget (naming the
            capture file, the record, the field and its value).
    """
    try:
        with collector_paused(), overall_clock(deadline, DEFAULT_REPLAY_DEADLINE) as clock:
            result = _replay(capture, variants, progress, part_of, window)
    except AllocationBudgetError as exc:  # a record's size past the budget: name its file
        raise in_capture(exc, capture) from None
    result.cut = clock.passed() if clock.cut else ""
    return result


def _replay(given: Any, variants: Any, progress: bool, part_of: Capture | None,
            window: Collection[tuple[int, int]] | None) -> ReplayResult:
    from forensics.judge.race import window_of

    source = Source.of(given)
    if part_of is not None:
        source = dataclasses.replace(source, manifest=part_of.manifest)
    records = source.records
    chosen = _variants(variants)
    for _, variant in chosen:  # a variant that refuses a capture (its file) whole says so first
        if hasattr(variant, "check_capture") and source.capture is not None and part_of is None:
            variant.check_capture(source.capture.sites, source.capture.manifest)
    names = [name for name, _ in chosen]
    reference = None
    if "upstream" not in names and (source.has_site(SINK) or _blind(chosen)):
        reference = resolve_variant("upstream")
    bar = Progress(len(records) * len(chosen), "replay", force=True) if progress else None
    judged = judge.Judge(names)
    kept = {name: _Kept(variant, len(records)) for name, variant in chosen}
    pieces = source.pieces()
    work = functools.partial(_prepared_chunks, models=_Models.of(chosen, reference))
    for number, done in enumerate(_in_order(work, pieces)):
        for chunk, runs in done:
            judged.add_coordinates(chunk.everyone, chunk.coords)
            _judge_summaries(chunk, names, reference, judged)
            if len(chunk.summaries) < len(chunk.everyone):
                _run_chunk(chunk, runs, chosen, reference, judged, kept, bar)
        source.release()  # the chunks' mapped pages leave the resident set
        if number % TRIM_EVERY == TRIM_EVERY - 1:
            _trim_heap()
    if bar is not None:
        bar.close()
    coords = judged.coordinates()
    continuity = source.continuity()
    found = past_a_known_vocabulary(judged.with_continuity(
        judged.findings(), continuity.findings), source.capture)
    result = ReplayResult(source.name, records, names, found, judged.verdicts(found),
                          outcomes=functools.partial(_outcome_frame, coords, kept),
                          capture=source.capture, bounds=judged.deferred_bounds(),
                          index=_index_frame(coords), continuity=continuity,
                          notes={n: v.note() for n, v in chosen if hasattr(v, "note")},
                          as_installed={n: v.as_installed() for n, v in chosen
                                        if hasattr(v, "as_installed")})
    if window is None and part_of is not None:
        window = window_of(part_of)
    return _with_race(result, judged, window)


def _with_race(result: ReplayResult, judged: judge.Judge,
               window: Collection[tuple[int, int]] | None) -> ReplayResult:
    """``result`` with its race check and the check's ``unwritten_input`` findings in its
    findings table (verdicts again: they leave every verdict as it was, see
    :func:`forensics.judge.findings.verdicts`)."""
    from forensics.judge.race import as_findings

    race = race_of(result, window)
    result.race = dataclasses.replace(race, findings=_not_the_clamp(race.findings,
                                                                    result.continuity))
    if len(result.race.findings):
        result.findings = judge.with_unwritten(result.findings, as_findings(
            result.race.findings), result.variants)
        result.verdicts = judged.verdicts(result.findings)
    return result


def race_of(result: ReplayResult, window: Collection[tuple[int, int]] | None = None
            ) -> RaceCheck:
    """The race check of ``result`` (:func:`forensics.judge.race.race_check`), the baseline
    run first on the writer records that kept no output and its outputs kept in
    ``result.baseline_outputs``; comparing the (step, rank) pairs of ``window`` when given."""
    from forensics.judge.race import race_check, race_plan

    plan = race_plan(result, window)
    result.baseline_outputs.update(_baseline_outputs(plan.baseline, plan.unrecorded()))
    return race_check(result, plan)


def _baseline_outputs(baseline: str, records: list[tuple[int, Record]]
                      ) -> dict[int, Mapping[str, Any] | None]:
    """The outputs of the built-in variant ``baseline`` on ``records`` (position, record),
    run in one batch, by position (none when it is not a built-in variant, such as a user's
    callable)."""
    if not records:
        return {}
    try:
        variant = resolve_variant(baseline)
    except ForensicsError:
        return {}
    outcomes = run_variant(variant, [record for _, record in records])
    return {p: None if o is None else o.outputs
            for (p, _), o in zip(records, outcomes, strict=True)}


def _not_the_clamp(found: Any, continuity: Any) -> Any:
    """The race check's disagreements less those vLLM's clamp explains (a ``-1`` written, 0
    fed, where the capture's vLLM clamps): those are ``clamped_placeholder`` findings of the
    continuity check, not input nobody wrote."""
    if not len(found) or continuity is None or continuity.clamps is not True:
        return found
    clamp = (found["written"] < 0) & (found["value"] == 0)
    return found[~clamp]


def _blind(chosen: list[tuple[str, Variant]]) -> bool:
    """Whether some chosen variant is no model (real code, a user callable): its
    ``IndexError`` is named after the upstream model's access at that record."""
    return any(not isinstance(variant, ModelVariant) for _, variant in chosen)


@dataclass
class _Chunk:
    """Records of one site read together: where they all stand in the result (``everyone``)
    and their coordinates (``coords``, as :func:`forensics.judge.findings.coordinates_of` gives
    them: the summary flag last), the summary records, and the replayed ones as columns
    (``cols``; their Records decoded only when a per-record variant asks, by ``decode``)."""

    site: str
    everyone: np.ndarray
    coords: np.ndarray
    summaries: list[Record]
    cols: RunColumns
    decode: Callable[[], Sequence[Record]]
    #: the capture's segment and batch they are read from ("": records given in memory)
    where: str = ""
    _decoded: Sequence[Record] | None = None

    @functools.cached_property
    def _summary(self) -> np.ndarray | None:
        """The summary flag of each record (None when there is none: a store chunk)."""
        flags = self.coords[:, 3].astype(bool)
        return flags if flags.any() else None

    @property
    def positions(self) -> np.ndarray:
        """Where the replayed records stand in the result."""
        flags = self._summary
        return self.everyone if flags is None else self.everyone[~flags]

    @property
    def summary_positions(self) -> np.ndarray:
        """Where the summary records stand in the result."""
        flags = self._summary
        return self.everyone[:0] if flags is None else self.everyone[flags]

    def records(self) -> Sequence[Record]:
        """The replayed records (decoded once)."""
        if self._decoded is None:
            self._decoded = self.decode()
        return self._decoded


#: a piece of the replay's input: a function giving some chunks (read on a worker thread)
Piece = Callable[[], Iterable[_Chunk]]


def _store_pieces(capture: Capture) -> Iterator[Piece]:
    """The pieces of a capture: one per run of at most ``CHUNK`` rows of one batch."""
    for view, start, stop, positions in capture.chunks(CHUNK):
        yield functools.partial(_store_chunks, view, start, stop, positions)


def _store_chunks(view: Any, start: int, stop: int, positions: np.ndarray
                  ) -> Iterator[_Chunk]:
    """The chunk of rows ``start:stop`` of a batch: columns straight from the store (the
    batch screened and its flagged rows validated, raising as decoding would); a batch the
    store cannot read in bulk (summary rows among them) is decoded into Records."""
    cols = view.screened(start, stop)
    if cols is None:
        yield from _record_chunks(view.records(start, stop), positions, view.where)
        return
    coords = np.empty((stop - start, 4), dtype=np.int64)
    coords[:, 0], coords[:, 1] = site_order(view.site), view.steps[start:stop]
    coords[:, 2], coords[:, 3] = view.rank, 0
    yield _Chunk(view.site, positions, coords, [], cols,
                 functools.partial(view.records, start, stop), view.where)


def _record_pieces(records: Sequence[Record]) -> Iterator[Piece]:
    """The pieces of in-memory records: one per chunk (made here, in order)."""
    for chunk in _record_chunks(records):
        yield functools.partial(iter, (chunk,))


def _record_chunks(records: Sequence[Record], positions: np.ndarray | None = None,
                   segment: str = "") -> Iterator[_Chunk]:
    """The chunks of Records (at ``positions``, default ``0...``; read from ``segment``, a
    capture's segment and batch), ``CHUNK`` at a time, one per site."""
    for begin in range(0, len(records), CHUNK):
        part = list(records[begin:begin + CHUNK])
        where = (np.arange(begin, begin + len(part)) if positions is None
                 else positions[begin:begin + len(part)])
        by_site: dict[str, list[int]] = {}
        for i, record in enumerate(part):
            by_site.setdefault(record.site, []).append(i)
        for site, indices in by_site.items():
            mine = [part[i] for i in indices]
            replayed = [r for r in mine if not r.summary]
            yield _Chunk(site, where[np.array(indices, dtype=np.int64)],
                         judge.coordinates_of(mine), [r for r in mine if r.summary],
                         RecordColumns(replayed), functools.partial(list, replayed), segment)


def _judge_summaries(chunk: _Chunk, names: list[str], reference: Variant | None,
                     judged: judge.Judge) -> None:
    """Every variant (and the origin reference) gets the bounds findings of the summary
    records."""
    if not chunk.summaries:
        return
    nothing = [None] * len(chunk.summaries)
    for name in names:
        judged.add(name, chunk.summaries, chunk.summary_positions, nothing)
    if reference is not None:
        judged.add_reference(chunk.summaries, chunk.summary_positions, nothing)


def _run_chunk(chunk: _Chunk, runs: _Runs, chosen: list[tuple[str, Variant]],
               reference: Variant | None, judged: judge.Judge, kept: Mapping[str, _Kept],
               bar: Progress | None) -> None:
    """Keep the judged model ``runs`` of ``chunk``'s replayed records (see
    :func:`_prepared_chunks`); run the other variants record by record and judge them."""
    positions = chunk.positions
    for name, variant in chosen:
        if name in runs.variants:
            judged.add_run(name, chunk.site, positions, runs.variants[name])
            kept[name].add_run(positions, runs.variants[name])
            if bar is not None:
                bar.advance(len(positions))
            continue
        outs = run_variant(variant, chunk.records(), bar, name)
        judged.add(name, chunk.records(), positions, outs)
        kept[name].add(positions, outs)
    if reference is None:
        return
    if runs.reference is not None:
        judged.add_run(None, chunk.site, positions, runs.reference)
    else:
        judged.add_reference(chunk.records(), positions,
                             run_variant(reference, chunk.records()))


@dataclass(frozen=True)
class _Runs:
    """The judged columnar runs of one chunk: one per model variant (by name), and the origin
    reference's (None: it is no model)."""

    variants: dict[str, judge.JudgedRun]
    reference: judge.JudgedRun | None = None


#: threads that read, run and judge chunks for the model variants while the main thread
#: keeps the results in order (numpy lets go of the interpreter lock in its big operations)
WORKERS = 2
#: pieces in flight beyond the one being kept (bounds the memory of chunks read ahead)
AHEAD = WORKERS


#: pieces between two trims of the heap: a trim costs 3-5 ms, and every page it hands back
#: is a page fault when the next chunks allocate again (every 4 pieces: 1.0-1.5 s more of a
#: million-record replay than every 16, with the same peak RSS)
TRIM_EVERY = 16


def _trim_heap() -> None:
    """Hand the heap memory freed by a chunk back to the system: each worker thread
    allocates from its own malloc arena, which would otherwise keep the chunks' freed arrays
    resident (about 0.05x the capture at 100,000 records)."""
    trim = libc_function("malloc_trim")
    if trim is not None:
        trim(0)


@dataclass(frozen=True)
class _Models:
    """The model variants among the chosen ones (by name), and the origin reference when it
    is a model (None otherwise)."""

    variants: list[tuple[str, ModelVariant]]
    reference: ModelVariant | None

    @classmethod
    def of(cls, chosen: list[tuple[str, Variant]], reference: Variant | None) -> _Models:
        """The models among ``chosen`` and ``reference``."""
        return cls([(name, v) for name, v in chosen if isinstance(v, ModelVariant)],
                   reference if isinstance(reference, ModelVariant) else None)


def _prepared_chunks(piece: Piece, models: _Models) -> list[tuple[_Chunk, _Runs]]:
    """The chunks of ``piece``, each with the judged run of every model variant (a pure
    function of the chunk: it runs on a worker thread)."""
    return [(chunk, _judged(*_model_runs(chunk, models))) for chunk in piece()]


def _judged(runs: Mapping[str, BatchRun], reference: BatchRun | None) -> _Runs:
    """Each model's run of one chunk judged, each run object once (variants that returned
    the same run, and runs inheriting records from another, share its judgment)."""
    known: dict[int, judge.JudgedRun] = {}
    variants = {name: judge.JudgedRun.of(run, known) for name, run in runs.items()}
    return _Runs(variants, None if reference is None else judge.JudgedRun.of(reference, known))


def _in_order(work: Callable[[Piece], Any], pieces: Iterator[Piece]) -> Iterator[Any]:
    """``work`` of every piece, in order, computed by :data:`WORKERS` threads at most
    :data:`AHEAD` pieces ahead of the caller (an exception comes out where its piece
    would have)."""
    if WORKERS < 1:
        yield from map(work, pieces)
        return
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="forensics-replay")
    pending: deque[Any] = deque()
    try:
        for piece in pieces:
            pending.append(pool.submit(work, piece))
            if len(pending) > AHEAD:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _model_runs(chunk: _Chunk, models: _Models
                ) -> tuple[dict[str, BatchRun], BatchRun | None]:
    """The columnar run of each model variant over the chunk; columns the store cannot vouch
    for (``ScreenUnsure``) are read again from the decoded records (CaptureFormatError when
    those hold values past int64)."""
    site = get_site(chunk.site)
    if not models.variants and models.reference is None:
        return {}, None
    try:
        prepared = site.prepared(chunk.cols)
        runs = {name: variant.run_batch(chunk.site, prepared)
                for name, variant in models.variants}
        reference = models.reference
        return runs, None if reference is None else reference.run_batch(chunk.site, prepared)
    except ScreenUnsure as exc:
        if isinstance(chunk.cols, RecordColumns):  # already the decoded records: no retry
            where = f"{chunk.where}: " if chunk.where else ""  # the segment and capture
            raise CaptureFormatError(
                f"{where}{chunk.site} records of steps {int(chunk.coords[0, 1])}-"
                f"{int(chunk.coords[-1, 1])}: {reason(exc)}; the replay checks indices as int64: "
                "capture that field as a signed integer tensor") from None
        chunk.cols = RecordColumns(chunk.records())
        return _model_runs(chunk, models)


@dataclass(frozen=True)
class Source:
    """The replay's input, built once at entry: its records in pipeline order (a lazy
    sequence for a capture), a name for it, and the Capture they are read from (None: records
    given in memory)."""

    name: str
    records: Sequence[Record]
    capture: Capture | None = None
    #: the manifest of the capture records given in memory were read from (None: unknown)
    manifest: dict[str, Any] | None = None

    @classmethod
    def of(cls, given: object) -> Source:
        """The source ``given`` names: a Capture, a capture path, or an iterable of Records
        (validated here).

        Raises:
            CaptureFormatError: ``given`` is none of these, or a record is malformed.
        """
        from forensics.store.reader import Capture, load

        if isinstance(given, (str, os.PathLike)):
            given = load(given)
        if isinstance(given, Capture):
            return cls(str(given.path), given.records(), given)
        if isinstance(given, Record) or not isinstance(given, Iterable):
            raise CaptureFormatError(f"replay needs a capture, a capture path or an iterable "
                                     f"of Records, got {type(given).__name__}")
        return cls("<records>", sorted(_validated(given), key=pipeline_key))

    def has_site(self, site: str) -> bool:
        """Whether some record is of ``site`` (from the capture's index when there is one)."""
        if self.capture is not None:
            return site in self.capture.sites
        return any(r.site == site for r in self.records)

    def continuity(self) -> Continuity:
        """The token continuity check of the records (:func:`continuity_of`)."""
        from forensics.judge.streams import continuity_of

        if self.capture is not None:
            capture = self.capture
            return continuity_of(lambda site: capture.records(site=site)
                                 if site in capture.sites else [],
                                 capture.sites, capture.manifest)
        return continuity_of(lambda site: [r for r in self.records if r.site == site],
                             {r.site for r in self.records}, self.manifest)

    def pieces(self) -> Iterator[Piece]:
        """The pieces the replay reads: the capture's batches, or the records' chunks."""
        if self.capture is not None:
            return _store_pieces(self.capture)
        return _record_pieces(self.records)

    def release(self) -> None:
        """Let the capture's mapped pages read so far leave the resident set."""
        if self.capture is not None:
            self.capture.release()


def _validated(records: Iterable[object]) -> list[Record]:
    """``records``, each checked to be a valid Record (CaptureFormatError naming it)."""
    from forensics.validate import validate_record

    checked = []
    for i, record in enumerate(records):
        if not isinstance(record, Record):
            raise CaptureFormatError(f"record {i} given to replay is a {type(record).__name__}, "
                                     f"not a forensics.Record")
        checked.append(validate_record(record, f"record {i}"))
    return checked


def _variants(variants: Any) -> list[tuple[str, Variant]]:
    if isinstance(variants, str) or hasattr(variants, "run"):
        variants = [variants]
    if isinstance(variants, Mapping):
        items = [(name, _from_spec(name, spec)) for name, spec in variants.items()]
    else:
        variants = list(variants)
        refuse_one_diff_twice(variants)
        items = [(v, resolve_variant(v)) if isinstance(v, str) else (v.name, v)
                 for v in variants]
    names = [name for name, _ in items]
    if not names or len(set(names)) != len(names):
        raise ConfigurationError(f"replay needs distinct variant names, got {names}; e.g. "
                                 f"variants=('upstream', 'patched')")
    return items


def _from_spec(name: str, spec: Any) -> Variant:
    """The variant ``spec`` gives ``name``; never another under ``upstream``, the baseline each
    sink finding's origin is judged by (``{"upstream": "patched"}`` found an embedding
    violation the patched model's own replay does not: ConfigurationError)."""
    variant = resolve_variant(spec) if isinstance(spec, str) else resolve_variant(name, spec)
    given = getattr(variant, "name", name)
    if name == "upstream" and given != name:
        raise ConfigurationError(
            f"replay: variants={{'upstream': {given!r}}}: 'upstream' names the baseline each "
            f"finding's origin is judged by; give {given!r} a name of its own")
    return variant


class _Kept:
    """What a replay keeps of one variant's outcomes: a status code per record (-1 for a
    summary record) and the messages."""

    def __init__(self, variant: Variant, count: int) -> None:
        self.variant = variant
        self.status = np.full(count, -1, dtype=np.int8)
        self.messages: dict[int, str] = {}

    def add(self, positions: np.ndarray, outcomes: Sequence[Outcome | None]) -> None:
        """Keep the outcomes of the records at ``positions``."""
        for i, outcome in zip(positions.tolist(), outcomes, strict=True):
            if outcome is not None:
                self.status[i] = STATUSES.index(outcome.status)
                if outcome.message:
                    self.messages[i] = outcome.message

    def add_run(self, positions: np.ndarray, run: judge.JudgedRun) -> None:
        """Keep the statuses and messages of a columnar run of the records at ``positions``
        (a model's: no Outcome is held)."""
        self.status[positions] = run.status
        for i, message in run.messages.items():
            self.messages[int(positions[i])] = message


def _outcome_frame(coords: np.ndarray, kept: Mapping[str, _Kept]) -> pd.DataFrame:
    """The ``ReplayResult.outcomes`` table (summary records left out)."""
    import pandas as pd

    parts = []
    texts = {"": 0}  # the distinct messages, coded
    for number, k in enumerate(kept.values()):
        rec = np.flatnonzero(k.status >= 0)
        parts.append({
            "record": rec, "variant": np.full(len(rec), number),
            "site": coords[rec, 0], "step": coords[rec, 1], "rank": coords[rec, 2],
            "status": k.status[rec],
            "message": _message_codes(rec, k.messages, texts)})
    if not parts or not sum(len(p["record"]) for p in parts):
        return pd.DataFrame([], columns=list(OUTCOME_COLUMNS))
    columns = {c: np.concatenate([p[c] for p in parts]) for c in OUTCOME_COLUMNS}
    columns["variant"] = judge.coded_strings(list(kept), columns["variant"])
    columns["site"] = judge.coded_strings(SITES, columns["site"])
    columns["status"] = judge.coded_strings(STATUSES, columns["status"])
    columns["message"] = judge.coded_strings(list(texts), columns["message"])
    return pd.DataFrame(columns)


def _message_codes(rec: np.ndarray, messages: Mapping[int, str], texts: dict[str, int]
                   ) -> np.ndarray:
    """The code in ``texts`` (extended) of each record's message, for the records of ``rec``
    (sorted); 0 ("") where it has none."""
    codes = np.zeros(len(rec), dtype=np.int32)
    if messages:
        at = np.searchsorted(rec, np.fromiter(messages, dtype=np.int64, count=len(messages)))
        codes[at] = [texts.setdefault(m, len(texts)) for m in messages.values()]
    return codes


def _index_frame(coords: np.ndarray) -> pd.DataFrame:
    """The ``ReplayResult.index`` table: site, step, rank and summary of every record."""
    import pandas as pd

    return pd.DataFrame({"site": judge.coded_strings(SITES, coords[:, 0]),
                         "step": coords[:, 1], "rank": coords[:, 2],
                         "summary": coords[:, 3].astype(bool)})
