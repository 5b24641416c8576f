"""forensics kernels: replay a capture's recorded Triton kernel launches in Triton's interpreter
and report out-of-bounds accesses, broken index contracts, int32 wraps and launches whose live
outputs differ from the replay's (:mod:`forensics.kernels.sanitizer`).

``--coverage`` lists every Triton kernel of the installed vLLM's worker packages: recorded,
seen only in a CUDA graph, launched but not recorded (and why), never launched, not watched
(outside the probe's selection, or no count of it written: whether it ran is unknown), or not
replayable (and why). Exit 1 when a launch
has a finding; else 2 when nothing could be judged (no launch recorded, or none replayed: one
line on stderr says why and what to do); else 0, a last line saying how many launches were not
replayed when some were not.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from forensics.errors import CaptureFormatError, ConfigurationError
from forensics.escaping import inert, json_text, terminal
from forensics.quiet import quietly

if TYPE_CHECKING:
    from forensics.kernels.sanitizer import KernelReport

EXAMPLE = """examples:
  FORENSICS_DIR=/tmp/caps FORENSICS_KERNELS=all vllm serve ...   # record
  forensics kernels /tmp/caps/NAME.capture
  forensics kernels /tmp/caps/NAME.capture --coverage --json"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare CAPTURE, --variant, --coverage, --json and --deadline."""
    from forensics.budget import DEFAULT_OVERALL_DEADLINE
    from forensics.commands._numbers import add_deadline

    parser.add_argument("capture", metavar="CAPTURE", help="a NAME.capture directory")
    parser.add_argument("--variant", default="vllm", metavar="NAME",
                        help="the kernels to replay: vllm (the installed vLLM's; the only one "
                             "supported so far)")
    parser.add_argument("--coverage", action="store_true",
                        help="list every Triton kernel of the installed vLLM's worker packages")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_deadline(parser, DEFAULT_OVERALL_DEADLINE, "all the replays",
                 "the launches left when it passes are listed as not run")


@quietly
def run(args: argparse.Namespace) -> int:
    """Replay the launches and print the report; 1 when a launch has a finding."""
    from forensics.budget import DEFAULT_OVERALL_DEADLINE, overall_deadline
    from forensics.kernels.sanitizer import NOT_RUN, describe, fold, sanitize, to_json

    if args.variant != "vllm":
        raise ConfigurationError(f"--variant {args.variant!r}: forensics kernels replays the "
                                 "installed vLLM's kernels only (--variant vllm); a diff's "
                                 "kernels are not supported yet")
    deadline = overall_deadline(DEFAULT_OVERALL_DEADLINE if args.deadline is None
                                else args.deadline)
    report = sanitize(args.capture, deadline)
    if args.json:
        out = to_json(report)
        if not args.coverage:
            out.pop("coverage")
        print(json_text(out, indent=1, default=str))
        return _exit_code(report)
    replayed = sum(r.status == "replayed" for r in report.results)
    lines = fold(report.findings)
    folded = "" if len(lines) == len(report.findings) else \
        f" ({len(report.findings)} before the programs of one access were folded into one)"
    print(f"{terminal(report.capture)}: {len(report.results)} launch(es) recorded, "
          f"{replayed} replayed, {len(lines)} finding(s){folded}")
    if report.note:
        print(f"note: {terminal(report.note)}")
    for result in report.results:
        if result.status == NOT_RUN:  # the reason says "not run: ..."
            print(f"{inert(result.reason)}: {terminal(result.launch.where)}")
        elif result.status != "replayed":
            print(f"not replayed: {terminal(result.launch.where)}: {inert(result.reason)}")
        elif result.reason:  # what the replay could not judge, or ran in the record's stead
            print(f"replayed, but: {terminal(result.launch.where)}: {inert(result.reason)}")
    for finding in lines:
        print(inert(describe(finding)))  # a sentence
    unjudged = sum(r.status != "replayed" for r in report.results)
    if unjudged:
        print(f"{unjudged} of {len(report.results)} launch(es) not replayed: not judged for "
              "out-of-bounds accesses, int32 wraps or live differences (only their index "
              "contracts were checked)")
    if args.coverage:
        for row in report.coverage:
            why = f" ({row['why']})" if row["why"] else ""
            print(f"  {row['status']:<15} {terminal(row['module'])}.{terminal(row['kernel'])}: "
                  f"{row['launches']} recorded{terminal(why)}")
    return _exit_code(report)


def _exit_code(report: KernelReport) -> int:
    """1 when a launch has a finding, else 0 when at least one launch was replayed.

    Raises CaptureFormatError (exit 2, one line) when nothing was judged: no launch recorded,
    or none of them replayed.
    """
    if report.findings:
        return 1
    if not report.results:
        why = f" ({terminal(report.note)})" if report.note else ""
        raise CaptureFormatError(f"'{terminal(report.capture)}' holds no kernel_launch event"
                                 f"{why}: nothing to judge; record with FORENSICS_KERNELS=all")
    if not any(r.status == "replayed" for r in report.results):
        from forensics.budget import remedy
        from forensics.kernels.sanitizer import NOT_RUN

        cut = next((r.reason.removeprefix("not run: ") for r in report.results
                    if r.status == NOT_RUN), "")
        more = f"; for the launches 'not run', {remedy(cut)}" if cut else ""
        raise CaptureFormatError(
            f"'{terminal(report.capture)}': none of its {len(report.results)} launch(es) was "
            f"replayed, so none was judged (see each launch's reason above); fix what it says"
            f"{more}")
    return 0
