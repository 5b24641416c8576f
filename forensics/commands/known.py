"""forensics known: vLLM's known failure signatures, and which of them a capture matches.

Without CAPTURE: the catalogue (id, title, threads with their state, runner, fix, workaround).
With CAPTURE: replay it and say, for every entry, whether it matches and on which evidence, or
why not, or (``?``) that it was not judged, a fact it needs being unknown; then the crash
verdict (unexplained when a crash holds no value out of range).
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from typing import TYPE_CHECKING, Any

from forensics.escaping import inert, json_text
from forensics.quiet import quietly

if TYPE_CHECKING:
    from forensics.known import Entry

EXAMPLE = """examples:
  forensics known
  forensics known data/incident-b-vocab-sentinel.capture
  forensics import engine.log -o crash.capture && forensics known crash.capture --json"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare CAPTURE (optional), --variant and --json."""
    parser.add_argument("capture", nargs="?", metavar="CAPTURE",
                        help="a NAME.capture directory (omit to list the catalogue)")
    parser.add_argument("--variant", action="append", metavar="NAME", default=None,
                        help="variants to replay (default: upstream and patched)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


@quietly
def run(args: argparse.Namespace) -> int:
    """List the catalogue or explain the matches of CAPTURE; return 0."""
    from forensics.known import answer, load_catalogue

    catalogue = load_catalogue()
    if args.capture is None:
        if args.json:
            print(json_text([_entry_json(e) for e in catalogue.entries], indent=2))
        else:
            print("\n\n".join(_entry_text(e) for e in catalogue.entries))
        return 0
    from forensics.present.capture_facts import capture_facts, ordinal_sentence
    from forensics.replaying import DEFAULT_VARIANTS, replay

    result = replay(args.capture, variants=list(args.variant or DEFAULT_VARIANTS),
                    progress=sys.stderr.isatty())
    known = answer(result, catalogue)
    if args.json:
        print(json_text({"capture": result.source, **known.to_json()}, indent=2))
        return 0
    lines = [_wrap(f"capture {result.source}: {known.verdict_text()}")]
    for match in known.checked:
        mark = {"match": "MATCH", "no": "no   "}.get(match.status, "?    ")
        lines.append(_wrap(f"{mark} {match.entry.id}: {match.explain()}"))
    lines.append(_wrap(known.paragraph()))
    ordinal = capture_facts(result.capture).get("ordinal_records")
    if ordinal:  # "step 0" above is a log line's order, not the engine's step
        lines.append(_wrap(ordinal_sentence(ordinal)))
    print("\n".join(lines))
    return 0


def _wrap(text: str) -> str:
    """``text`` as inert lines of at most 100 characters (a capture's facts and name reach
    it, escaped already: :func:`forensics.escaping.inert`)."""
    return textwrap.fill(inert(text), width=100, subsequent_indent="      ")


def _entry_json(e: Entry) -> dict[str, Any]:
    return {"id": e.id, "title": e.title, "threads": [r.label() for r in e.refs],
            "runner": e.runner, "methods": e.methods, "versions": e.versions,
            "fix": e.fix_text(), "workaround": e.workaround, "notes": e.notes}


def _entry_text(e: Entry) -> str:
    methods = ", ".join(e.methods) if isinstance(e.methods, tuple) else e.methods
    rows = [f"{e.id}: {e.title}", f"  threads: {e.threads()}",
            f"  runner: {e.runner}; methods: {methods}; versions: {e.versions}",
            f"  fix: {e.fix_text()}", f"  workaround: {e.workaround}"]
    if e.notes:
        rows.append(textwrap.fill(f"  notes: {e.notes}", width=100, subsequent_indent="    "))
    return "\n".join(rows)
