"""A triage row's conclusion and signature, and the groups of rows that share a signature."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from forensics.escaping import terminal
from forensics.fleet.piece import BASELINE, NO_RECORDS, ONLY_NOT_KNOWN
from forensics.store.events import LEFT_OUT, NEVER_WRITTEN, UNWRITTEN_WHY
from forensics.store.paths import CUT_SHORT
from forensics.store.unjudged import FROM_ORIGINAL

#: what a row's ``not_judged`` says of records of sites not known here
NOT_KNOWN_SAID = "(not known to this install)"
CONCLUSIONS = ("known", "violation", "suspect", "rank divergence", "not judged", "unexplained",
               "divergence not judged", "clean", "empty", "unreadable")


def conclusion(row: dict[str, Any]) -> str:
    """``empty`` (a capture of no records), ``unreadable`` (another error), ``known`` (the
    catalogue matched), ``violation`` or ``suspect`` (the baseline's worst verdict, unmatched),
    ``rank divergence``, ``not judged`` (nothing found, but records of a site this install
    does not know were judged by no variant: neither clean nor an unexplained crash can be
    said), ``unexplained`` (a crash with nothing found), ``divergence not judged`` (nothing
    found, but another capture of its engine claims one of its ranks: its ranks were compared
    with no other's, :func:`~forensics.fleet.stitch.contested_text`; or its ranks hold unlike
    numbers of records of a step, not compared: :func:`~forensics.fleet.stitch.unpaired_text`;
    or its steps after its engine's first divergence, of other ranks, compared with none:
    :func:`~forensics.fleet.stitch.stopped_text`),
    else ``clean``."""
    if row.get("error"):
        own = own_error(row)
        if own.startswith(ONLY_NOT_KNOWN):
            return "not judged"
        return "empty" if own.startswith(NO_RECORDS) else "unreadable"
    if row.get("known"):
        return "known"
    verdicts = set((row.get("verdicts") or {}).get(BASELINE, {}).values())
    for verdict in ("violation", "suspect"):
        if verdict in verdicts:
            return verdict
    if row.get("divergence") and not (row["divergence"].get("unpaired")
                                      or row["divergence"].get("stopped")):
        return "rank divergence"
    if row.get("not_judged"):
        return "not judged"
    if row.get("crashed"):
        return "unexplained"
    return "divergence not judged" if row.get("contested") or row.get("divergence") else "clean"


def own_error(row: dict[str, Any]) -> str:
    """The words of the error of ``row`` after its capture's quoted name, where the error is
    its piece's own of the capture (:data:`NO_RECORDS`, :data:`ONLY_NOT_KNOWN`), else ``""``:
    never the name's words (a capture named 'it holds no records.capture' whose manifest is not
    JSON was ``empty``)."""
    error, name = str(row.get("error") or ""), f"'{terminal(row.get('name'))}' "
    return error[len(name):] if error.startswith(name) else ""


#: what the value of a finding that is in range is, by its kind
IN_RANGE = {"misattributed": "another request's row", "substituted": "not the request's token",
            "unwritten_input": "not the id written"}


def value_class(first: dict[str, Any]) -> str:
    """What the first finding's value is: for an in-range finding what its kind says
    (:data:`IN_RANGE`: ``another request's row`` for a misattributed one), else the judge's
    ``value_class`` when the finding has one (``placeholder``), else ``-1``, ``vocab_size``
    (an id equal to its bound), ``negative``, ``past end``, or the value."""
    if first.get("kind") in IN_RANGE:
        return IN_RANGE[first["kind"]]
    if first.get("value_class"):  # the judge's own class, where it gives one
        return str(first["value_class"])
    value, lower, upper = first.get("value"), first.get("lower"), first.get("upper")
    if value == -1:
        return "-1"
    ids = any(part in str(first.get("tensor")) for part in ("ids", "output_tail"))
    if value is not None and value == upper and ids:
        return "vocab_size"
    if value is not None and lower is not None and value < lower:
        return "negative"
    if value is not None and upper is not None and value >= upper:
        return "past end"
    return str(value)


def what(row: dict[str, Any]) -> str:
    """The part of a signature that says what happened (no versions)."""
    kind = row["conclusion"]
    first = row.get("first")
    if kind in ("unreadable", "empty"):
        return "unreadable capture" if kind == "unreadable" else "capture of no records"
    if kind == "known":
        return f"known issue {', '.join(row['known'])}"
    if first is not None and kind in ("violation", "suspect"):
        return (f"`{value_class(first)}` {first['kind']} in {first['tensor']} at "
                f"{first['site']} (new)")
    if kind == "rank divergence":
        div = row["divergence"]
        return f"rank divergence in {div['tensor']} at {div['site']}"
    if kind == "not judged":
        why = str(row.get("not_judged") or own_error(row))
        reasons = [reason for reason, said in (("sites not known to this install", NOT_KNOWN_SAID),
                                               ("files cut short", CUT_SHORT),
                                               ("records never written", NEVER_WRITTEN),
                                               ("events left out", LEFT_OUT),
                                               ("events lost", UNWRITTEN_WHY),
                                               ("records its redaction did not keep",
                                                FROM_ORIGINAL)) if said in why]
        return f"records not judged ({', '.join(reasons) or 'sites not known to this install'})"
    if kind == "divergence not judged" and (row.get("divergence") or {}).get("stopped"):
        return "rank divergence not judged (compared up to its engine's first divergence)"
    if kind == "divergence not judged" and not row.get("contested"):
        return "rank divergence not judged (ranks hold unlike numbers of records of a step)"
    if kind == "divergence not judged":
        return "rank divergence not judged (another capture claims a rank of its engine)"
    if kind == "unexplained" and not (row.get("crash_events") or row.get("guard_events")):
        return "unexplained death (killed or crashed)"  # a probe never stopped: no crash event
    return "unexplained crash" if kind == "unexplained" else "clean"


#: the facts a group's title names, with their labels: (row key, label)
FACTS = (("vllm", "vLLM"), ("runner", "runner"), ("spec_method", "speculation"))
#: the most distinct values of a fact a group's title names, and the characters of each
FACT_VALUES, FACT_CHARS = 8, 100
#: a group's place: known issues first, then unmatched signatures, then unreadable captures
KNOWN, UNMATCHED, UNREADABLE = 0, 1, 2


def signature(row: dict[str, Any]) -> tuple[Any, ...]:
    """The grouping key: ``(KNOWN, issue ids)`` for a capture that matches known issues (one
    group per known issue, whatever its versions or findings), ``(UNREADABLE, what)``, else
    ``(UNMATCHED, vLLM version, runner, speculative method, what)``."""
    if row.get("error"):  # unreadable, empty, or of records this install cannot judge
        return (UNREADABLE, what(row))
    if row["conclusion"] == "known":
        return (KNOWN, what(row))
    return (UNMATCHED, row["vllm"], row["runner"], row["spec_method"], what(row))


@dataclass
class Group:
    """Rows that share a :func:`signature`."""

    key: tuple[Any, ...]
    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def hosts(self) -> list[str]:
        """The distinct known hosts of the group's captures."""
        return sorted({str(r["host"]) for r in self.rows
                       if r.get("host") and r["host"] != "unknown"})

    @property
    def what(self) -> str:
        """What the group's captures show (the last part of the key)."""
        return str(self.key[-1])

    def facts(self) -> str:
        """``"vLLM 0.32.0 or 0.33.0, runner v1, speculation mtp"``: each fact labelled, once,
        its distinct values among the group's captures ("unknown" where none is known); at
        most :data:`FACT_VALUES` values, each cut after :data:`FACT_CHARS` characters (the
        title is on every row of a table: its length never grows with the group), each through
        :func:`~forensics.escaping.spanless` (the title is a message of escaped values: a
        version holding ESC and one holding the text ``\\x1b`` once made two titles alike; a
        speculative method's backticks made a code span of the Markdown title)."""
        from forensics.escaping import capped, spanless

        parts = []
        for key, label in FACTS:
            values = sorted({str(r.get(key) or "unknown") for r in self.rows})
            known = [v for v in values if v != "unknown"]
            more = len(known) - FACT_VALUES
            shown = " or ".join(spanless(capped(v, FACT_CHARS)) for v in known[:FACT_VALUES]) + \
                (f" or {more} more" if more > 0 else "") + \
                (" (some unknown)" if len(known) < len(values) else "")
            parts.append(f"{label} {shown if known else 'unknown'}")
        return ", ".join(parts)

    def title(self) -> str:
        """``"47 captures on 12 hosts, vLLM 0.33.0, runner v2, speculation mtp: `-1` ...
        (new)"``; an unreadable group names no facts."""
        n = len(self.rows)
        head = f"{n} capture{'s' * (n != 1)}"
        if self.key[0] == UNREADABLE:
            return f"{head}: {self.what}"
        hosts = len(self.hosts)
        unknown = sum(1 for r in self.rows if not r.get("host") or r["host"] == "unknown")
        head += f" on {hosts} host{'s' * (hosts != 1)}" if hosts else " (hosts unknown)"
        if hosts and unknown:  # "3 captures on 1 host" said so of a capture whose host is unknown
            head += f" ({unknown} on a host unknown)"
        return f"{head}, {self.facts()}: {self.what}"


def group_rows(rows: Sequence[dict[str, Any]]) -> list[Group]:
    """Groups of ``rows`` by signature: known issues first, then unmatched signatures, then
    unreadable captures; in each, largest first, then by key."""
    groups: dict[tuple[Any, ...], Group] = {}
    for row in rows:
        key = signature(row)
        groups.setdefault(key, Group(key)).rows.append(row)
    return sorted(groups.values(), key=lambda g: (g.key[0], -len(g.rows),
                                                  tuple(map(str, g.key[1:]))))
