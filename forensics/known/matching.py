"""Evaluate the catalogue's signatures against a capture's :class:`Evidence`.

A clause evaluates to a :class:`Check`: ``holds`` is True, False, or None when the fact it
needs is unknown, with the evidence that decided it. An entry matches when every ``require``
clause holds and no ``context`` clause is false; unknown context facts are listed as unknown.
An entry none of whose clauses is false but one of whose ``require`` clauses is unknown is not
judged (:attr:`Match.status`): never "does not match", a verdict its data cannot give.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from forensics.escaping import capped, terminal
from forensics.known.evidence import (
    CRASH_EVENT_KINDS,
    ENGINE_CODE,
    Evidence,
    at_step,
    before_crash,
    crashed,
    engine_baseline,
    engine_variants,
    is_missing,
    out_of_range,
    unseen,
    value_class,
)
from forensics.known.guard_bounds import self_refuted
from forensics.known.schema import Entry
from forensics.manifest_facts import MTP_METHODS


@dataclass
class Check:
    """One clause's result: whether it holds (None: unknown) and why."""

    holds: bool | None
    why: str
    #: the kind of the finding that decided it (finding clauses that hold), else None
    kind: str | None = None


@dataclass
class Match:
    """How one catalogue entry fares against one capture."""

    entry: Entry
    matched: bool
    evidence: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    #: of :attr:`missing`, the required clauses whose fact is unknown (neither held nor false)
    unjudged: list[str] = field(default_factory=list)
    contradicted: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    #: the kinds of the findings the match rests on (``out_of_bounds``, ``misattributed``...)
    kinds: set[str] = field(default_factory=set)

    @property
    def status(self) -> str:
        """``"match"``, ``"no"`` (a clause is false) or ``"not judged"`` (no clause is false,
        and a required one's fact is unknown)."""
        if self.matched:
            return "match"
        false = self.contradicted or len(self.missing) > len(self.unjudged)
        return "no" if false else "not judged"

    def explain(self) -> str:
        """One sentence: why the entry matches, why not, or why it was not judged."""
        if self.matched:
            text = f"matches: {'; '.join(self.evidence)}"
            if self.unknown:
                text += f" (unknown: {'; '.join(self.unknown)})"
            return text + "."
        if self.status == "not judged":
            return f"not judged: {'; '.join(self.unjudged)}."
        reasons = self.contradicted + self.missing
        return f"does not match: {'; '.join(reasons)}."

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: id, title, matched, the reasons, threads, fix and workaround."""
        e = self.entry
        return {"id": e.id, "title": e.title, "matched": self.matched, "status": self.status,
                "evidence": self.evidence, "missing": self.missing, "not_judged": self.unjudged,
                "contradicted": self.contradicted, "unknown": self.unknown,
                "threads": [r.label() for r in e.refs], "fix": e.fix_text(),
                "workaround": e.workaround, "runner": e.runner, "notes": e.notes}


def match_entry(entry: Entry, evidence: Evidence) -> Match:
    """Evaluate ``entry``'s signature on ``evidence``."""
    result = Match(entry, matched=False)
    for clause in entry.require:
        check = evaluate(clause, evidence)
        (result.evidence if check.holds else result.missing).append(check.why)
        if check.holds is None:
            result.unjudged.append(check.why)
        if check.holds and check.kind:
            result.kinds.add(check.kind)
    for clause in entry.context:
        check = evaluate(clause, evidence)
        if check.holds is False:
            result.contradicted.append(check.why)
        elif check.holds is None:
            result.unknown.append(check.why)
    result.matched = not result.missing and not result.contradicted
    return result


def evaluate(clause: dict[str, Any], evidence: Evidence) -> Check:
    """Evaluate one (validated) clause."""
    kind, value = next(iter(clause.items()))
    return _EVALUATORS[kind](value, evidence)


def _any(clauses: list[dict[str, Any]], evidence: Evidence) -> Check:
    """The first clause that holds; else unknown if one is, else false."""
    checks = [evaluate(c, evidence) for c in clauses]
    hit = next((c for c in checks if c.holds), None)
    if hit is not None:
        return hit
    unknown = any(c.holds is None for c in checks)
    return Check(None if unknown else False, " and ".join(c.why for c in checks))


def _one_of(wanted: Any) -> list[Any]:
    return list(wanted) if isinstance(wanted, list) else [wanted]


def _finding(spec: dict[str, Any], evidence: Evidence) -> Check:
    frame = evidence.findings
    if spec.get("kind") == "unwritten_input" and evidence.race is not None:
        frame = evidence.race
    variant = spec.get("variant", engine_baseline(evidence))
    if variant not in ENGINE_CODE:
        return Check(None, f"{variant} replays a fix, not the engine's code: no signature "
                           "rests on its findings")
    rows = _narrowed(frame[frame["variant"] == variant], spec) if len(frame) else frame
    bounds = evidence.id_bounds() if len(rows) else set()
    unsure = None  # a row that matches but for an origin not searched (unknown, not none)
    blind = None  # a row that matches, of a value the variant cannot judge (``judged`` false)
    for row in _each_row(rows, spec):
        if all(_field_matches(row, key, spec[key], bounds) for key in spec if key != "variant"):
            if row.get("judged") is False:
                blind = blind or row
            elif not _origin_unknown(row, spec, evidence):
                return Check(True, f"{variant} finds {_describe(row, bounds)}", row.get("kind"))
            else:
                unsure = unsure or row
    if unsure is not None:
        return Check(None, f"{variant} finds {_describe(unsure, bounds)}, its origin not "
                           "searched in the earlier steps: unknown, not none")
    if blind is not None:
        return Check(None, f"{variant} cannot judge {_describe(blind, bounds)} (a summary "
                           "record's value, or a read it cannot see): unknown")
    wanted = ", ".join(f"{k} {'/'.join(map(str, _one_of(v)))}" for k, v in spec.items())
    return Check(False, f"no finding with {wanted}")


def _origin_unknown(row: Any, spec: dict[str, Any], evidence: Evidence) -> bool:
    """Whether ``spec`` reads ``row``'s origin and it is null where origins were not all
    searched (:attr:`Evidence.origins_unsearched`): unknown, never ``none``."""
    return "origin" in spec and evidence.origins_unsearched and is_missing(row.get("origin"))


#: finding fields a clause names by text, compared over the whole table before row by row
_TEXT_FIELDS = ("site", "tensor", "kind")


def _narrowed(rows: Any, spec: dict[str, Any]) -> Any:
    """The rows of ``rows`` whose text fields (:data:`_TEXT_FIELDS`) ``spec`` names hold one of
    the names, in order: a table-wide comparison where a row-by-row one took 13 s for the
    160,000 findings of one 640 KB capture. Every kept row is still checked whole."""
    for key in _TEXT_FIELDS:
        wanted = _one_of(spec.get(key, []))
        if key in spec and key in rows.columns and all(isinstance(w, str) for w in wanted):
            rows = rows[rows[key].isin(wanted)]
    return rows


#: the columns a clause's match reads (its own keys, then :func:`value_class`'s inputs, and
#: whether the variant judged the finding)
_MATCH_INPUTS = ("kind", "value", "lower", "upper", "indexed", "value_class", "origin",
                 "judged")


def _each_row(rows: Any, spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The rows of ``rows`` as dicts, in order, each first of the rows alike in every column
    the match reads: the first match is the same, and 80,000 findings of one value are one
    row. Read a thousand at a time, so a match early in the table reads no further."""
    read = [c for c in dict.fromkeys([*spec, *_MATCH_INPUTS]) if c in rows.columns]
    try:
        rows = rows.drop_duplicates(subset=read) if read else rows
    except TypeError:  # a cell that cannot be hashed (a list): every row, as it is
        pass
    for start in range(0, len(rows), 1000):
        yield from rows.iloc[start:start + 1000].to_dict("records")


def _field_matches(row: Any, key: str, wanted: Any, bounds: set[int]) -> bool:
    if key == "value_class":
        return value_class(row, bounds) in _one_of(wanted)
    got = row.get(key)
    if key == "origin" and is_missing(got):
        got = "none"
    return got in _one_of(wanted)


def _bad_value(row: Any) -> str:
    """``T[i] = v`` where the finding says ``T[i]`` holds ``v`` (``held``), else the value and
    where it was used, with no claim of what holds it."""
    held, tensor, at = row.get("held"), row.get("index_tensor"), row.get("index_at")
    if held is True and isinstance(tensor, str) and not is_missing(at):
        return f"{tensor}[{int(at)}] = {row['value']}"
    where = "" if is_missing(row.get("element")) else f" element {row['element']}"
    return f"value {row['value']} used at {row['tensor']}{where}"


def _describe(row: Any, bounds: set[int]) -> str:
    text = f"{row['site']} step {row['step']}: {_bad_value(row)}"
    if row.get("kind") == "misattributed":
        text += " (misattributed: an in-range row another request held)"
    cls = value_class(row, bounds)
    if cls:
        text += f" ({cls})"
    origin = row.get("origin")
    if isinstance(origin, str):
        text += f", origin {origin}"
    return text


#: how a fact the catalogue compares with a name is spelled (``v1``, ``mtp``, ``eagle3``):
#: anything else (a space, an invisible or look-alike character, a number) is no such name
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}", re.ASCII)


def _fact(spec: dict[str, Any], evidence: Evidence) -> Check:
    """Whether the capture's fact ``name`` equals the clause's value (None: not recorded,
    stated differently by crash dumps' config lines or spelled twice in one (:func:`_unstated`),
    or recorded as no true/false where the clause wants one: ``"true"`` or ``1`` is no
    boolean a producer writes, so it neither holds nor contradicts; nor does a name holding
    a space, an invisible or look-alike character, or a number where the clause wants a
    name). A speculative method vLLM reads as ``mtp`` (``deepseek_mtp``) is ``mtp``."""
    name, wanted = str(spec["name"]), spec["equals"]
    got = evidence.facts.get(name)
    source = " (from a crash dump's config line)" if name in evidence.dumped else ""
    if name == "speculative" and isinstance(got, str) and got.lower() in MTP_METHODS \
            and got.lower() != "mtp":  # vLLM's own reading of the name
        source = f" ({got}, which vLLM reads as mtp)" + source
        got = "mtp"
    if got is None:
        return Check(None, _unstated(name, evidence))
    if isinstance(wanted, bool) != isinstance(got, bool):
        return Check(None, (f"{name} recorded as {got!r}, not as true or false"
                            if isinstance(wanted, bool) else f"{name} recorded as {got!r}")
                     + source)
    if isinstance(wanted, str) and not (isinstance(got, str) and _NAME.fullmatch(got)):
        return Check(None, f"{name} recorded as {got!r}, not as a name" + source)
    same = (str(got).lower() == str(wanted).lower() if isinstance(wanted, str)
            else got == wanted)
    return Check(same, f"{name} is {got}" + ("" if same else f", not {wanted}") + source)


def _unstated(name: str, evidence: Evidence) -> str:
    """Why the fact ``name`` is not known: dumps that state it differently, a dump's config
    line that spells it more than once, or no record of it."""
    if name in evidence.unspelled:
        return (f"{name} unknown: a crash dump's config line spells it more than once (a "
                "model's path or name holds its text), so which is the config's is not known")
    if name in evidence.disputed:
        return f"{name} stated differently by the crash dumps' config lines"
    return f"{name} not recorded"


def _event(spec: dict[str, Any], evidence: Evidence) -> Check:
    """An event of the clause's kinds (by default one that means the engine failed: a
    capture's other events, its notes and the probe's own, name no failure) mentioning one
    of its words."""
    kinds = _one_of(spec["kind"]) if "kind" in spec else sorted(CRASH_EVENT_KINDS)
    words = [w.lower() for w in _one_of(spec.get("contains", []))]
    for event in evidence.events:
        if event.get("kind") not in kinds or self_refuted(event):
            continue
        text = _event_text(event)
        word = next((w for w in words if mentions(text, w)), None)
        if not words or word is not None:
            what = f" mentioning {word!r}" if word else ""
            return Check(True, f"event {event.get('kind')}{what}{at_step(event)}")
    wanted = f" mentioning one of {words}" if words else ""
    named = "" if "kind" not in spec else " " + "/".join(kinds)
    return Check(False, f"no {'crash ' if not named else ''}event{named}{wanted}")


def mentions(text: str, word: str) -> bool:
    """Whether ``word`` stands in ``text`` (either case) as a word or a part of an identifier
    of its own: no letter before it but where a camel-case part begins (``fusedGdn``), none
    after it but where one ends (``gdn_attn``, ``GDNAttention``, ``conv1d``); so ``kda``
    stands in ``fused_kda`` and not in ``/home/kdavis``, ``gdn`` not in ``LGDN``."""
    for found in re.finditer(f"(?={re.escape(word)})", text, re.IGNORECASE | re.ASCII):
        start, end = found.start(), found.start() + len(word)
        if _starts_part(text, start) and _ends_part(text, end):
            return True
    return False


def _starts_part(text: str, at: int) -> bool:
    """Whether an identifier part may begin at ``at``: no letter before, or a lower-case
    letter before an upper-case one."""
    before = text[at - 1] if at > 0 else ""
    return not before.isalpha() or (before.islower() and text[at].isupper())


def _ends_part(text: str, at: int) -> bool:
    """Whether an identifier part may end at ``at``: no letter after, or an upper-case letter
    after a lower-case one (``gdnAttn``) or beginning a camel-case part (``GDNAttn``)."""
    after = text[at] if at < len(text) else ""
    if not after.isalpha():
        return True
    return after.isupper() and (text[at - 1].islower() or text[at + 1:at + 2].islower())


def _event_text(event: dict[str, Any]) -> str:
    return " ".join(str(event.get(k) or "") for k in
                    ("message", "detail", "error", "exception", "location",
                                       "source_line"))


def _spec_tokens(wanted: str, evidence: Evidence) -> Check:
    """Whether a crash dump's scheduled drafts are of the class ``wanted``: each dump judged
    on its own (one that is says so, naming its line where there are several), never the
    dumps' drafts added up as one dump's; unknown (never false) where no dump read is so and
    one's drafts are unknown."""
    dumps, unread = evidence.spec_tokens, _unread_dumps(evidence.events)
    if dumps is None:  # a dump whose drafts are unknown leaves the clause unknown
        return (Check(None, unread) if unread
                else Check(False, "no crash dump with scheduled spec-decode tokens"))
    checks = [_dump_tokens(wanted, tokens, line if len(dumps) > 1 else None)
              for line, tokens in dumps]
    held = [check for check in checks if check.holds]
    if len(checks) == 1 or not held:
        why = "; ".join(c.why for c in checks[:3]) + (
            f"; and {len(checks) - 3} more crash dump(s) not so" if len(checks) > 3 else "")
        if not held and unread:
            return Check(None, f"{why}; {unread}")
        return Check(bool(held), why)
    return Check(True, f"{held[0].why} ({len(held)} of the {len(checks)} crash dumps so)")


def _unread_dumps(events: list[dict[str, Any]]) -> str:
    """Of crash dumps whose drafts are unknown (a cut line, a batch read wrong), the first's
    words: "the crash dump's scheduled spec-decode tokens are unknown (WHY)"; "" if none (a
    capture holding such a dump was said to hold "no crash dump with scheduled spec-decode
    tokens")."""
    unread = [e for e in events if e.get("kind") == "crash_dump"
              and not isinstance(e.get("scheduled_spec_decode_tokens"), dict)]
    if not unread:
        return ""
    why = unread[0].get("cut") or unread[0].get("unread")
    more = f"; {len(unread)} such crash dumps" if len(unread) > 1 else ""
    return ("the crash dump's scheduled spec-decode tokens are unknown"
            + (f" ({terminal(capped(why, 300))})" if why else "") + more)


def _dump_tokens(wanted: str, tokens: dict[str, list[int]], line: int | None) -> Check:
    """One crash dump's drafts judged (``line``: its line, named when there are several)."""
    dump = "the crash dump" if line is None else f"the crash dump of line {line}"
    if not tokens:
        return Check(False, f"{dump} schedules no spec-decode tokens")
    flat = [t for ids in tokens.values() for t in ids]
    placeholders = sum(t == -1 for t in flat)
    holds = {"all_placeholder": placeholders == len(flat) > 0,
             "some_placeholder": 0 < placeholders < len(flat)}.get(wanted, placeholders > 0)
    why = (f"{dump} schedules {placeholders} of {len(flat)} spec-decode tokens as -1 "
           f"over {len(tokens)} request(s)")
    if wanted == "some_placeholder" and placeholders == len(flat):
        why += " (every one: the async scheduler's placeholders, whatever the drafter wrote)"
    return Check(holds, why)


def _crash_without_findings(wanted: bool, evidence: Evidence) -> Check:
    """A crash event and no value out of range in the engine's own code; unknown when no
    variant of that code was replayed (the fix alone: its finding none says nothing of what
    the engine's values were); of a capture holding no record (a log or crash dump alone) it
    says so, never that the engine's values were judged in range."""
    if not evidence.engine_replayed():
        return Check(None, "whether the engine's code finds a value out of range is not known: "
                           "no variant of the engine's code (upstream or vllm) was replayed")
    crash = crashed(evidence.events)
    values = out_of_range(before_crash(evidence.findings, evidence.events),
                          engine_variants(evidence))
    holds = crash and not values
    hidden = unseen(evidence.findings, engine_variants(evidence)) if holds else 0
    if hidden:
        return Check(None, "whether the engine's code finds a value out of range is not known: "
                           f"{hidden} value(s) out of range that the models find lie where its "
                           "replayed variants cannot see")
    why = ("a crash event, and no record of the engine's values to find one out of range by "
           f"({evidence.no_records})" if holds and evidence.held_records is False else
           "a crash event and no value out of range in the engine's own code" if holds else
           "no crash event" if not crash else
           "the engine's own code (the baseline or unpatched vLLM) finds a value out of range")
    return Check(holds == wanted, why)


_EVALUATORS: dict[str, Callable[[Any, Evidence], Check]] = {
    "any": _any, "finding": _finding, "fact": _fact, "event": _event,
    "spec_tokens": _spec_tokens, "crash_without_findings": _crash_without_findings,
}
