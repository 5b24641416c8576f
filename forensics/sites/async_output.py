"""Site ``async_output``: ``InputBatch.update_async_output_token_ids``.

For each current request present in the previous batch whose output is non-empty and ends in
``-1`` placeholders, vLLM 0.33.0 takes ``sampled_token_ids_cpu[prev_row]`` (skipped when empty),
counts its ids (the row's length when its last id is not ``-1``, else the position of its first
``-1``) and replaces the trailing placeholders with the first ``min(count, placeholders)`` ids.
The patched count stops at the first id ``< 0`` or ``>= vocab_size``.

Outputs are given either as full lists (``output_token_ids``) or as tails (``output_tail``, the
last ids of each list, with the full lengths ``output_len``). A tail made only of ``-1`` is taken
to hold every trailing placeholder (the id before it is assumed not to be ``-1``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from forensics.outcome import Access, Outcome
from forensics.records import FieldSpec, Record
from forensics.sites._common import (
    BatchColumns,
    access_findings,
    failed,
    ids_outside,
    observe_range,
    prev_index_map,
    require,
    require_len,
    require_unique,
    rows_with_any,
    screen_unique,
)

NAME = "async_output"
FIELDS = (
    FieldSpec("req_ids", "str_list", doc="[n] current rows"),
    FieldSpec("prev_req_id_to_index", "index_map", required=False),
    FieldSpec("prev_req_ids", "opt_str_list", required=False),
    FieldSpec("sampled_token_ids_cpu", "tensor", ndim=2, doc="[p, k] int32"),
    FieldSpec("output_token_ids", "ragged", required=False, doc="full output lists"),
    FieldSpec("output_tail", "ragged", required=False, doc="last ids of each output list"),
    FieldSpec("output_len", "tensor", required=False, doc="[n] full lengths"),
    FieldSpec("vocab_size", "int"),
)
OUTPUT_FIELDS = ("output_token_ids", "output_tail", "output_len")
SUMMARY_BOUND = "vocab_size"
SUMMARY_TENSOR = "out.output_token_ids"


def check_record(record: Record, where: str) -> None:
    """Cross-field checks: the previous batch is given, outputs are full lists or tails with
    lengths, one per current row.

    Raises:
        CaptureFormatError: naming the field and what was expected.
    """
    n = len(record["req_ids"])
    require_unique(record, "req_ids", where)
    require("prev_req_id_to_index" in record or "prev_req_ids" in record, where,
            "prev_req_id_to_index", "or 'prev_req_ids' must give the previous batch")
    has_full, has_tail = "output_token_ids" in record, "output_tail" in record
    require(has_full != has_tail, where, "output_token_ids",
            "or 'output_tail' (with 'output_len') must be given, not both")
    for name in ("output_token_ids", "output_tail", "output_len"):
        require_len(record, name, n, where, "one per current row")
    if has_tail:
        require("output_len" in record, where, "output_len", "must come with 'output_tail'")
        _check_tails(record, where)
    require(record["vocab_size"] > 0, where, "vocab_size", "must be > 0")


def check_batch(cols: BatchColumns) -> np.ndarray:
    """:func:`check_record` on a whole batch at once: the records it may reject."""
    n = cols.length("req_ids")
    full, tail = cols.present("output_token_ids"), cols.present("output_tail")
    bad = screen_unique(cols, "req_ids") | (full == tail) | (cols.ints("vocab_size") <= 0)
    bad |= ~(cols.present("prev_req_id_to_index") | cols.present("prev_req_ids"))
    for name in ("output_token_ids", "output_tail", "output_len"):
        bad |= cols.present(name) & (cols.length(name) != n)
    has_len = cols.present("output_len")
    bad |= tail & ~has_len
    if not (tail & has_len).any():
        return bad
    lengths, counts = cols.flat("output_len")
    tails, tail_counts = cols.inner_lengths("output_tail")
    if not np.array_equal(counts, tail_counts):
        return bad | tail  # the rows whose counts differ are flagged; check the rest per row
    wrong = (tails > lengths) | ((tails == 0) & (lengths != 0))
    return bad | (tail & rows_with_any(wrong, counts))


def _check_tails(record: Record, where: str) -> None:
    """Each tail holds the last ids of its list: at most ``output_len`` ids, and some ids
    unless the list is empty (one numpy pass; the first bad row is named)."""
    lengths = np.asarray(record["output_len"], dtype=np.int64)
    tails = np.fromiter(map(len, record["output_tail"]), dtype=np.int64,
                        count=len(record["output_tail"]))
    bad = np.flatnonzero((tails > lengths) | ((tails == 0) & (lengths != 0)))
    if len(bad):
        row = int(bad[0])
        require(False, where, "output_tail", f"row {row}: must hold the last ids of a list of "
                f"{int(lengths[row])} ids (got {int(tails[row])})")


def upstream(record: Record) -> Outcome:
    """vLLM 0.33.0 on one record: outputs the edited lists (or tails and lengths); accesses of
    ``sampled_token_ids_cpu`` rows; ``index_error`` when a previous row is past its end."""
    return _run(record, _count_upstream)


def patched(record: Record) -> Outcome:
    """As :func:`upstream`, counting sampled ids only up to the first id outside the vocabulary."""
    vocab = record["vocab_size"]
    return _run(record, lambda ids: _count_patched(ids, vocab))


def patch_inert(record: Record) -> bool:
    """Whether ``patched`` gives exactly ``upstream``'s outcome on ``record``: when in each row of
    ``sampled_token_ids_cpu`` the ids before the first ``-1`` lie in ``[0, vocab_size)`` and a
    row holding a ``-1`` also ends in one, both counts are the position of the first ``-1``
    (or the row's length), also for a row shortened by an earlier row sharing it."""
    sampled = np.asarray(record["sampled_token_ids_cpu"])
    width = sampled.shape[1]
    if not sampled.size:
        return True
    minus = sampled == -1
    bad = (sampled < 0) | (sampled >= record["vocab_size"])
    first_minus = np.where(minus.any(axis=1), minus.argmax(axis=1), width)
    first_bad = np.where(bad.any(axis=1), bad.argmax(axis=1), width)
    return bool(((first_bad == first_minus) & ((first_minus == width) | minus[:, -1])).all())


def _count_upstream(ids: list[int]) -> int:
    return len(ids) if ids[-1] != -1 else ids.index(-1)


def _count_patched(ids: list[int], vocab: int) -> int:
    for i, token in enumerate(ids):
        if token < 0 or token >= vocab:
            return i
    return len(ids)


def _lists(record: Record, copy: bool = True) -> tuple[list[list[int]], list[int]]:
    """Each row's known ids (full list or tail; copies unless ``copy`` is false: then the
    record's own lists, read only) and the length of its hidden prefix."""
    if "output_token_ids" in record:
        rows = record["output_token_ids"]
        return [list(r) for r in rows] if copy else list(rows), [0] * len(record["req_ids"])
    tails = [list(r) for r in record["output_tail"]] if copy else list(record["output_tail"])
    lengths = np.asarray(record["output_len"], dtype=np.int64).tolist()
    return tails, [n - len(t) for n, t in zip(lengths, tails, strict=False)]


def _run(record: Record, count: Callable[[list[int]], int]) -> Outcome:
    lists, hidden = _lists(record, copy=False)  # _update copies each row it writes
    prev_map = prev_index_map(record) or {}
    sampled = np.asarray(record["sampled_token_ids_cpu"])
    req_ids = record["req_ids"]
    rows = [row for row, req in enumerate(req_ids)
            if req in prev_map and lists[row] and lists[row][-1] == -1]
    prev = [prev_map[req_ids[row]] for row in rows]
    accesses = [_access(rows, prev, sampled.shape[0])]
    try:
        _update(lists, rows, prev, sampled.tolist(), count)
    except Exception as exc:  # noqa: BLE001  (the outcome records any failure of the call)
        return failed(exc, accesses)
    return Outcome("ok", "", _outputs(record, lists, hidden), accesses)


def _access(rows: list[int], prev: list[int], upper: int) -> Access:
    index = np.array(rows, dtype=np.int64)
    return Access("sampled_token_ids_cpu", index, index, np.array(prev, dtype=np.int64), 0,
                  upper)


def _update(lists: list[list[int]], rows: list[int], prev: list[int], sampled: list[list[int]],
            count: Callable[[list[int]], int]) -> None:
    """The loop of ``update_async_output_token_ids`` over the selected ``rows`` (previous rows
    ``prev``), in place; each row written becomes a new list (the record stays as it was)."""
    for row, prev_row in zip(rows, prev, strict=True):
        new_ids = sampled[prev_row]
        if new_ids:
            old = lists[row]
            start = first_placeholder(old)
            del new_ids[min(count(new_ids), len(old) - start):]  # in place, as vLLM: rows
            lists[row] = old[:start] + new_ids                     # sharing a previous row see
                                                                   # it shortened


def _outputs(record: Record, lists: list[list[int]], hidden: list[int]) -> dict[str, Any]:
    if "output_token_ids" in record:
        return {"output_token_ids": lists}
    dtype = np.asarray(record["output_len"]).dtype
    lengths = np.array([h + len(t) for h, t in zip(hidden, lists, strict=True)], dtype=dtype)
    return {"output_tail": lists, "output_len": lengths}


def first_placeholder(ids: list[int]) -> int:
    """Position of the first of the trailing ``-1`` placeholders (``len(ids)`` when none)."""
    count = ids.count(-1)
    if count == 0:
        return len(ids)
    pos = len(ids) - count
    if ids[pos:].count(-1) == count:  # every -1 trails (the usual case): no Python loop
        return pos
    pos = len(ids)
    while pos > 0 and ids[pos - 1] == -1:
        pos -= 1
    return pos


def judge(record: Record, outcome: Outcome) -> list[dict[str, Any]]:
    """Findings of one outcome: previous rows past ``sampled_token_ids_cpu``, and ids the call
    wrote (from the first trailing placeholder on) outside ``[0, vocab_size)``. ``element`` is the
    position in the request's full output list."""
    req_ids = record["req_ids"]
    found = access_findings(outcome.accesses, req_ids)
    if outcome.status != "ok":
        return found
    before, hidden = _lists(record, copy=False)
    tails = "output_token_ids" not in record
    after = outcome.outputs.get("output_tail" if tails else "output_token_ids")
    tensor = "out.output_tail" if tails else "out.output_token_ids"
    after_rows = list(after or ())
    pairs = zip(before, after_rows, strict=False)
    # rows the call may have written: a list differing from the row before (anything else,
    # e.g. an array or a tuple, is compared as a list in _writes)
    changed = [row for row, (old, new) in enumerate(pairs)
               if new is not old and (type(new) is not list or new != old)]
    writes = _writes(before, after_rows, changed)
    values: list[int] = []
    for _, _, tail in writes:
        values += tail
    if not values:
        return found
    ids = np.array(values, dtype=np.int64)
    vocab = record["vocab_size"]
    if ids.min() >= 0 and ids.max() < vocab:  # every written id in range: no finding
        observe_range(tensor, ids, 0, vocab)
        return found
    rows: list[int] = []
    elements: list[int] = []
    for row, written, tail in writes:
        rows += [row] * len(tail)
        offset = hidden[row]
        elements += [j + offset for j in written]
    found += ids_outside(ids, 0, vocab, tensor, np.array(rows, dtype=np.int64), req_ids,
                         np.array(elements, dtype=np.int64))
    return found


def _writes(before: list[list[int]], after: list[Any], changed: list[int]
            ) -> list[tuple[int, Sequence[int], list[int]]]:
    """``(row, positions written, ids written)`` of each row of ``changed`` the call wrote."""
    found: list[tuple[int, Sequence[int], list[int]]] = []
    for row in changed:
        old, new = before[row], after[row]
        if type(new) is not list:  # lists were compared when ``changed`` was built
            new = new if isinstance(new, list) else list(new)
            if new == old:
                continue  # nothing written to this row
        start = len(old) if not old or old[-1] != -1 else first_placeholder(old)
        tail = new[start:]
        written: Sequence[int] = range(start, len(new))  # every position from the first
        if -1 in tail:  # some placeholders kept: only the changed positions were written
            written = [j for j in written if j >= len(old) or new[j] != old[j]]
            tail = [new[j] for j in written]
        found.append((row, written, tail))
    return found
