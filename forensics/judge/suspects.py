"""Where a ``suspect`` verdict comes from: each variant's first ``misattributed`` finding, with
the previous row it read and the request that held that row.

A misattributed finding names the current row and its request (``req_id``); the row read is
``prev_positions[row]`` for a gathered previous row (``tensor`` ``prev_positions``) and
``index // width`` for a draft read from ``draft_token_ids`` (``width`` its columns); the
request that held it comes from the record's ``prev_req_ids`` / ``prev_req_id_to_index``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from forensics.escaping import quoted
from forensics.judge.findings import COLUMNS, is_judged, sort_findings, to_python
from forensics.sites._common import prev_holders

if TYPE_CHECKING:
    from forensics.records import Record
    from forensics.replaying import ReplayResult

MISATTRIBUTED = "misattributed"


def first_suspects(result: ReplayResult) -> dict[str, dict[str, Any] | None]:
    """Per variant, its first misattributed finding (first-finding order) with ``read_row``
    (the previous row it read), ``read_req_id`` (the request holding it, None when unknown)
    and ``count`` (the variant's misattributed findings); None without one."""
    findings = result.findings
    out: dict[str, dict[str, Any] | None] = {}
    for variant in result.variants:
        mine = findings[(findings["variant"] == variant) & (findings["kind"] == MISATTRIBUTED)
                        & is_judged(findings)]
        if mine.empty:
            out[variant] = None
            continue
        first = {key: to_python(v) for key, v in sort_findings(mine).iloc[0].items()
                 if key in COLUMNS}
        record = result.records[first["record"]]
        row = read_row(record, first)
        holders = [] if row is None else holders_of(record, row)
        out[variant] = {**first, "read_row": row, "count": len(mine),
                        "read_req_id": holders[0] if len(holders) == 1 else None,
                        "read_req_ids": holders}
    return out


def holders_of(record: Record, row: int) -> list[str]:
    """Every request the record says held previous ``row`` (``prev_req_id_to_index`` may give
    one row to two requests: then no one of them is named as its holder)."""
    if record.get("prev_req_ids") is not None:
        held = prev_holders(record).get(row)
        return [] if held is None else [held]
    mapping = record.get("prev_req_id_to_index") or {}
    return sorted(str(req) for req, index in mapping.items() if index == row)


def read_row(record: Record, finding: dict[str, Any]) -> int | None:
    """The previous row a misattributed finding read (None when its tensor is not known)."""
    value = finding.get("value")
    if value is None:
        return None
    if finding.get("tensor") == "prev_positions":
        return int(value)
    if finding.get("tensor") == "draft_token_ids" and "draft_token_ids" in record:
        width = max(int(record["draft_token_ids"].shape[1]), 1)
        return int(value) // width
    return None


def describe_suspect(s: dict[str, Any]) -> str:
    """``"batch_change at step 19, rank 0, row 0: request 'req-0' read previous row 7, held by
    request 'req-7' (`prev_positions[0] = 7`)"``; unknown requests say so; request ids through
    :func:`~forensics.escaping.quoted` (the sentence goes out through
    :func:`~forensics.escaping.inert` or the escaping of its output)."""
    mine = "an unknown request" if s.get("req_id") is None else f"request {quoted(s['req_id'])}"
    claimed = s.get("read_req_ids") or []
    held = (f"request {quoted(s['read_req_id'])}" if s.get("read_req_id") is not None else
            f"one of {len(claimed)} requests the capture gives that row to "
            f"({', '.join(map(quoted, claimed[:3]))}{', ...' if len(claimed) > 3 else ''})"
            if len(claimed) > 1 else "a request the capture does not name")
    row = "" if s.get("row") is None else f", row {s['row']}"
    read = "a previous row" if s.get("read_row") is None else f"previous row {s['read_row']}"
    at = _where_read(s)
    return (f"{s['site']} at step {s['step']}, rank {s['rank']}{row}: {mine} read {read}, "
            f"held by {held}" + (f" ({at})" if at else ""))


def _where_read(s: dict[str, Any]) -> str:
    """What holds the index read: ``"`prev_positions[0] = 7`"`` when it holds that value,
    else what it is computed from."""
    tensor, at = s.get("index_tensor"), s.get("index_at")
    if tensor is None or at is None:
        return ""
    if s.get("held"):
        return f"`{tensor}[{at}] = {s['value']}`"
    return f"index {s['value']}, computed from `{tensor}[{at}]`"
