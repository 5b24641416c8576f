"""``scan`` of ``prepare_input_ids``: the previous positions and draft indices each record reads,
counted against their bounds without replaying a call."""

from __future__ import annotations

import numpy as np

from forensics.sites.prepare_input_ids.plans import one_slice
from forensics.sites.prepare_input_ids.records import DRAFTS, SAMPLED
from forensics.sites.scan_counts import IndexCount, ScanColumns, per_value, run_max, run_starts


def scan_indices(cols: ScanColumns) -> list[IndexCount]:
    """The captured index checks (see :mod:`forensics.sites.scan_counts`): the previous
    positions of the common rows (``>= 0``) read ``prev_sampled_token_ids``, valid in
    ``[0, rows)``; on the slow path, row by row, the drafts ``prev_position *
    prev_num_spec_tokens + j`` (``j < num_draft_tokens[row]``), valid in
    ``[0, draft_token_ids.size)``."""
    pp, n, _ = cols.tensor("prev_positions")
    sampled_rows = cols.first_dim(SAMPLED)
    common = np.greater_equal(pp, 0, out=cols.bools("common", len(pp)))
    top = run_max(pp, n)
    bad = 0
    if (top >= sampled_rows).any():  # else no row reads past the sampled rows
        bad = int(np.count_nonzero(common & (pp >= per_value(sampled_rows, n))))
    counts = [IndexCount(SAMPLED, int(np.count_nonzero(common)), bad)]
    if cols.has(DRAFTS):
        counts.append(_scan_drafts(cols, pp, n, top, common))
    return counts


def _scan_drafts(cols: ScanColumns, pp: np.ndarray, n: np.ndarray, top: np.ndarray,
                 common: np.ndarray) -> IndexCount:
    """Draft reads of the slow path: ``pp * k + j`` for ``j < num_draft_tokens[row]``."""
    _, draft_size, present = cols.tensor(DRAFTS)
    cu = cols.tensor("cu_num_tokens")[0]
    nd = cols.tensor("num_draft_tokens")[0]
    k = cols.ints("prev_num_spec_tokens")
    flat = np.subtract(cu, 1, dtype=np.int64, out=cols.int64s("flat", len(cu)))
    slow = _scan_slow_path(pp, flat, common, n, top, cols.bools("mismatch", len(pp)))
    records = slow & present
    read = common if records.all() else common & np.repeat(records, n)  # rows read
    checked = int(nd.sum(dtype=np.int64)) - int(nd[~read].sum(dtype=np.int64))
    if not len(nd) or (nd.min() >= 0 and not (records & (_reach(top, k, nd) > draft_size)).any()):
        return IndexCount(DRAFTS, checked, 0)  # no read past the size: nothing to count
    return IndexCount(DRAFTS, checked, _drafts_past(pp, n, k, nd, draft_size, read))


def _reach(top: np.ndarray, k: np.ndarray, nd: np.ndarray) -> np.ndarray:
    """Per record, a bound on one past its last draft read (``pp * k + nd`` of a read row,
    whose ``pp`` lies in ``[0, top]``): from each record's largest position and the largest
    count, no pass over the rows. Values too large to multiply exactly give no bound."""
    limit = 1 << 31
    if top.max(initial=0) >= limit or not -limit < k.min(initial=0) <= k.max(initial=0) < limit:
        return np.full(len(top), np.iinfo(np.int64).max, dtype=np.int64)
    return np.maximum(np.maximum(top, 0).astype(np.int64) * k, 0) + int(nd.max())


def _drafts_past(pp: np.ndarray, n: np.ndarray, k: np.ndarray, nd: np.ndarray,
                 draft_size: np.ndarray, read: np.ndarray) -> int:
    """Count of the draft reads of the rows ``read`` (``pp * k + j``, ``j < nd``) outside
    ``[0, draft_size)``."""
    # reads j < nd at pp * k + j (>= 0 on common rows): ``ends`` is one past the last read
    ends = np.multiply(pp, per_value(k, n), dtype=np.int64)
    np.add(ends, nd, out=ends)
    reads = nd.astype(np.int64)
    over = ends - per_value(draft_size, n)
    hit = np.flatnonzero(read & ((over > 0) | (reads < 0)))
    wanted, past = reads[hit], over[hit]
    return int(np.clip(wanted - np.maximum(wanted - past, 0), 0, wanted).sum())


def _scan_slow_path(pp: np.ndarray, flat: np.ndarray, common: np.ndarray, n: np.ndarray,
                    top: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """Per record: True when the call scatters row by row (not the one-slice fast path: every
    common row has ``pp == flat`` and the largest common ``flat`` is ``num_common - 1``).
    ``top``: each record's largest ``pp``, which is its largest common ``flat`` whenever every
    common row has ``pp == flat`` (rows that are not common have ``pp < 0``). One reduction
    per record over its run of rows (``reduceat``), no per-row indexing. ``scratch``: a
    boolean buffer like ``pp``."""
    filled, starts = run_starts(n)
    num_common = np.zeros(len(n), dtype=np.int64)
    mismatch = np.zeros(len(n), dtype=bool)
    if len(starts):
        num_common[filled] = np.add.reduceat(common, starts, dtype=np.int64)
        wrong = np.logical_and(np.not_equal(pp, flat, out=scratch), common, out=scratch)
        mismatch[filled] = np.logical_or.reduceat(wrong, starts)
    return ~one_slice(num_common, mismatch, top)
