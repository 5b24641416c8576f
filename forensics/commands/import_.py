"""forensics import: turn foreign dumps (.pt, .safetensors, .npz) and logs into a capture.

Each .pt holds a dict or a list of dicts (site, step, optional rank, the site's fields) and is
loaded with torch.load(weights_only=True); .safetensors and .npz hold one record each; log lines
from the probes become summary records, and CUDA asserts, illegal memory accesses and
EngineDeadError become events.
"""

from __future__ import annotations

import argparse

EXAMPLE = """example:
  forensics import dump_step41.pt dump_step42.safetensors engine.log -o incident.capture
  forensics inspect incident.capture"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare SOURCE..., -o OUT.capture and --force."""
    parser.add_argument("sources", nargs="+", metavar="SOURCE",
                        help=".pt, .safetensors, .npz or text log (.log, .txt, .out, .err)")
    parser.add_argument("-o", "--output", required=True, metavar="OUT.capture",
                        help="capture directory to create")
    parser.add_argument("--force", action="store_true",
                        help="replace an existing capture at OUT.capture")


def run(args: argparse.Namespace) -> int:
    """Import the sources; print one line naming the capture. Returns 0.

    Raises ForensicsError subclasses on bad input (the CLI turns them into exit 2).
    """
    from forensics.importers import import_sources
    from forensics.store.reader import load

    out = import_sources(args.sources, args.output, force=args.force)
    summary = load(out).summary()
    sites = ", ".join(f"{site} {count}" for site, count in summary["sites"].items()) or "none"
    print(f"wrote {out}: {summary['records']} records ({sites}), "
          f"{len(summary['events'])} events")
    return 0
