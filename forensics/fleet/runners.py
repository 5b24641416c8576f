"""Where a triage's tasks run: local processes (the default) or a Ray cluster.

Either way a task returns its row as Arrow IPC bytes (:func:`forensics.fleet.piece.replay_piece`)
and every task gives back one result: a task whose process died, or that Ray gave up on after
its retries, comes back as a row carrying that error, never silently lost. Either way a task
has a deadline (:func:`forensics.budget.child_deadline`): it ends in its own process at the
deadline (:func:`_with_deadline`), and one stuck past the backstop (:func:`backstop`) is killed
from outside; both come back as the row ``error: timed out after N s``.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from forensics.budget import child_deadline, timed_out
from forensics.errors import DeadlineError, MissingDependencyError
from forensics.fleet.piece import replay_piece, to_ipc
from forensics.fleet.tasks import Task

Done = Callable[[int], None]
#: Ray retries a task whose worker died this many times before it is reported lost
RAY_RETRIES = 2
#: attempts to start a local Ray cluster
RAY_STARTS = 3
#: seconds between two looks at the tasks (each look is their heartbeat check)
HEARTBEAT = 1.0
#: seconds past twice the deadline before a task stuck outside Python is killed
BACKSTOP_GRACE = 60.0


def lost(task: Task, why: str) -> bytes:
    """The row of a task that returned nothing: its capture, range and ``why``."""
    return to_ipc([{"capture": os.path.abspath(task.path), "name": os.path.basename(task.path),
                    "start": task.start, "stop": task.stop, "error": why}])


def backstop() -> float:
    """Seconds after which a task that did not end at its deadline (stuck outside Python, where
    no signal reaches it) is killed from outside: twice the deadline plus :data:`BACKSTOP_GRACE`."""
    return 2 * child_deadline() + BACKSTOP_GRACE


def run_local(tasks: Sequence[Task], workers: int | None = None, done: Done | None = None,
              piece: Callable[..., bytes] = replay_piece) -> list[bytes]:
    """Run ``tasks`` on ``workers`` local processes (default: the CPUs; 1: in this process);
    return their results in task order. ``done(n)`` is called as tasks finish. A task running
    past its deadline (:func:`forensics.budget.child_deadline`) ends in its process
    (:func:`_with_deadline`) and comes back as its row with ``error: timed out after N s``;
    one that does not end even then (stuck outside Python) is killed with its pool at twice
    the deadline plus a minute, and the unfinished others run in a new pool."""
    workers = min(workers or os.cpu_count() or 1, max(len(tasks), 1))
    if workers == 1:
        out = []
        for task in tasks:
            out.append(piece(task.path, task.start, task.stop))
            if done:
                done(1)
        return out
    results: list[bytes | None] = [None] * len(tasks)
    pending = list(range(len(tasks)))
    while pending:
        pending = _run_pool(tasks, pending, workers, piece, results, done)
    return [r if r is not None else lost(tasks[i], "task returned nothing")
            for i, r in enumerate(results)]


def _run_pool(tasks: Sequence[Task], pending: list[int], workers: int,
              piece: Callable[..., bytes], results: list[bytes | None], done: Done | None
              ) -> list[int]:
    """Run the ``pending`` tasks in one process pool, filling ``results``; the tasks left
    unfinished when a task outlived its deadline (its pool is then killed), else none."""
    import concurrent.futures as cf
    import multiprocessing

    deadline, limit = child_deadline(), backstop()  # the limit from when a process has it
    context = multiprocessing.get_context("spawn")  # no fork of a threaded process
    pool = cf.ProcessPoolExecutor(min(workers, len(pending)), mp_context=context)
    futures = {pool.submit(_with_deadline, piece, deadline, tasks[i].path, tasks[i].start,
                           tasks[i].stop): i for i in pending}
    started: dict[Any, float] = {}
    waiting = set(futures)
    try:
        while waiting:
            finished, waiting = cf.wait(waiting, timeout=HEARTBEAT,
                                        return_when=cf.FIRST_COMPLETED)
            for future in finished:
                results[futures[future]] = _result(future, tasks[futures[future]])
                if done:
                    done(1)
            now = time.monotonic()
            for future in waiting:
                if future.running():
                    started.setdefault(future, now)
            stuck = {f for f in waiting if now - started.get(f, now) > limit}
            if stuck:
                for future in stuck:
                    results[futures[future]] = lost(tasks[futures[future]], timed_out(limit))
                    if done:
                        done(1)
                _kill(pool)
                return sorted(futures[f] for f in waiting - stuck)
        return []
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _with_deadline(piece: Callable[..., bytes], seconds: float, path: str,
                   start: int | None, stop: int | None) -> bytes:
    """``piece(path, start, stop)`` in a pool's process or a Ray worker, ended once it runs
    ``seconds`` (SIGALRM: both run a task on their process's main thread); a task so ended
    gives its row ``error: timed out after N s``."""
    import signal

    def expire(signum: int, frame: Any) -> None:
        raise DeadlineError(timed_out(seconds))

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return piece(path, start, stop)
    except DeadlineError as exc:
        return lost(Task(path, start, stop), str(exc))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _kill(pool: Any) -> None:
    """Kill the worker processes of a ``ProcessPoolExecutor`` (one holds a stuck task)."""
    for process in list(getattr(pool, "_processes", {}).values()):
        process.kill()
        process.join()


def _result(future: Any, task: Task) -> bytes:
    """A finished future's bytes, or the lost-task row of its exception."""
    try:
        return bytes(future.result())
    except Exception as exc:  # noqa: BLE001  (a dead worker is a row, not the end of the run)
        return lost(task, f"task failed: {type(exc).__name__}: {exc}")


def run_ray(tasks: Sequence[Task], address: str | None = None, done: Done | None = None,
            piece: Callable[..., bytes] = replay_piece, retries: int = RAY_RETRIES
            ) -> list[bytes]:
    """Run ``tasks`` as Ray tasks (one each) on the cluster at ``address`` (None or "local":
    start one on this machine); return their results in task order. Each task has the local
    path's deadline (:func:`_with_deadline` in its worker, :func:`_gather` from outside).

    Raises MissingDependencyError when Ray is not installed.
    """
    ray = require_ray()
    started = not ray.is_initialized()
    if started and address in (None, "local"):
        start_local_ray()
    elif started:
        ray.init(address=address, log_to_driver=False)
    try:
        remote = ray.remote(max_retries=retries, retry_exceptions=False)(
            _deadlined(piece, child_deadline()))
        return _gather(ray, lambda t: remote.remote(t.path, t.start, t.stop), tasks, done)
    finally:
        if started:
            ray.shutdown()


def _deadlined(piece: Callable[..., bytes], seconds: float) -> Callable[..., bytes]:
    """The body of a Ray task: ``piece`` under :func:`_with_deadline` (a closure, so Ray ships
    ``piece`` with it as it shipped ``piece`` itself)."""
    def task(path: str, start: int | None, stop: int | None) -> bytes:
        return _with_deadline(piece, seconds, path, start, stop)
    return task


def _gather(ray: Any, submit: Callable[[Task], Any], tasks: Sequence[Task],
            done: Done | None) -> list[bytes]:
    """Each task's bytes as it finishes, submitting no more tasks than the cluster has CPUs
    (so a task in flight is running, and its time from submission is its own); a task Ray
    reports failed becomes its error row, and one in flight past :func:`backstop` is
    cancelled (its worker killed) and becomes its row ``timed out after N s``."""
    limit, slots = backstop(), max(1, int(ray.cluster_resources().get("CPU", 1)))
    results: list[bytes] = [b""] * len(tasks)
    queue = deque(range(len(tasks)))
    flying: dict[Any, tuple[int, float]] = {}  # a task's ref: its index, when it was sent
    while queue or flying:
        while queue and len(flying) < slots:
            i = queue.popleft()
            flying[submit(tasks[i])] = (i, time.monotonic())
        ready, _ = ray.wait(list(flying), num_returns=1, timeout=HEARTBEAT)
        now = time.monotonic()
        stuck = [ref for ref, (_, sent) in flying.items()
                 if ref not in ready and now - sent > limit]
        for ref in ready + stuck:
            i, _ = flying.pop(ref)
            if ref in stuck:
                ray.cancel(ref, force=True)
                results[i] = lost(tasks[i], timed_out(limit))
            else:
                results[i] = _ray_result(ray, ref, tasks[i])
            if done:
                done(1)
    return results


def _ray_result(ray: Any, ref: Any, task: Task) -> bytes:
    """A finished Ray task's bytes, or the lost-task row of its failure."""
    try:
        return bytes(ray.get(ref))
    except Exception as exc:  # noqa: BLE001  (a lost task is reported, not dropped)
        why = " ".join(str(exc).split())[:300]
        return lost(task, f"task lost on Ray: {type(exc).__name__}: {why}")


def start_local_ray(num_cpus: int | None = None, attempts: int = RAY_STARTS) -> None:
    """Start a Ray cluster of this process on the loopback address (``num_cpus``: default,
    the machine's), trying ``attempts`` times: on a loaded machine Ray's agents can miss their
    fixed 15 s start-up deadline (ray-project/ray#65983). Ray's usage statistics (a report sent
    to Ray's servers) stay off unless ``RAY_USAGE_STATS_ENABLED`` says otherwise: a triage sends
    nothing out. Raises the last start's error."""
    ray = require_ray()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    for attempt in range(attempts):
        try:
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False,
                     _node_ip_address="127.0.0.1")
            return
        except Exception:
            ray.shutdown()
            if attempt == attempts - 1:
                raise


def require_ray() -> Any:
    """The ``ray`` module; MissingDependencyError naming the extra when it is absent."""
    try:
        import ray
    except ImportError:
        raise MissingDependencyError("forensics triage --ray needs Ray: pip install "
                                     "'vllm-forensics[fleet]'") from None
    return ray
