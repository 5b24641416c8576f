"""Fixed-column pandas tables of a replay (for notebooks, reports and the CLI).

- :func:`findings_table`: the findings, columns :data:`forensics.findings.COLUMNS`;
- :func:`first_violation`: the first unresolved ``out_of_bounds`` finding of a variant;
- :func:`summary_by_site`: one row per (variant, site), columns :data:`SUMMARY_COLUMNS`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from forensics.findings import COLUMNS, FINDING_COLUMNS, sort_findings, to_python
from forensics.outcome import STATUSES
from forensics.sites import site_order

if TYPE_CHECKING:
    import pandas as pd

    from forensics.replay import ReplayResult

#: variant, site, records replayed (summary records counted apart), outcome counts, finding
#: counts, unresolved out-of-bounds findings, the first step with a finding, and the verdict
SUMMARY_COLUMNS = ("variant", "site", "records", "summary_records", "ok", "index_error",
                   "error", "out_of_bounds", "misattributed", "unresolved", "first_step",
                   "verdict")


def findings_table(result: ReplayResult, variant: str | None = None,
                   site: str | None = None) -> pd.DataFrame:
    """The findings of ``result``, optionally of one variant and/or one site, in first-finding
    order (columns :data:`forensics.findings.COLUMNS`)."""
    frame = result.findings
    if variant is not None:
        frame = frame[frame["variant"] == variant]
    if site is not None:
        frame = frame[frame["site"] == site]
    return sort_findings(frame[list(COLUMNS)], result.variants)


def first_violation(result: ReplayResult, variant: str = "upstream") -> dict[str, Any] | None:
    """The first unresolved ``out_of_bounds`` finding of ``variant`` as a dict of the DESIGN.md
    columns, or None when it has none."""
    frame = findings_table(result, variant)
    frame = frame[(frame["kind"] == "out_of_bounds") & (frame["resolved"] != True)]  # noqa: E712
    if frame.empty:
        return None
    return {c: to_python(frame.iloc[0][c]) for c in FINDING_COLUMNS}


def summary_by_site(result: ReplayResult) -> pd.DataFrame:
    """One row per (variant, site) present, in variant then pipeline order (columns
    :data:`SUMMARY_COLUMNS`)."""
    import pandas as pd

    sites = sorted(set(result.index["site"]), key=site_order)
    rows = [_summary_row(result, variant, site) for variant in result.variants for site in sites]
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def _summary_row(result: ReplayResult, variant: str, site: str) -> dict[str, Any]:
    outs = result.outcomes[(result.outcomes["variant"] == variant)
                           & (result.outcomes["site"] == site)]
    found = result.findings[(result.findings["variant"] == variant)
                            & (result.findings["site"] == site)]
    oob = found[found["kind"] == "out_of_bounds"]
    index = result.index
    row: dict[str, Any] = {"variant": variant, "site": site, "records": len(outs),
                           "summary_records": int((index["summary"]
                                                   & (index["site"] == site)).sum())}
    row.update({status: int((outs["status"] == status).sum()) for status in STATUSES})
    row.update({"out_of_bounds": len(oob), "misattributed": int((found["kind"]
                                                                == "misattributed").sum()),
                "unresolved": int((oob["resolved"] != True).sum()),  # noqa: E712
                "first_step": int(found["step"].min()) if len(found) else None,
                "verdict": result.verdicts[variant][site]})
    return row
