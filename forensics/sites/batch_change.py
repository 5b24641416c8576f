"""Site ``batch_change``: ``vllm.v1.spec_decode.utils.update_num_computed_tokens_for_batch_change``.

vLLM 0.33.0 gathers ``valid_sampled_token_count``, ``num_computed_tokens`` and
``prev_num_draft_tokens`` at ``prev_positions.clamp(min=0)`` for every row, with no upper check.
A row takes ``prev_computed + valid_count`` when ``prev_position >= 0`` and its previous drafts
were > 0, otherwise the CPU value; ``num_accepted_tokens`` takes ``valid_count`` on those rows.
The patched model counts a row as previous only when ``0 <= prev_position < len(t)`` for every
gathered tensor ``t`` and gathers nothing for other rows.

``run_batch`` runs many records at once in numpy; records numpy cannot run exactly, and the
Outcome of a record (its outputs), go through ``_run``, the same torch operations as vLLM.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import numpy as np

from forensics.outcome import INDEX_ERROR, STATUSES, Access, Outcome
from forensics.records import FieldSpec, Record
from forensics.screening import as_int64
from forensics.sites._common import (
    MISATTRIBUTED,
    BatchColumns,
    RecordColumns,
    RowValues,
    RunColumns,
    Violation,
    failed,
    first_outside,
    other_holder,
    require_rows,
    run_each,
    screen_rows,
)
from forensics.sites._fields import PREV_REQUESTS
from forensics.sites.core import (
    BatchRun,
    CheckList,
    Checks,
    owner,
    select_runs,
    starts_of,
    within,
)
from forensics.sites.scan_counts import IndexCount, ScanColumns, at_or_past, outside

if TYPE_CHECKING:
    import torch

NAME = "batch_change"
FIELDS = (
    FieldSpec("prev_positions", "tensor", rank_shared=True,
              doc="[n] current row -> previous row, -1 for new"),
    FieldSpec("valid_sampled_token_count", "tensor", doc="[p] per previous row"),
    FieldSpec("num_computed_tokens", "tensor", doc="[m] max_num_reqs buffer"),
    FieldSpec("num_accepted_tokens", "tensor", doc="[n]"),
    FieldSpec("prev_num_draft_tokens", "tensor", doc="[q] max_num_reqs buffer"),
    FieldSpec("cpu_num_computed_tokens", "tensor", doc="[n]"),
    FieldSpec("req_ids", "str_list", required=False, doc="current rows' request ids"),
    *PREV_REQUESTS,
)
OUTPUT_FIELDS = ("num_computed_tokens", "num_accepted_tokens")
SUMMARY_BOUND = "bound"
#: the tensor a summary record's min/max describe (unless the record names one in ``tensor``)
SUMMARY_TENSOR = "prev_positions"
#: the tensors gathered at the clamped previous positions, in vLLM's order
GATHERED = ("valid_sampled_token_count", "num_computed_tokens", "prev_num_draft_tokens")
_FAST_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))
#: fields with one entry per current row
_ROWS = ("num_accepted_tokens", "cpu_num_computed_tokens", "req_ids")


def check_record(record: Record, where: str) -> None:
    """Cross-field checks: per-row tensors and request ids have one entry per current row.

    Raises:
        CaptureFormatError: naming the field and the expected length.
    """
    require_rows(record, _ROWS, where)


def check_batch(cols: BatchColumns) -> np.ndarray:
    """:func:`check_record` on a whole batch at once: the records it may reject."""
    return screen_rows(cols, _ROWS)


def _run(record: Record, guard: bool) -> Outcome:
    """The call on one record through torch, as vLLM 0.33.0 makes it (``guard``: the
    stale-row guard: out-of-range previous rows fall back to the CPU value): outputs
    ``num_computed_tokens`` (whole buffer) and ``num_accepted_tokens``; ``index_error`` when a
    clamped position is past a gathered tensor."""
    import torch

    pp = _signed(record, "prev_positions")
    gathered = [_signed(record, name) for name in GATHERED]
    num_computed = _signed(record, "num_computed_tokens").clone()
    num_accepted = _signed(record, "num_accepted_tokens").clone()
    cpu = _signed(record, "cpu_num_computed_tokens")
    n = pp.shape[0]
    previous = pp >= 0
    for tensor in gathered:
        previous &= pp < tensor.shape[0]
    rows = torch.nonzero(previous).reshape(-1) if guard else torch.arange(n)
    gather_indices = pp[rows].clamp(min=0)
    accesses = [_access(name, rows.numpy(), gather_indices.numpy(), t.shape[0])
                for name, t in zip(GATHERED, gathered, strict=True)]
    try:
        valid_counts, prev_computed, prev_drafts = (t[gather_indices] for t in gathered)
        if guard:
            valid_counts, prev_computed, prev_drafts = (
                torch.zeros(n, dtype=v.dtype).index_copy_(0, rows, v)
                for v in (valid_counts, prev_computed, prev_drafts))
        participating = (pp >= 0) & (prev_drafts > 0)
        corrected = prev_computed + valid_counts.int()
        num_computed[:n].copy_(torch.where(participating, corrected, cpu))
        num_accepted.copy_(torch.where(participating, valid_counts, num_accepted))
    except Exception as exc:  # noqa: BLE001  (the outcome records any failure of the call)
        return failed(exc, accesses)
    outputs = {"num_computed_tokens": num_computed.numpy(),
               "num_accepted_tokens": num_accepted.numpy()}
    return Outcome("ok", "", outputs, accesses)


def _signed(record: Record, name: str) -> torch.Tensor:
    """Tensor field ``name`` for torch: an unsigned one wider than a byte (which torch cannot
    compare) as int64, the same values.

    Raises:
        ScreenUnsure: a value past int64 (the replay refuses the record, naming the field).
    """
    values = record[name]
    if values.dtype.kind == "u" and values.dtype.itemsize > 1:
        import torch

        return torch.from_numpy(as_int64(np.asarray(values), name))
    return record.tensor(name)


def gathered_rows(prev_positions: np.ndarray) -> np.ndarray:
    """The previous rows vLLM gathers at, one per row: ``prev_positions.clamp(min=0)`` (a new
    row's ``-1`` reads row 0), unchecked against the gathered tensors' lengths (the rule the
    columnar run, the scan and the probe's guard share; the torch model runs vLLM's own)."""
    return np.maximum(prev_positions, 0)


def guard(prev_positions: np.ndarray, lengths: Mapping[str, int]) -> Violation | None:
    """The probe's per-call check (``Site.guard``): rows gather every tensor of
    :data:`GATHERED` (``lengths`` holds their lengths, and may hold other tensors') at
    :func:`gathered_rows`, unchecked; the first gather outside its tensor, or None."""
    gather = gathered_rows(np.asarray(prev_positions))
    for tensor in GATHERED:
        length = lengths[tensor]
        row = first_outside(gather, 0, length)
        if row is not None:
            return Violation(NAME, row, tensor, int(gather[row]), 0, int(length))
    return None


def _access(name: str, rows: np.ndarray, values: np.ndarray, upper: int) -> Access:
    rows = np.asarray(rows, dtype=np.int64)
    return Access(name, rows, rows, np.asarray(values, dtype=np.int64), 0, int(upper),
                  "prev_positions", stale=True)


def _regular(cols: RunColumns) -> np.ndarray:
    """The records numpy runs exactly as torch does: int32/int64 tensors, per-row tensors of
    one entry per row, a ``num_computed_tokens`` buffer that holds every row."""
    n = cols.length("prev_positions")
    plain = all(cols.dtype(spec.name) in _FAST_DTYPES for spec in FIELDS
                if spec.kind == "tensor")
    return (np.full(cols.rows, plain) & (cols.length("num_accepted_tokens") == n)
            & (cols.length("cpu_num_computed_tokens") == n)
            & (cols.length("num_computed_tokens") >= n))


class _Batch:
    """The regular records ``rows`` of ``cols`` laid end to end: one numpy pass over all
    their rows."""

    def __init__(self, cols: RunColumns, rows: np.ndarray) -> None:
        self.cols, self.rows = cols, rows
        self._holder: np.ndarray | None = None
        self.pp, self.ns = self._field("prev_positions")
        self.starts = starts_of(self.ns)
        self.rec = owner(self.ns)
        self.local = within(self.ns)
        self.gather = gathered_rows(self.pp)
        #: the gathered tensors' lengths per record, and the rows that read past one (past
        #: the shortest)
        self.uppers = {name: self._field(name, widen=False)[1] for name in GATHERED}
        shortest = np.minimum.reduce(list(self.uppers.values()))
        self.outside = self.gather >= shortest[self.rec]
        self._misattributed: Checks | None = None

    def _field(self, name: str, widen: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Tensor ``name`` of the batch's records end to end (int64 when ``widen``, else at
        its captured width) and their lengths."""
        values, counts = self.cols.flat(name, widen)
        if len(self.rows) == self.cols.rows:
            return values, counts
        return select_runs(values, counts, self.rows)

    def compute(self, guard: bool) -> None:
        """Run every record as the judge reads it: which rows gather (``used``) and the
        failed records."""
        self.used = (self.pp >= 0) & ~self.outside if guard else np.ones(len(self.pp), bool)
        self.failed = np.zeros(len(self.rows), dtype=bool)
        if not guard:
            self.failed[self.rec[self.outside]] = True

    def checks(self, guard: bool) -> CheckList:
        """The gathers of every record as checks (``guard``: only the rows patched gathers,
        those of a previous row inside every tensor), then its misattributed rows."""
        at: np.ndarray | None = None
        if guard:
            at = np.flatnonzero((self.pp >= 0) & ~self.outside)
            first = self._gathers(self.pp[at], _per_record(at, self.ns), at)
        else:
            first = self._gathers(self.gather, self.ns, None)
        others = [first.sharing(name, _looked_up(self.uppers[name], self.rec, at))
                  for name in GATHERED[1:]]
        return Checks.concat([first, *others, self.misattributed()])

    def _gathers(self, value: np.ndarray, counts: np.ndarray, at: np.ndarray | None
                 ) -> Checks:
        """The first gathered tensor's checks of the rows ``at`` (None: every row), which
        read ``value`` (``counts`` per record): one group per record, the other columns
        looked up only where the judge reads them."""
        row = _looked_up(self.local, None, at)
        return Checks(GATHERED[0], 0, _looked_up(self.rec, None, at), row, row, value,
                      np.broadcast_to(np.int64(0), value.shape),
                      _looked_up(self.uppers[GATHERED[0]], self.rec, at),
                      starts_of(counts)[counts > 0], index_tensor="prev_positions",
                      indexed=GATHERED[0], stale=True)

    def misattributed(self) -> Checks:
        """The in-range previous rows held by another request: the same for both models
        (upstream gathers every row, patched every row of an in-range previous position)."""
        if self._misattributed is None:
            wrong = ~self.outside & (self.pp >= 0) & self.holder()
            self._misattributed = Checks.of(
                "prev_positions", self.rec[wrong], self.local[wrong], self.local[wrong],
                self.pp[wrong], None, None, MISATTRIBUTED)
        return self._misattributed

    def holder(self) -> np.ndarray:
        """Per row: whether its previous row was held by another request (computed once
        for the batch's columns: the same for every variant)."""
        if self._holder is None:
            pp, counts = self.cols.flat("prev_positions")
            holder = other_holder(self.cols, pp, counts)
            if len(self.rows) != self.cols.rows:
                holder = select_runs(holder, counts, self.rows)[0]
            self._holder = holder
        return self._holder

    def message(self, r: int) -> str:
        """The IndexError message of failed record ``r``."""
        sl = slice(self.starts[r], self.starts[r] + self.ns[r])
        return _bounds_message(self.gather[sl][self.used[sl]], self.uppers, r)

def _per_record(at: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """How many of the rows ``at`` (increasing positions among rows laid end to end in runs
    of ``counts``, one run per record) each record holds."""
    return np.diff(np.searchsorted(at, np.cumsum(counts)), prepend=0)


def _looked_up(values: np.ndarray, by: np.ndarray | None, at: np.ndarray | None
               ) -> Callable[[np.ndarray], np.ndarray]:
    """A :class:`Checks` column read where needed: entry ``i`` is ``values[by[at[i]]]``
    (``by``/``at`` None: the identity)."""
    return functools.partial(_look_up, values, by, at)


def _look_up(values: np.ndarray, by: np.ndarray | None, at: np.ndarray | None,
             entries: np.ndarray) -> np.ndarray:
    rows = entries if at is None else at[entries]
    return values[rows if by is None else by[rows]]


Prepared = tuple[RunColumns, np.ndarray, "_Batch"]


def prepare_columns(cols: RunColumns) -> Prepared:
    """What :func:`run_batch` runs: the columns, which of their records are regular and
    those laid end to end (shared by the variants)."""
    regular = np.flatnonzero(_regular(cols))
    return cols, regular, _Batch(cols, regular)


def run_batch(prepared: Prepared, patched: bool) -> BatchRun:
    """The columnar run of prepared records as the judge reads it (regular records in one
    numpy pass, the others one by one through torch); a record's Outcome, its outputs, is
    made through torch on demand."""
    cols, regular, batch = prepared
    status = np.zeros(cols.rows, dtype=np.int8)
    messages: dict[int, str] = {}
    parts = []
    if len(regular):
        batch.compute(patched)
        checks = batch.checks(patched)
        parts.append(checks if len(regular) == cols.rows else checks.renumbered(regular))
        for j in np.flatnonzero(batch.failed).tolist():
            status[regular[j]] = STATUSES.index(INDEX_ERROR)
            messages[int(regular[j])] = batch.message(j)
    irregular = np.ones(cols.rows, dtype=bool)
    irregular[regular] = False
    run = BatchRun(status, messages, Checks.concat(parts), RowValues(cols, "req_ids"),
                   outcome=lambda i: _run(cols.record(i), patched))
    return run_each(cols, _run, patched, outcome_checks, np.flatnonzero(irregular).tolist(), run)


def outcome_checks(record: Record, outcome: Outcome) -> CheckList:
    """The checks of any variant's outcome on one record: its gathers, then the misattributed
    rows among the in-range gathers (request ids known)."""
    accesses = list(outcome.accesses or ())
    parts = [Checks.of_access(a) for a in accesses]
    if accesses and accesses[0].rows is not None:
        pp = np.asarray(record["prev_positions"], dtype=np.int64)
        read = np.zeros(len(pp), dtype=bool)
        read[np.asarray(accesses[0].rows, dtype=np.int64)] = True
        for a in accesses:
            values = np.asarray(a.values, dtype=np.int64)
            outside = (values < a.lower) | (values >= a.upper)
            read[np.asarray(a.rows, dtype=np.int64)[outside]] = False
        holder = other_holder(RecordColumns([record]), pp, np.array([len(pp)]))
        wrong = np.flatnonzero(read & (pp >= 0) & holder)
        parts.append(Checks.of("prev_positions", 0, wrong, wrong, pp[wrong], None, None,
                               MISATTRIBUTED))
    return Checks.concat(parts)


def _bounds_message(gather: np.ndarray, uppers: dict[str, np.ndarray], r: int) -> str:
    for name in GATHERED:
        bad = gather[gather >= uppers[name][r]]
        if len(bad):
            return (f"IndexError: index {int(bad[0])} is out of bounds for dimension 0 "
                    f"with size {int(uppers[name][r])}")
    raise AssertionError("no out-of-bounds index in a failed record")


def scan_indices(cols: ScanColumns) -> list[IndexCount]:
    """The captured index checks (see :mod:`forensics.sites.scan_counts`): every row gathers
    each tensor of :data:`GATHERED` at ``prev_positions.clamp(min=0)``, valid in
    ``[0, len(tensor))``."""
    pp, sizes, _ = cols.tensor("prev_positions")
    gather: np.ndarray | None = None
    counts = []
    for name in GATHERED:
        _, lengths, _ = cols.tensor(name)
        if len(lengths) and lengths.min() > 0:
            # clamp(min=0) lands inside a non-empty tensor: only ``>= len`` is outside
            bad = at_or_past(pp, lengths, sizes, cols.bools("compare", len(pp)))
        else:
            gather = gathered_rows(pp) if gather is None else gather
            bad = outside(gather, lengths, sizes)
        counts.append(IndexCount(name, len(pp), bad))
    return counts


from forensics.sites.base import Site  # noqa: E402  (the SITE declaration closes the module)

#: this module's site: its schema and operations (the registry holds it)
#: ``forensics repro``: the vLLM function a standalone test calls with one record ``r``,
#: and the test body that calls it (``{lower}``/``{upper}``: the first finding's bound)
REPRO = ('vllm.v1.spec_decode.utils.update_num_computed_tokens_for_batch_change',
         '''    from vllm.v1.spec_decode import utils

    args = [r[name].clone() for name in (
        "num_computed_tokens", "num_accepted_tokens", "prev_positions",
        "valid_sampled_token_count", "prev_num_draft_tokens", "cpu_num_computed_tokens")]
    real(utils.update_num_computed_tokens_for_batch_change)(*args)
    return []
''')


SITE = Site(name=NAME, fields=FIELDS, output_fields=OUTPUT_FIELDS, summary_bound=SUMMARY_BOUND,
            summary_tensor=SUMMARY_TENSOR,
            adapter="forensics.variants.vllm_adapters:run_update_num_computed_tokens",
            hook="vllm.v1.spec_decode.utils:update_num_computed_tokens_for_batch_change",
            repro=REPRO,
            checks=outcome_checks, scan_indices=scan_indices, guard=guard,
            check_record=check_record, check_batch=check_batch, prepare_columns=prepare_columns,
            run_batch=run_batch)
