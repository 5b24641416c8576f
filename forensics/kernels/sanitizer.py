"""``forensics kernels``: replay a capture's recorded kernel launches and report what they did.

Each launch goes to a worker process (:mod:`forensics.kernels.replay_worker`) that runs the
installed vLLM's kernel in Triton's interpreter with every load and store observed. Findings:

- ``kernel_out_of_bounds``: an access outside the storage of the tensor it derives from;
- ``kernel_contract``: a recorded index outside its contract (:mod:`forensics.kernels.contracts`);
- ``offset_overflow``: int32 arithmetic that wrapped;
- ``live_differs``: the replay on the recorded inputs wrote other values than the live launch:
  evidence the kernel read inputs that changed under it (a race).

A launch that cannot be replayed is listed with its reason, never dropped. Only kernels the
installed vLLM's worker packages define are run (:mod:`forensics.kernels.coverage`): a capture
names a kernel, it never chooses code.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forensics.budget import (
    DEFAULT_OVERALL_DEADLINE,
    Clock,
    child_deadline,
    overall_clock,
    overall_deadline,
    running_clock,
    timed_out,
)
from forensics.cpu_env import triton_child_env
from forensics.escaping import terminal
from forensics.kernels import contracts
from forensics.kernels.coverage import installed_kernels
from forensics.kernels.format import KIND, Launch, launches_of, summaries_of
from forensics.variants.triton_kernels import Lines, end_process, json_object

RACE = ("evidence the kernel read inputs that changed under it (a race): the replay on the "
        "recorded inputs wrote other values than the live launch")
DISABLED = ("not judged: vLLM disabled Triton here ({why}); fix: run with a Triton that has a "
            "backend, or register the installed backend as 'cpu' before vLLM is imported "
            "(the worker does: it failed)")


#: the status of a launch the overall deadline left unreplayed (not judged)
NOT_RUN = "not_run"


@dataclass
class LaunchResult:
    """One launch: ``status`` (``replayed``, ``not_replayable``, ``not_run``: the overall
    deadline passed before it), why, and its findings."""

    launch: Launch
    status: str
    reason: str = ""
    findings: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class KernelReport:
    """A capture's launches, their results and the kernels' coverage."""

    capture: str
    results: list[LaunchResult]
    coverage: list[dict[str, Any]]
    note: str = ""

    @property
    def findings(self) -> list[dict[str, Any]]:
        """Every finding, in launch order."""
        return [f for r in self.results for f in r.findings]


#: the seconds the worker may take to start (import vLLM), unless the child deadline is longer
START_TIMEOUT = 600.0


class Worker:
    """The replay worker process (started on first use). Each answer has a deadline
    (:func:`forensics.budget.child_deadline`): a worker that gives none in time is killed and
    that launch is not replayable (``timed out after N s``); the next launch starts a new one.
    It starts with ``-P``: the working directory (a shared folder, a capture) is not on its
    import path, so no ``vllm/``, ``numpy.py`` or ``forensics/`` planted there is imported."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[str] | None = None
        self.lines: Lines | None = None
        self.note = ""
        self.failed = ""

    def command(self) -> list[str]:
        """The worker's command line (``-P``: see the class)."""
        return [sys.executable, "-P", "-m", "forensics.kernels.replay_worker"]

    def start(self, most: float = math.inf) -> bool:
        """Start the worker; False (``failed`` says why, in one line) when vLLM's kernels cannot
        run or it gave no ``ready`` within :data:`START_TIMEOUT` (or the child deadline);
        False, ``failed`` left empty, when ``most`` seconds (what is left of the overall
        deadline) ran out first: that says nothing of the worker."""
        self.process = subprocess.Popen(
            self.command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, env=triton_child_env())
        self.lines = Lines(self.process.stdout)
        seconds = min(max(START_TIMEOUT, child_deadline()), most)
        line = self.lines.next(seconds)
        answer = _json(line or "")
        if line is None and seconds < max(START_TIMEOUT, child_deadline()):
            self.stop()  # the overall deadline cut its start: not the worker's failure
            return False
        if not answer.get("ready"):
            self.failed = f"the replay worker did not start: {timed_out(seconds)}" \
                if line is None else DISABLED.format(
                    why=str(answer.get("message") or "the worker exited"))
            self.stop()
            return False
        self.note = str(answer.get("note", ""))
        return True

    def ask(self, event: dict[str, Any], most: float = math.inf) -> dict[str, Any]:
        """The worker's answer for one launch event within the child deadline and at most
        ``most`` seconds, its start included (a dead or stuck worker is ended; the next launch
        starts a new one; one that failed to start is not started again; the
        :data:`~forensics.budget.MOST_CHILD_TIMEOUTS`-th it outlives, and the
        :data:`~forensics.budget.MOST_CHILD_DEATHS`-th it dies on or answers with no answer,
        end the overall clock); ``{"status": "not_run"}`` when ``most`` ran out first (the
        worker ended): the launch was left by the overall deadline, not found unreplayable."""
        if self.failed:
            return {"status": "not_replayable", "reason": self.failed}
        begun = time.monotonic()
        if self.process is None or self.process.poll() is not None:
            if not self.start(most):
                return {"status": "not_replayable", "reason": self.failed} if self.failed \
                    else {"status": NOT_RUN}
        assert self.process is not None and self.process.stdin is not None
        assert self.lines is not None
        try:
            self.process.stdin.write(json.dumps(event) + "\n")
            self.process.stdin.flush()
        except OSError:
            pass  # it died: the read below says so
        seconds = min(child_deadline(), max(most - (time.monotonic() - begun), 0.0))
        line = self.lines.next(seconds)
        answer = _json(line or "")
        if line is None and seconds < child_deadline():  # the overall deadline cut the wait
            self.stop()
            return {"status": NOT_RUN}
        if not _is_answer(answer):
            self.stop()
            clock = running_clock()
            if line is None and clock is not None:
                clock.timed_out()  # the last few end the clock: no more launches run
            elif line is not None and clock is not None:
                clock.died()  # so do the last few deaths and lines that are no answer
            why = timed_out(seconds) if line is None else NOT_AN_ANSWER if line else \
                "the replay crashed the interpreter's process"
            return {"status": "not_replayable", "reason": why}
        return answer

    def stop(self) -> None:
        """Kill the worker and reap it (its stdout closes on its reader's thread)."""
        if self.process is not None:
            end_process(self.process)
        self.process, self.lines = None, None

    def close(self) -> None:
        """End the worker (its stdin closed, it exits; killed when it does not in 30 s)."""
        if self.process is not None and self.process.stdin is not None:
            try:
                self.process.stdin.close()
                self.process.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.stop()


def _json(line: str) -> dict[str, Any]:
    """The JSON object of one worker line, or {} (nothing, not JSON, too deep, no object)."""
    return json_object(line) or {}


#: the reason of a launch whose worker's line is no answer (cut off, or not of its shape)
NOT_AN_ANSWER = ("the replay worker answered a line that is not an answer (cut off, or not a "
                 "JSON object of a status, a reason and lists of findings): not explained by "
                 "the launch's values")
#: the keys of the more programs' entry of an answer's access
_MORE_KEYS = ("programs", "count", "listed")


def _is_answer(answer: dict[str, Any]) -> bool:
    """Whether ``answer`` is of an answer's shape: its status, a reason, lists of objects."""
    if answer.get("status") not in ("replayed", "not_replayable") or not isinstance(
            answer.get("reason", ""), str):
        return False
    lists = [answer.get(key, []) for key in ("accesses", "overflows", "differs", "more")]
    if not all(isinstance(found, list) and all(isinstance(f, dict) for f in found)
               for found in lists):
        return False
    return all(key in more for more in lists[3] for key in _MORE_KEYS)


def _base(launch: Launch, kind: str) -> dict[str, Any]:
    return {"kind": kind, "kernel": launch.name, "module": launch.module,
            "step": launch.step, "rank": launch.rank, "launch": launch.ordinal}


def _findings(launch: Launch, answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The findings of one replayed launch's answer; each says when the installed kernel that
    replayed it has another source than the engine's (``source_differs``: the record's
    ``source_sha256`` is another's); an access or a wrap of a replay in which
    a tensor's contents were not recorded (zeros in their place: its values may have chosen
    the address, the mask or the operand) names those tensors (``zeros_for``)."""
    out = _made(launch, answer)
    for finding in out if answer.get("source_differs") is True else ():
        finding["source_differs"] = True
    blind = [n for n, a in launch.tensors.items() if a.contents == "none"]
    for finding in out if blind else ():
        if finding["kind"] in ("kernel_out_of_bounds", "offset_overflow"):
            finding["zeros_for"] = blind
    return out


def _made(launch: Launch, answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The findings of one replayed launch's answer, as the worker found them."""
    out = []
    more = {_key(m): m for m in answer.get("more", [])}
    for access in answer.get("accesses", []):
        name = access.get("argument")
        arg = launch.tensors.get(name) if isinstance(name, str) else None
        left = more.pop(_key(access), None)  # on the first listed program's finding
        out.append({**_base(launch, "kernel_out_of_bounds"), **access,
                    "storage_elements": arg.elements if arg else None,
                    **({} if left is None else {"more_programs": left["programs"],
                                                "more_lanes": left["count"],
                                                "listed": left["listed"]})})
    for overflow in answer.get("overflows", []):
        out.append({**_base(launch, "offset_overflow"), **overflow})
    meaning = RACE if not answer.get("accesses") else (
        "the live launch also accessed memory outside its tensors (kernel_out_of_bounds "
        "above): what it read there is not recorded; else " + RACE)
    for differ in answer.get("differs", []):
        out.append({**_base(launch, "live_differs"), **differ, "meaning": meaning})
    return out


def _key(access: dict[str, Any]) -> str:
    """What makes the worker's accesses of one argument, operation and mask one."""
    return json.dumps([access.get(k) for k in ("argument", "unattributed", "op", "masked")])


def sanitize(capture: str | os.PathLike[str],
             deadline: float = DEFAULT_OVERALL_DEADLINE) -> KernelReport:
    """Replay every recorded launch of ``capture`` (see the module) within ``deadline``
    seconds in all: each replay waits at most what is left of it, and the launches left when
    it has passed are ``not_run`` (their contracts still checked from the record)."""
    from forensics.store.reader import load

    overall_deadline(deadline)
    cap = load(capture)
    raw = [e for e in cap.kernel_events if e.get("kind") == KIND]
    launches = launches_of(cap.kernel_events, str(capture), cap.kernel_places)
    summaries = summaries_of(cap.kernel_events, str(capture), cap.kernel_places)
    known = set(installed_kernels())
    worker, results = Worker(), []
    with overall_clock(deadline) as clock:
        try:
            for launch, event in zip(launches, raw, strict=True):
                left = clock.left()
                results.append(_one(launch, event, known, worker, cap.manifest, left)
                               if left > 0 else _not_run(launch, cap.manifest, clock))
        finally:
            worker.close()
    note = "; ".join(n for n in (worker.note or worker.failed, _dropped_note(cap.events)) if n)
    return KernelReport(str(capture), results,
                        coverage(results, summaries, known, recorders(cap.events)), note)


def _not_run(launch: Launch, manifest: dict[str, Any], clock: Clock) -> LaunchResult:
    """A launch the overall deadline left unreplayed: not judged, its contracts checked."""
    clock.cut += 1
    return LaunchResult(launch, NOT_RUN, f"not run: {clock.passed()}",
                        contracts.check(launch, manifest))


def _one(launch: Launch, event: dict[str, Any], known: set[tuple[str, str]], worker: Worker,
         manifest: dict[str, Any], most: float = math.inf) -> LaunchResult:
    """One launch's contracts and replay (``most``: the seconds it may take)."""
    found = contracts.check(launch, manifest)
    if (launch.module, launch.name) not in known:
        return LaunchResult(launch, "not_replayable", "not a Triton kernel of the installed "
                                                      "vLLM's worker packages", found)
    answer = worker.ask(event, most)
    if answer.get("status") == NOT_RUN and (clock := running_clock()) is not None:
        return _not_run(launch, manifest, clock)  # the overall deadline cut it: not judged
    if answer.get("status") != "replayed":
        return LaunchResult(launch, "not_replayable", str(answer.get("reason", "")), found)
    why = "; ".join(n for n in (str(answer.get("reason", "")), _on_zeros(launch)) if n)
    return LaunchResult(launch, "replayed", why, found + _findings(launch, answer))


def _on_zeros(launch: Launch) -> str:
    """What a replay on zeros in place of the launch's tensors recorded without contents
    judged of the live launch's accesses and int32 arithmetic: nothing ("" when it has none);
    its values may choose their addresses, masks and operands, so "0 finding(s)" of such a
    launch said its accesses in bounds where none of the live launch's was judged."""
    blind = [n for n, a in launch.tensors.items() if a.contents == "none"]
    if not blind:
        return ""
    return (f"the live launch's out-of-bounds accesses and int32 wraps not judged: the replay "
            f"ran on zeros in place of the contents of {', '.join(blind)} (not recorded), "
            "whose values may choose its addresses, masks and operands")


def coverage(results: list[LaunchResult], summaries: list[dict[str, Any]],
             known: set[tuple[str, str]],
             started: frozenset[tuple[str, int]] = frozenset()) -> list[dict[str, Any]]:
    """One row per kernel of the installed vLLM (and per recorded kernel it lacks):
    ``recorded``, ``graph_only``, ``not_recorded`` (launches the probe saw, none in the
    capture: with why), ``never_launched`` (neither recorded nor seen by a probe that counted
    its launches: :func:`_watched`), ``not_watched`` (neither, and no count covers it: with
    why), ``not_replayable`` (with why) or ``not_run`` (launches recorded, none refused, some
    left by the overall deadline). ``graph_only``: every
    launch the probe saw was during a CUDA graph capture (:func:`_launch_counts`).
    ``started``: the processes whose ``probe_start`` says they recorded kernels
    (:func:`recorders`)."""
    seen, graph, unsure = _launch_counts(summaries)
    watched, unwatched = _watched(summaries, {r.launch.rank for r in results}, started)
    by_kernel: dict[tuple[str, str], list[LaunchResult]] = {}
    for result in results:
        by_kernel.setdefault((result.launch.module, result.launch.name), []).append(result)
    rows = []
    for module, name in sorted(known | set(by_kernel)):
        mine, key = by_kernel.get((module, name), []), f"{module}.{name}"
        failed = [r for r in mine if r.status == "not_replayable"] or \
            [r for r in mine if r.status == NOT_RUN]
        blind = unwatched or _unchosen(watched, module, name)
        status = (failed[0].status if failed else "recorded") if mine else (
            "graph_only" if 0 < seen.get(key, 0) == graph.get(key, -1) else
            NOT_RECORDED if seen.get(key, 0) or key in unsure else
            NOT_WATCHED if blind else "never_launched")
        why = failed[0].reason if failed else (
            not_recorded_why(seen.get(key, 0), graph.get(key, 0), key in unsure)
            if status == NOT_RECORDED else blind if status == NOT_WATCHED else "")
        rows.append({"module": module, "kernel": name, "status": status,
                     "launches": len(mine), "seen": seen.get(key, 0), "why": why})
    return rows


#: the coverage of a kernel the probe saw launched whose launches the capture does not hold
NOT_RECORDED = "not_recorded"
#: the coverage of a kernel no probe's count covers (not selected, or no count written):
#: whether it was launched is unknown
NOT_WATCHED = "not_watched"
#: the most globs of a summary's ``selection`` read (a probe writes those of its
#: ``FORENSICS_KERNELS``: a handful)
MOST_GLOBS = 256
#: why a kernel no count covers is not said to be never launched, where no summary covers all
UNCOUNTED = ("whether it was launched is unknown: {what}; the probe counts the launches of the "
             "kernels it records (FORENSICS_KERNELS) in its kernel_summary, written when it "
             "dumps (an engine killed before it did writes none)")


def recorders(events: list[dict[str, Any]]) -> frozenset[tuple[str, int]]:
    """The processes (:func:`_who`) whose ``probe_start`` names the kernels their recorder
    counts (``kernels``, a list: :func:`forensics.probe.kernels.recording`); each owes a
    ``kernel_summary``. A probe older than that field names none."""
    return frozenset(_who(e) for e in events if e.get("kind") == "probe_start"
                     and type(e.get("pid")) is int and isinstance(e.get("kernels"), list))


def _who(event: dict[str, Any]) -> tuple[str, int]:
    """The process of an event with an integer ``pid``: its events file's (``process``, the
    probe's ``HOST-PID``) and its pid; a pid alone is another host's process too (two nodes'
    workers, each in a container of its own, often share one)."""
    return str(event.get("process")), event["pid"]


def _shown(who: tuple[str, int]) -> str:
    """A process of :func:`_who` in a sentence: its ``HOST-PID``, or its pid where its events
    file is another's (a capture written again)."""
    process, pid = who
    return terminal(process) if process.endswith(f"-{pid}") else str(pid)


def _watched(summaries: list[dict[str, Any]], ranks: set[int],
             started: frozenset[tuple[str, int]]) -> tuple[set[tuple[str, ...]], str]:
    """The kernel selections (``FORENSICS_KERNELS`` globs) of the capture's summaries, whose
    kernels their probes counted every launch of; or why the counts do not cover every process
    (no summary, a rank of recorded launches or a process whose ``probe_start`` names its
    recorder (``started``) without one, a summary whose selection is not a list of at most
    :data:`MOST_GLOBS` globs, more than that many selections): then no kernel is said never
    launched."""
    if not summaries:
        return set(), UNCOUNTED.format(what="the capture holds no kernel_summary")
    counted = {s.get("rank") for s in summaries if type(s.get("rank")) is int}
    missing = sorted(ranks - counted)
    if missing:
        return set(), UNCOUNTED.format(what=f"rank(s) {missing} recorded launches and wrote "
                                            "no kernel_summary")
    silent = sorted(started - {_who(s) for s in summaries if type(s.get("pid")) is int})
    if silent:
        shown = ", ".join(map(_shown, silent[:8])) + \
            (f" (the first 8 of {len(silent)})" if len(silent) > 8 else "")
        return set(), UNCOUNTED.format(what=f"process(es) {shown} started recording kernels "
                                            "(their probe_start) and wrote no kernel_summary")
    selections = set()
    for summary in summaries:
        globs = summary.get("selection")
        if not isinstance(globs, list) or len(globs) > MOST_GLOBS or not all(
                isinstance(g, str) and len(g) <= 300 for g in globs):
            return set(), UNCOUNTED.format(what="a kernel_summary does not say which kernels "
                                                "its probe recorded (its 'selection')")
        selections.add(tuple(globs))
        if len(selections) > MOST_GLOBS:
            return set(), UNCOUNTED.format(what=f"its kernel_summary events name more than "
                                                f"{MOST_GLOBS} selections")
    return selections, ""


def _unchosen(selections: set[tuple[str, ...]], module: str, name: str) -> str:
    """Why a kernel one of ``selections`` does not choose is not said never launched, or
    ``""``."""
    from forensics.probe.kernel_selection import chosen

    for globs in sorted(selections):
        if not chosen(globs, module, name):
            picked = terminal(",".join(globs))
            return (f"not among the kernels the probe recorded (FORENSICS_KERNELS={picked}): "
                    "it counts no launch of the others, so whether it was launched is unknown")
    return ""


def _launch_counts(summaries: list[dict[str, Any]]
                   ) -> tuple[dict[str, int], dict[str, int], set[str]]:
    """Launches seen per kernel, those seen during a CUDA graph capture (``graph_launches``),
    and the kernels an older probe listed in ``graph_only`` without counting those apart (seen
    in a capture at least once; whether also outside one is unknown). A process's summaries
    each hold its counts since it started (one per dump): each process counts once, by its
    largest count of each kernel; processes' counts are added."""
    per_process: dict[object, tuple[dict[str, int], dict[str, int]]] = {}
    unsure: set[str] = set()
    for at, summary in enumerate(summaries):
        mine = per_process.setdefault(_process_of(summary, at), ({}, {}))
        for counts, name in zip(mine, ("kernels_seen", "graph_launches"), strict=True):
            for key, count in summary.get(name, {}).items():
                counts[key] = max(counts.get(key, 0), count)
        if "graph_launches" not in summary:
            unsure |= set(summary.get("graph_only", []))
    seen: dict[str, int] = {}
    graph: dict[str, int] = {}
    for counts_seen, counts_graph in per_process.values():
        for total, counts in ((seen, counts_seen), (graph, counts_graph)):
            for key, count in counts.items():
                total[key] = total.get(key, 0) + count
    for key in unsure:
        graph.pop(key, None)  # not all of its launches were counted apart
    return seen, graph, unsure


def _process_of(summary: dict[str, Any], at: int) -> object:
    """The process a ``kernel_summary`` came from: its events file's (:func:`_who`) and its
    ``rank``; a summary without an integer ``pid`` (imported, or forged) is a process of its
    own (``at``, its position)."""
    pid, rank = summary.get("pid"), summary.get("rank")
    if type(pid) is not int:
        return at
    return _who(summary), rank if type(rank) is int else None


def not_recorded_why(seen: int, graph: int = 0, unsure: bool = False) -> str:
    """Why a kernel seen ``seen`` times (``graph`` of them during a CUDA graph capture, never
    recorded) has no launch in the capture (it was launched: it is not "never launched");
    ``unsure``: an older probe saw it during a capture without counting those launches."""
    if unsure:
        return (f"launched {seen} time(s) by the probe's count (kernel_summary), some while a "
                "CUDA graph was being captured (never recorded), by a probe that did not count "
                "those apart: whether it was also launched outside a graph is unknown; none "
                "recorded")
    during = (f", {graph} of them while a CUDA graph was being captured (never recorded)"
              if graph else "")
    return (f"launched {seen} time(s) by the probe's count (kernel_summary){during}, none "
            "recorded: in steps older than those kept (FORENSICS_KERNELS_KEEP) or not recorded "
            "(the summary's recorder_errors)")


def to_json(report: KernelReport) -> dict[str, Any]:
    """The report as one JSON object."""
    return {"capture": report.capture, "note": report.note,
            "launches": [{"kernel": r.launch.name, "module": r.launch.module,
                          "step": r.launch.step, "rank": r.launch.rank,
                          "launch": r.launch.ordinal, "status": r.status, "reason": r.reason,
                          "findings": len(r.findings)} for r in report.results],
            "findings": report.findings, "coverage": report.coverage}


#: what makes two programs' out-of-bounds findings of one launch one line of text
FOLD_KEYS = ("kernel", "module", "step", "rank", "launch", "argument", "unattributed", "op",
             "masked")


def fold(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``findings`` with each launch's ``kernel_out_of_bounds`` of one argument, operation and
    mask (:data:`FOLD_KEYS`) folded across its programs into the first program's finding (its
    elements named exactly), which gains ``programs`` (their ids, in order) and ``lanes`` (of
    them all), in the place of the first: an access out of bounds in every program of a grid
    was one line per program."""
    out: list[dict[str, Any]] = []
    folded: dict[tuple[Any, ...], dict[str, Any]] = {}
    for finding in findings:
        if finding["kind"] != "kernel_out_of_bounds":
            out.append(finding)
            continue
        key = tuple(json.dumps(finding.get(k), default=str) for k in FOLD_KEYS)
        first = folded.get(key)
        if first is None:
            folded[key] = first = {**finding, "programs": [], "lanes": 0}
            out.append(first)
        first["programs"].append(tuple(finding["program_id"]))
        first["lanes"] += finding["count"]
    return out


def _programs(finding: dict[str, Any]) -> str:
    """``by program P, N lane(s)``, or the programs a folded finding stands for."""
    programs = finding.get("programs") or [tuple(finding["program_id"])]
    lanes = finding.get("lanes", finding["count"])
    more = "" if "more_programs" not in finding else (
        f", and {finding['more_programs']} more program(s), {finding['more_lanes']} lane(s), "
        f"not listed (the replay lists the first {finding['listed']})")
    if len(programs) == 1:
        return f"by program {programs[0]}, {lanes} lane(s){more}"
    low = tuple(map(min, zip(*programs, strict=True)))
    high = tuple(map(max, zip(*programs, strict=True)))
    if len(set(programs)) == math.prod(b - a + 1 for a, b in zip(low, high, strict=True)):
        return f"by the {len(programs)} programs {low} to {high}, {lanes} lane(s) in all{more}"
    return (f"by {len(programs)} programs from {low} to {high}, not every one between, "
            f"{lanes} lane(s) in all{more}")


def _whose(finding: dict[str, Any], first: str) -> str:
    """The tensor an out-of-bounds access is attributed to and its elements, or why none."""
    if finding.get("unattributed") == "outside":
        return ("attributed to no tensor: its address lies outside every tensor's storage and "
                "the gaps about it (a wild pointer, or an address of the live process the "
                "record does not hold)")
    if finding.get("unattributed") == "null":
        empty = finding.get("empty_tensors") or []
        which = f"{len(empty)} empty tensors' ({', '.join(empty)}) pointers are null" \
            if empty else "no empty tensor's pointer is null"
        return (f"through a null pointer at byte(s) {finding['elements']}{first}, attributed "
                f"to no tensor ({which})")
    return (f"of {finding['argument']} element(s) {finding['elements']}{first} (its storage "
            f"holds {finding['storage_elements']} elements)")


def _zeros_for(finding: dict[str, Any], what: str) -> str:
    """What a finding of a replay on zeros in place of unrecorded contents can say."""
    blind = finding.get("zeros_for")
    if not blind:
        return ""
    return (f", in a replay on zeros in place of the contents of {', '.join(map(terminal, blind))}"
            f" (not recorded): whether the live launch made this {what} is unknown")


def _source(finding: dict[str, Any], what: str) -> str:
    """What a finding of a replay by an installed kernel whose source differs from the engine's
    can say."""
    if finding.get("source_differs") is not True:
        return ""
    tail = "this difference may be that source's" if what == "difference" else \
        f"whether the engine's kernel made this {what} is unknown"
    return (f", by the installed kernel, whose source differs from the engine's (the record's "
            f"source_sha256): {tail}")


def _of_count(finding: dict[str, Any]) -> str:
    """`` (the first N of M)`` when a contract finding lists fewer elements than it counts
    (:data:`~forensics.kernels.contracts.MOST`), else ``""``: 36 slots out of range read as the
    16 it listed."""
    count, listed = finding.get("count"), len(finding.get("elements") or [])
    if not isinstance(count, int) or count <= listed:
        return ""
    return f" (the first {listed} of {count})"


def describe(finding: dict[str, Any]) -> str:
    """One line of text for a finding, or for a folded one (:func:`fold`), its names (the
    kernel's, the argument's: a capture's) through :func:`~forensics.escaping.terminal` (the
    caller writes it through :func:`~forensics.escaping.inert`)."""
    finding = {key: terminal(value) if isinstance(value, str) else value
               for key, value in finding.items()}
    at = (f"{finding['kernel']} (step {finding['step']}, rank {finding['rank']}, launch "
          f"{finding['launch']})")
    kind = finding["kind"]
    if kind == "kernel_out_of_bounds":
        first = "" if len(finding.get("programs", [])) < 2 else \
            f" (program {tuple(finding['program_id'])}'s)"
        return (f"kernel_out_of_bounds: {at}: {'masked' if finding['masked'] else 'unmasked'} "
                f"{finding['op']} {_whose(finding, first)} {_programs(finding)}"
                f"{_zeros_for(finding, 'access')}{_source(finding, 'access')}")
    if kind == "kernel_contract":
        return (f"kernel_contract: {at}: {finding['argument']} element(s) "
                f"{finding['elements']}{_of_count(finding)} hold {finding['contract']} "
                f"{finding['values']}, outside [{finding['lower']}, {finding['upper']}) "
                f"({finding['bound']})")
    if kind == "offset_overflow":
        return (f"offset_overflow: {at}: an int32 {finding['operation']} by program "
                f"{tuple(finding['program_id'])} is {finding['exact']}, wrapped to "
                f"{finding['wrapped']}{_zeros_for(finding, 'wrap')}{_source(finding, 'wrap')}")
    shown = ", ".join(f"[{i}] live {a} replay {b}" for i, a, b in finding["elements"])
    return (f"live_differs: {at}: {finding['argument']} ({finding['span']}) differs at "
            f"{finding['count']} element(s): {shown}; {finding['meaning']}"
            f"{_source(finding, 'difference')}")


def unreadable(path: Path) -> str:
    """The line for a capture without kernel records."""
    return (f"{path}: the capture holds no kernel_launch events; record with "
            f"FORENSICS_KERNELS=all")


def _dropped_note(events: list[dict[str, Any]]) -> str:
    """That the probe left launches out of its full events files, or lost them to its stalled
    writer (its ``probe_stop`` says how many events: ``events_dropped``, ``events_unwritten``),
    so the launches here may not be all the capture's; ``""`` when none was."""
    from forensics.store.events import dropped_by_probe

    dropped, lost = dropped_by_probe(events), dropped_by_probe(events, "events_unwritten")
    why = [f"left out {dropped} event(s) when its events file was full"] if dropped else []
    why += [f"lost {lost} event(s) its stalled writer could not take"] if lost else []
    if not why:
        return ""
    return (f"the probe {' and '.join(why)}: kernel launches among them were not recorded, "
            "so the launches here may not be all that ran")
