"""``forensics summary``: a write-up of a replay to paste into a bug thread or a pull request.

Three renderings of one :class:`~forensics.conclusion.Conclusion`:

- :func:`to_markdown`: the conclusion, the verdict table, the first violations with their origin
  chains, the capture's facts and the commands that reproduce the replay;
- :func:`to_text`: one line per variant, for CI logs;
- :func:`to_json`: the conclusion's fields plus the verdicts and the reproduce commands.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from forensics.conclusion import Conclusion, conclude, describe_finding, fact_text
from forensics.suspects import describe_suspect

if TYPE_CHECKING:
    from forensics.replaying import ReplayResult

FORMATS = ("markdown", "text", "json")


def reproduce_commands(source: str, variants: list[str]) -> list[str]:
    """The shell commands that reproduce this replay and its write-up."""
    flags = " ".join(f"--variant {shlex.quote(v)}" for v in variants)
    path = shlex.quote(source)
    return [f"forensics replay {path} {flags}", f"forensics summary {path} {flags}",
            f"forensics report {path} -o report.html {flags}"]


def to_markdown(result: ReplayResult, conclusion: Conclusion | None = None) -> str:
    """The Markdown write-up of ``result`` (GitHub-flavoured: tables, fenced commands)."""
    conclusion = conclusion or conclude(result)
    lines = [f"## vllm-forensics: {conclusion.capture}", "", conclusion.paragraph(), "",
             "### Verdicts", "", *_verdict_rows(result), "", "### First violations", ""]
    for variant in result.variants:
        lines.append(f"- **{variant}**: {_first_text(conclusion, variant)}")
    suspects = {v: s for v, s in conclusion.suspect_first.items() if s}
    if suspects:
        lines += ["", "### Suspect rows", ""]
        lines += [f"- **{v}**: {describe_suspect(s)} (the first of {s['count']})"
                  for v, s in suspects.items()]
    lines += ["", "### Capture", ""]
    lines += [f"- {key}: {fact_text(key, value)}" for key, value in conclusion.facts.items()
              if key != "events"]
    lines += [f"- event: {event}" for event in conclusion.facts.get("events", [])]
    lines += ["", "### Reproduce", "", "```sh",
              *reproduce_commands(result.source, result.variants), "```"]
    return "\n".join(lines)


def _verdict_rows(result: ReplayResult) -> list[str]:
    sites = list(next(iter(result.verdicts.values()), {}))
    rows = ["| site | " + " | ".join(result.variants) + " |",
            "|---|" + "---|" * len(result.variants)]
    rows += [f"| {site} | " + " | ".join(result.verdicts[v][site] for v in result.variants)
             + " |" for site in sites]
    return rows


def _first_text(conclusion: Conclusion, variant: str) -> str:
    first = conclusion.first.get(variant)
    if first is None:
        return "no unresolved out-of-bounds finding"
    text = describe_finding(first)
    chain = conclusion.chains.get(variant) or []
    if len(chain) > 1:
        text += "; origin chain " + " -> ".join(f"{c['site']} step {c['step']}" for c in chain)
    return text


def to_text(result: ReplayResult, conclusion: Conclusion | None = None) -> str:
    """One line per variant (see :meth:`Conclusion.line`)."""
    conclusion = conclusion or conclude(result)
    return "\n".join(conclusion.line(v) for v in result.variants)


def to_json(result: ReplayResult, conclusion: Conclusion | None = None) -> dict[str, Any]:
    """The conclusion's fields, the verdicts and the reproduce commands (JSON-ready)."""
    conclusion = conclusion or conclude(result)
    return {**conclusion.to_json(), "verdicts": result.verdicts,
            "reproduce": reproduce_commands(result.source, result.variants)}


def render(result: ReplayResult, fmt: str) -> str:
    """``result``'s write-up in ``fmt`` (one of :data:`FORMATS`)."""
    import json

    if fmt == "json":
        return json.dumps(to_json(result), indent=2)
    return to_text(result) if fmt == "text" else to_markdown(result)
