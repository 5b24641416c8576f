"""The demo: replay every bundled capture, tabulate the verdicts, write one report per incident.

``forensics demo`` and ``make demo`` call :func:`run_demo`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from forensics.atomic import make_folder, refuse_inside_captures, user_path
from forensics.errors import CaptureFormatError
from forensics.escaping import inert, terminal

DEMO_VARIANTS = ("upstream", "patched")


@dataclass
class DemoRow:
    """One line of the demo's verdict table."""

    capture: str
    site: str
    upstream: str
    patched: str
    first_finding: str
    #: the capture's crash verdict and the known issues it matches (forensics.known)
    known: str = ""


@dataclass
class Demo:
    """What :func:`run_demo` did: the verdict table's rows, and each report it could not write
    (the capture's name, one line why; its index entry links no report)."""

    rows: list[DemoRow]
    failed: list[tuple[str, str]] = field(default_factory=list)


def bundled_data_dir() -> Path:
    """The repository's ``data/`` folder holding the bundled captures.

    Raises:
        CaptureFormatError: it cannot be found (the package is not run from a checkout).
    """
    path = Path(__file__).resolve().parents[2] / "data"
    if not any(path.glob("*.capture")):
        raise CaptureFormatError(f"{terminal(path)}: no bundled *.capture found; run the demo "
                                 f"from a checkout of vllm-forensics (make demo)")
    return path


def describe_finding(finding: dict | None) -> str:
    """One short phrase for a finding row (or '-' for none)."""
    if not finding:
        return "-"
    where = f"step {finding['step']}" + (f" row {finding['row']}"
                                         if finding.get("row") is not None else "")
    from forensics.present.finding_words import what_happened

    return f"{finding['kind']} {what_happened(finding)} at {where}"


def verdict_rows(name: str, result: object) -> list[DemoRow]:
    """The demo rows of one replayed capture, in pipeline order of its sites."""
    rows = []
    verdicts = result.verdicts  # type: ignore[attr-defined]
    findings = result.findings  # type: ignore[attr-defined]
    for site in verdicts[DEMO_VARIANTS[0]]:
        site_rows = findings[(findings["site"] == site)
                             & (findings["variant"] == DEMO_VARIANTS[0])]
        first = site_rows.iloc[0].to_dict() if len(site_rows) else None
        rows.append(DemoRow(name, site, verdicts["upstream"][site], verdicts["patched"][site],
                            describe_finding(first)))
    return rows


def known_line(result: object) -> str:
    """``"crash verdict unexplained; known issues: none matches"`` for one replayed capture."""
    from forensics.known import answer

    known = answer(result)  # type: ignore[arg-type]
    ids = ", ".join(f"{m.entry.id} ({m.entry.threads()})" for m in known.matches)
    return f"{known.verdict_text()}; known issues: {ids or 'none matches'}"


def known_block(rows: list[DemoRow]) -> str:
    """One line per capture: its crash verdict and the known issues it matches."""
    seen = dict.fromkeys((terminal(r.capture), inert(r.known)) for r in rows if r.known)
    return "\n".join(f"{capture}: {known}" for capture, known in seen)


def format_table(rows: list[DemoRow]) -> str:
    """The verdict table as aligned text, then the known issues of each capture."""
    header = ("capture", "site", "upstream", "patched", "first finding (upstream)")
    cells = [header] + [(terminal(r.capture), *(inert(c) for c in (r.site, r.upstream,
                                                                    r.patched, r.first_finding)))
                        for r in rows]
    widths = [max(len(str(c[i])) for c in cells) for i in range(len(header) - 1)]
    lines = ["  ".join(str(c[i]).ljust(widths[i]) for i in range(len(widths))) + "  " + c[-1]
             for c in cells]
    lines.insert(1, "-" * min(120, max(len(line) for line in lines)))
    known = known_block(rows)
    return "\n".join(lines) + (f"\n\nknown issues (forensics known CAPTURE):\n{known}"
                               if known else "")


def run_demo(out_dir: Path | str = "reports", data_dir: Path | None = None,
             with_reports: bool = True,
             progress: Callable[[str], None] | None = None) -> Demo:
    """Replay every bundled capture and write ``out_dir/index.html`` with reports and figures;
    a report that cannot be written is named in :attr:`Demo.failed` and the others are still
    written.

    Returns:
        The verdict table's rows and the reports not written.
    Raises:
        ForensicsError: a bundled capture cannot be read or replayed.
    """
    from forensics.replaying import replay
    from forensics.store.reader import load

    out = user_path(out_dir)
    captures = sorted((data_dir or bundled_data_dir()).glob("*.capture"))
    refuse_inside_captures(out, captures)
    make_folder(out)  # through no link another user planted
    demo = Demo([])
    entries: list[tuple[str, str | None, str]] = []
    for path in captures:
        if progress:
            progress(f"replaying {path.name}")
        name = path.name.removesuffix(".capture")
        result = replay(load(path), variants=list(DEMO_VARIANTS))
        known = known_line(result)
        demo.rows += [replace(row, known=known) for row in verdict_rows(name, result)]
        figure = _write_verdict_figure(result, out / f"{name}-verdicts.png")
        report = None
        if with_reports:
            if progress:
                progress(f"writing the report of {path.name}")
            page = report_page(name)
            why = _write_report(path, out / page)
            report = None if why else page
            demo.failed += [(name, why)] if why else []
        entries.append((name, report, figure.name))
    _write_index(out / INDEX, demo.rows, entries)
    return demo


#: the demo's index page, beside the reports
INDEX = "index.html"


def report_page(name: str) -> str:
    """The file of the report of the capture ``name`` (its folder's name less ``.capture``):
    ``NAME.html``, but never the index's name: a capture ``index`` (or ``index.capture``...)
    takes one ``.capture`` more (``index.capture.html``), so that no two captures share one."""
    stem = name
    while stem.endswith(".capture"):
        stem = stem.removesuffix(".capture")
    return f"{name}.capture.html" if f"{stem}.html" == INDEX else f"{name}.html"


def _write_report(capture: Path, target: Path) -> str:
    """Write the report of ``capture`` to ``target``: ``""``, or one line why it was not."""
    from forensics.errors import one_line
    from forensics.present.report import write_report

    try:
        write_report(capture, target)
    except Exception as exc:  # noqa: BLE001  (one report's failure is a line, not the demo's end)
        return one_line(exc)
    return ""


def _write_verdict_figure(result: object, path: Path) -> Path:
    from forensics.present.plots import plot_verdict_matrix, save

    save(plot_verdict_matrix(result), path, dpi=100)
    return path


def _write_index(path: Path, rows: list[DemoRow], entries: list[tuple[str, str | None, str]]
                 ) -> None:
    from forensics.atomic import write_text_atomically
    from forensics.escaping import html as esc

    table = "".join(
        f"<tr><td>{esc(r.capture)}</td><td>{esc(r.site)}</td><td class='{esc(r.upstream)}'>"
        f"{esc(r.upstream)}</td><td class='{esc(r.patched)}'>{esc(r.patched)}</td>"
        f"<td>{esc(r.first_finding)}</td></tr>" for r in rows)
    known = "".join(f"<li><b>{esc(capture)}</b>: {esc(text)}</li>"
                    for capture, text in dict.fromkeys((r.capture, r.known) for r in rows
                                                       if r.known))
    links = "".join(
        f"<li><b>{esc(name)}</b>: "
        + (f"<a href='{_href(report)}'>report</a>, " if report else "")
        + f"<a href='{_href(figure)}'>verdict figure</a></li>"
        for name, report, figure in entries)
    write_text_atomically(
        path, "<!doctype html><html><head><meta charset='utf-8'><meta http-equiv="
        "'Content-Security-Policy' content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        "<title>vllm-forensics demo</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{border:1px solid #ccc;"
        "padding:4px 8px}table{border-collapse:collapse}.violation{background:#f4c2c2}"
        ".error{background:#f9e0a0}.suspect{background:#fff3b0}.ok{background:#d8f0d8}"
        "</style></head><body><h1>vllm-forensics: bundled incidents</h1>"
        "<table id='verdicts'><tr><th>capture</th><th>site</th><th>upstream</th>"
        f"<th>patched</th><th>first finding (upstream)</th></tr>{table}</table>"
        f"<h2>Known issues</h2><ul id='known'>{known}</ul>"
        f"<h2>Reports</h2><ul>{links}</ul></body></html>\n", shared=True)


def _href(name: str) -> str:
    """A link to the file ``name`` beside the index, percent-encoded: a relative URL (a capture
    named ``javascript:alert(1);x`` linked its report as a script to run)."""
    from urllib.parse import quote

    from forensics.escaping import html as esc

    return esc(quote(name, safe=""))
