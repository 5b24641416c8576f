"""Outcomes -> findings and verdicts. Judges, never runs.

The findings table has the columns of DESIGN.md (:data:`FINDING_COLUMNS`) followed by
:data:`EXTRA_COLUMNS`: ``req_id`` (the request of the row, when known) and ``record`` (the
position of the record in ``ReplayResult.records``), then :data:`INDEX_COLUMNS`: what holds
each bad value (``index_tensor[index_at]``; ``held`` false when the index used is computed
from it), what it indexes (``indexed``) and its ``value_class``. Conventions where DESIGN.md is
silent:

- an access finding names the tensor read (``valid_sampled_token_count``,
  ``prev_sampled_token_ids``, ``draft_token_ids``, ``sampled_token_ids_cpu``), ``value`` is the
  index used and ``element`` its position in the index the code builds: the row for row-wise
  indices (``prev_positions``, the previous-row map), the destination slot in ``input_ids`` for
  ``prepare_input_ids`` (sampled token, drafts, and the fast path's broadcast);
- an output finding names ``out.<field>``; for ``async_output`` ``element`` is the position in
  the request's full output list;
- ``misattributed`` findings carry no bounds (``lower``/``upper`` null);
- a summary record gives one finding per side it breaks (``min < 0``, ``max >= bound``), row and
  element null, tensor the site's ``SUMMARY_TENSOR`` unless the record names one in ``tensor``;
- a variant without accesses (real code, user callables) whose outcome is ``index_error`` and
  which has no other ``out_of_bounds`` finding on that record gets one, ``value``/``upper``
  parsed from a torch message when possible; it is then named after the access it came from:
  the first ``upstream`` model finding at that record (the site's declared accesses, in the
  order the code runs them) with the same value and bound lends it its tensor, row, element,
  request and what it indexes (:func:`forensics.judge.origins.named_after_access`). Where
  none matches, it keeps ``tensor`` null: :func:`forensics.judge.origins.is_raised` tells it,
  and the conclusion says "vLLM raised IndexError at this record";
- only output findings (``out.*``) and summary findings make a record an origin candidate;
- in the first-finding order a null row or element sorts after the others.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from forensics.budget import require_findings
from forensics.judge.continuity import CONTINUITY_COLUMNS, VERIFIED
from forensics.judge.continuity import KINDS as CONTINUITY_KINDS
from forensics.judge.origins import (
    Findings,
    Origins,
    annotate_sink,
    annotate_token,
    name_raised,
    not_judged,
)
from forensics.outcome import ERROR, INDEX_ERROR, STATUSES, Outcome
from forensics.outcome import OK as OK_OUTCOME
from forensics.records import Record
from forensics.sites import SITES, get_site, site_order
from forensics.sites._common import OUT_OF_BOUNDS, finding, index_error_finding
from forensics.sites.base import record_findings
from forensics.sites.core import (
    EMBEDDING_ROWS,
    VOCABULARY,
    BatchRun,
    CheckList,
    Checks,
    per_record,
)

if TYPE_CHECKING:
    import pandas as pd

FINDING_COLUMNS = ("variant", "site", "step", "rank", "row", "element", "tensor", "kind",
                   "value", "lower", "upper", "origin", "resolved")
EXTRA_COLUMNS = ("req_id", "record", "judged")
#: what holds an out-of-bounds value and what it indexes (DESIGN.md): ``index_tensor`` and
#: ``index_at`` (the tensor and element holding the value; ``held`` false when the index used
#: is computed from it, e.g. a draft's ``prev_positions[r] * spec + j``), ``indexed`` (a
#: tensor, ``vocabulary`` or ``embedding rows``) and ``value_class``
INDEX_COLUMNS = ("index_tensor", "index_at", "held", "indexed", "value_class")
#: a token continuity finding's (``substituted``, ``clamped_placeholder``; null for others):
#: the position fed, the token expected there, where and at which step it was recorded, and
#: the role of the slot (:data:`forensics.judge.continuity.CONTINUITY_COLUMNS`)
COLUMNS = FINDING_COLUMNS + EXTRA_COLUMNS + INDEX_COLUMNS + CONTINUITY_COLUMNS
#: columns of ``ReplayResult.bounds``: per variant, record and checked tensor, the range of the
#: indices or ids used against their valid range ``[lower, upper)``
BOUNDS_COLUMNS = ("variant", "site", "step", "rank", "record", "tensor", "min", "max", "lower",
                  "upper")
FIRST_FINDING_KEYS = ("site", "step", "rank", "row", "element", "tensor", "kind", "value")
VIOLATION, ERROR_VERDICT, SUSPECT, OK = "violation", "error", "suspect", "ok"
#: the verdict of a site a variant cannot judge: summary records only (for every variant but
#: the baseline), or only findings it cannot see (``judged`` false)
UNJUDGED = "unjudged"
#: the race check's finding (:mod:`forensics.judge.race`): it leaves every verdict as it was
UNWRITTEN_INPUT = "unwritten_input"
_INT_COLUMNS = ("row", "element", "value", "lower", "upper", "index_at", "position", "expected",
                "expected_step")

#: checked ranges as ``Checks.range_table()`` gives them: per group its record, its tensor as
#: ``tensors[which]`` and ``(min, max, lower, upper)``: ``(record, tensors, which, numbers)``
RangeTable = tuple[np.ndarray, list[str], np.ndarray, np.ndarray]


def summary_checks(records: Sequence[Record]) -> CheckList:
    """The checks of summary records (record ``i`` of the checks is ``records[i]``): each
    one's ``min`` and ``max`` against its range (:func:`summary_range`) as one group (its
    checked range), one :class:`Checks` per tensor."""
    by_tensor: dict[str, list[int]] = {}
    ranges = [summary_range(record) for record in records]
    for i, (tensor, *_) in enumerate(ranges):
        by_tensor.setdefault(tensor, []).append(i)
    parts = []
    for tensor, mine in by_tensor.items():
        sides = [ranges[i][1:3] for i in mine]
        lower = np.repeat([ranges[i][3] for i in mine], 2)
        upper = np.repeat([ranges[i][4] for i in mine], 2)
        parts.append(Checks.of(tensor, np.repeat(mine, 2), None, None, np.ravel(sides), lower,
                               upper))
    return Checks.concat(parts)


def summary_findings(record: Record) -> Findings:
    """Bounds findings of a summary record: one per side it breaks, ``min`` below the range,
    ``max`` at or past its end."""
    tensor, low, high, lower, upper = summary_range(record)
    found = []
    indexed = summary_indexed(record.site)
    if low < lower:
        found.append(finding(OUT_OF_BOUNDS, tensor, low, lower, upper, indexed=indexed))
    if high >= upper:
        found.append(finding(OUT_OF_BOUNDS, tensor, high, lower, upper, indexed=indexed))
    return found


def summary_indexed(site: str) -> str | None:
    """What a summary record's ids index, from its site's bound: the embedding's rows
    (``num_embeddings``), the vocabulary (``vocab_size``), else unknown."""
    bound = get_site(site).summary_bound
    return {"num_embeddings": EMBEDDING_ROWS, "vocab_size": VOCABULARY}.get(bound)


def summary_range(record: Record) -> tuple[str, int, int, int, int]:
    """A summary record's ``(tensor, min, max, lower, upper)``: its values lie in ``[0,
    bound)`` of its site's ``summary_bound`` field; the tensor is its ``tensor`` field, else
    its site's ``summary_tensor``. The least and the greatest of the two values it names (a
    ``min`` above its ``max`` names both all the same: ``max = -1`` below ``min = 9`` was
    judged in range, only ``min`` held to the lower bound)."""
    site = get_site(record.site)
    tensor = record.get("tensor")
    low, high = sorted((int(record["min"]), int(record["max"])))
    return (tensor if isinstance(tensor, str) else site.summary_tensor, low, high, 0,
            int(record[site.summary_bound]))


def judge_record(record: Record, outcome: Outcome | None) -> Findings:
    """Findings of one record under one variant (``outcome`` None for a summary record, and
    for a record judged from its site's columnar run: no finding here)."""
    return judged_record(record, outcome)[0]


def judged_record(record: Record, outcome: Outcome | None) -> tuple[Findings, Checks | CheckList]:
    """Findings of one record under one variant (see :func:`judge_record`) and the checks they
    come from (its checked ranges): a model run's own, else the site's ``checks``, a summary's
    :func:`summary_checks`."""
    if record.summary:
        return summary_findings(record), summary_checks([record])
    if outcome is None:
        return [], Checks.empty()
    checks = get_site(record.site).checks_of(record, outcome)
    found = record_findings(checks, record)
    if (outcome.accesses is None and outcome.status == INDEX_ERROR
            and not any(f["kind"] == OUT_OF_BOUNDS for f in found)):
        found.append(index_error_finding(outcome))
    return found, checks


def judge_all(records: Sequence[Record], outcomes: Sequence[Outcome | None]) -> list[Findings]:
    """Findings of every record under one variant, in record order (no checked ranges kept:
    :class:`Judge` keeps those)."""
    return [judge_record(r, o) for r, o in zip(records, outcomes, strict=True)]


class Judge:
    """The judge of a streamed replay: records are judged chunk by chunk, then let go.

    It keeps only what the results need: each record's coordinates (one numpy row: site order,
    step, rank, summary), the findings (dicts, only for records that have some), the checked
    ranges as numpy columns, and per variant the sites with an ``error`` outcome.
    """

    def __init__(self, variants: Sequence[str]) -> None:
        self.variants = list(variants)
        self._found: dict[str, dict[int, Findings]] = {v: {} for v in self.variants}
        self._reference: dict[int, Findings] | None = None
        self._errors: dict[str, set[str]] = {v: set() for v in self.variants}
        self._coords: list[tuple[np.ndarray, np.ndarray]] = []
        #: checked ranges, piece by piece: variant, records, tensor codes, numbers
        self._ranges: list[tuple[str, np.ndarray, np.ndarray, np.ndarray]] = []
        self._tensors: dict[str, int] = {}
        self._count = 0
        #: per variant, the records it ran without raising and without showing its accesses
        #: (real code, user callables): it cannot see a silent read there
        self._blind: dict[str, set[int]] = {v: set() for v in self.variants}
        self._count_found = 0

    def _held(self, found: Iterable[Findings]) -> None:
        """Count ``found`` into the findings this judge holds, within the allocation budget
        (:func:`forensics.budget.require_findings`)."""
        self._count_found = require_findings(self._count_found + sum(len(f) for f in found))

    def add_coordinates(self, positions: np.ndarray, rows: np.ndarray) -> None:
        """Note the coordinates of the records at ``positions``: one row each of site order,
        step, rank and summary flag (see :func:`coordinates_of`)."""
        self._coords.append((np.asarray(positions, dtype=np.int64), rows))
        self._count += len(rows)

    def add(self, variant: str, records: Sequence[Record], positions: np.ndarray,
            outcomes: Sequence[Outcome | None]) -> None:
        """Judge ``records`` (at ``positions``) under ``variant`` one by one (summary records
        and the outcomes of variants without a columnar run: :meth:`add_run` judges those)."""
        positions = np.asarray(positions, dtype=np.int64)
        summary = np.fromiter((r.summary for r in records), dtype=bool, count=len(records))
        found: list[Findings] = []
        tables: list[RangeTable] = []  # each replayed record's, its record numbered 0
        for record, outcome in zip(records, outcomes, strict=True):
            if record.summary:
                found.append(summary_findings(record))
                continue
            findings, checks = judged_record(record, outcome)
            found.append(findings)
            tables.append(checks.range_table())
        self._held(found)
        _keep(self._found[variant], positions, found)
        self._blind[variant] |= {int(i) for i, r, o in zip(positions, records, outcomes,
                                                          strict=True)
                                 if o is not None and o.accesses is None and o.status == OK_OUTCOME
                                 and not r.summary}
        self._errors[variant] |= {r.site for r, o in zip(records, outcomes, strict=True)
                                  if o is not None and o.status == ERROR}
        rec, tensors, which, numbers = summary_checks(
            [r for r in records if r.summary]).range_table()
        self._add_ranges(variant, positions[summary][rec], self._codes(tensors)[which], numbers)
        if tables:
            self._add_ranges(
                variant, np.repeat(positions[~summary], [len(t[0]) for t in tables]),
                np.concatenate([self._codes(t[1])[t[2]] for t in tables]),
                np.concatenate([t[3] for t in tables]))

    def _add_ranges(self, variant: str, rec: np.ndarray, codes: np.ndarray,
                    numbers: np.ndarray) -> None:
        """Keep checked ranges: per group, its record's position, its tensor's code
        (:meth:`_codes`) and ``(min, max, lower, upper)``."""
        if len(rec):
            self._ranges.append((variant, rec, codes, numbers))

    def add_run(self, variant: str | None, site: str, positions: np.ndarray,
                run: JudgedRun) -> None:
        """Keep the judged columnar ``run`` (:meth:`JudgedRun.of`) of the records at
        ``positions`` (all of ``site``) under ``variant`` (None: the ``upstream`` model run
        only to find origins): its findings, checked ranges and error outcomes."""
        found = self._reference_store() if variant is None else self._found[variant]
        self._held(run.found.values())
        for i, fs in run.found.items():  # a copy: a judged run may be kept for two variants
            found[int(positions[i])] = [dict(f) for f in fs]
        if variant is None:
            return
        if run.error:
            self._errors[variant].add(site)
        self._add_ranges(variant, positions[run.rec], self._codes(run.tensors)[run.which],
                         run.numbers)

    def _codes(self, tensors: Sequence[str]) -> np.ndarray:
        """Tensor names as small codes (the names are few; a range is kept by the million)."""
        codes = self._tensors
        return np.fromiter((codes.setdefault(t, len(codes)) for t in tensors), dtype=np.int32,
                           count=len(tensors))

    def _reference_store(self) -> dict[int, Findings]:
        if self._reference is None:
            self._reference = {}
        return self._reference

    def add_reference(self, records: Sequence[Record], positions: np.ndarray,
                      outcomes: Sequence[Outcome | None]) -> None:
        """Judge ``records`` (at ``positions``) under the ``upstream`` model run only to find
        origins."""
        found = judge_all(records, outcomes)
        self._held(found)
        _keep(self._reference_store(), positions, found)

    def coordinates(self) -> np.ndarray:
        """One row per record noted so far, by position: site order, step, rank, summary
        (int64)."""
        if len(self._coords) != 1 or not np.array_equal(
                self._coords[0][0], np.arange(self._count)):
            coords = np.zeros((self._count, 4), dtype=np.int64)
            for positions, rows in self._coords:
                coords[positions] = rows
            self._coords = [(np.arange(self._count), coords)]
        return self._coords[0][1]

    def findings(self) -> pd.DataFrame:
        """The findings table of every variant (see :func:`build_findings`)."""
        coords = self.coordinates()
        reference = self._origin_reference()
        origins = Origins(coords, reference)
        rows = []
        for name in self.variants:
            found = self._found[name]
            name_raised(found, reference)
            annotate_sink(coords, found, origins)
            unseen = not_judged(coords, reference, self._blind[name], found)
            base = name == baseline_of(self.variants)
            for i in sorted(found.keys() | unseen.keys()):
                site, step, rank = SITES[coords[i, 0]], int(coords[i, 1]), int(coords[i, 2])
                summary = bool(coords[i, 3]) and not base
                rows += [{"variant": name, "site": site, "step": step, "rank": rank, **f,
                          "record": i, "judged": not summary or f.get("resolved") is True}
                         for f in found.get(i, [])]
                rows += [{"variant": name, "site": site, "step": step, "rank": rank, **f,
                          "origin": None, "resolved": None, "record": i, "judged": False}
                         for f in unseen.get(i, [])]
        return _frame(rows, self.variants)

    def _origin_reference(self) -> dict[int, Findings]:
        """The findings origins are found in: the ``upstream`` model's run only for them, else
        the ``upstream`` variant's."""
        return self._reference if self._reference is not None else self._found.get(
            "upstream", {})

    def token_origins(self) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
        """``(variant, token) -> token`` with its value's origin and whether ``variant``
        resolves it there (:func:`forensics.judge.origins.annotate_token`), for
        :func:`with_continuity`."""
        coords = self.coordinates()
        origins = Origins(coords, self._origin_reference())
        return lambda variant, token: annotate_token(coords, self._found[variant], origins, token)

    def with_continuity(self, findings: pd.DataFrame, found: Sequence[dict[str, Any]]
                        ) -> pd.DataFrame:
        """:func:`with_continuity` of every variant, each wrong token's origin placed."""
        return with_continuity(findings, found, self.variants, self.coordinates(),
                               self.token_origins())

    def verdicts(self, findings: pd.DataFrame) -> dict[str, dict[str, str]]:
        """``{variant: {site: verdict}}`` (see :func:`verdicts`)."""
        coords = self.coordinates()
        sites = [SITES[code] for code in np.unique(coords[:, 0])]
        replayed = {SITES[code] for code in np.unique(coords[coords[:, 3] == 0, 0])}
        return _verdicts(sites, self._errors, findings, set(sites) - replayed)

    def bounds(self) -> pd.DataFrame:
        """The ``ReplayResult.bounds`` table, ordered by variant, then record. It takes the
        ranges over: a second call gives an empty table."""
        return self.deferred_bounds()()

    def deferred_bounds(self) -> Callable[[], pd.DataFrame]:
        """A function building :meth:`bounds` later (the replay's result builds it when first
        read); it takes the ranges over as :meth:`bounds` does."""
        pieces, self._ranges = self._ranges, []
        return functools.partial(_bounds_table, pieces, self.coordinates(), self.variants,
                                 list(self._tensors), self._count)


def _bounds_table(pieces: list[tuple[str, np.ndarray, np.ndarray, np.ndarray]],
                  coords: np.ndarray, variants: list[str], tensors: list[str],
                  count: int) -> pd.DataFrame:
    """The ``ReplayResult.bounds`` table from the checked ranges kept piece by piece
    (:meth:`Judge._add_ranges`), ordered by variant, then record. It takes ``pieces`` over
    (empties the list) and lets each go once read."""
    taken = list(pieces)
    pieces.clear()
    if not taken:
        return bounds_frame([])
    import pandas as pd

    order = {name: i for i, name in enumerate(variants)}
    variant = np.concatenate([np.full(len(r[1]), order[r[0]], np.int8) for r in taken])
    rec = np.concatenate([r[1] for r in taken])
    # variant, then record (chunks interleave them); a stable sort keeps ties in order
    keep = np.argsort(variant.astype(np.int64) * max(count, 1) + rec, kind="stable")
    rec, variant = rec[keep], variant[keep]
    tensor = np.concatenate([r[2] for r in taken])[keep]
    numbers = np.concatenate([r[3] for r in taken])
    del taken
    numbers = numbers[keep]
    del keep
    columns = {
        "variant": coded_strings(variants, variant),
        "site": coded_strings(SITES, coords[rec, 0]),
        "step": coords[rec, 1], "rank": coords[rec, 2], "record": rec,
        "tensor": coded_strings(tensors, tensor),
        **{c: numbers[:, j] for j, c in enumerate(("min", "max", "lower", "upper"))}}
    return pd.DataFrame(columns, columns=list(BOUNDS_COLUMNS), copy=False)


@dataclass(frozen=True)
class JudgedRun:
    """A model's columnar run judged, as :meth:`Judge.add_run` keeps it: the run's status per
    record and messages, findings per record (batch positions), and the checked ranges (each
    group's record, ``tensors[which]`` and ``(min, max, lower, upper)``). A pure function of
    the run, so a replay computes it on a worker thread."""

    status: np.ndarray
    messages: dict[int, str]
    found: dict[int, Findings]
    rec: np.ndarray
    tensors: list[str]
    which: np.ndarray
    numbers: np.ndarray

    @classmethod
    def of(cls, run: BatchRun, known: dict[int, JudgedRun] | None = None) -> JudgedRun:
        """Judge ``run``: its findings and checked ranges. ``known``: the runs of this batch
        judged so far, by ``id`` of the run (the caller keeps the runs alive): a run object
        that several variants returned is judged once, and a run that inherits records from
        a ``base`` run (:class:`~forensics.sites.core.BatchRun`) takes their results from
        ``base``'s judgment, judging only its own records' checks."""
        if known is None:
            known = {}
        key = id(run)
        if key not in known:
            if run.base is None:
                known[key] = cls._judged(run)
            else:
                own = cls._judged(run)
                known[key] = own.merged(cls.of(run.base, known), run.inherited_mask())
        return known[key]

    @classmethod
    def _judged(cls, run: BatchRun) -> JudgedRun:
        """``run`` judged from its own checks alone."""
        rec, tensors, which, numbers = run.checks.range_table()
        return cls(run.status, run.messages, run.checks.findings(run.req_ids), rec, tensors,
                   which, numbers)

    def merged(self, base: JudgedRun, inherited: np.ndarray) -> JudgedRun:
        """This judgment with the records ``inherited`` (a bool per record) taken from
        ``base``'s: status, messages, findings and checked ranges (each record's ranges from
        one of the two, in record order)."""
        status = np.where(inherited, base.status, self.status).astype(self.status.dtype)
        mine, theirs = self.rec_mask(~inherited), base.rec_mask(inherited)
        tensors = list(dict.fromkeys([*base.tensors, *self.tensors]))
        recode = np.array([tensors.index(t) for t in self.tensors], dtype=np.intp)
        rec = np.concatenate([base.rec[theirs], self.rec[mine]])
        order = np.argsort(rec, kind="stable")
        which = np.concatenate([base.which[theirs], recode[self.which[mine]]])
        numbers = np.concatenate([base.numbers[theirs], self.numbers[mine]])
        return JudgedRun(status, per_record(base.messages, self.messages, inherited),
                         per_record(base.found, self.found, inherited), rec[order], tensors,
                         which[order], numbers[order])

    def rec_mask(self, records: np.ndarray) -> np.ndarray:
        """Which checked ranges belong to the records where ``records`` (a bool per record)."""
        return records[self.rec] if len(self.rec) else np.zeros(0, dtype=bool)

    @property
    def error(self) -> bool:
        """Whether some record's outcome is ``error``."""
        return bool((self.status == STATUSES.index(ERROR)).any())


def coordinates_of(records: Sequence[Record]) -> np.ndarray:
    """The coordinates the judge keeps of ``records``: site order, step, rank, summary."""
    rows = [(site_order(r.site), r.step, r.rank, r.summary) for r in records]
    return np.array(rows, dtype=np.int64).reshape(-1, 4)


def _keep(store: dict[int, Findings], positions: np.ndarray, found: list[Findings]) -> None:
    """Keep the non-empty findings of the records at ``positions`` in ``store``."""
    for i, f in zip(np.asarray(positions).tolist(), found, strict=True):
        if f:
            store[i] = f


def build_findings(records: Sequence[Record], outcomes: Mapping[str, Sequence[Outcome | None]],
                   reference: Sequence[Outcome | None] | None = None,
                   bounds: list[tuple[Any, ...]] | None = None) -> pd.DataFrame:
    """The findings table of every variant, ordered by variant then first-finding order.

    ``outcomes`` maps variant names to one outcome per record (None for summary records);
    ``reference`` holds the ``upstream`` outcomes used to find origins (default:
    ``outcomes["upstream"]``; without either, no sink finding has an origin). When ``bounds``
    is a list, the checked ranges are appended to it (columns :data:`BOUNDS_COLUMNS`).
    """
    judge = Judge(list(outcomes))
    positions = np.arange(len(records))
    judge.add_coordinates(positions, coordinates_of(records))
    for name, outs in outcomes.items():
        judge.add(name, records, positions, outs)
    if reference is not None:
        judge.add_reference(records, positions, reference)
    if bounds is not None:
        bounds += judge.bounds().itertuples(index=False, name=None)
    return judge.findings()


def empty_findings() -> pd.DataFrame:
    """An empty findings table with the fixed columns and dtypes."""
    return _frame([], [])


def _frame(rows: list[dict[str, Any]], variants: list[str]) -> pd.DataFrame:
    import pandas as pd

    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    for column in _INT_COLUMNS:  # from the rows, not the frame's floats (2**63 - 1 is exact)
        frame[column] = pd.array([row.get(column) for row in rows], dtype="Int64")
    for column in ("step", "rank", "record"):
        frame[column] = frame[column].astype("int64")
    frame["judged"] = [j is not False for j in frame["judged"]]
    for column in ("variant", "site", "tensor", "kind", "origin", "resolved", "req_id",
                   "index_tensor", "held", "indexed", "value_class", "judged", "expected_at",
                   "effect"):
        frame[column] = frame[column].astype(object)
    frame = frame.where(frame.notna(), None) if len(frame) else frame
    return sort_findings(frame, variants)


def sort_findings(frame: pd.DataFrame, variants: Sequence[str] = ()) -> pd.DataFrame:
    """``frame`` ordered by variant (in ``variants`` order), step, rank, site pipeline order,
    row, element (nulls last), keeping the judge's order among equals."""
    if frame.empty:
        return frame.reset_index(drop=True)
    order = {name: i for i, name in enumerate(variants)}
    keys = frame.assign(
        _v=frame["variant"].map(lambda v: order.get(v, len(order))),
        _s=frame["site"].map(site_order),
        _r=frame["row"].fillna(2**62).astype("int64"),
        _e=frame["element"].fillna(2**62).astype("int64"),
    )
    keys = keys.sort_values(["_v", "step", "rank", "_s", "_r", "_e"], kind="mergesort")
    return frame.loc[keys.index].reset_index(drop=True)


def verdicts(records: Sequence[Record], outcomes: Mapping[str, Sequence[Outcome | None]],
             findings: pd.DataFrame) -> dict[str, dict[str, str]]:
    """``{variant: {site: verdict}}`` for every site present in ``records``, in pipeline order.

    ``violation``: an unresolved ``out_of_bounds`` finding; else ``error``: an ``error`` outcome;
    else ``suspect``: a ``misattributed`` finding; else ``ok``.
    """
    sites = sorted({r.site for r in records}, key=site_order)
    errors = {name: {r.site for r, o in zip(records, outs, strict=True)
                     if o is not None and o.status == ERROR}
              for name, outs in outcomes.items()}
    summary_only = set(sites) - {r.site for r in records if not r.summary}
    return _verdicts(sites, errors, findings, summary_only)


def baseline_of(variants: Sequence[str]) -> str | None:
    """The variant the others are compared with: ``upstream`` when chosen, else the first."""
    return "upstream" if "upstream" in variants else (variants[0] if variants else None)


def _verdicts(sites: Sequence[str], errors: Mapping[str, set[str]], findings: pd.DataFrame,
              summary_only: set[str] = frozenset()  # type: ignore[assignment]
              ) -> dict[str, dict[str, str]]:
    """Verdicts of ``sites`` per variant of ``errors`` (the sites with an ``error`` outcome);
    a site of ``summary_only`` (nothing there replayed) is :data:`UNJUDGED` for every variant
    but the baseline."""
    result = {}
    baseline = baseline_of(list(errors))
    for name, errored in errors.items():
        mine = findings[findings["variant"] == name]
        judged = is_judged(mine)
        unseen = set(mine.loc[~judged, "site"])
        mine = mine[judged]
        # a wrong token whose out-of-range value the variant no longer writes at its origin
        # is resolved there, as a sink finding is
        mine = mine[~(mine["kind"].isin(CONTINUITY_KINDS) & (mine["resolved"] == True))]  # noqa: E712
        wrong_token = mine["kind"].isin(CONTINUITY_KINDS) & (mine.get("effect", "") == VERIFIED)
        unresolved = mine[((mine["kind"] == OUT_OF_BOUNDS) & (mine["resolved"] != True))  # noqa: E712
                          | wrong_token]
        # an unwritten input is race evidence, not a misused index: it leaves the verdict
        suspect = set(mine.loc[~mine["kind"].isin([OUT_OF_BOUNDS, UNWRITTEN_INPUT]), "site"])
        result[name] = {site: UNJUDGED if name != baseline and site in summary_only
                        else _verdict(site, set(unresolved["site"]), errored, suspect, unseen)
                        for site in sites}
    return result


def is_judged(findings: pd.DataFrame) -> pd.Series:
    """Per finding, whether its variant could judge it (``judged`` not false; a table without
    the column: every finding)."""
    import pandas as pd

    if "judged" not in findings.columns:
        return pd.Series(True, index=findings.index)
    return (findings["judged"] != False).astype(bool)  # noqa: E712  (null: judged)


def _verdict(site: str, violations: set[str], errors: set[str], suspect: set[str],
             unseen: set[str] = frozenset()) -> str:  # type: ignore[assignment]
    if site in violations:
        return VIOLATION
    if site in errors:
        return ERROR_VERDICT
    if site in suspect:
        return SUSPECT
    return UNJUDGED if site in unseen else OK


def first_finding(findings: pd.DataFrame, variant: str,
                  keys: Sequence[str] = FIRST_FINDING_KEYS) -> dict[str, Any] | None:
    """The first finding of ``variant`` (step, rank, site order, row, element) as a dict of
    ``keys`` (columns of the findings table; default :data:`FIRST_FINDING_KEYS`, the keys of
    ``expected.json``; pass :data:`COLUMNS` for the bound, origin, ``resolved`` and request),
    or None when it has none."""
    unknown = [key for key in keys if key not in findings.columns]
    if unknown:
        raise KeyError(f"first_finding: no findings column {unknown[0]!r}; "
                       f"choose among {', '.join(findings.columns)}")
    mine = sort_findings(findings[findings["variant"] == variant])
    if mine.empty:
        return None
    return {key: to_python(mine.iloc[0][key]) for key in keys}


def to_python(value: Any) -> Any:
    """A JSON-ready Python value: numpy/pandas scalars unwrapped, NA as None."""
    import pandas as pd

    if value is None or (not isinstance(value, (str, list, dict)) and pd.isna(value)):
        return None
    if hasattr(value, "item"):
        return value.item()
    return value


def with_continuity(findings: pd.DataFrame, found: Sequence[dict[str, Any]],
                    variants: Sequence[str], coords: np.ndarray,
                    placed: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None
                    ) -> pd.DataFrame:
    """``findings`` with the token continuity findings ``found`` (rows of
    :func:`forensics.judge.continuity.finding_of`) added for every variant: they are facts of
    the capture, the same whatever code replays it, but for the ``origin`` of a wrong token's
    out-of-range value and whether the variant resolves it there (``placed``:
    :meth:`Judge.token_origins`; None: neither known). ``record`` is the position of the
    record of their site, step and rank (``coords``: :meth:`Judge.coordinates`)."""
    if not found:
        return findings
    import pandas as pd

    where = {(int(c[0]), int(c[1]), int(c[2])): i for i, c in enumerate(coords.tolist())
             if not c[3]}
    rows = [{**(f if placed is None else placed(v, f)), "variant": v,
             "record": where.get((site_order(f["site"]), f["step"], f["rank"]), -1)}
            for v in variants for f in found]
    added = _frame(rows, list(variants))
    merged = added if findings.empty else pd.concat([findings, added], ignore_index=True)
    return sort_findings(merged, variants)


def with_unwritten(findings: pd.DataFrame, found: Sequence[dict[str, Any]],
                   variants: Sequence[str]) -> pd.DataFrame:
    """``findings`` with the ``unwritten_input`` findings ``found`` (rows of
    :func:`forensics.judge.race.as_findings`, each under the baseline variant that judged it)
    added in first order."""
    if not found:
        return findings
    import pandas as pd

    added = _frame(list(found), list(variants))
    merged = added if findings.empty else pd.concat([findings, added], ignore_index=True)
    return sort_findings(merged, variants)


def finding_records(findings: pd.DataFrame) -> list[dict[str, Any]]:
    """The findings as JSON-ready dicts (columns :data:`COLUMNS`)."""
    return [{c: to_python(v) for c, v in zip(COLUMNS, row, strict=True)}
            for row in findings[list(COLUMNS)].itertuples(index=False, name=None)]


def coded_strings(names: Sequence[str], codes: np.ndarray) -> Any:
    """The column ``names[codes]`` as pandas builds a column of Python strings (its default
    string dtype), decoded by Arrow from the codes: no Python string per row (a replay's
    tables hold hundreds of thousands of rows naming a few variants, sites and tensors)."""
    import pandas as pd

    dtype = pd.Series(["x"]).dtype
    if pd.api.types.is_object_dtype(dtype):
        return np.array(list(names), dtype=object)[codes]
    import pyarrow as pa

    column = pa.DictionaryArray.from_arrays(pa.array(np.asarray(codes, dtype=np.int32)),
                                            pa.array(list(names), type=pa.string()))
    # cast straight to the Arrow type pandas keeps (large_string): a cast to ``string`` first
    # would have pandas convert every row again (4x the time of one cast)
    stored = pa.array(pd.array(["x"], dtype=dtype)).type
    return pd.array(column.cast(stored), dtype=dtype)


def bounds_frame(rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    """The ``ReplayResult.bounds`` table (columns :data:`BOUNDS_COLUMNS`) from collected rows."""
    import pandas as pd

    return pd.DataFrame(rows, columns=list(BOUNDS_COLUMNS))
