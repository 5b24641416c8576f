"""The answer first: one conclusion computed from a replay, for the report, ``replay``'s text,
``forensics summary`` and the triage notebook.

:func:`conclude` reads a :class:`~forensics.replaying.ReplayResult` (and its capture's manifest,
events and summary) and gives a :class:`Conclusion`:

- per variant, the sites it leaves in violation (and the suspect and error sites);
- per patch (every variant but the baseline: ``upstream`` when chosen, else the first), how many
  of the baseline's ``out_of_bounds`` findings it resolves, and how many new ones it adds; a
  baseline finding is resolved when the patch has no unresolved ``out_of_bounds`` finding at the
  same (site, step, rank, row, element, tensor);
- per variant, the first violation (the first unresolved ``out_of_bounds`` finding, with its
  request and bound) and the origin chain from the site that produced the value to the sink;
- the capture's facts (model, vocabulary, speculative config, async flag, versions, host, ranks,
  steps, events).

A resolved finding (``resolved`` true) is never counted as unresolved anywhere here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from forensics.findings import FINDING_COLUMNS, sort_findings, to_python
from forensics.silent import silent_inputs_of
from forensics.sites import SINK

if TYPE_CHECKING:
    import pandas as pd

    from forensics.replaying import ReplayResult

OUT_OF_BOUNDS = "out_of_bounds"
#: a finding's place: two findings at the same place are the same finding under two variants
PLACE = ("site", "step", "rank", "row", "element", "tensor")
#: keys of a first violation: the DESIGN.md columns plus the request
VIOLATION_KEYS = (*FINDING_COLUMNS, "req_id")
#: manifest model keys shown as capture facts, with their labels
MODEL_FACTS = (("name", "model"), ("vocab_size", "vocabulary"),
               ("num_embeddings", "embedding rows"), ("speculative", "speculative method"),
               ("num_speculative_tokens", "speculative tokens"),
               ("async_scheduling", "async scheduling"),
               ("tensor_parallel_size", "tensor parallel"),
               ("hardware", "hardware"))


@dataclass
class Patch:
    """What one variant does to the baseline's out-of-bounds findings."""

    variant: str
    resolved: int
    total: int
    added: int


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
    #: wrong tokens fed to the model without a crash (:func:`forensics.silent.silent_inputs`)
    silent: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of every field, plus ``text`` (the paragraph)."""
        return {**asdict(self), "text": self.paragraph()}

    def paragraph(self) -> str:
        """The conclusion as one paragraph of plain text (verdicts, patches, first violation and
        its chain, then the capture's facts)."""
        parts = [self.verdict_sentence(v) for v in self.variants]
        parts.append(self.first_sentence(self.baseline))
        parts += [self.first_sentence(v) for v in self.variants
                  if v != self.baseline and not same_place(self.first.get(v),
                                                           self.first.get(self.baseline))]
        parts.append(self.silent_sentence())
        parts.append(facts_sentence(self.facts))
        return " ".join(p for p in parts if p)

    def verdict_sentence(self, variant: str) -> str:
        """``"upstream leaves async_output, embedding in violation."`` (and suspects, errors)."""
        bad = self.violations[variant]
        text = (f"{variant} leaves {', '.join(bad)} in violation" if bad
                else f"{variant} leaves no site in violation")
        if self.errors[variant]:
            text += f", fails with errors at {', '.join(self.errors[variant])}"
        if self.suspects[variant]:
            text += f", finds {', '.join(self.suspects[variant])} suspect (misattributed rows)"
        patch = self.patch(variant)
        if patch is not None and patch.total + patch.added:
            text += " and " + describe_patch(patch, self.baseline)
        return text + "."

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
                f"{c['site']} step {c['step']}" for c in chain) + "."
        return text

    def silent_sentence(self) -> str:
        """How many wrong tokens the model was fed silently (not a crash), and the first; or
        ``""``."""
        if not self.silent:
            return ""
        from forensics.silent import describe

        return (f"The model was fed {len(self.silent)} wrong token(s) silently, without a "
                f"crash; the first at {describe(self.silent[0])}.")

    def line(self, variant: str) -> str:
        """One line for CI logs: ``variant: violation at SITES; first step S ...``."""
        first = self.first.get(variant)
        bad = self.violations[variant]
        status = f"violation at {','.join(bad)}" if bad else "no violation"
        if self.suspects[variant]:
            status += f"; suspect at {','.join(self.suspects[variant])}"
        if self.errors[variant]:
            status += f"; error at {','.join(self.errors[variant])}"
        patch = self.patch(variant)
        if patch is not None:
            status += f"; resolves {patch.resolved} of {patch.total}, adds {patch.added}"
        if first is not None:
            status += f"; first {describe_finding(first)}"
        return f"{variant}: {status}"


def conclude(result: ReplayResult) -> Conclusion:
    """Compute the :class:`Conclusion` of ``result`` (a replay of a capture or of records)."""
    findings = result.findings
    baseline = "upstream" if "upstream" in result.variants else result.variants[0]
    by_verdict = {kind: {v: [s for s, verdict in result.verdicts[v].items() if verdict == kind]
                         for v in result.variants}
                  for kind in ("violation", "suspect", "error")}
    first = {v: first_violation(findings, v) for v in result.variants}
    return Conclusion(
        capture=_capture_name(result), baseline=baseline, variants=list(result.variants),
        violations=by_verdict["violation"], suspects=by_verdict["suspect"],
        errors=by_verdict["error"],
        patches=[patch_effect(findings, baseline, v) for v in result.variants if v != baseline],
        first=first,
        chains={v: origin_chain(findings, v, f) for v, f in first.items() if f is not None},
        facts=capture_facts(result.capture), silent=silent_inputs_of(result))


def _capture_name(result: ReplayResult) -> str:
    capture = result.capture
    return str(getattr(capture, "name", None) or result.source)


def unresolved(findings: pd.DataFrame, variant: str) -> pd.DataFrame:
    """The ``out_of_bounds`` findings of ``variant`` that are not resolved, in first order."""
    mine = findings[(findings["variant"] == variant) & (findings["kind"] == OUT_OF_BOUNDS)]
    return sort_findings(mine[mine["resolved"].map(lambda r: r is not True).astype(bool)])


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


def _places(frame: pd.DataFrame) -> set[tuple[Any, ...]]:
    return {tuple(to_python(v) for v in row)
            for row in frame[list(PLACE)].itertuples(index=False, name=None)}


def patch_effect(findings: pd.DataFrame, baseline: str, variant: str) -> Patch:
    """How many of ``baseline``'s out-of-bounds findings ``variant`` resolves, and adds."""
    base = _places(findings[(findings["variant"] == baseline)
                            & (findings["kind"] == OUT_OF_BOUNDS)])
    still = _places(unresolved(findings, variant))
    return Patch(variant=variant, resolved=len(base - still), total=len(base),
                 added=len(still - base))


def origin_chain(findings: pd.DataFrame, variant: str, first: dict[str, Any]
                 ) -> list[dict[str, Any]]:
    """The path of ``first``'s bad value: ``[{site, step, tensor}, ...]`` from the site that
    produced it to the sink (one entry when the value reached no other recorded site)."""
    rows = findings[(findings["variant"] == variant) & (findings["rank"] == first["rank"])
                    & (findings["value"] == first["value"])]
    if first["site"] == SINK and first.get("origin"):
        before = rows[(rows["site"] == first["origin"]) & (rows["step"] <= first["step"])]
        if len(before):
            src = sort_findings(before).iloc[-1]
            return [_link(src), _link(first)]
        return [{"site": first["origin"], "step": None, "tensor": None}, _link(first)]
    after = rows[(rows["site"] == SINK) & (rows["origin"] == first["site"])
                 & (rows["step"] >= first["step"])]
    if len(after):
        return [_link(first), _link(sort_findings(after).iloc[0])]
    return [_link(first)]


def _link(row: Any) -> dict[str, Any]:
    return {"site": row["site"], "step": to_python(row["step"]), "tensor": row["tensor"]}


def describe_finding(f: dict[str, Any]) -> str:
    """``"async_output at step 13, rank 0, row 1 (request req-1): out.output_tail[21] = 248320,
    outside [0, 248320)"``; null parts left out (a summary record has no row)."""
    where = f"{f['site']} at step {f['step']}, rank {f['rank']}"
    if f.get("row") is not None:
        where += f", row {f['row']}"
    if f.get("req_id") is not None:
        where += f" (request {f['req_id']})"
    tensor = f["tensor"] if f.get("element") is None else f"{f['tensor']}[{f['element']}]"
    text = f"{where}: {tensor} = {f['value']}"
    if f.get("lower") is not None or f.get("upper") is not None:
        text += f", outside [{_bound(f.get('lower'))}, {_bound(f.get('upper'))})"
    if f.get("resolved") is True:
        text += " (resolved)"
    return text


def _bound(value: Any) -> str:
    return "?" if value is None else str(value)


def describe_patch(patch: Patch, baseline: str) -> str:
    """``"resolves 2 of 2 upstream findings"`` (and the new ones it adds)."""
    text = f"resolves {patch.resolved} of {patch.total} {baseline} out-of-bounds findings"
    if patch.added:
        text += f", adding {patch.added} of its own"
    return text


def capture_facts(capture: Any) -> dict[str, Any]:
    """The capture's facts from its manifest, summary and events (empty without a capture)."""
    if capture is None or not hasattr(capture, "summary"):
        return {}
    return summary_facts(capture.summary())


def summary_facts(summary: dict[str, Any]) -> dict[str, Any]:
    """The capture's facts from its ``summary()`` (the ``inspect --json`` object)."""
    manifest = summary.get("manifest") or {}
    model = manifest.get("model") or {}
    facts: dict[str, Any] = {label: model[key] for key, label in MODEL_FACTS
                             if model.get(key) is not None}
    versions = manifest.get("versions") or {}
    facts.update({name: versions[name] for name in ("vllm", "torch") if versions.get(name)})
    for key in ("runner", "host", "created"):
        if manifest.get(key):
            facts[key] = manifest[key]
    facts["ranks"] = summary["ranks"]
    facts["steps"] = summary["steps"]
    facts["events"] = [_event_text(e) for e in summary["events"]]
    if manifest.get("notes"):
        facts["notes"] = manifest["notes"]
    return facts


def _event_text(event: dict[str, Any]) -> str:
    """``"cuda_assert at step 14 rank 0: MESSAGE"``; an unknown step or rank left out."""
    where = " ".join(f"{name} {event[name]}" for name in ("step", "rank")
                     if event.get(name) is not None)
    message = str(event.get("message") or event.get("detail") or "").rstrip(".")
    return f"{event.get('kind', 'event')}{f' at {where}' if where else ''}: {message}"


def facts_sentence(facts: dict[str, Any]) -> str:
    """The capture's facts as one sentence (``""`` when there are none)."""
    if not facts:
        return ""
    shown = [f"{key} {fact_text(key, value)}" for key, value in facts.items()
             if key not in ("events", "notes")]
    events = facts.get("events") or []
    shown.append(f"{len(events)} crash event(s)" + (f", the first {events[0]}" if events else ""))
    text = "Capture: " + "; ".join(shown) + "."
    if facts.get("notes"):
        text += f" Notes: {facts['notes']}"
    return text


def fact_text(key: str, value: Any) -> str:
    """A capture fact as text: booleans on/off, the step span ``A-B``, lists comma-joined."""
    if key == "steps" and isinstance(value, list) and len(value) == 2:
        return f"{value[0]}-{value[1]}"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value)


def next_steps(conclusion: Conclusion) -> list[str]:
    """What to look at next, computed from ``conclusion`` (one sentence per item)."""
    steps: list[str] = []
    first = conclusion.first.get(conclusion.baseline)
    if first is not None:
        steps.append(f"Start at the first violation: {describe_finding(first)}.")
        chain = conclusion.chains.get(conclusion.baseline) or []
        if len(chain) > 1:
            steps.append(f"The bad value reaches the sink from {chain[0]['site']} (step "
                         f"{chain[0]['step']}): the fix belongs there, not at the crash.")
    steps += [_patch_step(conclusion, p) for p in conclusion.patches if p.total or p.added]
    suspects = {v: s for v, s in conclusion.suspects.items() if s}
    steps += [f"{v} finds {', '.join(s)} suspect: an in-range row read another request's "
              f"state; compare the request ids at those steps." for v, s in suspects.items()]
    if not any(conclusion.violations.values()) and not suspects:
        events = conclusion.facts.get("events") or []
        steps.append(
            f"No site has a violation, yet the capture holds {len(events)} crash event(s): it "
            f"refutes the hypotheses these sites encode; look elsewhere (notebook "
            f"01_stale_prev_rows shows how)." if events else
            "No index left its valid range in this capture: nothing to fix at these sites.")
    return steps


def _patch_step(conclusion: Conclusion, patch: Patch) -> str:
    left = conclusion.violations[patch.variant]
    if left:
        return (f"{patch.variant} still leaves {', '.join(left)} in violation: it does not "
                f"reach the cause there.")
    if any(v.startswith("vllm") for v in conclusion.variants):
        return f"{patch.variant} resolves every {conclusion.baseline} finding."
    return (f"{patch.variant} resolves every {conclusion.baseline} finding; confirm on the real "
            f"code with --variant vllm --variant vllm+your-fix.diff (vLLM installed).")


def facts_lines(summary: dict[str, Any]) -> list[str]:
    """The manifest's facts as ``  key: value`` lines, for ``inspect``'s text (events and the
    step span are shown there already)."""
    facts = summary_facts(summary)
    return ["manifest:", *(f"  {key}: {fact_text(key, value)}" for key, value in facts.items()
                           if key not in ("events", "steps", "ranks"))]
