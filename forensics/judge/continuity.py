"""Token continuity: every token fed to the model is the one the request had there.

A request's token stream is rebuilt from what a capture holds (:mod:`forensics.judge.streams`
turns a runner's records into a :class:`Stream`): each token fed (:class:`Fed`: the tensor and
element, the request, the position, the value, and its role: ``verified``, ``draft`` or
``padding``), each token accepted for a request at a position (:class:`Recorded`: where it was
recorded, and the step that sampled it), and each draft the drafter proposed for a request's
slot. :func:`check` compares them:

- a verified token fed at position ``p`` of request ``r`` must equal the token accepted for
  ``r`` at ``p`` in an earlier step: else ``substituted`` (verdict ``violation``: the output is
  corrupt from that token on);
- a draft must equal what the drafter proposed for that slot: else ``substituted`` (verdict
  ``suspect``: the draft is judged against the wrong token);
- a ``-1`` placeholder fed where vLLM clamps ids to ``>= 0`` before the embedding is
  ``clamped_placeholder``: the model read token 0 there;
- padding beyond the scheduled tokens is harmless: a placeholder there is a note, not a finding.

A token without a recorded expectation (a prompt token, a request first seen mid-capture) is
not judged and not counted. Every wrong token is counted; the first :data:`MAX_FINDINGS` are
kept as findings. A stream that lacks a field the check needs says so in
:attr:`Stream.needs`: its continuity is "not judged: needs <field>", never ``ok``.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from forensics.escaping import quoted

SUBSTITUTED, CLAMPED = "substituted", "clamped_placeholder"
#: the finding kinds of this check
KINDS = (SUBSTITUTED, CLAMPED)
VERIFIED, DRAFT, PADDING = "verified", "draft", "padding"
#: what a wrong token at each role does to the output, in words a user can act on
EFFECTS = {
    VERIFIED: "the output of this request is corrupt from this token on",
    DRAFT: ("the draft is judged against the wrong token (acceptance lost, or a wrong token "
            "accepted where the two agree by chance)"),
    PADDING: "harmless: padding beyond the scheduled tokens",
}
#: columns a continuity finding adds to the findings table (null for other findings)
CONTINUITY_COLUMNS = ("position", "expected", "expected_at", "expected_step", "effect")


@dataclass(frozen=True, slots=True)
class Recorded:
    """A token as a capture recorded it: its value, where (site, step, tensor, element) and
    the step that sampled or proposed it."""

    value: int
    site: str
    step: int
    tensor: str
    element: str
    made_at: int

    def where(self) -> str:
        """``"prepare_input_ids step 38 prev_sampled_token_ids[2, 0]"``."""
        return f"{self.site} step {self.step} {self.tensor}{self.element}"


def _made_at(token: Recorded) -> int:
    """The step that sampled or proposed ``token`` (the order of a position's tokens)."""
    return token.made_at


@dataclass(slots=True)
class Fed:
    """One token fed to the model: ``tensor[element]`` of ``site``'s record at ``step`` holds
    ``value`` for request ``req_id`` at ``position``; ``draft`` is its draft slot (``-1`` for a
    verified token); ``read`` is what the model read there after vLLM's clamp (None: not
    recorded); ``bound`` the ids' bound of its own record (the embedding's rows: an id at or
    past it is a bounds finding, not a substitution; None: not recorded)."""

    step: int
    rank: int
    site: str
    tensor: str
    element: int
    req_id: str | None
    position: int | None
    value: int
    role: str
    draft: int = -1
    row: int | None = None
    read: int | None = None
    bound: int | None = None


@dataclass(slots=True)
class Span:
    """The tokens one row fed at one step, held as plain lists (a :class:`Fed` is made only for
    a token judged wrong, :meth:`fed`): element ``start + k`` of ``read_at``'s tensor holds
    ``reads[k]``, the id the model read; ``written[k]``, where recorded and negative, is the id
    staged before vLLM's clamp (at ``written_at``), and is then the token fed. Its position is
    ``positions[k]`` (None past their end) or else ``first + k`` (None when ``first`` is);
    tokens from ``draft_from`` on are drafts (slot ``k - draft_from``). A padding span
    (``padding``) has no request."""

    step: int
    rank: int
    req_id: str | None
    row: int | None
    start: int
    reads: list[int]
    bound: int | None
    read_at: tuple[str, str]
    draft_from: int = 0
    padding: bool = False
    positions: list[int] | None = None
    first: int | None = None
    written: list[int] = field(default_factory=list)
    written_at: tuple[str, str] = ("", "")

    def value(self, k: int) -> int:
        """The token fed at ``k``: the id written before the clamp where negative, else read."""
        return self.written[k] if k < len(self.written) and self.written[k] < 0 else self.reads[k]

    def position(self, k: int) -> int | None:
        """The position of the token at ``k`` (None: not recorded)."""
        if self.positions is not None:
            return self.positions[k] if k < len(self.positions) else None
        return None if self.first is None else self.first + k

    def fed(self, k: int) -> Fed:
        """The token at ``k`` as a :class:`Fed`."""
        j = k - self.draft_from
        role = PADDING if self.padding else DRAFT if j >= 0 else VERIFIED
        written = k < len(self.written) and self.written[k] < 0
        site, tensor = self.written_at if written else self.read_at
        return Fed(self.step, self.rank, site, tensor, self.start + k, self.req_id,
                   self.position(k), self.value(k), role, j if role == DRAFT else -1, self.row,
                   self.reads[k], self.bound)


@dataclass
class Stream:
    """What a capture holds of its requests' token streams (see the module)."""

    runner: str
    #: the tokens fed since the last take, as rows' spans (a stream's own) and as single tokens
    spans: list[Span] = field(default_factory=list)
    fed: list[Fed] = field(default_factory=list)
    #: (rank, request, position) -> the tokens accepted there, in the order of the step that
    #: sampled them (recording order among one step's: :meth:`before`)
    accepted: dict[tuple[int, str, int], list[Recorded]] = field(default_factory=dict)
    #: the (rank, request) pairs some token was accepted for
    requests: set[tuple[int, str]] = field(default_factory=set)
    #: (rank, step fed, request) -> the drafts proposed for it: their values, and where they
    #: were recorded (site, step, tensor, row of that tensor, the step that proposed them)
    proposed: dict[tuple[int, int, str], tuple[list[int], str, int, str, int, int]] = field(
        default_factory=dict)
    #: the fields the check needs and the capture lacks (``site.field``)
    needs: list[str] = field(default_factory=list)
    #: whether vLLM clamps ``input_ids`` to ``>= 0`` before the embedding (None: unknown)
    clamps: bool | None = None
    clamp_reason: str = "unknown"

    def accept(self, rank: int, req_id: str, position: int, token: Recorded) -> None:
        """Note ``token`` as accepted for ``req_id`` at ``position`` (after the tokens of its
        step and the steps before: a stream is read in step order, so this appends)."""
        self.requests.add((rank, req_id))
        bisect.insort_right(self.accepted.setdefault((rank, req_id, position), []), token,
                            key=_made_at)

    def before(self, key: tuple[int, str, int], step: int) -> Recorded | None:
        """The latest token accepted at ``key`` by a step before ``step`` (None: none), found
        by bisection: a key accepted at every step costs a lookup a logarithm."""
        tokens = self.accepted.get(key)
        if tokens is None:
            return None
        at = bisect.bisect_left(tokens, step, key=_made_at)
        return tokens[at - 1] if at else None

    def need(self, what: str) -> None:
        """Note a field the check needs and the capture lacks."""
        if what not in self.needs:
            self.needs.append(what)


@dataclass
class Continuity:
    """The continuity check's answer: findings (dicts, :func:`finding_of`), notes (padding),
    the fields it lacked, and how many fed tokens it could judge."""

    runner: str
    findings: list[dict[str, Any]]
    notes: list[dict[str, Any]]
    needs: list[str]
    judged: int
    clamps: bool | None = None
    #: every wrong token found, by kind (``findings`` keeps the first :data:`MAX_FINDINGS`)
    counts: dict[str, int] = field(default_factory=dict)
    #: whether some wrong token found was fed at a verified position
    verified: bool = False
    #: the padding placeholders noted (``notes`` keeps the first :data:`MAX_FINDINGS`)
    padded: int = 0

    def __post_init__(self) -> None:
        """Counts from the findings and notes themselves where none were given."""
        if not self.counts:
            for found in self.findings:
                self.counts[found["kind"]] = self.counts.get(found["kind"], 0) + 1
        self.verified = self.verified or any(f["effect"] == VERIFIED for f in self.findings)
        self.padded = max(self.padded, len(self.notes))

    @property
    def verdict(self) -> str:
        """``violation`` (a wrong token at a verified position), ``suspect`` (at drafts only),
        ``ok``, or ``not judged: needs <field>, ...``."""
        if self.verified:
            return "violation"
        if self.counts:
            return "suspect"
        if self.needs:
            return "not judged: needs " + ", ".join(self.needs)
        return "ok"

    def sentence(self) -> str:
        """One sentence for the conclusion: the first finding and the count, the fields
        lacking, or ``""`` when the check found nothing to say."""
        if self.findings:
            first = describe(self.findings[0])
            total = sum(self.counts.values())
            kinds = ", ".join(f"{self.counts[k]} {k}" for k in KINDS if self.counts.get(k))
            listed = (f"; the findings table lists the first {len(self.findings)}"
                      if total > len(self.findings) else "")
            return (f"Token continuity: {total} wrong token(s) fed ({kinds}); the first: "
                    f"{first}" + (f" ({total - 1} more{listed})." if total > 1 else "."))
        if self.needs:
            return f"Token continuity not judged: needs {', '.join(self.needs)}."
        return ""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: verdict, findings, notes, needs, judged count."""
        return {"runner": self.runner, "verdict": self.verdict, "findings": self.findings,
                "notes": self.notes, "needs": self.needs, "judged": self.judged,
                "clamps": self.clamps}

    def summary(self) -> dict[str, Any]:
        """What ``replay --json`` says of the check beside its findings: the verdict, the fed
        tokens judged, the fields it lacked, the clamp and the padding notes counted."""
        return {"verdict": self.verdict, "judged": self.judged, "needs": self.needs,
                "clamps": self.clamps, "padding_notes": self.padded,
                "found": sum(self.counts.values()), "listed": len(self.findings)}


def check(stream: Stream) -> Continuity:
    """Compare every fed token of ``stream`` with the token its request had there (in time
    linear in the tokens fed and accepted, whatever positions and steps they claim); the
    stream's tokens and drafts are taken (:meth:`Judging.take`)."""
    judging = Judging()
    judging.take(stream)
    return judging.result(stream)


class Judging:
    """The check as a stream is read: :meth:`take` judges the tokens fed so far and lets them
    go (a stream read in step order holds, when a step's tokens are taken, every token
    accepted before that step), so a capture's tokens are never all held at once."""

    def __init__(self) -> None:
        self.found = _Found()
        self.judged = 0

    def take(self, stream: Stream) -> None:
        """Judge the tokens ``stream`` fed since the last take; drop them and their drafts."""
        for span in stream.spans:
            self._span(stream, span)
        for fed in stream.fed:
            self._judge(stream, fed)
        stream.spans.clear()
        stream.fed.clear()
        stream.proposed.clear()

    def result(self, stream: Stream) -> Continuity:
        """The check's answer for ``stream`` (its tokens all taken)."""
        found = self.found
        return Continuity(stream.runner, found.findings, found.notes, list(stream.needs),
                          self.judged, stream.clamps, found.counts, found.verified,
                          found.padded)

    def _span(self, stream: Stream, span: Span) -> None:
        """Judge a row's tokens as :meth:`_judge` would each of them, making a :class:`Fed` only
        for a token that is negative or differs from the token expected (the rest are at most
        counted as judged: an id in range equal to its expected token)."""
        if not span.padding and self._in_order(stream, span):
            return
        name, step, rank = span.req_id, span.step, span.rank
        proposal = None if name is None else stream.proposed.get((rank, step, name))
        drafts = () if proposal is None else proposal[0]
        limit = INT64[1] + 1 if span.bound is None else span.bound
        for k in range(len(span.reads)):  # only rows :meth:`_in_order` could not clear
            value, j, expected = span.value(k), k - span.draft_from, None
            if span.padding:
                pass
            elif j >= 0:
                expected = drafts[j] if j < len(drafts) else None
            elif name is not None and (position := span.position(k)) is not None:
                found = stream.before((rank, name, position), step)
                expected = None if found is None else found.value
            if value < 0 or (expected is not None and value != expected):
                self._judge(stream, span.fed(k))
            elif expected is not None and value < limit:
                self.judged += 1

    def _in_order(self, stream: Stream, span: Span) -> bool:
        """Whether every token of a row's ``span`` is an id in range that equals its expected
        token where it has one (those are then counted judged), checked by whole lists: a
        token by token walk (:meth:`_span`) is needed only where this says False."""
        reads, written, name = span.reads, span.written, span.req_id
        limit = INT64[1] + 1 if span.bound is None else span.bound
        if not reads or min(reads) < 0 or max(reads) >= limit or (written and min(written) < 0):
            return not reads
        if name is None:
            return True
        judged, verified = 0, min(max(span.draft_from, 0), len(reads))
        if (span.rank, name) in stream.requests:
            for k in range(verified):
                position = span.position(k)
                found = None if position is None else stream.before(
                    (span.rank, name, position), span.step)
                if found is not None:
                    if found.value != reads[k]:
                        return False
                    judged += 1
        proposal = stream.proposed.get((span.rank, span.step, name))
        if proposal is not None:
            first = verified - span.draft_from  # the draft slot of the first draft token
            count = max(0, min(len(reads) - verified, len(proposal[0]) - first))
            if reads[verified:verified + count] != proposal[0][first:first + count]:
                return False
            judged += count
        self.judged += judged
        return True

    def _judge(self, stream: Stream, fed: Fed) -> None:
        if fed.role == PADDING:
            if fed.value < 0:
                self.found.note(fed, CLAMPED if stream.clamps else SUBSTITUTED)
            return
        expected = expected_for(stream, fed)
        # a -1 the capture shows reaching the embedding unclamped is a bounds finding instead,
        # and one where the embedding read another id than the clamp's 0 is the race check's
        placeholder = (fed.value < 0 and stream.clamps is True
                       and (fed.read is None or fed.read == 0))
        if placeholder:
            self.judged += 1
            known = expected is not None and INT64[0] <= expected.value <= INT64[1]
            self.found.add(fed, expected if known else None, CLAMPED)
        elif (expected is not None and is_token(fed.value, fed.bound)
              and is_token(expected.value, fed.bound)):
            self.judged += 1
            if fed.value != expected.value:
                self.found.add(fed, expected, SUBSTITUTED)


#: the most findings (and padding notes) kept: a capture whose every token is wrong is told by
#: the counts, not by a row per token (5 KB each, for every variant)
MAX_FINDINGS = 10_000


@dataclass
class _Found:
    """The check's findings and notes as they are found: all counted, the first kept."""

    findings: list[dict[str, Any]] = field(default_factory=list)
    notes: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    verified: bool = False
    padded: int = 0

    #: the (site, role) pairs kept: the first of each is kept past the cap (the verdict of
    #: each site is read from the findings table)
    kept: set[tuple[str, str]] = field(default_factory=set)

    def add(self, fed: Fed, expected: Recorded | None, kind: str) -> None:
        """Count a wrong token ``fed`` of ``kind``; keep it while under the cap, or when it is
        the first of its site and role."""
        self.counts[kind] = self.counts.get(kind, 0) + 1
        self.verified = self.verified or fed.role == VERIFIED
        if len(self.findings) < MAX_FINDINGS or (fed.site, fed.role) not in self.kept:
            self.kept.add((fed.site, fed.role))
            self.findings.append(finding_of(fed, expected, kind))

    def note(self, fed: Fed, kind: str) -> None:
        """Count a placeholder in the padding; keep it while under the cap."""
        self.padded += 1
        if len(self.notes) < MAX_FINDINGS:
            self.notes.append(finding_of(fed, None, kind))


#: the range of an int64 (the findings table's integer columns)
INT64 = (-2**63, 2**63 - 1)


def is_token(value: int, bound: int | None) -> bool:
    """Whether ``value`` is an id in range: ``[0, bound)``, or a non-negative int64 when the
    bound is not recorded (an id out of range is a bounds finding, never a substitution)."""
    return 0 <= value < (INT64[1] + 1 if bound is None else bound)


def expected_for(stream: Stream, fed: Fed) -> Recorded | None:
    """The token ``fed`` should be: the latest accepted for its request at its position by a
    step before it (verified), or the drafter's proposal for its slot (draft); None unknown."""
    if fed.req_id is None:
        return None
    if fed.role == DRAFT:
        drafts = stream.proposed.get((fed.rank, fed.step, fed.req_id))
        if drafts is None or not 0 <= fed.draft < len(drafts[0]):
            return None
        values, site, step, tensor, row, made_at = drafts
        return Recorded(values[fed.draft], site, step, tensor, f"[{row}, {fed.draft}]", made_at)
    if fed.position is None:
        return None
    return stream.before((fed.rank, fed.req_id, fed.position), fed.step)


def finding_of(fed: Fed, expected: Recorded | None, kind: str) -> dict[str, Any]:
    """The findings-table row (less variant and record) of a wrong token fed."""
    return {"site": fed.site, "step": fed.step, "rank": fed.rank, "row": fed.row,
            "element": fed.element, "tensor": fed.tensor, "kind": kind, "value": fed.value,
            "lower": None, "upper": None, "origin": None, "resolved": None,
            "req_id": fed.req_id, "judged": True, "index_tensor": fed.tensor,
            "index_at": fed.element, "held": True, "indexed": "embedding rows",
            "value_class": "placeholder" if fed.value == -1 else None,
            "position": fed.position,
            "expected": None if expected is None else expected.value,
            "expected_at": None if expected is None else expected.where(),
            "expected_step": None if expected is None else expected.made_at,
            "effect": fed.role, "read": fed.read}


def describe(found: dict[str, Any]) -> str:
    """One sentence naming the tensor and element fed, request, position, the value fed, the
    value expected and where it was recorded, and what it does to the output (the request id
    through :func:`~forensics.escaping.quoted`: the sentence goes out through
    :func:`~forensics.escaping.inert` or the escaping of its output)."""
    request = "unknown" if found.get("req_id") is None else quoted(found["req_id"])
    where = (f"`{found['tensor']}[{found['element']}] = {found['value']}` (step "
             f"{found['step']}, request {request}, position "
             f"{_or_unknown(found.get('position'))})")
    expected = found.get("expected")
    if found["kind"] == CLAMPED:
        instead = ("the token sampled for it (unknown: not recorded)" if expected is None else
                   f"token {expected}, sampled at step {found['expected_step']} "
                   f"({found['expected_at']})")
        if found["effect"] == DRAFT and expected is not None:
            instead = f"draft {expected}, proposed at step {found['expected_step']} " \
                      f"({found['expected_at']})"
        if expected is not None and expected < 0:  # the source holds the placeholder too
            instead = (f"the token its request had there (unknown: the id recorded at step "
                       f"{found['expected_step']} ({found['expected_at']}) is {expected} "
                       f"itself)")
        return (f"{where} was clamped to token 0 before the embedding: the model read token 0 "
                f"instead of {instead}; {EFFECTS[found['effect']]}")
    what = "sampled" if found["effect"] == VERIFIED else "proposed"
    return (f"{where} was fed token {found['value']} where the request had token {expected} "
            f"({what} at step {found.get('expected_step')}, recorded at "
            f"{found.get('expected_at')}); {EFFECTS[found['effect']]}")


def _or_unknown(value: Any) -> str:
    return "unknown" if value is None else str(value)
