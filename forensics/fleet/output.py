"""A triage written out: text, Markdown or JSON on stdout; Parquet or CSV; an HTML index."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from forensics.atomic import make_folder, refuse_inside_captures, user_path, write_atomically
from forensics.errors import ConfigurationError, ForensicsError, one_line
from forensics.escaping import (
    csv_cell,
    html,
    inert,
    json_ready,
    markdown,
    terminal,
    unicode,
    unicode_path,
)
from forensics.fleet.triage import Triage

FORMATS = ("text", "markdown", "json")
TABLE_SUFFIXES = (".parquet", ".csv")
#: the columns of a triage table (Parquet, CSV), in order
COLUMNS = ("capture", "name", "host", "pid", "ranks", "engine_id", "vllm", "runner",
           "spec_method", "async_scheduling", "steps", "records", "crash_events",
           "guard_events", "verdicts", "first_finding", "findings", "known", "known_not_judged",
           "divergence", "conclusion", "group", "error", "refused", "not_judged", "contested")


def flat_rows(result: Triage) -> list[dict[str, Any]]:
    """One flat dict per capture (:data:`COLUMNS`): nested values as text, ``group`` the
    title of its group."""
    from forensics.fleet.stitch import divergence_text
    from forensics.present.conclusion import describe_finding

    titles: dict[int, str] = {}
    for group in result.groups:  # a title counts its group's rows: made once per group
        title = group.title()
        titles.update((id(row), title) for row in group.rows)
    out = []
    for row in result.rows:
        flat = {key: row.get(key) for key in COLUMNS}
        flat["verdicts"] = verdicts_text(row.get("verdicts") or {})
        flat["first_finding"] = describe_finding(row["first"]) if row.get("first") else ""
        flat["known"] = ", ".join(row.get("known") or [])
        flat["known_not_judged"] = ", ".join(row.get("known_not_judged") or [])
        flat["divergence"] = divergence_text(row["divergence"]) if row.get("divergence") else ""
        flat["group"] = titles[id(row)]
        out.append(flat)
    return out


def verdicts_text(verdicts: dict[str, dict[str, str]]) -> str:
    """``"upstream: embedding violation, ...; patched: ..."`` (ok sites left out)."""
    parts = []
    for variant, sites in verdicts.items():
        bad = [f"{site} {v}" for site, v in sites.items() if v != "ok"]
        parts.append(f"{variant}: {', '.join(bad) if bad else 'ok'}")
    return "; ".join(parts)


def render(result: Triage, fmt: str) -> str:
    """The triage as ``text``, ``markdown`` or ``json``; ConfigurationError for another."""
    if fmt == "json":
        return json.dumps(to_json(result), indent=2, sort_keys=True)
    if fmt not in FORMATS:
        raise ConfigurationError(f"--format {fmt!r}; choose one of {list(FORMATS)}")
    return _render_groups(result, fmt == "markdown")


def to_json(result: Triage) -> dict[str, Any]:
    """``{"captures": n, "groups": [{title, captures: [...]}], "rows": [row]}``, each row's
    divergence saying whether it was judged (:func:`~forensics.fleet.stitch.divergence_json`),
    every string UTF-8 can encode (:func:`json_ready`: a lone surrogate of a file name is no
    strict JSON; a capture's path and name no other capture's: :data:`PATH_COLUMNS`)."""
    from forensics.fleet.stitch import divergence_json

    rows = [{k: divergence_json(v) if k == "divergence" and v else v
             for k, v in paths_apart(row).items() if k != "crashed"} for row in result.rows]
    return json_ready({"captures": len(result.rows), "where": result.where,
                       "groups": [{"title": g.title(),
                                   "captures": [unicode_path(r["capture"]) for r in g.rows]}
                                  for g in result.groups], "rows": rows})


#: the columns that name a capture: in JSON and Parquet through
#: :func:`forensics.escaping.unicode_path` (two captures' never alike)
PATH_COLUMNS = frozenset({"capture", "name"})


def paths_apart(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with its :data:`PATH_COLUMNS` through :func:`forensics.escaping.unicode_path`
    (UTF-8 encodable, and two captures' never alike; the other columns as they are)."""
    return {k: unicode_path(v) if k in PATH_COLUMNS and isinstance(v, str) else v
            for k, v in row.items()}


#: the columns whose text is a message that may hold values escaped already (an error's one
#: line): escaped as inert text (:func:`forensics.escaping.inert`), their escapes not doubled;
#: every other column's text is a value (escaped so no two print alike)
MESSAGE_COLUMNS = frozenset({"shows", "error", "first_finding", "divergence", "conclusion",
                             "group", "verdicts", "known", "known_not_judged", "refused",
                             "not_judged", "contested"})
#: the columns of a group's table in text, Markdown and HTML: (flat row key, header)
TABLE = (("name", "capture"), ("host", "host"), ("pid", "pid"), ("ranks", "ranks"),
         ("vllm", "vLLM"), ("runner", "runner"), ("shows", "what it shows"))


def _many(count: int, noun: str) -> str:
    """``1 capture``, ``2 captures``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _render_groups(result: Triage, md: bool) -> str:
    """Each group: its title, then a table of its captures (Markdown: a GitHub table; text:
    aligned columns); every capture string escaped."""
    flat = {row["capture"]: row for row in flat_rows(result)}
    lines = [f"{'# ' if md else ''}triage: {_many(len(result.rows), 'capture')}, "
             f"{_many(len(result.groups), 'group')} ({result.seconds:.1f} s, {result.where})",
             ""]
    for group in result.groups:
        title = group.title()  # a message: it may hold a capture's error
        lines.append(f"## {markdown(title)}" if md else inert(title))
        cells = [[_cell(c, key in MESSAGE_COLUMNS, md, not row["error"]) for (key, _), c in
                  zip(TABLE, _cells(flat[row["capture"]]), strict=True)] for row in group.rows]
        lines += (_markdown_table(cells) if md else _text_table(cells)) + [""]
    return "\n".join(lines).rstrip() + "\n"


def _cell(value: str, message: bool, md: bool, spans: bool = True) -> str:
    """A table cell of text or Markdown: a value through :func:`terminal` (or
    :func:`markdown`), a message (its values escaped already) through :func:`inert`;
    ``spans=False``: an error's (its paths through :func:`terminal`, their backticks no code
    span's: a Markdown cell makes none)."""
    if md:
        return markdown(value, table=True, raw=not message, spans=spans)
    return inert(value) if message else terminal(value)


def _cells(row: dict[str, Any]) -> list[str]:
    """One capture's cells of :data:`TABLE` (``unknown`` for a missing fact)."""
    shown = {**row, "shows": _shows(row)}
    return ["unknown" if shown.get(key) is None or shown.get(key) == "" else str(shown[key])
            for key, _ in TABLE]


def _markdown_table(cells: list[list[str]]) -> list[str]:
    """A GitHub table of already escaped ``cells``."""
    head = [h for _, h in TABLE]
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + \
        ["| " + " | ".join(row) + " |" for row in cells]


def _text_table(cells: list[list[str]]) -> list[str]:
    """Aligned columns of already escaped ``cells``, indented under the group's title
    (:func:`forensics.present.text_table.aligned`: each padded to at most its width)."""
    from forensics.present.text_table import aligned

    return aligned([[h for _, h in TABLE], *cells], indent="  ")


def _shows(row: dict[str, Any]) -> str:
    """What one capture shows: its error, else its first finding, divergence and events, else
    its conclusion; then the records no variant judged and the manifest fields refused (read
    as unknown), if any."""
    if row["error"]:
        return f"error: {row['error']}"
    details = [row[k] for k in ("first_finding", "divergence", "contested", "crash_events",
                                "guard_events") if row[k]]
    shown = "; ".join(details) if details else row["conclusion"]
    if row.get("not_judged"):
        shown += f"; not judged: {row['not_judged']}"
    if row.get("known_not_judged"):
        shown += f"; known issues not judged: {row['known_not_judged']}"
    return f"{shown}; {row['refused']}" if row.get("refused") else shown


def write_table(result: Triage, path: str | os.PathLike[str]) -> Path:
    """Write the triage table to ``path`` (``.parquet`` or ``.csv``, atomically); return it.

    Raises ConfigurationError for another suffix, or a path inside a capture triaged.
    """
    refuse_inside_captures(path, (row["capture"] for row in result.rows), "-o")
    target = user_path(path)
    suffix = target.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise ConfigurationError(f"-o '{terminal(target)}': give a file ending in one of "
                                 f"{list(TABLE_SUFFIXES)}")
    rows = flat_rows(result)
    shared_write(target, lambda tmp: _write_parquet(rows, tmp) if suffix == ".parquet"
                 else _write_csv(rows, tmp))
    return target


def shared_write(target: Path, write: Callable[[Path], None]) -> Path:
    """Write ``target`` atomically (:func:`forensics.atomic.write_atomically`) with the
    permissions of a new file under the umask: a triage is made to be shared."""
    return write_atomically(target, write, shared=True)


def _write_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    ints = {"pid", "steps", "records", "findings"}
    schema = pa.schema([(c, pa.int64() if c in ints else pa.bool_() if c == "async_scheduling"
                         else pa.string()) for c in COLUMNS])
    cells = [{c: unicode(v) if isinstance(v, str) else v for c, v in paths_apart(row).items()}
             for row in rows]
    pq.write_table(pa.Table.from_pylist(cells, schema=schema), path)


def _write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    import csv

    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(COLUMNS)
        for row in rows:
            writer.writerow(["" if row[c] is None else csv_cell(row[c], c not in MESSAGE_COLUMNS)
                             for c in COLUMNS])


def write_html(result: Triage, directory: str | os.PathLike[str],
               report: Callable[[str, Path], Any] | None = None) -> Path:
    """Write ``DIR/index.html`` (every group, its captures, a link to the report of its first
    readable capture) and those reports (``report(capture, out)``, default
    :func:`forensics.present.report.write_report`); return the index's path.

    Raises ConfigurationError for a folder inside a capture triaged."""
    refuse_inside_captures(directory, (row["capture"] for row in result.rows), "--html")
    root = user_path(directory)
    make_folder(root)  # through no link another user planted
    if report is None:
        from forensics.present.report import write_report

        report = write_report
    flat = {row["capture"]: row for row in flat_rows(result)}
    sections: list[str] = []
    failed: list[str] = []
    for number, group in enumerate(result.groups):
        first = next((r for r in group.rows if not r.get("error")), None)
        link = "" if first is None else _report_link(
            report, first, root / f"group-{number:03d}.html", flat[first["capture"]], failed)
        head = "".join(f"<th>{h}</th>" for _, h in TABLE)
        body = "".join("<tr>" + "".join(
            f"<td>{html(c, key not in MESSAGE_COLUMNS)}</td>"
            for (key, _), c in zip(TABLE, _cells(flat[r["capture"]]), strict=True))
                       + "</tr>" for r in group.rows)
        sections.append(f"<h2>{html(group.title())}{link}</h2>\n<table><thead><tr>{head}"
                        f"</tr></thead><tbody>{body}</tbody></table>")
    page = ("<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>forensics triage"
            "</title><style>table{border-collapse:collapse}th,td{border:1px solid #ccc;"
            "padding:2px 6px;text-align:left;vertical-align:top}</style></head><body>\n"
            f"<h1>triage: {len(result.rows)} captures, {len(result.groups)} groups</h1>\n"
            + "\n".join(sections) + "\n</body></html>\n")
    index = root / "index.html"
    shared_write(index, lambda tmp: _write_text(tmp, page))
    if failed:
        raise ForensicsError(f"wrote {index}, but {len(failed)} group report(s) failed "
                             f"(said in it), the first {failed[0]}")
    return index


def _report_link(report: Callable[[str, Path], Any], first: dict[str, Any], out: Path,
                 row: dict[str, Any], failed: list[str]) -> str:
    """Write the report of a group's ``first`` capture to ``out``; return the index's link to
    it (``row``: its flat row, for the divergence banner), or, when the report fails, its
    one-line reason (added to ``failed``): one group's
    failed report (a notebook past its deadline) leaves the others' written. The capture is
    opened as its task read it (:func:`~forensics.fleet.paths.openable`: a path past PATH_MAX
    relative to the working directory)."""
    from forensics.fleet.paths import openable

    try:
        report(openable(first["capture"]), out)
    except ForensicsError as exc:
        why = one_line(exc)
        failed.append(f"{out.name}: {why}")
        return f" (report of {html(first['name'], True)}: error: {html(why)})"
    if first.get("divergence") and out.exists():
        _add_banner(out, row["divergence"])
    return f' <a href="{out.name}">report of {html(first["name"], True)}</a>'


def _add_banner(report: Path, text: str) -> None:
    """Put ``text`` (escaped) at the top of the body of the HTML ``report``: what the fleet
    knows and a single capture's report cannot (a rank divergence across captures)."""
    page = report.read_text(encoding="utf-8")
    at = page.find(">", page.find("<body")) + 1 if "<body" in page else 0
    banner = f'<p class="forensics-fleet">Fleet triage: {html(text)}</p>'  # report.css styles it
    shared_write(report, lambda tmp: _write_text(tmp, page[:at] + banner + page[at:]))


def _write_text(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
