"""forensics import: turn foreign dumps (.pt, .safetensors, .npz) and logs into a capture.

Each .pt holds a dict or a list of dicts (site, step, optional rank, the site's fields) and is
loaded with torch.load(weights_only=True); .safetensors and .npz hold one record each; log lines
from the probes become summary records, and CUDA asserts, illegal memory accesses,
EngineDeadError and vLLM's report of a worker or engine process that died become events.

The capture states only the incident's facts: what the sources say and what ``--set`` gives;
the rest (vLLM and torch versions, model, time) is ``unknown``. The importing tool and time
are kept apart, under ``imported``.
"""

from __future__ import annotations

import argparse

from forensics.escaping import terminal

EXAMPLE = """example:
  forensics import dump_step41.pt dump_step42.safetensors engine.log -o incident.capture \\
      --set versions.vllm=0.31.0 --set model.name=Qwen/Qwen3-8B
  forensics inspect incident.capture"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare SOURCE..., -o OUT.capture and --force."""
    parser.add_argument("sources", nargs="+", metavar="SOURCE",
                        help=".pt, .safetensors, .npz or text log (.log, .txt, .out, .err)")
    parser.add_argument("-o", "--output", required=True, metavar="OUT.capture",
                        help="capture directory to create")
    parser.add_argument("--force", action="store_true",
                        help="replace an existing capture at OUT.capture")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        dest="facts",
                        help="a fact of the incident (repeatable): versions.vllm, "
                             "versions.torch, model.name, model.vocab_size, host, created, ... "
                             "(the rest is recorded as unknown)")


def run(args: argparse.Namespace) -> int:
    """Import the sources; print one line naming the capture (and one naming the events read
    from a cut log line, if any). Returns 0.

    Raises ForensicsError subclasses on bad input (the CLI turns them into exit 2).
    """
    from forensics.importers import import_sources
    from forensics.importers.facts import parse_settings
    from forensics.importers.logs import cut_note
    from forensics.store.reader import load

    facts = parse_settings(args.facts)  # bad keys fail before anything is read
    out = import_sources(args.sources, args.output, force=args.force, facts=facts)
    summary = load(out).summary()
    sites = ", ".join(f"{site} {count}" for site, count in summary["sites"].items()) or "none"
    print(f"wrote {terminal(out)}: {summary['records']} records ({sites}), "
          f"{len(summary['events'])} events")
    note = cut_note(summary["events"])
    if note is not None:
        print(f"note: {note}")
    return 0
