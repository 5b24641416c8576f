"""``shrink(capture, out)``: the fewest steps, then records, that give the same evidence.

The evidence (:mod:`forensics.share.evidence`) is every site's verdict per variant and each
variant's first finding with its bound, origin and resolution. One replay of the original gives it,
with the records behind every finding. The search then works on small sets only:

1. **window**: the steps of the records that witness the evidence: each variant's first
   finding, one record per (variant, site) verdict (a violation or a wrong token fed, an
   error outcome, a misattribution, or any record of an ``ok`` site), and the origin of each
   of those that is a sink finding (the latest ``upstream`` output finding with that value,
   same rank, at or before the sink's step). Each window step is widened backwards (1, 2, 4,
   ... steps, a width that would add no stored step skipped) until the window's records replay
   to the same evidence; at worst (every step up to the last witness is in and the evidence
   still needs a later one) the window is the capture. When the records of the witness steps
   do not keep the evidence but the witness records alone do (a record the evidence does not
   need feeds a token judged against a step left out), the search goes on from those alone.
2. **steps**: ``ddmin`` over the window's steps (each step with all its records);
3. **records**: ``ddmin`` over the records left.

Each test is a replay of the candidate records in memory; records are decoded once. ``ddmin``
over items that are all needed (a capture whose every step the evidence needs: each missing
step makes a wrong token appear) tests the complement of each of n chunks at every granularity:
its replays take in records quadratic in the window's. Each search replays at most
:data:`SEARCH_FACTOR` times the records it starts from (a :class:`~forensics.share.ddmin.Budget`);
spent, it keeps the smallest set found so far, which keeps the evidence, and the result says
it stopped (:attr:`ShrinkResult.complete`).

All of a shrink's replays (the original's, the search's, the written capture's) run under one
overall deadline (``deadline``, :data:`~forensics.budget.DEFAULT_SHRINK_DEADLINE`; a replay's
own kernel worker ends no later than it). The search stops before a replay once what is left
of it is less than the original's replay took (the written capture's replay needs about that),
or when a replay of it was cut: it then keeps the smallest set a complete replay found to keep
the evidence (the whole capture when that is all it found) and says it stopped
(:attr:`ShrinkResult.stopped`, in the manifest's ``shrink`` entry too). A replay of the
original, or of the capture written, that the deadline cut writes nothing (DeadlineError).
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from forensics.budget import (
    DEFAULT_SHRINK_DEADLINE,
    Clock,
    overall_clock,
    own_limits,
    remedy,
)
from forensics.errors import DeadlineError, ForensicsError
from forensics.escaping import terminal
from forensics.judge.continuity import CLAMPED, SUBSTITUTED
from forensics.progress import Progress
from forensics.share.ddmin import Budget, Spent, ddmin
from forensics.share.evidence import Evidence, differences, evidence_of, publish, reference

if TYPE_CHECKING:
    from forensics.api_types import CaptureArg
    from forensics.records import Record


#: the token continuity findings (a verified one makes its site a violation, a draft one a
#: suspect): their records witness the verdict as a bounds finding's do
TOKEN_KINDS = (SUBSTITUTED, CLAMPED)
#: the records each ddmin search may replay in all, as a multiple of the records it starts from
SEARCH_FACTOR = 64


class NothingToKeepError(ForensicsError, ValueError):
    """A capture whose replay has no finding and raises at no site: shrinking it would keep no
    evidence."""


@dataclass
class ShrinkResult:
    """What :func:`shrink` wrote and what it cost."""

    path: Path
    records_before: int
    records_kept: int
    steps_kept: list[int]
    replays: int
    seconds: float
    evidence: Evidence
    #: of ``seconds``: the replay of the original (the rest: search, write, verify)
    reference_seconds: float = 0.0
    #: False when the search stopped at its budget (:data:`SEARCH_FACTOR`): what was written
    #: keeps the evidence, but a record of it might still be dropped
    complete: bool = True
    #: the records the window held, and the records its two ddmin searches replayed
    window_records: int = 0
    records_replayed: int = 0
    #: why the search stopped before its end at the overall deadline ("" when it did not):
    #: what was written keeps the evidence, but may not be minimal
    stopped: str = ""
    #: the records of sites this install does not know, left out (``3 record(s) of site
    #: 'toy' (not known to this install)``; "" when there were none): no replay here judged
    #: them, so whether the evidence needs them is not known
    dropped: str = ""

    @property
    def fraction_kept(self) -> float:
        """Records kept over records before."""
        return self.records_kept / max(self.records_before, 1)


def shrink(capture: CaptureArg, out: str | os.PathLike[str], variants: Sequence[str] | None = None,
           *, force: bool = False, progress: bool = False,
           deadline: float = DEFAULT_SHRINK_DEADLINE) -> ShrinkResult:
    """Write at ``out`` the smallest capture found whose replay through ``variants`` (default
    ``upstream`` and ``patched``) gives ``capture``'s verdicts and first findings, all its
    replays within ``deadline`` seconds together (see the module docstring).

    Returns:
        A :class:`ShrinkResult`.
    Raises:
        CaptureFormatError: ``capture`` is not a readable capture.
        OutputExistsError: ``out`` exists without ``force``.
        ConfigurationError: ``out`` is the input capture or lies inside it; ``deadline`` is
            not a positive number of seconds up to a day.
        DeadlineError: the deadline cut the replay of ``capture`` or of the capture written.
        NothingToKeepError: the replay of ``capture`` has no finding and raises at no site.
        EvidenceChangedError: the written capture would not replay to the same evidence.
        PatchApplyError: a diff changed while the shrink ran.
    """
    from forensics.variants import DEFAULT_VARIANTS, diffs_read_once

    with diffs_read_once(variants or DEFAULT_VARIANTS) as names, \
            overall_clock(deadline, DEFAULT_SHRINK_DEADLINE) as clock:  # one diff, every replay
        return _shrink(capture, out, names, force, progress, clock)


def _shrink(capture: CaptureArg, out: str | os.PathLike[str], variants: Sequence[str],
            force: bool, progress: bool, clock: Clock) -> ShrinkResult:
    """:func:`shrink`, each variant as its replays name it, under ``clock``."""
    start = time.perf_counter()
    cap, names, result = reference(capture, out, variants, force, progress)
    reference_seconds = time.perf_counter() - start
    if result.cut:
        raise DeadlineError(f"capture '{terminal(cap.path)}': its replay did not finish "
                            f"({result.cut}): there is no evidence to keep; nothing was "
                            f"written; {remedy(result.cut)}")
    expected = evidence_of(result, crash=True)
    if not (expected.has_findings or expected.has_errors):
        raise NothingToKeepError(f"capture '{terminal(cap.path)}' has no finding and no site "
                                 f"whose replay raised under {names}: there is no evidence to "
                                 "keep; share it whole or choose other variants")
    search = _Search(result, expected, names, progress, clock, reference_seconds)
    kept = search.run()
    steps = sorted({int(result.index["step"].iat[i]) for i in kept})
    before, dropped = _not_known(cap, len(result.records))
    done: dict[str, Any] = {"records_before": before, "records_kept": len(kept),
                            "steps_kept": steps, "variants": names}
    if dropped:
        done["dropped"] = dropped
    if search.stopped:
        done["stopped"] = f"{search.stopped}: it keeps the evidence but may not be minimal"
    if "shrink" in cap.manifest:  # a shrunk capture shrunk again: what was done first stays
        done["before"] = cap.manifest["shrink"]
    from forensics.present.capture_facts import STOPPED_AFTER, stopped_after

    stopped = stopped_after(cap.summary())  # the steps kept are not where the engine stopped
    if isinstance(stopped, int):
        done[STOPPED_AFTER] = stopped
    manifest = {**cap.manifest, "shrink": done}
    # every event is kept, the flight recorder's kernel launches too (``forensics kernels``)
    with own_limits():  # its check: as many deaths and timeouts as the original's are its own
        path = publish(out, [search.record(i) for i in kept], manifest,
                       [*cap.events, *cap.kernel_events], expected, names, force)
    return ShrinkResult(path, before, len(kept), steps, search.replays + 2,
                        time.perf_counter() - start, expected, reference_seconds,
                        not (search.stopped or any(b.exhausted for b in search.budgets)),
                        search.window_records, sum(b.spent for b in search.budgets),
                        search.stopped, dropped)


def _not_known(cap: Any, judged: int) -> tuple[int, str]:
    """The records ``cap`` holds (the ``judged`` ones of the sites this install knows, and
    those of sites it does not know, which no replay here reads), and the latter as text
    (:func:`~forensics.store.unjudged.not_known_text`; "" when there are none)."""
    from forensics.store.unjudged import not_known_text

    counts = dict(getattr(cap, "unknown_sites", None) or {})
    return judged + sum(counts.values()), not_known_text(counts) if counts else ""


class _Search:
    """The window, then ``ddmin`` over steps and records, on one replay result."""

    def __init__(self, result: Any, expected: Evidence, variants: list[str],
                 progress: bool, clock: Clock | None = None, reserve: float = 0.0) -> None:
        self.result, self.expected, self.variants = result, expected, variants
        # the overall deadline (None: none), and the seconds of it the written capture's
        # replay is left
        self.clock, self.reserve, self.stopped = clock, reserve, ""
        self.index, self.findings = result.index, result.findings
        self.replays = 0
        self._records: dict[int, Record] = {}
        self.budgets: list[Budget] = []  # of the search over steps, then over records
        self.window_records = 0
        self.bar = Progress(1, "shrink", force=True) if progress else None

    def record(self, i: int) -> Record:
        """Record ``i`` of the original, decoded once."""
        if i not in self._records:
            self._records[i] = self.result.records[i]
        return self._records[i]

    def keeps(self, positions: Sequence[int]) -> bool:
        """Whether the records at ``positions`` replay to the expected evidence.

        Raises:
            Spent: the overall deadline leaves no time for this replay and the written
                capture's, or it cut this replay (:attr:`stopped` says so).
        """
        from forensics.replaying import replay

        if self.clock is not None and self.clock.left() < self.reserve:
            self.stopped = (f"the search stopped: {self.clock.why}" if self.clock.why else
                            f"the search stopped at the overall deadline of "
                            f"{self.clock.seconds:g} s")
            raise Spent
        self.replays += 1
        if self.bar is not None:
            self.bar.advance(0, f"shrink: {len(positions)} records, replay {self.replays}")
        done = replay([self.record(i) for i in sorted(positions)], variants=self.variants)
        if done.cut:  # not known either way
            self.stopped = f"the search stopped: {done.cut}"
            raise Spent
        return not differences(self.expected, evidence_of(done))

    def run(self) -> list[int]:
        """Positions of the records kept, in capture order."""
        try:
            witnesses = sorted(self.witnesses())
            try:
                steps = self.window(witnesses)
            except Spent:  # only the whole capture is known to keep the evidence
                return self.at_steps(list(self.by_step))
            left = witnesses if steps is None else self.over_steps(steps)
            self.budgets.append(Budget(SEARCH_FACTOR * len(left)))
            kept, _ = ddmin(left, self.keeps, self.budgets[-1])
        finally:
            if self.bar is not None:
                self.bar.close()
        return sorted(kept)

    def over_steps(self, steps: list[int]) -> list[int]:
        """Positions of the records at the fewest of ``steps`` found to keep the evidence
        (``ddmin`` over the steps, each with all its records)."""
        self.window_records = len(self.at_steps(steps))
        self.budgets.append(Budget(SEARCH_FACTOR * self.window_records))
        steps, _ = ddmin(steps, lambda s: self.keeps(self.at_steps(s)), self.budgets[-1],
                         lambda s: sum(len(self.by_step[step]) for step in s))
        return self.at_steps(steps)

    @functools.cached_property
    def by_step(self) -> dict[int, list[int]]:
        """Each step's record positions, in capture order."""
        out: dict[int, list[int]] = {}
        steps = self.index["step"].to_numpy(np.int64).tolist()
        for position, step in zip(self.index.index.tolist(), steps, strict=True):
            out.setdefault(step, []).append(int(position))
        return out

    def at_steps(self, steps: Sequence[int]) -> list[int]:
        """Positions of every record at ``steps``, in capture order (from a table made once:
        a look-up over the whole index for each subset tested was quadratic in the steps)."""
        return sorted(i for step in steps for i in self.by_step.get(int(step), ()))

    def window(self, witnesses: Sequence[int]) -> list[int] | None:
        """The steps of ``witnesses``, widened backwards until their records keep the
        evidence; None when all the records of those steps do not keep it but ``witnesses``
        alone do (a record of a witness step the evidence does not need can change it: the
        token it feeds is judged against a stored token of a step left out)."""
        seeds = np.array(sorted({int(self.index["step"].iat[i]) for i in witnesses}),
                         dtype=np.int64)
        all_steps = np.array(sorted(int(s) for s in self.index["step"].unique()), np.int64)
        # once every step up to the last witness is in, widening backwards adds nothing
        reachable = int(np.count_nonzero(all_steps <= seeds.max())) if len(seeds) else 0
        width = 0
        while True:
            steps = [int(s) for s in all_steps[_within(all_steps, seeds, width)]]
            positions = self.at_steps(steps)
            if len(steps) == len(all_steps) or self.keeps(positions):
                return steps
            if width == 0 and len(witnesses) < len(positions) and self.keeps(witnesses):
                self.window_records = len(witnesses)
                return None
            if len(steps) >= reachable:  # what is missing lies after every witness
                return [int(s) for s in all_steps]
            width = max(2 * width, _next_width(all_steps, seeds, width))

    def witnesses(self) -> set[int]:
        """Record positions behind the evidence (see the module docstring)."""
        f, out = self.findings, set()
        for variant, sites in self.expected.verdicts.items():
            mine = f[f["variant"] == variant]
            for site, verdict in sites.items():
                out.add(self._witness(mine[mine["site"] == site], variant, site, verdict))
            first = self.expected.first[variant]
            if first is not None:
                out.add(int(mine[(mine["step"] == first["step"]) & (mine["site"] == first["site"])
                                 & (mine["rank"] == first["rank"])]["record"].iat[0]))
        return out | self._origins(out)

    def _witness(self, mine: Any, variant: str, site: str, verdict: str) -> int:
        if verdict == "violation":
            rows = mine[((mine["kind"] == "out_of_bounds") & (mine["resolved"] != True))  # noqa: E712
                        | mine["kind"].isin(TOKEN_KINDS)]
        elif verdict == "suspect":
            rows = mine[mine["kind"].isin(("misattributed", *TOKEN_KINDS))]
        elif verdict == "error":
            o = self.result.outcomes
            rows = o[(o["variant"] == variant) & (o["site"] == site) & (o["status"] == "error")]
        else:
            rows = mine.iloc[:0]
        if len(rows):
            return int(rows["record"].iat[0])
        return int(self.index.index[self.index["site"] == site][0])  # any record of the site

    def _origins(self, positions: set[int]) -> set[int]:
        """The origin records of the sink findings on ``positions`` (from ``upstream``): per
        sink, the latest output finding of its origin site, rank and value at or before its
        step. One lookup per distinct (origin, rank, value, step), each a binary search: a
        witness holding thousands of bad ids once cost a scan of the table for each."""
        f = self.findings
        sinks = f[f["record"].isin(list(positions)) & f["origin"].notna()]
        up = f[(f["variant"] == "upstream") & f["tensor"].str.startswith("out.", na=False)]
        keys = ["rank", "value"]
        written = {key: (rows["step"].to_numpy(np.int64), rows["record"].to_numpy())
                   for key, rows in up.sort_values("step", kind="mergesort")
                   .groupby(["site", *keys], sort=False)}
        found: set[int] = set()
        wanted = sinks[["origin", *keys, "step"]].drop_duplicates()
        for key, steps in wanted.groupby(["origin", *keys], sort=False)["step"]:
            if key in written:
                up_steps, records = written[key]
                at = np.searchsorted(up_steps, steps.to_numpy(np.int64), side="right") - 1
                found.update(int(records[i]) for i in at[at >= 0])
        return found


def _next_width(steps: np.ndarray, seeds: np.ndarray, width: int) -> int:
    """The least width past ``width`` that takes in one more of ``steps`` (one before a seed):
    a window is never replayed again on the steps it already had (steps 0 and 2**62 once took
    63 replays of the same records before the gap was crossed)."""
    at = np.searchsorted(seeds, steps)
    before = at < len(seeds)
    gaps = seeds[at[before]] - steps[before]
    gaps = gaps[gaps > width]
    return int(gaps.min()) if len(gaps) else width + 1


def _within(steps: np.ndarray, seeds: np.ndarray, width: int) -> np.ndarray:
    """Where each of ``steps`` lies at most ``width`` steps before (or at) a seed: computed
    over the steps the capture holds, never by listing every step value in the window (a
    record's step of 2**62 once made that list grow without end)."""
    at = np.searchsorted(seeds, steps)  # the first seed at or after each step
    inside = at < len(seeds)
    gap = seeds[np.minimum(at, max(len(seeds) - 1, 0))] - steps if len(seeds) else steps * 0
    return inside & (gap <= width)
