"""forensics shrink: write the fewest steps, then records, of a capture that replay to the same
evidence: the verdict of every site per variant and each variant's first finding (site, step,
rank, row, element, tensor, value, bound, origin, resolved).

One replay of the original gives the evidence and the records behind it; a delta-debugging
search over the steps around them, then over their records, keeps the smallest set found. The
output is replayed before it is renamed into place. Exit 0 when written, 1 when the written
capture would differ (nothing is written), 2 for bad input (not a capture, an existing output
without --force, a capture with no finding and no site whose replay raised, or a replay of
the original or of the capture written that ``--deadline`` cut: nothing is written).
``--deadline``: the seconds all its replays may take together; when it comes, the search stops
and writes the smallest capture found so far, said to keep the evidence but maybe not minimal.
"""

from __future__ import annotations

import argparse
import sys

from forensics.commands._share import add_common_arguments, refused
from forensics.escaping import terminal
from forensics.quiet import quietly

EXAMPLE = """examples:
  forensics shrink soak.capture -o small.capture
  forensics shrink incident.capture -o small.capture --variant upstream --variant vllm
  forensics redact small.capture -o shareable.capture    # then strip what is private"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare CAPTURE, -o SMALL.capture, --variant, --force and --deadline."""
    from forensics.budget import DEFAULT_SHRINK_DEADLINE
    from forensics.commands._numbers import add_deadline

    add_common_arguments(parser, "SMALL.capture")
    add_deadline(parser, DEFAULT_SHRINK_DEADLINE,
                 "all the replays of the shrink (the original's, the search's, the written "
                 "capture's)",
                 "when it comes the search stops and writes the smallest capture found so far, "
                 "said to be maybe not minimal")


@quietly
def run(args: argparse.Namespace) -> int:
    """Shrink, print what was kept and what it cost; return the exit code."""
    from forensics.budget import DEFAULT_SHRINK_DEADLINE
    from forensics.present.conclusion import steps_text
    from forensics.share.evidence import EvidenceChangedError
    from forensics.share.shrinking import SEARCH_FACTOR, shrink

    try:
        result = shrink(args.capture, args.output, args.variant, force=args.force,
                        progress=sys.stderr.isatty(),
                        deadline=DEFAULT_SHRINK_DEADLINE if args.deadline is None
                        else args.deadline)
    except EvidenceChangedError as exc:
        return refused("shrink", exc)
    print(f"wrote {terminal(result.path)}: kept {result.records_kept} of "
          f"{result.records_before} records ({100 * result.fraction_kept:.3g}%), "
          f"{steps_text(result.steps_kept) if result.steps_kept else 'no step'}; "
          f"{result.replays} replays, {result.seconds:.1f} s")
    if result.dropped:
        print(f"note: left out {result.dropped}: no replay here judged them, so whether the "
              "evidence needs them is not known; shrink where the plugin that declares the "
              "site is installed to judge them")
    if result.stopped:
        print(f"note: {result.stopped}: {terminal(result.path)} keeps the evidence, but it may "
              "not be minimal (some of its records may not be needed); give a longer "
              "--deadline to search further")
    elif not result.complete:
        print(f"note: the search stopped at its budget ({SEARCH_FACTOR} times the records each "
              f"pass starts from, {result.window_records} for the first; "
              f"{result.records_replayed} replayed): {terminal(result.path)} keeps the "
              "evidence, but some of its records may not be needed")
    return 0

