"""Fixed-column pandas tables of a replay (for notebooks, reports and the CLI).

- :func:`findings_table`: the findings, columns :data:`forensics.judge.findings.COLUMNS`;
- :func:`first_violation`: the first unresolved ``out_of_bounds`` finding of a variant;
- :func:`summary_by_site`: one row per (variant, site), columns :data:`SUMMARY_COLUMNS`;
- :func:`grouped_findings`: every finding, one row per (variant, site, step, row);
- :func:`events_table`: a capture's events, at most :data:`EVENT_COLUMNS` columns and one
  more for the rest of each event's keys;
- :func:`display_frame` / :func:`styled` / :func:`table_html`: a table cleaned for reading
  (integers as integers, empty cells for nulls) and, for HTML, without its index column and
  with every row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from forensics.judge.findings import COLUMNS, FINDING_COLUMNS, sort_findings, to_python
from forensics.outcome import STATUSES
from forensics.sites import site_order

if TYPE_CHECKING:
    import pandas as pd

    from forensics.replaying import ReplayResult

#: variant, site, records replayed (summary records counted apart), outcome counts, finding
#: counts, unresolved out-of-bounds findings, the first step with a finding, and the verdict
SUMMARY_COLUMNS = ("variant", "site", "records", "summary_records", "ok", "index_error",
                   "error", "out_of_bounds", "misattributed", "unresolved", "first_step",
                   "verdict")


def findings_table(result: ReplayResult, variant: str | None = None,
                   site: str | None = None) -> pd.DataFrame:
    """The findings of ``result``, optionally of one variant and/or one site, in first-finding
    order (columns :data:`forensics.judge.findings.COLUMNS`).

    Raises UnknownVariantError, UnknownSiteError when ``variant`` is not one ``result``
    replayed, or ``site`` one it judged: an empty table read "no finding" (``first_violation``
    of a replay without ``upstream`` was None beside a violation)."""
    _refuse_unreplayed(result, variant, site)
    frame = result.findings
    if variant is not None:
        frame = frame[frame["variant"] == variant]
    if site is not None:
        frame = frame[frame["site"] == site]
    return sort_findings(frame[list(COLUMNS)], result.variants)


def _refuse_unreplayed(result: ReplayResult, variant: str | None, site: str | None) -> None:
    """Raise UnknownVariantError or UnknownSiteError (as the plots do: one line naming it and
    the choices) when ``result`` holds no replay of ``variant`` or ``site``."""
    from forensics.present.selection import capture_name, check_site_name, chosen_variant

    if variant is not None:
        chosen_variant(result, variant)
    if site is not None:
        check_site_name(site, list(dict.fromkeys(s for verdicts in result.verdicts.values()
                                                 for s in verdicts)), capture_name(result))


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
    frame = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
    # an integer, or empty: built from the ints themselves (a column of ints and None is
    # float64, which holds no step past 2**53)
    frame["first_step"] = pd.array([row["first_step"] for row in rows], dtype="Int64")
    return frame


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


#: columns of :func:`grouped_findings`
GROUP_COLUMNS = ("variant", "site", "step", "row", "req_id", "findings", "ranks", "tensors",
                 "kinds", "values", "bounds", "origin", "resolved")


def grouped_findings(result: ReplayResult, variant: str | None = None) -> pd.DataFrame:
    """Every finding of ``result``, one row per (variant, site, step, row) with its count and
    the distinct ranks, tensors, kinds, values and bounds (columns :data:`GROUP_COLUMNS`)."""
    import pandas as pd

    frame = findings_table(result, variant)
    rows = [_group_row(key, group) for key, group in
            frame.groupby(["variant", "site", "step", "row"], sort=False, dropna=False)]
    return pd.DataFrame(rows, columns=list(GROUP_COLUMNS))


def _group_row(key: tuple[Any, ...], group: pd.DataFrame) -> dict[str, Any]:
    def distinct(column: str) -> str:
        values = [to_python(v) for v in group[column]]
        return ", ".join(dict.fromkeys("" if v is None else str(v) for v in values))

    bounds = [f"[{to_python(lo)}, {to_python(hi)})" for lo, hi in
              zip(group["lower"], group["upper"], strict=True) if to_python(hi) is not None]
    return {"variant": key[0], "site": key[1], "step": key[2], "row": to_python(key[3]),
            "req_id": distinct("req_id"), "findings": len(group), "ranks": distinct("rank"),
            "tensors": distinct("tensor"), "kinds": distinct("kind"),
            "values": distinct("value"), "bounds": ", ".join(dict.fromkeys(bounds)),
            "origin": distinct("origin"), "resolved": distinct("resolved")}


#: the most columns of an events table named by the events' keys (first seen first); an event's
#: other keys share its last cell (:func:`events_table`)
EVENT_COLUMNS = 12


def events_table(events: list[dict[str, Any]]) -> pd.DataFrame:
    """A capture's events (``Capture.summary()["events"]``), one row each: a column per key,
    first seen first, for at most :data:`EVENT_COLUMNS` keys, then one column (``more``)
    holding each event's other keys as ``key: value; ...``. A table of a column per key had a
    cell for every event and every key any event held: 4,000 events each naming a key of its
    own were 16 million cells (the report's table of 400 was 11.6 MB of HTML). A step an
    imported log never said is ``unknown`` (:func:`~forensics.store.events.as_said`); a guard
    event whose value lies inside its own bound has its message said as contradicting itself
    (:func:`~forensics.known.guard_bounds.refuted_note`), not as the guard's raise."""
    import pandas as pd

    from forensics.known.guard_bounds import refuted_note, self_refuted
    from forensics.store.events import as_said

    events = [as_said({**event, "message": refuted_note(event)} if self_refuted(event)
                      else event) for event in events]

    keys = list(dict.fromkeys(key for event in events for key in event))
    shown = keys[:EVENT_COLUMNS]
    more = next(name for name in ("more", *(f"more ({n})" for n in range(1, len(shown) + 2)))
                if name not in shown)
    rows = [[event.get(key) for key in shown]
            + ["; ".join(f"{key}: {value}" for key, value in event.items() if key not in shown)]
            for event in events]
    frame = pd.DataFrame(rows, columns=[*shown, more])
    return frame if len(keys) > len(shown) else frame.drop(columns=[more])


def display_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` for reading: every cell a string, integers without ``.0``, nulls (``None``,
    ``NaN``, ``<NA>``) empty; the index reset."""
    return frame.apply(lambda column: column.map(_cell)).reset_index(drop=True)


def _cell(value: Any) -> str:
    value = to_python(value)
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


#: rows a long table shows before the rest is folded into ``<details>`` (:func:`styled`)
SHOWN_ROWS = 8


def styled(frame: pd.DataFrame) -> Any:
    """``frame`` as a pandas Styler whose HTML is :func:`table_html`'s: cleaned, no index
    column, escaped, text aligned left and numbers right. Shown in a notebook or report, a
    table of more than :data:`SHOWN_ROWS` rows is its first rows, every row one click away
    (``to_html()`` gives the whole table)."""
    from pandas.io.formats.style import Styler

    class FoldedStyler(Styler):
        """A Styler whose HTML is :func:`table_html`'s and whose notebook display folds the
        rows past :data:`SHOWN_ROWS`."""

        def to_html(self, *args: Any, **kwargs: Any) -> str:
            """Every row, every cell escaped (:func:`table_html`)."""
            return table_html(frame)

        def _repr_html_(self) -> str:
            """The first rows, then ``<details>`` holding the whole table."""
            return folded_html(frame, self.to_html())

    return FoldedStyler(frame.reset_index(drop=True))


def folded_html(frame: pd.DataFrame, whole: str) -> str:
    """``whole`` (the HTML of ``frame``'s table) when it has at most :data:`SHOWN_ROWS` rows,
    else its first rows followed by ``<details>`` holding ``whole`` (no script needed)."""
    if len(frame) <= SHOWN_ROWS:
        return whole
    head = table_html(frame.head(SHOWN_ROWS))
    return (f'{head}<details class="forensics-rows"><summary>show all {len(frame)} rows'
            f"</summary>\n{whole}</details>")


def table_html(frame: pd.DataFrame) -> str:
    """``frame`` as an HTML table, cleaned (:func:`display_frame`), without its index column,
    every cell and column name escaped (:func:`forensics.escaping.html`), text columns
    (:func:`text_columns`) aligned left by rules on the table's own id (the one style element
    a report admits). Written directly: pandas' Styler took 13 s and 1 GB for a table of
    40,000 rows and nine columns, and its cut past 262,144 cells lost rows without a word."""
    import uuid

    from forensics.escaping import html

    table = f"T_{uuid.uuid4().hex[:8]}"
    shown = display_frame(frame)
    left = {str(name) for name in text_columns(frame)}
    rules = "".join(f"#{table} {cell}.col{i} {{\n  text-align: left;\n}}\n"
                    for i, name in enumerate(shown.columns) if str(name) in left
                    for cell in ("th", "td"))
    head = "".join(f'<th class="col_heading col{i}">{html(str(name))}</th>'
                   for i, name in enumerate(shown.columns))
    body = "".join("<tr>" + "".join(f'<td class="col{i}">{html(cell)}</td>'
                                    for i, cell in enumerate(row)) + "</tr>\n"
                   for row in shown.itertuples(index=False, name=None))
    style = f'<style type="text/css">\n{rules}</style>\n' if rules else ""
    return (f'{style}<table id="{table}">\n<thead>\n<tr>{head}</tr>\n</thead>\n'
            f"<tbody>\n{body}</tbody>\n</table>\n")


def text_columns(frame: pd.DataFrame) -> list[str]:
    """The columns of ``frame`` holding text: some non-null value that is not a number (a
    column of a numeric or boolean dtype holds none)."""
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    return [name for name in frame.columns
            if not (is_numeric_dtype(frame[name].dtype) or is_bool_dtype(frame[name].dtype))
            and any(v is not None and not isinstance(v, (int, float))
                    for v in map(to_python, frame[name]))]


def findings_details(groups: pd.DataFrame) -> str:
    """The grouped findings (:func:`grouped_findings`) as collapsible HTML: one ``<details>``
    per (variant, site), its summary the counts (findings, groups, steps); every text escaped
    (the tables through :func:`styled`)."""
    from forensics.escaping import html

    parts = []
    for (variant, site), part in groups.groupby(["variant", "site"], sort=False):
        steps = part["step"]
        summary = (f"{variant} · {site}: {int(part['findings'].sum())} findings in "
                   f"{len(part)} groups, steps {steps.min()}-{steps.max()}")
        table = styled(part.drop(columns=["variant", "site"])).to_html()
        parts.append(f'<details class="forensics-findings"><summary>{html(summary)}'
                     f"</summary>\n{table}</details>")
    return "\n".join(parts)
