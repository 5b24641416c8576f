"""Replay: records x variants -> outcomes (runs, never judges), then hands them to the judge.

Every non-summary record goes through every chosen variant on CPU. A variant's exception becomes
an ``index_error`` outcome (IndexError) or an ``error`` outcome (anything else) with the message
``"<ExceptionType>: <text>"``. Summary records are never replayed: every variant gets the same
bounds finding from them. Origins of sink findings come from the ``upstream`` model, run here
when it is not among the chosen variants.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from forensics import findings as judge
from forensics._callable import make_module_callable
from forensics.errors import (
    CaptureFormatError,
    ConfigurationError,
    MissingDependencyError,
    PatchApplyError,
    UnsupportedVersionError,
)
from forensics.outcome import STATUSES, Outcome
from forensics.progress import Progress
from forensics.records import Record
from forensics.sites import SINK
from forensics.sites._common import failed
from forensics.variants import Variant, resolve_variant

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_VARIANTS = ("upstream", "patched")
#: a variant that cannot be set up (missing vLLM, a patched copy that does not import) is bad
#: input, not an outcome: these propagate (the CLI exits 2)
_SETUP_ERRORS = (MissingDependencyError, UnsupportedVersionError, PatchApplyError)
OUTCOME_COLUMNS = ("record", "variant", "site", "step", "rank", "status", "message")


@dataclass
class ReplayResult:
    """What a replay produced. ``raw`` maps each variant to one Outcome per record (None for a
    summary record); ``outcomes`` is the same as a table (columns :data:`OUTCOME_COLUMNS`,
    summary records left out); ``findings``, ``verdicts`` and ``bounds`` are the judge's."""

    source: str
    records: list[Record]
    variants: list[str]
    raw: dict[str, list[Outcome | None]]
    outcomes: pd.DataFrame
    findings: pd.DataFrame
    verdicts: dict[str, dict[str, str]]
    capture: Any = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: per variant, record and checked tensor: min/max used against [lower, upper)
    #: (columns :data:`forensics.findings.BOUNDS_COLUMNS`)
    bounds: Any = None

    @property
    def outcome_counts(self) -> dict[str, dict[str, int]]:
        """``{variant: {"ok": n, "index_error": n, "error": n}}`` over replayed records."""
        counts = {}
        for name, outs in self.raw.items():
            counts[name] = {status: 0 for status in STATUSES}
            for outcome in outs:
                if outcome is not None:
                    counts[name][outcome.status] += 1
        return counts

    def first_finding(self, variant: str) -> dict[str, Any] | None:
        """The first finding of ``variant`` (keys ``site, step, rank, row, element, tensor, kind,
        value``), or None."""
        return judge.first_finding(self.findings, variant)

    def to_json(self) -> dict[str, Any]:
        """The ``forensics replay --json`` object (JSON-ready)."""
        return {"capture": self.source, "records": len(self.records),
                "variants": list(self.variants), "verdicts": self.verdicts,
                "findings": judge.finding_records(self.findings),
                "outcomes": self.outcome_counts,
                "first_finding": {v: self.first_finding(v) for v in self.variants}}

    def expected(self) -> dict[str, Any]:
        """The ``expected.json`` object: format, verdicts and first finding per variant."""
        return {"format": 1, "verdicts": self.verdicts,
                "first_finding": {v: self.first_finding(v) for v in self.variants}}


def replay(capture: Any, variants: Any = DEFAULT_VARIANTS, progress: bool = False
           ) -> ReplayResult:
    """Replay ``capture`` (a Capture, a capture path, or an iterable of Records) through
    ``variants`` (names; variant objects; or a mapping name -> None, name, callable or variant).

    Returns:
        A :class:`ReplayResult`.
    Raises:
        CaptureFormatError: a record is malformed (in-memory records are validated here).
        UnknownVariantError, MissingDependencyError: a variant cannot be built.
        ConfigurationError: no variant, or a variant name given twice.
    """
    with _collector_paused():
        return _replay(capture, variants, progress)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector: a replay allocates millions of small lists while
    every record stays alive, and each full collection would walk them all (a third of the
    time at soak scale). Nothing a replay builds needs the collector; it resumes afterwards."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _replay(capture: Any, variants: Any, progress: bool) -> ReplayResult:
    records, source, capture_obj = _records(capture)
    chosen = _variants(variants)
    bar = Progress(len(records) * len(chosen), "replay", force=True) if progress else None
    raw = {}
    for name, variant in chosen:
        raw[name] = run_variant(variant, records, bar, name)
    if bar is not None:
        bar.close()
    reference = None
    if "upstream" not in raw and any(r.site == SINK for r in records):
        reference = run_variant(resolve_variant("upstream"), records, None, "upstream")
    ranges: list[tuple[Any, ...]] = []
    found = judge.build_findings(records, raw, reference, ranges)
    return ReplayResult(source, records, list(raw), raw, _outcome_frame(records, raw), found,
                        judge.verdicts(records, raw, found), capture_obj,
                        bounds=judge.bounds_frame(ranges))


def _records(capture: Any) -> tuple[list[Record], str, Any]:
    """The records of ``capture`` in pipeline order, a name for it, and the Capture (or None)."""
    if isinstance(capture, (str, os.PathLike)):
        from forensics.store.reader import load

        capture = load(capture)
    if hasattr(capture, "manifest") and hasattr(capture, "path"):
        return sorted(capture, key=Record.key), str(capture.path), capture
    if isinstance(capture, Record) or not isinstance(capture, Iterable):
        raise CaptureFormatError(f"replay needs a capture, a capture path or an iterable of "
                                 f"Records, got {type(capture).__name__}")
    from forensics.validate import validate_record

    records = []
    for i, record in enumerate(capture):
        if not isinstance(record, Record):
            raise CaptureFormatError(f"record {i} given to replay is a {type(record).__name__}, "
                                     f"not a forensics.Record")
        records.append(validate_record(record, f"record {i}"))
    return sorted(records, key=Record.key), "<records>", None


def _variants(variants: Any) -> list[tuple[str, Variant]]:
    if isinstance(variants, str) or hasattr(variants, "run"):
        variants = [variants]
    if isinstance(variants, Mapping):
        items = [(name, _from_spec(name, spec)) for name, spec in variants.items()]
    else:
        items = [(v, resolve_variant(v)) if isinstance(v, str) else (v.name, v)
                 for v in variants]
    names = [name for name, _ in items]
    if not names or len(set(names)) != len(names):
        raise ConfigurationError(f"replay needs distinct variant names, got {names}; e.g. "
                                 f"variants=('upstream', 'patched')")
    return items


def _from_spec(name: str, spec: Any) -> Variant:
    if isinstance(spec, str):
        return resolve_variant(spec)
    return resolve_variant(name, spec)


def run_variant(variant: Variant, records: Sequence[Record], progress: Progress | None = None,
                name: str | None = None) -> list[Outcome | None]:
    """One outcome per record (None for summary records), site by site; ``run_many`` when the
    variant has it, else ``run`` per record. Exceptions become outcomes. ``progress`` is
    advanced by the records of each site."""
    outcomes: list[Outcome | None] = [None] * len(records)
    by_site: dict[str, list[int]] = {}
    for i, record in enumerate(records):
        if not record.summary:
            by_site.setdefault(record.site, []).append(i)
    for site, indices in by_site.items():
        if progress is not None:
            progress.advance(0, f"{name or variant.name}: {site}")
        for i, outcome in zip(indices, _run_site(variant, site, [records[i] for i in indices]),
                              strict=True):
            outcomes[i] = outcome
        if progress is not None:
            progress.advance(len(indices))
    return outcomes


def _run_site(variant: Variant, site: str, records: list[Record]) -> list[Outcome]:
    many = getattr(variant, "run_many", None)
    if many is not None:
        try:
            outs = list(many(site, records))
            if len(outs) == len(records):
                return [_checked(o) for o in outs]
        except _SETUP_ERRORS:
            raise
        except Exception:  # noqa: BLE001  (fall back to one record at a time)
            pass
    return [_run_one(variant, record) for record in records]


def _run_one(variant: Variant, record: Record) -> Outcome:
    try:
        return _checked(variant.run(record))
    except _SETUP_ERRORS:
        raise
    except Exception as exc:  # noqa: BLE001  (a variant's failure is an outcome)
        return failed(exc)


def _checked(outcome: Any) -> Outcome:
    if not isinstance(outcome, Outcome) or outcome.status not in STATUSES:
        return Outcome("error", f"TypeError: variant returned {outcome!r:.80}, not an Outcome "
                                f"with a status in {list(STATUSES)}")
    return outcome


def _outcome_frame(records: Sequence[Record], raw: dict[str, list[Outcome | None]]
                   ) -> pd.DataFrame:
    import pandas as pd

    rows = [(i, name, r.site, r.step, r.rank, o.status, o.message)
            for name, outs in raw.items()
            for i, (r, o) in enumerate(zip(records, outs, strict=True)) if o is not None]
    return pd.DataFrame(rows, columns=list(OUTCOME_COLUMNS))


make_module_callable(__name__, replay)  # forensics.replay stays callable
