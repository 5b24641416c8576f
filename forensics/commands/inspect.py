"""forensics inspect: summarise a capture (records per site, steps, ranks, events) without
replaying it. The summary is the batch index's, each entry checked first against its batch's
header and step column (8 bytes a record), so large captures answer at once and every count and
step range it states is one the batches hold."""

from __future__ import annotations

import argparse
from typing import Any

from forensics.escaping import json_text, terminal
from forensics.importers.tracebacks import death_lines
from forensics.known.guard_bounds import refuted_note, self_refuted
from forensics.store.events import as_said

EXAMPLE = """example:
  forensics inspect incident.capture
  forensics inspect incident.capture --json | jq .sites"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare CAPTURE and --json."""
    parser.add_argument("capture", metavar="CAPTURE", help="a NAME.capture directory")
    parser.add_argument("--json", action="store_true",
                        help="print the summary as one JSON object")


def run(args: argparse.Namespace) -> int:
    """Print the capture's summary (a short table, or JSON with --json). Returns 0.

    Raises ForensicsError subclasses for a missing or malformed capture (exit 2).
    """
    from forensics.present.capture_facts import facts_lines
    from forensics.present.conclusion import kernel_launches
    from forensics.store.reader import load
    from forensics.store.unjudged import unjudged_of, unjudged_text

    capture = load(args.capture)
    capture.check_index()  # what the summary states of the index is what the batches hold
    summary = capture.summary()
    summary["kernel_launches"] = kernel_launches(capture)  # apart from its events
    if args.json:  # what no variant judged, worded as every output words it
        summary["not_judged"] = unjudged_text(unjudged_of(capture))
        print(json_text(summary, sort_keys=True))
    else:
        print(render(summary))
        print("\n".join(facts_lines(summary)))
    return 0


def _span(steps: list[int] | None) -> str:
    return "-" if not steps else f"{steps[0]}..{steps[1]}"


def event_origin(event: dict[str, Any]) -> str:
    """Where an event comes from: ``FILE:LINE`` for an imported log line, else the process;
    then the step and rank it was kept at, when known (a field an event lacks is left out;
    "step unknown" where a log's lines gave the step only their order: ``step_known`` false)."""
    if "line" in event:
        parts = [f"{terminal(event.get('source', event.get('process', '?')))}:"
                 f"{terminal(event['line'])}"]
    else:
        parts = [terminal(event.get("process") or event.get("source") or event.get("pid")
                          or "?")]
    shown = as_said(event)
    parts += [f"{name} {terminal(shown[name])}" for name in ("step", "rank")
              if shown.get(name) is not None]
    return " ".join(parts)


def render(summary: dict[str, Any]) -> str:
    """The human table of ``inspect``: one line per site (those this install does not know
    too), then events (whole messages) and truncated files."""
    unknown = sum(summary.get("unknown_sites", {}).values())
    more = f" (and {unknown} of sites not known to this install)" if unknown else ""
    lines = [f"capture {terminal(summary['name'])}: {summary['records']} records in "
             f"{summary['segments']} segments{more}, steps {_span(summary['steps'])}, "
             f"ranks {summary['ranks']}",
             f"  {'site':<20}{'records':>10}  steps"]
    for site, count in summary["sites"].items():
        lines.append(f"  {site:<20}{count:>10}  {_span(summary['site_steps'][site])}")
    for site, count in summary.get("unknown_sites", {}).items():
        lines.append(f"  {terminal(site):<20}{count:>10}  not known to this install (not read, "
                     "not judged: install the plugin that declares it)")
    events = summary["events"]
    lines.append(f"events: {len(events)}")
    for event in events[:20]:
        deaths = death_lines(event)
        said = (refuted_note(event) if self_refuted(event)
                else terminal(event.get('message') or event.get('detail') or ''))
        lines.append(f"  {event_origin(event):<34} {terminal(event.get('kind', '?')):<22} "
                     f"{said}" + (f" [{deaths}]" if deaths else ""))
    if len(events) > 20:
        lines.append(f"  ... {len(events) - 20} more (use --json)")
    if summary.get("kernel_launches"):
        lines.append(f"kernel launches: {summary['kernel_launches']} recorded (not among the "
                     "events; no variant judges them: `forensics kernels` replays them)")
    if summary["truncated"]:
        lines.append("truncated tail ignored in: "
                     + ", ".join(map(terminal, summary["truncated_files"])))
    return "\n".join(lines)
