"""The real-code variant of Model Runner V2's sites: vLLM's own Triton kernels, on CPU.

V2's index math is in Triton kernels (``vllm.v1.worker.gpu.input_batch``). They run here in
Triton's interpreter, which must be switched on (``TRITON_INTERPRET=1``) before vLLM's kernels
are decorated, and vLLM's Triton check must accept a machine without a GPU driver: neither can
be arranged in a process that may have imported vLLM already, so the kernels run in a worker
process (:mod:`forensics.variants.triton_worker`), started on first use and kept. Records go
to it as ``.npz`` files (no pickle) and outputs come back the same way.

The worker observes every load and store of the kernel: one outside the buffers handed to the
launch is reported as ``index_error`` (observed, not modelled) and not performed, so the replay
is never corrupted. A worker that dies anyway is restarted and the record's outcome is
``index_error`` with what it printed.

Each record has a deadline (:func:`forensics.budget.child_deadline`, ``FORENSICS_CHILD_TIMEOUT``
seconds): the worker answers a batch one line per record, and each answer is its heartbeat. A
worker that gives no answer within the deadline is killed; the record it held gets ``error:
timed out after N s`` and the records after it run in a new worker. A record whose buffers
would pass the allocation budget (:mod:`forensics.budget`) raises AllocationBudgetError.
Under an overall deadline (:func:`forensics.budget.overall_clock`: a replay's) each wait, the
worker's start included, takes at most what is left of it: the record it cuts, and every one
after it, gets ``error: not judged: the overall deadline of N s passed`` (:func:`not_judged`),
the worker killed, none started again. The same comes of the
:data:`~forensics.budget.MOST_CHILD_TIMEOUTS`-th record the worker outlives its deadline on
under that clock: the records left are ``not judged: 3 answers outlived the child deadline of
N s (FORENSICS_CHILD_TIMEOUT), so no more were run``; and of the
:data:`~forensics.budget.MOST_CHILD_DEATHS`-th record it dies on or answers with a line that is
no answer (``not judged: the child died, or answered a line that is not an answer, 3 times``).
A direct call (:func:`run_kernels`, a notebook's) runs under a clock of its own, whose
timeouts and deaths go on from the worker's earlier direct calls until it is closed or reset
(:data:`KEPT`, which their ``not judged`` reason ends with).

The ``vllm+PATH.diff`` variant gets a worker of its own (:class:`KernelPatch`): it imports the
diff's patched copies of vLLM's files in place of the installed ones, so the kernels it runs are
the diff's. A record whose kernels live in no file the diff changes raises PatchApplyError (the
diff would replay as the installed code).
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import tempfile
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from forensics.budget import (
    DEFAULT_REPLAY_DEADLINE,
    Clock,
    child_deadline,
    overall_clock,
    running_clock,
    timed_out,
    waiting,
)
from forensics.cpu_env import triton_child_env
from forensics.errors import AllocationBudgetError, MissingDependencyError, PatchApplyError
from forensics.outcome import ERROR, INDEX_ERROR, OK, Outcome
from forensics.process_end import by_memory_signal, how_ended, signal_name
from forensics.records import Record

_START_TIMEOUT = 600.0
#: seconds a worker whose output ended is given to end, for its exit status
_DEATH_WAIT = 10.0


@dataclass(frozen=True)
class KernelPatch:
    """A diff's patched vLLM files, for a worker that runs the diff's kernels."""

    #: the diff file, as the variant names it
    name: str
    #: vllm path (``vllm/v1/worker/gpu/input_batch.py``) -> patched text
    sources: tuple[tuple[str, str], ...]
    #: the dotted module name of each patched path
    modules: tuple[str, ...]

    def check_touches(self, site: str, used: list[str]) -> None:
        """Raise unless the diff changes one of the modules ``used`` (the ones the record ran).

        Raises:
            PatchApplyError: naming the diff, the kernel's file and the fix.
        """
        used = [m for m in used if m]
        if not used or set(used) & set(self.modules):
            return
        files = ", ".join(m.replace(".", "/") + ".py" for m in used)
        raise PatchApplyError(
            f"{self.name}: site {site!r} runs Model Runner V2's kernels in {files}, which the "
            f"diff does not change (it changes {', '.join(p for p, _ in self.sources)}); put the "
            f"kernel's fix in that file, or replay this site with 'vllm'")


class Lines:
    """A child's stdout read line by line on a thread, so that each read has a deadline."""

    def __init__(self, stream: IO[str] | None) -> None:
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._ended = False
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[str] | None) -> None:
        if stream is not None:
            with stream:
                for line in stream:
                    self._queue.put(line.strip())
        self._queue.put(None)

    def next(self, seconds: float) -> str | None:
        """The next line (``""`` once the stream ended), or None when none came in time."""
        if self._ended:
            return ""
        waiting(seconds)  # a report's cell is not ended before this wait's deadline
        try:
            line = self._queue.get(timeout=seconds)
        except queue.Empty:
            return None
        self._ended = line is None
        return line or ""


class KernelWorker:
    """One worker process and its scratch directory (see the module); ``patch``: the diff
    whose patched files it imports."""

    def __init__(self, patch: KernelPatch | None = None) -> None:
        self._process: subprocess.Popen[str] | None = None
        self._lines: Lines | None = None
        self._dir = tempfile.TemporaryDirectory(prefix="forensics-triton-")
        self._count = 0
        self.patch = patch
        self._stuck = ""  # why its start outlived its deadline (then it is not started again)
        self._counts = (0, 0, "")  # the timeouts, deaths and why of its direct calls' clocks

    def _command(self) -> list[str]:
        """The worker's command line; a patch's files written under the scratch directory."""
        command = [sys.executable, "-P", "-m", "forensics.variants.triton_worker"]
        if self.patch is None:
            return command
        root = Path(self._dir.name) / "patched"
        for path, text in self.patch.sources:
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text, encoding="utf-8")
        return [*command, "--patched", str(root)]

    def _start(self, clock: Clock | None) -> subprocess.Popen[str] | None:
        """The started worker; None when the overall deadline of ``clock`` passed first, or its
        start's own (a worker stuck as it starts: ``_stuck`` says so; it is not started again).
        """
        env = triton_child_env()
        process = subprocess.Popen(self._command(),
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, text=True, env=env)
        self._lines = Lines(process.stdout)
        most = max(_START_TIMEOUT, child_deadline())
        wait = most if clock is None else clock.wait(most)
        hello = self._lines.next(wait)
        if hello is None:  # the overall deadline passed first, or its start's own
            end_process(process)
            if wait >= most:  # every record it was to run is an error that says so
                self._stuck = f"the Triton interpreter's worker did not start: {timed_out(most)}"
            return None
        said = json_object(hello) if hello else {}
        if said is None or not said.get("ready"):
            end_process(process)
            why = ("the worker's first line is not JSON" if said is None
                   else said.get("message") if hello else "it exited")
            if self.patch is not None:
                raise PatchApplyError(
                    f"{self.patch.name}: vLLM's Triton kernels with the diff applied fail to "
                    f"import in Triton's interpreter ({why}); fix the diff")
            raise MissingDependencyError(
                f"vLLM's Triton kernels cannot run in Triton's interpreter here ({why}); the "
                f"'vllm' variant of Model Runner V2 sites needs vLLM and Triton installed")
        return process

    def run(self, record: Record) -> Outcome:
        """Run ``record`` through vLLM's kernel of its site; return its Outcome."""
        return self.run_many([record])[0]

    def run_many(self, records: list[Record]) -> list[Outcome]:
        """Run ``records`` through the worker; their Outcomes, in order. The record a worker
        dies on gets the crash's ``index_error``, the one it outlives its deadline on
        ``error: timed out after N s``; the records after it run in a new worker, until the
        clock they run under ends (:func:`~forensics.budget.running_clock`; a direct call's
        own, of :data:`~forensics.budget.DEFAULT_REPLAY_DEADLINE`): the records left are
        :func:`not_judged`.

        Raises:
            PatchApplyError: a patch's worker ran a record's kernels in no file the diff
                changes (see :meth:`KernelPatch.check_touches`), or fails to start.
            AllocationBudgetError: a record's buffers would pass the allocation budget.
        """
        if running_clock() is None:  # a direct call (a notebook's): a replay's clock of its own
            return self._direct(records)
        outcomes: list[Outcome] = []
        while len(outcomes) < len(records):
            outcomes += self._exchange(records[len(outcomes):])
        return outcomes

    def _direct(self, records: list[Record]) -> list[Outcome]:
        """:meth:`run_many` of a direct call, under a replay's clock of its own whose child
        timeouts and deaths go on from this worker's earlier direct calls (:meth:`reset`)."""
        with overall_clock(DEFAULT_REPLAY_DEADLINE) as clock:
            clock.timeouts, clock.deaths, clock.why = self._counts
            clock.kept = KEPT
            try:
                return self.run_many(records)
            finally:
                self._counts = (clock.timeouts, clock.deaths, clock.why)

    def reset(self) -> None:
        """Forget the child timeouts and deaths of its earlier direct calls: the next may
        start it again (:data:`KEPT`)."""
        self._counts = (0, 0, "")

    def _exchange(self, records: list[Record]) -> list[Outcome]:
        """Send ``records`` as one batch; the outcomes of those answered, and of the one the
        worker died on or outlived its deadline on (then the worker is ended); those of all
        ``records`` left when the overall deadline passes are :func:`not_judged`."""
        clock = running_clock()
        if clock is not None and clock.left() <= 0:
            return not_judged(records, clock)
        if self._process is None or self._process.poll() is not None:
            self._process = None if self._stuck else self._start(clock)
            if self._stuck:  # it gave no ready within its start's deadline: not started again
                return [Outcome(ERROR, self._stuck) for _ in records]
            if self._process is None:
                return not_judged(records, clock)
        requests = [self._request(record) for record in records]
        try:
            return self._answered(records, requests, clock)
        except BaseException:  # an interrupt, an alarm or a refusal between a batch and its
            self._stop()       # answers: they are never read as the next batch's
            _remove(requests)
            raise

    def _answered(self, records: list[Record], requests: list[dict[str, str]],
                  clock: Clock | None) -> list[Outcome]:
        """Send ``requests`` (of ``records``) and read their answers (see :meth:`_exchange`)."""
        assert self._process is not None and self._process.stdin is not None
        assert self._lines is not None
        try:
            self._process.stdin.write(json.dumps({"batch": requests}) + "\n")
            self._process.stdin.flush()
        except OSError:
            pass  # it died: the first read below says so
        deadline = child_deadline()
        outcomes: list[Outcome] = []
        answers: list[dict[str, Any]] = []
        for request in requests:
            wait = deadline if clock is None else clock.wait(deadline)
            line = self._lines.next(wait)
            if not line:
                died = None if line is None else _death(self._process)
                self._stop()
                _remove(requests)
                if died is None and wait < deadline:  # the overall deadline cut it
                    return outcomes + not_judged(records[len(outcomes):], clock)
                if clock is not None and died is None:  # the last few end the clock
                    clock.timed_out()
                elif clock is not None:  # so do the last few deaths
                    clock.died()
                outcomes.append(Outcome(ERROR, timed_out(deadline)) if died is None else died)
                return outcomes
            answered = _answer(line)
            if answered is None:  # cut off or no answer: as a death the values do not explain
                self._stop()
                _remove(requests)
                if clock is not None:
                    clock.died()
                outcomes.append(Outcome(ERROR, _NO_ANSWER))
                return outcomes
            answers.append(answered)
            if answers[-1]["status"] == BUDGET:  # the worker is ended by _exchange
                raise AllocationBudgetError(answers[-1]["message"])
            outcomes.append(_outcome(answers[-1], request))
        if self.patch is not None:
            for answer, record in zip(answers, records, strict=True):
                self.patch.check_touches(record.site, answer.get("modules", []))
        return outcomes

    def _request(self, record: Record) -> dict[str, str]:
        """The request of ``record``: its arrays written to a new ``.npz`` in the scratch
        directory, and its name for messages."""
        self._count += 1
        base = Path(self._dir.name) / f"r{self._count}"
        request = {"site": record.site, "inputs": f"{base}-in.npz",
                   "outputs": f"{base}-out.npz",
                   "where": f"record of site {record.site!r} at step {record.step}, "
                            f"rank {record.rank}"}
        np.savez(request["inputs"], **_arrays(record))
        return request

    def _stop(self) -> None:
        """Kill the worker (stuck, dead or abandoned mid-batch); the next use starts one."""
        if self._process is not None:
            end_process(self._process)
        self._process, self._lines = None, None

    def close(self) -> None:
        """End the worker and remove the scratch directory."""
        if self._process is not None and self._process.stdin is not None:
            self._process.stdin.close()
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._stop()
        self._process = None
        self._dir.cleanup()


def not_judged(records: list[Record], clock: Clock | None) -> list[Outcome]:
    """The ``error`` outcome of each of ``records`` the overall deadline of ``clock`` left
    unjudged (``not judged: the overall deadline of N s passed``), counted on it."""
    assert clock is not None
    clock.cut += len(records)
    return [Outcome(ERROR, f"not judged: {clock.passed()}") for _ in records]


#: the outcome's message of a record whose answer line is none (cut off, or not an answer)
_NO_ANSWER = ("the Triton interpreter's process answered a line that is not an answer (cut "
              "off, or not a JSON object with a status and a message): not explained by the "
              "values")


def json_object(line: str) -> dict[str, Any] | None:
    """The JSON object ``line`` holds, or None (not JSON, too deep, or not an object)."""
    try:
        said = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return said if isinstance(said, dict) else None


def _answer(line: str) -> dict[str, Any] | None:
    """The worker's answer ``line`` holds (a status it gives, a message, an ok's outputs), or
    None."""
    said = json_object(line)
    if said is None or said.get("status") not in (OK, INDEX_ERROR, ERROR, BUDGET):
        return None
    if not isinstance(said.get("message"), str):
        return None
    return said if said["status"] != OK or isinstance(said.get("outputs"), str) else None


def _outcome(answer: dict[str, Any], request: dict[str, str]) -> Outcome:
    """The Outcome of one answer (its files removed)."""
    produced: dict[str, Any] = {}
    unread = ""
    if answer["status"] == OK:
        try:
            produced = _outputs(answer["outputs"], request["outputs"])
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
            unread = f"{type(error).__name__}: {error}"
    for path in (request["inputs"], request["outputs"]):
        Path(path).unlink(missing_ok=True)
    if unread:
        return Outcome(ERROR, f"the Triton interpreter's process answered ok, but the outputs "
                       f"file it named could not be read ({unread[:300]}): not explained by "
                       "the values")
    return Outcome(answer["status"], answer["message"], produced)


def _outputs(named: str, asked: str) -> dict[str, Any]:
    """The arrays of the outputs file an ``ok`` answer ``named``, which must be the one its
    request ``asked`` for.

    Raises:
        OSError, ValueError, EOFError, zipfile.BadZipFile: the file is another, missing or not
            an ``.npz`` of plain arrays.
    """
    if named != asked:
        raise ValueError(f"it named {named[:200]!r}, not the file its request gave")
    with np.load(named, allow_pickle=False) as data:
        return {name: data[name] for name in data.files}


def _death(process: subprocess.Popen[str]) -> Outcome:
    """The outcome of the record the worker ``process`` died on (its output ended): an index
    error when a signal of a bad memory access (:data:`forensics.process_end.MEMORY_SIGNALS`)
    ended it, else an error saying how it ended, which the values do not explain (the OOM
    killer, another signal, an exit)."""
    try:
        code = process.wait(timeout=_DEATH_WAIT)
    except subprocess.TimeoutExpired:
        code = None
    if code is not None and by_memory_signal(code):
        return Outcome(INDEX_ERROR, "IndexError: the Triton kernel crashed the interpreter's "
                       f"process ({signal_name(-code)}: an illegal memory access)")
    how = "its output ended while it ran on" if code is None else f"it {how_ended(code)}"
    return Outcome(ERROR, f"the Triton interpreter's process died ({how}): not explained by "
                   "the values")


def end_process(process: subprocess.Popen[str]) -> None:
    """Kill ``process``, reap it and close its stdin (its stdout closes on its reader's
    thread, at the end of the stream)."""
    process.kill()
    process.wait()
    if process.stdin is not None:
        try:
            process.stdin.close()
        except OSError:
            pass  # a pipe with unsent bytes to a dead process


def _remove(requests: list[dict[str, str]]) -> None:
    """Remove the files of ``requests`` (an exchange cut short)."""
    for request in requests:
        for path in (request["inputs"], request["outputs"]):
            Path(path).unlink(missing_ok=True)


def _arrays(record: Record) -> dict[str, Any]:
    """The record's tensor and int fields as arrays (request ids are not needed)."""
    return {name: np.asarray(value) for name, value in record.fields.items()
            if not isinstance(value, (list, dict)) and not name.endswith("_after")}


#: the answer status of a record past the allocation budget (as the worker's ``BUDGET``)
BUDGET = "budget"

#: what the reason of the records a direct call leaves ``not judged`` adds: the limit is the
#: worker's, counted across its direct calls (a notebook's loop of single-record calls)
KEPT = (" (counted across this worker's direct calls until it is closed, close_worker(), or "
        "its count reset, worker().reset())")

#: the shared workers, by patch (None: the installed vLLM)
_WORKERS: dict[KernelPatch | None, KernelWorker] = {}


def worker(patch: KernelPatch | None = None) -> KernelWorker:
    """The shared worker of ``patch`` (None: the installed kernels), made on first use."""
    if patch not in _WORKERS:
        _WORKERS[patch] = KernelWorker(patch)
    return _WORKERS[patch]


def run_kernel(record: Record, patch: KernelPatch | None = None) -> Outcome:
    """The ``vllm`` (or, with ``patch``, ``vllm+PATH.diff``) variant of a Model Runner V2 site
    on one record (one shared worker per patch). Raises as :meth:`KernelWorker.run_many`."""
    return worker(patch).run(record)


def run_kernels(records: list[Record], patch: KernelPatch | None = None) -> list[Outcome]:
    """:func:`run_kernel` on many records in one exchange with the shared worker (outside a
    command's clock, under one of its own: see :meth:`KernelWorker.run_many`)."""
    return worker(patch).run_many(records)


def close_worker(patch: KernelPatch | None = None) -> None:
    """End the shared worker of ``patch`` if one runs (the next use starts another)."""
    running = _WORKERS.pop(patch, None)
    if running is not None:
        running.close()
