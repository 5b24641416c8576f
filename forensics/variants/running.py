"""Running a variant on records, one outcome each (the replay's per-record path, and its
baseline runs for presenting): ``run_many`` over a site's records when the variant has it,
else ``run`` one record at a time. A variant's exception becomes an ``index_error`` or
``error`` outcome; a variant that cannot be set up propagates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from forensics.errors import (
    AllocationBudgetError,
    MissingDependencyError,
    PatchApplyError,
    UnsupportedVersionError,
)
from forensics.outcome import STATUSES, Outcome
from forensics.progress import Progress
from forensics.records import Record
from forensics.sites._common import failed
from forensics.variants import Variant

#: a variant that cannot be set up (missing vLLM, a patched copy that does not import) is bad
#: input, not an outcome: these propagate (the CLI exits 2), as does a record whose buffers
#: would pass the allocation budget (forensics.budget)
_SETUP_ERRORS = (MissingDependencyError, UnsupportedVersionError, PatchApplyError,
                 AllocationBudgetError)

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
    """The outcomes of ``records`` (all of ``site``): ``run_many`` over them when the variant
    has it, else ``run`` one record at a time. A ``run_many`` that raises or answers another
    number of outcomes fails the batch: each of its records gets an ``error`` outcome naming
    the batch (it is not run again record by record)."""
    many = getattr(variant, "run_many", None)
    if many is None:
        return [_run_one(variant, record) for record in records]
    try:
        outs = list(many(site, records))
    except _SETUP_ERRORS:
        raise
    except Exception as exc:  # noqa: BLE001  (a variant's failure is an outcome)
        return _batch_failed(variant, site, records, f"{type(exc).__name__}: {exc}")
    if len(outs) != len(records):
        return _batch_failed(variant, site, records,
                             f"it returned {len(outs)} outcomes for {len(records)} records")
    return [_checked(o) for o in outs]


def _batch_failed(variant: Variant, site: str, records: list[Record], why: str
                  ) -> list[Outcome]:
    """An ``error`` outcome for each record of a failed ``run_many`` batch, naming it."""
    steps = [r.step for r in records]
    message = (f"{variant.name}.run_many failed on the batch of {len(records)} {site} records "
               f"of steps {min(steps)}-{max(steps)}: {why}")
    return [Outcome("error", message) for _ in records]


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
