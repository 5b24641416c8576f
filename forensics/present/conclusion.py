"""The answer first: one conclusion computed from a replay, for the report, ``replay``'s text,
``forensics summary`` and the triage notebook.

:func:`conclude` reads a :class:`~forensics.replaying.ReplayResult` (and its capture's manifest,
events and summary) and gives a :class:`Conclusion`:

- per variant, the sites it leaves in violation (and the suspect and error sites);
- per patch (every variant but the baseline: ``upstream`` when chosen, else the first), how many
  of the baseline's ``out_of_bounds`` findings it resolves, how many still fail, and how many
  new ones it adds; a baseline finding is resolved only when the fix made it go away: the patch
  has no unresolved ``out_of_bounds`` finding at that record at all (real code stops at its
  first ``IndexError``: whatever it raises there stands in the finding's place, the same
  failure, never "resolved" plus "added"); a new one is a finding at a record where the
  baseline has none;
- per variant, the first violation (the first unresolved ``out_of_bounds`` finding, with its
  request and bound) and the origin chain from the site that produced the value to the sink;
- the capture's facts (model, vocabulary, speculative config, async flag, versions, host, ranks,
  steps, events).

A resolved finding (``resolved`` true) is never counted as unresolved anywhere here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from forensics.budget import longer, remedy
from forensics.escaping import inert, quoted, terminal
from forensics.judge.findings import (
    FINDING_COLUMNS,
    INDEX_COLUMNS,
    UNJUDGED,
    baseline_of,
    is_judged,
    sort_findings,
    to_python,
)
from forensics.judge.suspects import describe_suspect, first_suspects
from forensics.judge.wrong_tokens import silent_inputs_of
from forensics.present.capture_facts import (
    capture_facts,
    facts_sentence,
    guard_claim,
    stopped_sentence,
    version_sentence,
)
from forensics.present.finding_words import what_happened
from forensics.present.summary_findings import mixed_summaries, of_summaries, summary_records
from forensics.present.unseen_access import access_words, accesses_text
from forensics.sites import SINK, site_order
from forensics.sites.core import OUT_OF_BOUNDS
from forensics.store.unjudged import (
    KINDS,
    NOT_KNOWN,
    Unjudged,
    unjudged,
    unjudged_sentences,
    unjudged_text,
)

if TYPE_CHECKING:
    import pandas as pd

    from forensics.replaying import ReplayResult

#: a finding's place: two findings at the same place are the same finding under two variants
PLACE = ("site", "step", "rank", "row", "element", "tensor")
#: keys of a first violation: the DESIGN.md columns plus the request
VIOLATION_KEYS = (*FINDING_COLUMNS, "req_id", *INDEX_COLUMNS)
#: how many findings a variant cannot see are named in the conclusion
_SHOWN_UNSEEN = 3


@dataclass
class Patch:
    """What one variant does to the baseline's out-of-bounds findings."""

    variant: str
    resolved: int
    total: int
    added: int
    #: the baseline's findings this variant cannot see (an access inside an allocation, by code
    #: that shows no accesses): neither resolved nor still there
    not_judged: int = 0
    #: the baseline's findings at records where this variant still has an unresolved finding
    #: (it raised there, or reads out of bounds): the same failure, not resolved
    failing: int = 0
    #: of :attr:`not_judged`, those of summary records (a least and a greatest value, which
    #: nothing replays), not accesses inside an allocation
    summaries: int = 0

    @property
    def inside(self) -> int:
        """The baseline's findings this variant cannot see that are accesses inside an
        allocation (:attr:`not_judged` but those of summary records)."""
        return self.not_judged - self.summaries


@dataclass
class Conclusion:
    """The conclusion of one replay (see the module docstring); :meth:`paragraph` is its text."""

    capture: str
    baseline: str
    variants: list[str]
    violations: dict[str, list[str]]
    suspects: dict[str, list[str]]
    errors: dict[str, list[str]]
    patches: list[Patch]
    first: dict[str, dict[str, Any] | None]
    chains: dict[str, list[dict[str, Any]]]
    facts: dict[str, Any] = field(default_factory=dict)
    #: wrong tokens fed to the model without a crash
    #: (:func:`forensics.judge.wrong_tokens.silent_inputs`)
    silent: list[dict[str, Any]] = field(default_factory=list)
    #: the token continuity check's sentence (:meth:`forensics.judge.continuity.Continuity.
    #: sentence`): substituted or clamped tokens, or the fields it lacked; "" when silent
    continuity: str = ""
    #: known or new, explained or not (:class:`forensics.known.KnownAnswer`; None: not asked)
    known: Any = None
    #: per variant, the first baseline findings it cannot see (only the models see them; the
    #: summary-only sites apart) and how many there are
    unseen: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    unseen_count: dict[str, int] = field(default_factory=dict)
    #: per variant, what the code does at them: read, write, read-modify-write
    #: (:func:`~forensics.present.unseen_access.access_words`; none: "access")
    unseen_access: dict[str, list[str]] = field(default_factory=dict)
    #: per variant, the sites it cannot judge (:data:`forensics.judge.findings.UNJUDGED`)
    unjudged: dict[str, list[str]] = field(default_factory=dict)
    #: the sites holding summary records only (log lines): nothing there is replayed
    summary_only: list[str] = field(default_factory=list)
    #: per variant, how many findings of summary records it cannot judge at sites that hold
    #: tensor records too, and those sites (:func:`mixed_summaries`)
    mixed: dict[str, tuple[int, list[str]]] = field(default_factory=dict)
    #: per variant, its first misattributed finding with the row and request it read
    #: (:func:`forensics.judge.suspects.first_suspects`), or None
    suspect_first: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    #: site -> records of the capture's sites this install does not know (a plugin not
    #: installed here): no variant judged them
    not_known: dict[str, int] = field(default_factory=dict)
    #: what a capture of no records holds instead (:func:`no_records_sentence`), or ""
    no_records: str = ""
    #: the records the replay's overall deadline left unjudged (:func:`cut_sentence`), or ""
    cut: str = ""
    #: the capture's files whose last batch or line was cut short, not read (its
    #: ``truncated``)
    cut_files: list[str] = field(default_factory=list)
    #: what the capture's first guard event claims (:func:`~forensics.present.capture_facts.
    #: guard_claim`), or ""
    guard_claim: str = ""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of every field, plus ``text`` (the paragraph)."""
        data = asdict(self)
        data["known"] = self.known.to_json() if self.known is not None else None
        return {**data, "text": self.paragraph()}

    def paragraph(self) -> str:
        """The conclusion as one paragraph of plain text ("not explained" first when so;
        verdicts, patches, first violation and its chain, known issues, the capture's facts)."""
        parts = [self.known.lead() if self.known is not None else ""]
        parts += [self.verdict_sentence(v) for v in self.variants]
        parts += self.not_judged_sentences()
        parts.append(self.first_sentence(self.baseline))
        parts += [self.first_sentence(v) for v in self.variants
                  if v != self.baseline and not same_place(self.first.get(v),
                                                           self.first.get(self.baseline))]
        parts.append(self.silent_sentence())
        parts.append(self.continuity)
        parts += known_sentences(self.known)
        parts.append(version_sentence(self.facts, self.variants))
        parts.append(facts_sentence(self.facts))
        return " ".join(p for p in parts if p)

    def verdict_sentence(self, variant: str) -> str:
        """``"upstream leaves async_output, embedding in violation."`` (and suspects, errors)."""
        bad = self.violations[variant]
        text = (f"{variant} leaves {', '.join(bad)} in violation" if bad
                else f"{variant} judged no record" if self.no_records  # it held none
                else f"{variant} leaves no site in violation")
        if self.errors[variant]:
            text += f", fails with errors at {', '.join(self.errors[variant])}"
        if self.suspects[variant]:
            text += f", finds {', '.join(self.suspects[variant])} suspect (misattributed rows"
            first = self.suspect_first.get(variant)
            text += f"; the first: {describe_suspect(first)})" if first else ")"
        if self.unjudged.get(variant):
            text += f", cannot judge {', '.join(self.unjudged[variant])}"
        patch = self.patch(variant)
        if patch is not None and patch.total + patch.added:
            text += " and " + describe_patch(patch, self.baseline)
        return text + "."

    def not_judged_sentences(self) -> list[str]:
        """What no variant judged (:meth:`unjudged_facts`), what a variant cannot see, and the
        sites of summary records only (each sentence, or ``""``): said wherever the verdicts
        are (the paragraph, a report's header)."""
        return [self.no_records, self.cut, *unjudged_sentences(self.unjudged_facts()),
                *(self.unseen_sentence(v) for v in self.variants), self.summary_sentence()]

    def unjudged_facts(self) -> list[Unjudged]:
        """What the capture held that no variant judged (:func:`~forensics.store.unjudged.
        unjudged`)."""
        return unjudged(self.not_known, self.cut_files, self.facts)

    def summary_sentence(self) -> str:
        """Why the sites with summary records only are unjudged, and what each variant cannot
        judge of summary records at sites of tensors too (said to be reads inside an
        allocation), or ``""``."""
        others = [v for v in self.variants if v != self.baseline]
        mixed = " ".join(
            f"{v} cannot judge {count} {self.baseline} out-of-bounds finding(s) of summary "
            f"records at {', '.join(sites)} (a log's or a dump's min/max, no tensors: nothing "
            f"there is replayed); only the recorded values against their bound "
            f"({self.baseline}) stand there." for v, (count, sites) in self.mixed.items())
        if not self.summary_only or not others:
            return mixed
        sites = ", ".join(self.summary_only)
        return (f"{sites} {'holds' if len(self.summary_only) == 1 else 'hold'} summary records "
                f"only (a log's or a dump's min/max, no tensors): nothing there can be "
                f"replayed, so {', '.join(others)} cannot be judged there (unjudged); only the "
                f"recorded values against their bound ({self.baseline}) stand."
                + (f" {mixed}" if mixed else ""))

    def unseen_sentence(self, variant: str) -> str:
        """Which baseline findings ``variant`` cannot see, or ``""``."""
        unseen = self.unseen.get(variant) or []
        patch = self.patch(variant)
        if not unseen or patch is None:
            return ""
        count = self.unseen_count.get(variant, len(unseen))
        shown = "; ".join(describe_finding(f) for f in unseen[:_SHOWN_UNSEEN])
        more = count - min(len(unseen), _SHOWN_UNSEEN)
        # the models may count one baseline finding (a real code's one raise per record) as
        # several (one per tensor it indexes): the count of them is said apart
        of_baseline = (f"{patch.inside} of the {patch.total} {self.baseline} out-of-bounds "
                       "findings")
        told = "them, " if patch.inside else ""
        did = accesses_text(self.unseen_access.get(variant, []))
        return (f"{variant} cannot see {of_baseline} ({did} inside an allocation raises "
                f"nothing and {variant} shows no accesses): only the models see "
                + (f"{told}as {count} findings: " if count != patch.inside else "")
                + shown + (f" and {more} more" if more > 0 else "") + ".")

    def patch(self, variant: str) -> Patch | None:
        """The :class:`Patch` of ``variant`` (None for the baseline)."""
        return next((p for p in self.patches if p.variant == variant), None)

    def first_sentence(self, variant: str) -> str:
        """The first violation of ``variant`` and its chain to the sink, or ``""``."""
        first = self.first.get(variant)
        if first is None:
            return ""
        text = f"First violation ({variant}): {describe_finding(first)}."
        chain = self.chains.get(variant) or []
        if len(chain) > 1:
            text += " Origin chain: " + " -> ".join(
                f"{c['site']} step {c['step']}" + _rank_of(c) for c in chain) + "."
        return text

    def silent_sentence(self) -> str:
        """How many wrong tokens the model was fed silently (not a crash), and the first; or
        ``""``."""
        if not self.silent:
            return ""
        from forensics.judge.wrong_tokens import describe

        return (f"The model was fed {len(self.silent)} wrong token(s) silently, without a "
                f"crash; the first at {describe(self.silent[0])}.")

    def line(self, variant: str) -> str:
        """One line for CI logs: ``variant: violation at SITES; first step S ...``."""
        first = self.first.get(variant)
        bad = self.violations[variant]
        status = f"violation at {','.join(bad)}" if bad else "no violation"
        if self.suspects[variant]:
            status += f"; suspect at {','.join(self.suspects[variant])}"
            suspect = self.suspect_first.get(variant)
            if suspect:
                status += f" (first {describe_suspect(suspect)})"
        if self.errors[variant]:
            status += f"; error at {','.join(self.errors[variant])}"
        if self.unjudged.get(variant):
            status += f"; unjudged at {','.join(self.unjudged[variant])}"
        patch = self.patch(variant)
        if patch is not None:
            status += f"; resolves {patch.resolved} of {patch.total}, adds {patch.added}"
            if patch.failing:
                status += f", still failing {patch.failing}"
            if patch.not_judged:
                status += f", not judged {patch.not_judged}"
        if first is not None:
            status += f"; first {describe_finding(first)}"
        unseen = self.unjudged_facts()  # as the paragraph says them
        for label, kinds in (("not judged", {NOT_KNOWN}), ("not read", set(KINDS) - {NOT_KNOWN})):
            if text := unjudged_text(unseen, kinds):
                status += f"; {label}: {text}"
        if self.no_records:  # "holds no records", "holds no records of a site, only N ..."
            status += "; nothing judged: the capture " + self.no_records.split(":")[0].removeprefix(
                "The capture ")
        return f"{variant}: {status}"


def conclude(result: ReplayResult) -> Conclusion:
    """Compute the :class:`Conclusion` of ``result`` (a replay of a capture or of records)."""
    findings = result.findings
    baseline = baseline_of(result.variants) or result.variants[0]
    by_verdict = {kind: {v: [s for s, verdict in result.verdicts[v].items() if verdict == kind]
                         for v in result.variants}
                  for kind in ("violation", "suspect", "error")}
    first = {v: first_violation(findings, v) for v in result.variants}
    apart = summary_only_sites(result)
    others = [v for v in result.variants if v != baseline]
    summaries = summary_records(result)
    blind = findings[~of_summaries(findings, summaries)]  # a summary's value is no access
    return Conclusion(
        capture=_capture_name(result), baseline=baseline, variants=list(result.variants),
        violations=by_verdict["violation"], suspects=by_verdict["suspect"],
        errors=by_verdict["error"],
        patches=[patch_effect(findings, baseline, v, summaries)
                 for v in result.variants if v != baseline],
        first=first,
        chains={v: origin_chain(findings, v, f) for v, f in first.items() if f is not None},
        facts=capture_facts(result.capture), silent=silent_inputs_of(result),
        continuity=_continuity_sentence(result),
        unseen={v: not_judged(blind, v, apart)[0] for v in others},
        unseen_count={v: not_judged(blind, v, apart)[1] for v in others},
        unseen_access={v: access_words(unseen_rows(blind, v, apart)[["site", "tensor"]]
                                       .itertuples(index=False)) for v in others},
        unjudged={v: [s for s, verdict in result.verdicts[v].items() if verdict == UNJUDGED]
                  for v in result.variants},
        summary_only=apart, suspect_first=first_suspects(result),
        mixed=mixed_summaries(findings[of_summaries(findings, summaries)], others, apart),
        known=known_answer(result),
        not_known=dict(getattr(result.capture, "unknown_sites", None) or {}),
        no_records=no_records_sentence(result.capture, len(result.records)),
        cut=cut_sentence(result),
        cut_files=list(getattr(result.capture, "truncated", None) or []),
        guard_claim=guard_claim(result.capture))


def cut_sentence(result: ReplayResult) -> str:
    """Which records the replay's overall deadline (or its children's timeouts or deaths) left
    unjudged (per variant and site, their steps) and that they count as errors, never as
    clean, and whether it cut the race check's replay of writer records too; "" when it cut
    none."""
    if not result.cut:
        return ""
    table = result.outcomes
    rows = table[table["message"] == f"not judged: {result.cut}"]
    parts = [f"{len(group)} {site} record(s) of {variant} ({steps_text(group['step'])})"
             for (variant, site), group in
             rows.groupby(["variant", "site"], sort=False, observed=True)]
    race = getattr(result, "race", None)
    unproduced = len(getattr(race, "unproduced", ()) or ())
    timed = longer(result.cut) != "--deadline"  # its children's timeouts or deaths ended it
    if timed:
        text = (f"Not judged: {'; '.join(parts)}: {result.cut}; they count as errors, not as "
                "clean." if parts else
                f"Not judged: the race check's replay of writer records: {result.cut}.")
    else:
        text = (f"Not judged: {'; '.join(parts)}: {result.cut} (counted from the replay's "
                "start) before they were answered; they count as errors, not as clean."
                if parts else
                f"Not judged: {result.cut} (counted from the replay's start) before the race "
                "check's replay of writer records was answered.")
    if unproduced:
        text += (f" The race check did not compare {unproduced} step(s): what the writer "
                 "wrote there is not known.")
    return text[:-1] + f" ({remedy(result.cut)})."


def steps_text(steps: Any) -> str:
    """The distinct steps of ``steps`` in words: each of up to three (``steps 3 and 40000``),
    else their count and ends (``5 steps from 3 to 40000``), never a span that reads as every
    step between."""
    distinct = sorted({int(s) for s in steps})
    if len(distinct) > 3:
        return f"{len(distinct)} steps from {distinct[0]} to {distinct[-1]}"
    words = [str(s) for s in distinct]
    listed = words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"
    return f"step{'s' if len(words) > 1 else ''} {listed}"


def no_records_sentence(capture: Any, records: int) -> str:
    """That a capture of no records (``records``: its count) judged nothing, and what it holds
    instead: recorded kernel launches (``forensics kernels`` judges them: "the probe saw no
    call" was false of them); "" when it holds records (of a site not known here too)."""
    if records or getattr(capture, "unknown_sites", None):
        return ""
    launches = kernel_launches(capture)
    if launches:
        return (f"The capture holds no records of a site, only {launches} recorded kernel "
                "launch(es): no variant judged anything here; `forensics kernels` replays and "
                "judges the launches.")
    from forensics.manifest_facts import no_records_why

    return ("The capture holds no records: no variant judged anything "
            f"({no_records_why(getattr(capture, 'manifest', None))}).")


def kernel_launches(capture: Any) -> int:
    """How many ``kernel_launch`` events ``capture`` holds (0 for records without one)."""
    from forensics.kernels.format import KIND

    return sum(event.get("kind") == KIND for event in getattr(capture, "kernel_events", []))


def summary_only_sites(result: ReplayResult) -> list[str]:
    """The sites of ``result`` whose records are all summary records, in pipeline order."""
    index = result.index
    pairs: Iterable[tuple[str, bool]]
    if index is not None and len(index):
        pairs = zip(index["site"], index["summary"], strict=True)
    else:
        pairs = ((r.site, r.summary) for r in result.records)
    seen: dict[str, bool] = {}
    for site, summary in pairs:
        seen[site] = seen.get(site, True) and bool(summary)
    return [site for site in sorted(seen, key=site_order) if seen[site]]


def _capture_name(result: ReplayResult) -> str:
    capture = result.capture
    return terminal(getattr(capture, "name", None) or result.source)


def unresolved(findings: pd.DataFrame, variant: str) -> pd.DataFrame:
    """The ``out_of_bounds`` findings of ``variant`` that are not resolved (and that it could
    judge), in first order."""
    mine = findings[(findings["variant"] == variant) & (findings["kind"] == OUT_OF_BOUNDS)
                    & is_judged(findings)]
    return sort_findings(mine[mine["resolved"].map(lambda r: r is not True).astype(bool)])


def unseen_rows(findings: pd.DataFrame, variant: str, apart: Sequence[str] = ()
                ) -> pd.DataFrame:
    """The findings ``variant`` cannot see (``judged`` false) outside the sites ``apart``."""
    return findings[(findings["variant"] == variant) & ~is_judged(findings)
                    & ~findings["site"].isin(list(apart))]


def not_judged(findings: pd.DataFrame, variant: str, apart: Sequence[str] = (),
               limit: int = _SHOWN_UNSEEN) -> tuple[list[dict[str, Any]], int]:
    """The first ``limit`` findings ``variant`` cannot see (``judged`` false) outside the
    sites ``apart``, as dicts, and how many there are."""
    mine = unseen_rows(findings, variant, apart)
    return [{key: to_python(row[key]) for key in VIOLATION_KEYS}
            for _, row in sort_findings(mine).head(limit).iterrows()], len(mine)


def first_violation(findings: pd.DataFrame, variant: str) -> dict[str, Any] | None:
    """The first unresolved ``out_of_bounds`` finding of ``variant`` (keys
    :data:`VIOLATION_KEYS`), or None."""
    rows = unresolved(findings, variant)
    if rows.empty:
        return None
    return {key: to_python(rows.iloc[0][key]) for key in VIOLATION_KEYS}


def same_place(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Whether two first violations (of two variants) are the same finding: same place and
    value, or both None."""
    if a is None or b is None:
        return a is b
    return all(a.get(k) == b.get(k) for k in (*PLACE, "value"))


def _keyed(frame: pd.DataFrame) -> set[tuple[Any, ...]]:
    """Each finding of ``frame`` as ``(record, *PLACE)``: its record (the ``record`` column,
    else its site, step and rank) then its place."""
    places = [tuple(to_python(v) for v in row)
              for row in frame[list(PLACE)].itertuples(index=False, name=None)]
    if "record" in frame.columns:
        records: list[Any] = [to_python(r) for r in frame["record"]]
    else:
        records = [p[:3] for p in places]
    return {(r, *p) for r, p in zip(records, places, strict=True)}


def patch_effect(findings: pd.DataFrame, baseline: str, variant: str,
                 summaries: frozenset[int] = frozenset()) -> Patch:
    """How many of ``baseline``'s out-of-bounds findings ``variant`` resolves (no unresolved
    finding of its own left at that record), still fails on, cannot see (of them, how many
    are of the summary records ``summaries``), and how many it adds (at records where the
    baseline has none)."""
    base = _keyed(findings[(findings["variant"] == baseline)
                           & (findings["kind"] == OUT_OF_BOUNDS)])
    still = _keyed(unresolved(findings, variant))
    unseen = _keyed(findings[(findings["variant"] == variant) & ~is_judged(findings)]) & base
    failing_records = {key[0] for key in still}
    seen = base - unseen
    failing = {key for key in seen if key[0] in failing_records}
    base_records = {key[0] for key in base}
    return Patch(variant=variant, resolved=len(seen - failing), total=len(base),
                 added=len({key for key in still if key[0] not in base_records}),
                 not_judged=len(unseen), failing=len(failing),
                 summaries=sum(1 for key in unseen if key[0] in summaries))


def origin_chain(findings: pd.DataFrame, variant: str, first: dict[str, Any]
                 ) -> list[dict[str, Any]]:
    """The path of ``first``'s bad value: ``[{site, step, rank, tensor}, ...]`` from the site that
    produced it to the sink (one entry when the value reached no other recorded site)."""
    rows = findings[(findings["variant"] == variant) & (findings["rank"] == first["rank"])
                    & (findings["value"] == first["value"])]
    if first["site"] == SINK and first.get("origin"):
        before = rows[(rows["site"] == first["origin"]) & (rows["step"] <= first["step"])]
        if len(before):
            src = sort_findings(before).iloc[-1]
            return [_link(src), _link(first)]
        return [{"site": first["origin"], "step": None, "rank": first["rank"], "tensor": None},
                _link(first)]
    after = rows[(rows["site"] == SINK) & (rows["origin"] == first["site"])
                 & (rows["step"] >= first["step"])]
    if len(after):
        return [_link(first), _link(sort_findings(after).iloc[0])]
    return [_link(first)]


def _link(row: Any) -> dict[str, Any]:
    return {"site": row["site"], "step": to_python(row["step"]), "rank": to_python(row["rank"]),
            "tensor": row["tensor"]}


def _rank_of(link: dict[str, Any]) -> str:
    """``" (rank 1)"``: the rank of a link of an origin chain (``""`` when unknown)."""
    return "" if link.get("rank") is None else f" (rank {link['rank']})"


def describe_finding(f: dict[str, Any]) -> str:
    """``"async_output at step 13, rank 0, row 1 (request req-1): out.output_tail[21] = 248320,
    outside [0, 248320)"``; null parts left out (a summary record has no row)."""
    where = f"{f['site']} at step {f['step']}, rank {f['rank']}"
    if f.get("row") is not None:
        where += f", row {f['row']}"
    if f.get("req_id") is not None:
        where += f" (request {quoted(f['req_id'])})"
    text = f"{where}: {inert(what_happened(f))}"
    if f.get("resolved") is True:
        text += " (resolved at its origin: its replay there no longer writes it)"
    if isinstance(f.get("origin_unsearched"), int):  # a split triage's, past what it carried
        text += (f" (origin not searched before step {f['origin_unsearched']}: more "
                 "out-of-range values than a split triage carries between its pieces)")
    return text


def describe_patch(patch: Patch, baseline: str) -> str:
    """``"resolves 2 of 2 upstream findings"`` (and the new ones it adds)."""
    text = f"resolves {patch.resolved} of {patch.total} {baseline} out-of-bounds findings"
    if patch.failing:
        every = "all " if patch.failing == patch.total else ""
        text += f" ({every}{patch.failing} still fail at their records)"
    if patch.not_judged:
        text += f" ({patch.not_judged} not judged: {_why_not_judged(patch)})"
    if patch.added:
        text += f", adding {patch.added} of its own"
    return text


def _why_not_judged(patch: Patch) -> str:
    """Why ``patch``'s variant judges none of its :attr:`Patch.not_judged` findings: it cannot
    see them (inside an allocation), or they are summary records' values nothing replays."""
    summaries = "the least and greatest values of summary records, which nothing replays"
    if not patch.summaries:
        return "it cannot see them"
    if not patch.inside:
        return summaries
    return f"{patch.inside} it cannot see, {patch.summaries} of {summaries}"


# -- known or new, explained or not (forensics.known): the one block this module adds for it --

def known_answer(result: ReplayResult) -> Any:
    """The :class:`forensics.known.KnownAnswer` of ``result``."""
    from forensics.known import answer

    return answer(result)


def known_sentences(known: Any) -> list[str]:
    """The known issues the capture matches (or that none does) and the race evidence."""
    if known is None:
        return []
    return [known.known_sentence(), known.race]


def next_steps(conclusion: Conclusion) -> list[str]:
    """What to look at next, computed from ``conclusion`` (one sentence per item)."""
    known = conclusion.known
    steps: list[str] = []
    if known is not None and known.crash_verdict == "unexplained":
        steps += [known.lead().split(" Next: ")[0], *known.experiments]
    first = conclusion.first.get(conclusion.baseline)
    if first is not None:
        steps.append(f"Start at the first violation: {describe_finding(first)}.")
        chain = conclusion.chains.get(conclusion.baseline) or []
        if len(chain) > 1:
            steps.append(f"The bad value reaches the sink from {chain[0]['site']} (step "
                         f"{chain[0]['step']}){_rank_of(chain[0])}: the fix belongs there, "
                         "not at the crash.")
    steps += [_patch_step(conclusion, p) for p in conclusion.patches if p.total or p.added]
    suspects = {v: s for v, s in conclusion.suspects.items() if s}
    steps += [_suspect_step(conclusion, v, s) for v, s in suspects.items()]
    if not any(conclusion.violations.values()) and not suspects:
        events = conclusion.facts.get("events") or []
        stopped = conclusion.facts.get("stopped_after")
        if stopped is not None and not events:
            steps.append(stopped_sentence(stopped) + " No captured index left its range: "
                         "look at the step in flight (the kernels it launched) next.")
            return steps
        if known is not None and known.padded_said() and not known.unwritten:
            steps.append(f"No index left its valid range, yet {' and '.join(known.padded_said())}"
                         ": look for the site that wrote them.")
            return steps
        if known is not None and known.failing:  # only unwritten inputs are left
            steps.append("No index left its valid range, yet the model received input ids "
                         "that no recorded site wrote (unwritten_input findings, the race "
                         "evidence above): look for a race on the input buffer.")
            return steps
        steps.append(
            f"No site has a violation, yet the capture holds {len(events)} crash event(s): it "
            f"refutes the hypotheses these sites encode; look elsewhere (notebook "
            f"01_stale_prev_rows shows how)." if events else
            "No index left its valid range in this capture: nothing to fix at these sites.")
    return steps


def _suspect_step(conclusion: Conclusion, variant: str, sites: list[str]) -> str:
    """Where to look for ``variant``'s suspect rows: its first misattributed finding."""
    first = conclusion.suspect_first.get(variant)
    text = (f"{variant} finds {', '.join(sites)} suspect: an in-range row read another "
            f"request's state")
    if not first:
        return text + "."
    return (f"{text}; start at {describe_suspect(first)}"
            + (f", the first of {first['count']}" if first.get("count", 1) > 1 else "") + ".")


def _patch_step(conclusion: Conclusion, patch: Patch) -> str:
    left = conclusion.violations[patch.variant]
    if patch.inside:
        did = accesses_text(conclusion.unseen_access.get(patch.variant, []), plural=True)
        return (f"{patch.variant} cannot see {patch.inside} of the {conclusion.baseline} "
                f"findings ({did} inside an allocation): only the models judge them, so "
                f"this replay does not say whether {patch.variant} is affected there.")
    if patch.summaries:
        return (f"{patch.variant} cannot judge {patch.summaries} of the {conclusion.baseline} "
                "findings (the least and greatest values of summary records: nothing there is "
                f"replayed), so this replay does not say whether {patch.variant} is affected "
                "there.")
    if left:
        return (f"{patch.variant} still leaves {', '.join(left)} in violation: it does not "
                f"reach the cause there.")
    if any(v.startswith("vllm") for v in conclusion.variants):
        return f"{patch.variant} resolves every {conclusion.baseline} finding."
    return (f"{patch.variant} resolves every {conclusion.baseline} finding; confirm on the real "
            f"code with --variant vllm --variant vllm+your-fix.diff (vLLM installed).")


def _continuity_sentence(result: ReplayResult) -> str:
    """The continuity check's sentence of ``result`` ("" when the replay did not run it)."""
    continuity = getattr(result, "continuity", None)
    return continuity.sentence() if continuity is not None else ""
