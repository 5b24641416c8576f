"""``forensics summary``: a write-up of a replay to paste into a bug thread or a pull request.

Three renderings of one :class:`~forensics.present.conclusion.Conclusion`:

- :func:`to_markdown`: the conclusion, the verdict table, the first violations with their origin
  chains, the capture's facts and the commands that reproduce the replay;
- :func:`to_text`: one line per variant, for CI logs;
- :func:`to_json`: the conclusion's fields plus the verdicts and the reproduce commands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from forensics.escaping import (
    inert,
    json_text,
    markdown,
    markdown_code,
    shell_path,
    shell_word,
    terminal,
)
from forensics.judge.suspects import describe_suspect
from forensics.present.capture_facts import (
    SHRUNK_KEY,
    fact_label,
    fact_text,
    ordinal_sentence,
    shrunk_sentence,
    stopped_sentence,
    version_sentence,
)
from forensics.present.conclusion import Conclusion, conclude, describe_finding

if TYPE_CHECKING:
    from forensics.replaying import ReplayResult

FORMATS = ("markdown", "text", "json")


def reproduce_commands(source: str, variants: list[str]) -> list[str]:
    """The shell commands that reproduce this replay and its write-up."""
    flags = " ".join(f"--variant {shell_word(v)}" for v in variants)
    path = shell_path(source)
    return [f"forensics replay {path} {flags}", f"forensics summary {path} {flags}",
            f"forensics report {path} -o report.html {flags}"]


def to_markdown(result: ReplayResult, conclusion: Conclusion | None = None,
                given: list[str] | None = None) -> str:
    """The Markdown write-up of ``result`` (GitHub-flavoured: tables, fenced commands).
    ``given``: the variants as the reproduce commands name them, when the replay named them
    otherwise (:func:`forensics.variants.shared_diffs`: a diff by its file name and digest);
    default, as the replay named them."""
    conclusion = conclusion or conclude(result)
    lines = [f"## vllm-forensics: {markdown_code(conclusion.capture)}", "",
             markdown(conclusion.paragraph()), "",
             "### Verdicts", "", *_verdict_rows(result), "", "### First violations", ""]
    for variant in result.variants:
        lines.append(f"- **{markdown(variant, raw=True)}**: "
                     f"{markdown(_first_text(conclusion, variant))}")
    lines += known_markdown(conclusion)
    suspects = {v: s for v, s in conclusion.suspect_first.items() if s}
    if suspects:
        lines += ["", "### Suspect rows", ""]
        lines += [f"- **{markdown(v, raw=True)}**: {markdown(describe_suspect(s))} (the first of "
                  f"{s['count']})" for v, s in suspects.items()]
    lines += ["", "### Capture", ""]
    lines += [f"- {markdown(fact_label(key))}: {markdown_code(fact_text(key, value))}"
              for key, value in conclusion.facts.items() if key != "events"]
    lines += [f"- event: {markdown_code(event)}" for event in conclusion.facts.get("events", [])]
    lines += ["", "### Reproduce", "", "```sh",
              *reproduce_commands(result.source, given or result.variants), "```", "",
              *(repro_lines(result.source) if _reproducible(conclusion)
                else [no_repro_line(result, conclusion)])]
    return "\n".join(lines)


#: the line in place of the reproducer's when no variant leaves an index out of range
NO_REPRO = ("No standalone reproducer: no variant leaves an index out of range at a site "
            "`forensics repro` writes a test for, so it has no failing record to write.")


def no_repro_line(result: ReplayResult, conclusion: Conclusion) -> str:
    """:data:`NO_REPRO`; of a capture of no record, that it holds none; of one whose records
    were not all judged (:meth:`~forensics.present.conclusion.Conclusion.unjudged_facts`:
    records of a site not known here, the end of a file cut short, records the probe never
    wrote), that the records judged leave no index out of range,
    naming the rest: never "no variant leaves an index out of range" of what none read."""
    from forensics.store.unjudged import RECORDS, unjudged_text

    if not len(result.records) and not conclusion.not_known:
        return ("No standalone reproducer: the capture holds no record to replay, so "
                "`forensics repro` has no failing record to write.")
    unjudged = unjudged_text(conclusion.unjudged_facts(), RECORDS)
    if not unjudged:
        return NO_REPRO
    return ("No standalone reproducer: in the records judged, no variant leaves an index out of "
            "range at a site `forensics repro` writes a test for, so it has no failing record "
            f"to write ({markdown(f'not judged: {unjudged}')}).")


def _reproducible(conclusion: Conclusion) -> bool:
    """Whether some variant's first violation is at a site ``forensics repro`` writes a test
    for (else it refuses, "nothing to reproduce": the lines offering a test that "fails until
    the fix is in" were said of a clean capture too)."""
    from forensics.sites import reproducible_sites

    sites = set(reproducible_sites())
    return any(first is not None and first.get("site") in sites
               for first in conclusion.first.values())


def repro_lines(source: str) -> list[str]:
    """The Markdown lines pointing to ``forensics repro``'s standalone pytest file."""
    return ["A standalone reproducer for vLLM maintainers, `test_repro.py` and its data "
            "`test_repro.json` (the failing records; it imports only torch, vllm and pytest, "
            "each test fails until the vLLM calls it runs keep their indices in range, and it "
            "skips without vLLM):",
            "", "```sh", f"forensics repro {shell_path(source)} -o test_repro.py",
            "pytest test_repro.py", "```"]


def _verdict_rows(result: ReplayResult) -> list[str]:
    sites = list(next(iter(result.verdicts.values()), {}))
    rows = ["| site | " + " | ".join(markdown(v, raw=True) for v in result.variants) + " |",
            "|---|" + "---|" * len(result.variants)]
    rows += [f"| {markdown(site, raw=True)} | "
             + " | ".join(result.shown_verdict(v, site) for v in result.variants) + " |"
             for site in sites]
    return rows


def _first_text(conclusion: Conclusion, variant: str) -> str:
    """``variant``'s first violation and its origin chain; when it has none, that nothing was
    judged (a capture of no records: "no unresolved finding" read as a clean replay), or that
    only the records judged hold none (some were not: a site not known here, the deadline, a
    site the variant cannot judge)."""
    first = conclusion.first.get(variant)
    if first is None:
        if conclusion.no_records:
            return conclusion.no_records
        partial = conclusion.not_known or conclusion.cut or conclusion.unjudged.get(variant)
        return "no unresolved out-of-bounds finding" + (
            " in the records judged (not all were: see above)" if partial else "")
    text = describe_finding(first)
    chain = conclusion.chains.get(variant) or []
    if len(chain) > 1:
        text += "; origin chain " + " -> ".join(
            f"{c['site']} step {c['step']}" + (f" (rank {c['rank']})" if c.get("rank") is not None
                                                else "") for c in chain)
    return text


def to_text(result: ReplayResult, conclusion: Conclusion | None = None) -> str:
    """One line per variant (see :meth:`Conclusion.line`), then the crash verdict with what
    it rests on (as ``forensics known`` says it: the capture's crash events, where the replay
    raises) and the known issues matched, then that the capture's vLLM is another than (or not
    known beside) the code replayed (:func:`~forensics.present.capture_facts.version_sentence`)
    and that steps of records are their log lines' order (:func:`~forensics.present.
    capture_facts.ordinal_sentence`) or that it was shrunk (:func:`~forensics.present.
    capture_facts.shrunk_sentence`)."""
    conclusion = conclusion or conclude(result)
    lines = [inert(conclusion.line(v)) for v in result.variants]  # values escaped
    known = conclusion.known
    if known is not None:
        seen = f" ({known.seen})" if known.seen else ""
        lines.append(terminal(f"crash verdict: {known.crash_verdict}{seen}; known issues: "
                              f"{known.issues_text()}"))
    ordinal, shrunk_from = (conclusion.facts.get(key) for key in ("ordinal_records", SHRUNK_KEY))
    notes = (version_sentence(conclusion.facts, conclusion.variants),
             ordinal_sentence(ordinal) if ordinal else "",
             shrunk_sentence(shrunk_from) if shrunk_from else "")
    return "\n".join([*lines, *(terminal(note) for note in notes if note)])


# -- known or new (forensics.known): the one block this module adds for it --

def known_markdown(conclusion: Conclusion) -> list[str]:
    """The "Known issues" section: each match with evidence, fix and workaround; or, when none
    matches a failing capture, the outline of a new issue to file."""
    known = conclusion.known
    if known is None:
        return []
    lines = ["", "### Known issues", ""]
    for match in known.matches:
        e = match.entry
        lines += [f"- **{e.id}**: {e.title} ({e.threads()})",
                  f"  - evidence: {markdown('; '.join(match.evidence))}",
                  f"  - fix: {e.fix_text()}", f"  - workaround: {e.workaround}"]
    if known.matches:
        return lines
    if not known.engine_replayed or (known.crash_verdict == "no crash" and not known.failing):
        return [*lines, markdown(known.known_sentence())]
    lines.append("No known signature matches: a reason to file a new issue; a draft follows.")
    lines += ["", "### Draft: a new vLLM issue", "",
              f"**Title**: [Bug]: {markdown(_draft_title(conclusion), raw=True)}", "",
              f"**What happened**: {_happened(conclusion)}", "",
              "**What the capture shows**: " + markdown(known.lead() or conclusion.first_sentence(
                  conclusion.baseline) or "see the verdicts above."), "",
              "**Checked against known issues** (`forensics known CAPTURE`):", "",
              *(f"- {m.entry.id} ({m.entry.threads()}): {markdown(m.explain())}"
                for m in known.checked)]
    return lines


def _happened(conclusion: Conclusion) -> str:
    """The draft's "what happened": where the capture's crash events are listed, or that it
    holds none (they were said to be listed under Capture, where none was); and that the
    engine stopped without the probe's stop, where it did (a process killed or crashed: "the
    capture holds no crash event" was all it said of an engine that died)."""
    facts = "its facts (model, speculative method, async scheduling, versions)"
    stopped = conclusion.facts.get("stopped_after")
    died = "" if stopped is None else " " + stopped_sentence(stopped)
    if conclusion.facts.get("events"):
        return (f"the capture's crash events are listed under Capture below; {facts} with "
                f"them.{died}")
    return f"the capture holds no crash event; {facts} are listed under Capture below.{died}"


def _draft_title(conclusion: Conclusion) -> str:
    """The draft issue's title: the first violation's tensor, value and site as they are (a
    capture's values: the caller escapes the title as one); without one, what was judged (no
    record, or not every record: "every captured index value in range" was said of both), and
    whether the engine crashed (a capture of no crash, drafted for its other findings, was
    titled "engine crash"; one of the guard's claims alone, no finding, "no crash, findings";
    one that died with no crash event, killed or crashed, "engine died (killed or crashed)"),
    and what a guard event claims beside it (a value out of range the records do not show was
    titled "every captured index value in range" beside it)."""
    first = conclusion.first.get(conclusion.baseline)
    if first is not None:
        return f"{first['tensor']} = {first['value']} out of range at {first['site']}"
    known = conclusion.known
    crash = ("engine died (killed or crashed)" if known is not None and known.died else
             "engine crash" if known is None or known.crash_verdict != "no crash" else
             "no crash" if known.claims_only else "no crash, findings")
    padded = known.padded_said() if known is not None else []
    claims = [said for said in (conclusion.guard_claim, *padded) if said]
    claim = f", though {'; '.join(claims)}" if claims else ""
    if conclusion.no_records:
        return f"{crash} with no index value captured{claim}"
    if conclusion.not_known or conclusion.cut or conclusion.unjudged.get(conclusion.baseline):
        return (f"{crash} with no captured index value judged out of range (not all "
                f"judged){claim}")
    if claim:
        return f"{crash} with no captured index value out of range{claim}"
    return f"{crash} with every captured index value in range"


def to_json(result: ReplayResult, conclusion: Conclusion | None = None) -> dict[str, Any]:
    """The conclusion's fields, the verdicts and the reproduce commands (JSON-ready)."""
    conclusion = conclusion or conclude(result)
    return {**conclusion.to_json(), "verdicts": result.verdicts,
            "reproduce": reproduce_commands(result.source, result.variants)}


def render(result: ReplayResult, fmt: str, given: list[str] | None = None) -> str:
    """``result``'s write-up in ``fmt`` (one of :data:`FORMATS`); ``given``: as
    :func:`to_markdown` takes it."""
    if fmt == "json":
        return json_text(to_json(result), indent=2)
    return to_text(result) if fmt == "text" else to_markdown(result, given=given)
