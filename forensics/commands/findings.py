"""forensics findings: replay a capture and export its findings, filtered.

Without -o: a table on stdout (empty cells for nulls). With -o: the format by the file's suffix
(.csv, .parquet, .jsonl), columns variant, site, step, rank, row, element, tensor, kind, value,
lower, upper, origin, resolved, req_id, record. --steps A:B includes both ends.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from forensics.quiet import quietly

if TYPE_CHECKING:
    import pandas as pd

EXAMPLE = """examples:
  forensics findings data/incident-b-vocab-sentinel.capture
  forensics findings run.capture --variant upstream --site embedding --steps 100:200 -o f.csv
  forensics findings run.capture --request req-7 -o req-7.jsonl
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare this command's arguments."""
    parser.add_argument("capture", metavar="CAPTURE", help="a NAME.capture directory")
    parser.add_argument("--variant", action="append", metavar="NAME", default=None,
                        help="replay and keep only these variants (repeatable; default: "
                             "upstream and patched, all kept)")
    parser.add_argument("--site", metavar="SITE", default=None, help="keep one site")
    parser.add_argument("--steps", metavar="A:B", default=None,
                        help="keep steps A to B, both included (A: or :B leave an end open)")
    parser.add_argument("--request", metavar="ID", default=None, help="keep one request id")
    parser.add_argument("-o", "--output", metavar="FILE", default=None,
                        help="write FILE.csv, FILE.parquet or FILE.jsonl instead of a table")


@quietly
def run(args: argparse.Namespace) -> int:
    """Replay, filter, then print or write the findings; return 0."""
    from forensics.atomic import real_output, refuse_inside_captures, user_path
    from forensics.escaping import inert, terminal
    from forensics.present.export import (
        errored_records,
        output_path,
        parse_steps,
        select_findings,
        write_findings,
    )
    from forensics.replaying import replay
    from forensics.sites import SITES
    from forensics.variants import DEFAULT_VARIANTS

    steps = parse_steps(args.steps) if args.steps else (None, None)
    if args.site and args.site not in SITES:  # bad input fails before the replay
        from forensics.present.selection import check_site_name
        from forensics.store.reader import load

        check_site_name(args.site, [], str(args.capture), load(args.capture).unknown_sites)
    if args.output is not None:  # "" refused: it printed the table where a file was asked
        output_path(args.output)
        refuse_inside_captures(args.output, [args.capture])
        real_output(user_path(args.output))  # a link planted on its way: refused before the replay
    result = replay(args.capture, variants=list(args.variant or DEFAULT_VARIANTS),
                    progress=sys.stderr.isatty())
    frame = select_findings(result.findings, site=args.site, steps=steps, request=args.request)
    if args.output is not None:
        print(f"{len(frame)} findings -> {terminal(write_findings(frame, args.output))}")
    else:
        print("\n".join(table_lines(frame)) if len(frame) else "no findings")
    padded = padded_lines(result.capture, args.site, steps) if args.request is None else []
    if padded:
        print("\n".join(padded))
    nothing = "" if len(frame) or padded else _nothing_selected(result.capture, args.site, steps)
    if not (len(frame) or nothing) and args.request is not None:
        nothing = _no_request(result.capture, args.site, steps, args.request)
    if nothing:
        print(nothing)
    if args.request is not None:
        unnamed = _unnamed_text(result.findings, args.site, steps, args.request)
        if unnamed:
            print(unnamed)
    errors = errored_records(result.outcomes, site=args.site, steps=steps)
    if errors:  # records judged by nothing: "no findings" is not all there is to say
        counts = ", ".join(f"{n} record(s) of {terminal(v)}" for v, n in errors.items())
        print(f"not judged: {counts} ended in errors, so hold no finding; forensics replay "
              "names why")
    from forensics.store.unjudged import (
        CUT,
        NEVER_WRITTEN,
        NOT_KNOWN,
        REDACTED,
        unjudged_of,
        unjudged_text,
    )

    unseen = unjudged_of(result.capture)  # records no variant judged: nor is "no findings" all
    unknown = unjudged_text(unseen, {NOT_KNOWN})
    unread = unjudged_text(unseen, {CUT, NEVER_WRITTEN, REDACTED})
    if unknown:
        print(f"not judged: {inert(unknown)}; install the plugin that declares each and run "
              "findings again")
    if unread:
        print(f"not read: {inert(unread)}; what it held holds no finding")
    return 0


def padded_lines(capture: Any, site: str | None, steps: tuple[int | None, int | None]
                 ) -> list[str]:
    """The ids the embedding read in padded rows past the vocabulary (no finding of a variant:
    :func:`~forensics.judge.padded_rows.padded_inputs_of`) that ``site`` and ``steps`` select,
    said as ``replay`` says the slots fed silently; none where none is."""
    from forensics.escaping import terminal
    from forensics.judge.padded_rows import (
        describe_padded_summary,
        padded_inputs_of,
        padded_summaries_of,
    )
    from forensics.judge.wrong_tokens import describe

    low, high = steps
    slots = [slot for slot in [*padded_inputs_of(capture), *padded_summaries_of(capture)]
             if site in (None, slot["site"]) and (low is None or slot["step"] >= low)
             and (high is None or slot["step"] <= high)]
    if not slots:
        return []
    return [f"fed silently: {len(slots)} slot(s) (kind padded_row, no variant's finding)",
            *(f"  {terminal(describe_padded_summary(s) if s.get('summary') else describe(s))}"
              for s in slots[:10]),
            *([f"  ... {len(slots) - 10} more"] if len(slots) > 10 else [])]


def _nothing_selected(capture: Any, site: str | None, steps: tuple[int | None, int | None]
                      ) -> str:
    """Of findings none of which ``site`` and ``steps`` selected: whether the capture holds a
    record there at all ("0 findings" of steps the capture does not reach was read as those
    steps judged clean), or ``""`` when it does or cannot say (records held in memory)."""
    from forensics.escaping import terminal

    held = getattr(capture, "steps", None)
    if not (site or any(end is not None for end in steps)) or not isinstance(held, list) \
            or not held:
        return ""
    if len(_selected(capture, site, steps)):
        return ""
    where = " ".join(part for part in (f"of site {terminal(site)}" if site else "",
                                        _steps_text(*steps)) if part)
    sites = f", of sites {', '.join(capture.sites)}" if site else ""
    return (f"the capture holds no record {where} (its records are at steps "
            f"{held[0]}..{held[-1]}{sites}): nothing there was judged")


def _selected(capture: Any, site: str | None, steps: tuple[int | None, int | None]) -> Any:
    """The records of a capture on disk (its ``steps`` some) that ``site`` and ``steps``
    select, an open end at its first or last step."""
    low = capture.steps[0] if steps[0] is None else steps[0]
    high = capture.steps[-1] if steps[1] is None else steps[1]
    return capture.records(site=site, steps=range(low, high + 1))


def _no_request(capture: Any, site: str | None, steps: tuple[int | None, int | None],
                request: str) -> str:
    """Of ``--request`` selecting no finding: that no record ``site`` and ``steps`` select
    names ``request`` in its ``req_ids`` while some name requests ("no findings" of a request
    the capture never batched was read as its rows judged clean), or ``""``."""
    from forensics.escaping import terminal

    held = getattr(capture, "steps", None)
    if not isinstance(held, list) or not held:
        return ""  # records held in memory: cannot say
    naming = 0
    for record in _selected(capture, site, steps):
        ids = record.fields.get("req_ids")
        if isinstance(ids, list):
            if request in ids:
                return ""
            naming += 1
    if not naming:
        return ""  # no record names its requests: whether it is there is unknown
    where = " ".join(part for part in (f"of site {terminal(site)}" if site else "",
                                        _steps_text(*steps)) if part)
    return (f"the capture holds no record {where + ' ' if where else ''}naming request "
            f"'{terminal(request)}' ({naming} record(s) there name their requests): nothing of "
            "it was judged")


def _unnamed_text(findings: pd.DataFrame, site: str | None,
                  steps: tuple[int | None, int | None], request: str) -> str:
    """Of ``--request``: how many findings ``site`` and ``steps`` select that name no request
    (their records hold no request ids, so no ``--request`` selects them: "no findings" of a
    request was read as its rows judged clean), or ``""`` when none."""
    from forensics.escaping import terminal
    from forensics.present.export import select_findings

    unnamed = int(select_findings(findings, site=site, steps=steps)["req_id"].isna().sum())
    if not unnamed:
        return ""
    return (f"not selected: {unnamed} finding(s) name no request (their records hold no "
            f"request ids), so --request '{terminal(request)}' cannot say whether they are "
            "its; run findings without --request to see them")


def _steps_text(low: int | None, high: int | None) -> str:
    """``--steps`` as a sentence says it (``""`` when not given)."""
    if low is None:
        return "" if high is None else f"at a step up to {high}"
    if high is None:
        return f"at a step from {low}"
    return f"at step {low}" if low == high else f"at steps {low}..{high}"


def table_lines(frame: pd.DataFrame) -> list[str]:
    """The findings as aligned text, every cell escaped (:func:`forensics.escaping.terminal`),
    each column padded to at most :data:`forensics.present.text_table.TEXT_WIDTH`: a table
    padded to its widest cell was the rows times that cell (a 76 KB capture of 5,000 findings
    and a request id of 20,000 characters printed 200 MB)."""
    from forensics.escaping import terminal
    from forensics.present.tables import display_frame
    from forensics.present.text_table import aligned

    cells = display_frame(frame).map(terminal)
    return aligned([[terminal(c) for c in cells.columns], *cells.to_numpy().tolist()])

