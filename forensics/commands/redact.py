"""forensics redact: write a copy of a capture that is fit to share, with the same evidence.

In-range token ids are mapped by a keyed random permutation (the same id to the same id across
the capture; no id but 0 keeps its value; the key is never stored); token 0 (vLLM's clamp
writes it for a -1 placeholder), out-of-range values, -1 placeholders and values equal to a
bound stay exactly as they were; request ids become
pseudonyms (anon-<n>); host names, paths, pids, model names and free-text notes leave the
manifest and the events unless kept with --keep-manifest. The manifest says what was done. The
output is replayed before it is renamed into place: exit 1 (nothing written) when its verdicts
or first findings would differ, 2 for bad input.
"""

from __future__ import annotations

import argparse
import sys

from forensics.commands._share import add_common_arguments, refused
from forensics.escaping import terminal

EXAMPLE = """examples:
  forensics redact small.capture -o shareable.capture
  forensics redact small.capture -o shareable.capture --keep-manifest model.name
  forensics redact run.capture -o shareable.capture --keep-manifest events.message"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare CAPTURE, -o SHAREABLE.capture, --keep-manifest, --variant and --force."""
    add_common_arguments(parser, "SHAREABLE.capture")
    parser.add_argument("--keep-manifest", action="append", metavar="FIELD", default=[],
                        dest="keep", help="a dotted manifest field (model.name) or event field "
                                          "(events.message) to keep as it is (repeatable)")


def run(args: argparse.Namespace) -> int:
    """Redact, print what was done; return the exit code."""
    from forensics.share.evidence import EvidenceChangedError
    from forensics.share.redaction import redact

    try:
        result = redact(args.capture, args.output, args.keep, args.variant, force=args.force,
                        progress=sys.stderr.isatty())
    except EvidenceChangedError as exc:
        return refused("redact", exc)
    dropped = ", ".join(result.dropped) or "nothing"
    if any(name.endswith("*") for name in result.dropped):  # a name that may be private
        dropped += (" (*: fields of names redact does not know as ones forensics writes (a "
                    "name may be private), not named here)")
    # the ids of its records and guard events only: another number of kept text stays (T37e)
    tokens = (f"token ids in [1, {result.token_domain}) permuted in its records and its guard "
              "events' values (another number in the events' kept text is not)"
              if result.token_domain
              else "no token ids (no record holds any)")
    print(f"wrote {terminal(result.path)}: {result.records} records, {tokens}, "
          f"{result.request_ids} request ids pseudonymised; dropped: {dropped} "
          f"({result.seconds:.1f} s)")
    return 0
