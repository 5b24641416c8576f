"""Where a triage's tasks run: local processes (the default) or a Ray cluster.

Either way a task returns its row as Arrow IPC bytes (:func:`forensics.fleet.piece.replay_piece`)
and every task gives back one result: a task whose process died, or that Ray gave up on after
its retries, comes back as a row carrying that error, never silently lost. No task runs in the
triage's own process, not even with one worker: a task that kills its process (a reader's
segfault on a hostile file, the OOM killer) ends only that process. Either way a task
has a deadline (:func:`forensics.budget.child_deadline`): it ends in its own process at the
deadline (:func:`_with_deadline`), and one stuck past the backstop (:func:`backstop`) is killed
from outside; both come back as the row ``error: timed out after N s``, ``N`` the deadline
(:func:`past_backstop` says which fired).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from forensics.budget import alarm_deadline, child_deadline, timed_out
from forensics.errors import (
    ConfigurationError,
    DeadlineError,
    MissingDependencyError,
    reason,
)
from forensics.fleet.paths import spawnable_folder
from forensics.fleet.piece import replay_piece, to_ipc
from forensics.fleet.tasks import Task
from forensics.modes import owner_read_write
from forensics.process_end import signal_name

Done = Callable[[int], None]
#: Ray retries a task whose worker died this many times before it is reported lost
RAY_RETRIES = 2
#: attempts to start a local Ray cluster
RAY_STARTS = 3
#: seconds between two looks at the tasks (each look is their heartbeat check)
HEARTBEAT = 1.0
#: seconds past twice the deadline before a task stuck outside Python is killed
BACKSTOP_GRACE = 60.0
#: seconds a Ray task may wait to start (a worker to run it) before it is reported not started
RAY_START_WAIT = 600.0
#: seconds a broken pool is given to end its processes before their exit codes are read
BREAK_WAIT = 5.0
#: the variable that keeps the working directory off a child Python's path (``python -P``)
SAFE_PATH_ENV = "PYTHONSAFEPATH"
#: local processes per CPU a triage may start at most (each replays a capture: more only
#: adds memory and switching)
WORKERS_PER_CPU = 4


def most_workers() -> int:
    """The most local processes a triage may start: ``WORKERS_PER_CPU`` x the CPUs."""
    return WORKERS_PER_CPU * (os.cpu_count() or 1)


def check_workers(workers: int | None, option: str = "workers") -> None:
    """Refuse a number of local processes that is not 1 to :func:`most_workers` (None: the
    default, one per CPU).

    Raises ConfigurationError naming ``option``, the value and the cap."""
    if workers is None:
        return
    cap = most_workers()
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= cap:
        raise ConfigurationError(f"{option} {workers!r}: give 1 to {cap} local processes (at "
                                 f"most {WORKERS_PER_CPU} per CPU, {os.cpu_count() or 1} CPUs "
                                 "here)")


def lost(task: Task, why: str) -> bytes:
    """The row of a task that returned nothing: its capture, range and ``why``."""
    return to_ipc([{"capture": os.path.abspath(task.path), "name": os.path.basename(task.path),
                    "start": task.start, "stop": task.stop, "error": why}])


def backstop() -> float:
    """Seconds after which a task that did not end at its deadline (stuck outside Python, where
    no signal reaches it) is killed from outside: twice the deadline plus :data:`BACKSTOP_GRACE`."""
    return 2 * child_deadline() + BACKSTOP_GRACE


def past_backstop() -> str:
    """The error of a task ended from outside at :func:`backstop`: ``timed out after N s``,
    ``N`` its deadline (:func:`forensics.budget.child_deadline`), as its own process says when
    the deadline ends it, and why it was ended from outside. It said ``timed out after`` the
    backstop's seconds: where the deadline did end it (its row late on a loaded machine, the
    backstop then counting first) that was not the time it was given."""
    return (f"{timed_out(child_deadline())} (no row came back by the backstop, over "
            f"{backstop():g} s after it started: ended from outside)")


def run_local(tasks: Sequence[Task], workers: int | None = None, done: Done | None = None,
              piece: Callable[..., bytes] = replay_piece) -> list[bytes]:
    """Run ``tasks`` on ``workers`` local processes (default: the CPUs; with 1, or one task,
    still one process apart from this one); return their results in task order. ``done(n)`` is
    called as tasks finish. A task that raises is its row ``task failed: TYPE: MESSAGE``
    (:func:`_announced`). A task running past its deadline
    (:func:`forensics.budget.child_deadline`) ends (:func:`_with_deadline`) and comes back as
    its row with ``error: timed out after N s``; one that does not end even then (stuck outside
    Python) is killed with its pool at twice the deadline plus a minute, and the unfinished
    others run in a new pool. A task whose process dies (a signal, the OOM killer) breaks its
    pool: it is its row ``task failed: BrokenProcessPool``, and the tasks that shared the pool
    run again (:func:`_run_pool`). Never more processes than tasks.

    Raises ConfigurationError for ``workers`` outside 1 to :data:`WORKERS_PER_CPU` x the CPUs
    (:func:`check_workers`), and for a working directory the processes cannot start in
    (:func:`forensics.fleet.paths.spawnable_folder`), before anything runs."""
    check_workers(workers)
    spawnable_folder()
    workers = min(workers or os.cpu_count() or 1, max(len(tasks), 1))
    results: list[bytes | None] = [None] * len(tasks)
    pools = [list(range(len(tasks)))]
    while pools:
        rerun, alone = _run_pool(tasks, pools.pop(0), workers, piece, results, done)
        pools += ([rerun] if rerun else []) + [[i] for i in alone]
    return [r if r is not None else lost(tasks[i], "task returned nothing")
            for i, r in enumerate(results)]


#: in a pool's process, where its tasks say they started (:func:`_announced`)
_STARTS: Any = None


def _keep_starts(starts: Any) -> None:
    """A pool process's initializer: keep the queue its tasks announce their start on."""
    global _STARTS
    _STARTS = starts


def _announced(piece: Callable[..., bytes], seconds: float, index: int, task: Task) -> bytes:
    """Say that task ``index`` started in this process (before anything of it runs), then run
    it under its deadline (:func:`_with_deadline`); a task that raises is its row
    (:func:`failed`), made here: an exception that cannot be pickled back would be reported as
    the pickling's error instead of its own."""
    if _STARTS is not None:
        _STARTS.put((index, os.getpid()))
    try:
        return _with_deadline(piece, seconds, task)
    except Exception as exc:  # noqa: BLE001  (a task's failure is its row)
        return failed(task, exc)


def _run_pool(tasks: Sequence[Task], pending: list[int], workers: int,
              piece: Callable[..., bytes], results: list[bytes | None], done: Done | None
              ) -> tuple[list[int], list[int]]:
    """Run the ``pending`` tasks in one process pool, filling ``results``; return the tasks
    to run again in a new pool, and those to run again each alone. A task that outlived its
    deadline, counted from when it said it started (not from when the pool queued it), kills
    the pool (the unfinished others run again). A process that died breaks
    the pool: of the tasks it failed, those that never started run again; of those that had
    started, one alone is the one that died (its row says so), several each run again alone
    (if none started, every one is its row)."""
    import concurrent.futures as cf
    import multiprocessing

    deadline, limit = child_deadline(), backstop()  # the limit from when a process has it
    context = multiprocessing.get_context("spawn")  # no fork of a threaded process
    with safe_path():  # the queue's resource tracker, the pool's processes as tasks come
        with owner_read_write():  # the queues' semaphores (the processes keep the umask)
            starts = context.SimpleQueue()
            pool = cf.ProcessPoolExecutor(min(workers, len(pending)), mp_context=context,
                                          initializer=_keep_starts, initargs=(starts,))
        futures = {pool.submit(_announced, piece, deadline, i, tasks[i]): i for i in pending}
    began: dict[int, float] = {}  # a task: when it said it started
    running: dict[int, int] = {}  # a pool process's pid: the last task it started
    processes: dict[int, Any] = {}
    broken: list[int] = []
    waiting = set(futures)
    ended = False  # every task ended: the pool's processes are waited for (none is stuck)
    try:
        while waiting:
            finished, waiting = cf.wait(waiting, timeout=HEARTBEAT,
                                        return_when=cf.FIRST_COMPLETED)
            now = time.monotonic()
            for pid, index in _drained(starts).items():
                running[pid] = index
                began.setdefault(index, now)
            processes.update(getattr(pool, "_processes", None) or {})
            for future in finished:
                if _died(future):
                    broken.append(futures[future])
                    continue
                results[futures[future]] = _result(future, tasks[futures[future]])
                if done:
                    done(1)
            stuck = {f for f in waiting if now - began.get(futures[f], now) > limit}
            if stuck:
                for future in stuck:
                    results[futures[future]] = lost(tasks[futures[future]], past_backstop())
                    if done:
                        done(1)
                _kill(pool)
                return sorted(futures[f] for f in waiting - stuck) + broken, []
        running.update(_drained(starts))
        ended = True
        # the pool's own thread reaps its processes: a join beside it could lose the race to
        # reap a dead one and read no exit code ("a signal, or the system ended it", once in 15)
        pool.shutdown(wait=True)
        return _after_break(tasks, broken, running, processes, results, done)
    finally:  # a process still starting up must not outlive the queue it is handed
        pool.shutdown(wait=ended, cancel_futures=True)
        starts.close()


@contextlib.contextmanager
def safe_path() -> Iterator[None]:
    """While inside, a Python process started here puts nothing of the working directory on
    its path (``PYTHONSAFEPATH``, as ``python -P``): a spawned process first runs
    ``python -c 'from multiprocessing.spawn import ...'``, which imported ``multiprocessing``
    from the folder the triage was run in (a folder of captures someone else may write)."""
    before = os.environ.get(SAFE_PATH_ENV)
    os.environ[SAFE_PATH_ENV] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(SAFE_PATH_ENV, None)
        else:
            os.environ[SAFE_PATH_ENV] = before


def _drained(starts: Any) -> dict[int, int]:
    """``{pid: task index}``: the last task each pool process announced on ``starts`` since
    the last call (read as they come: a full pipe would stop the tasks announcing)."""
    out = {}
    while not starts.empty():
        index, pid = starts.get()
        out[pid] = index
    return out


def _died(future: Any) -> bool:
    """Whether ``future`` failed because a process of its pool died."""
    from concurrent.futures.process import BrokenProcessPool

    return isinstance(future.exception(), BrokenProcessPool)


def _after_break(tasks: Sequence[Task], broken: list[int], running: dict[int, int],
                 processes: dict[int, Any], results: list[bytes | None], done: Done | None
                 ) -> tuple[list[int], list[int]]:
    """The tasks to run again (in a new pool; each alone) after a process of the pool died,
    failing ``broken``: the task a process ran when it died (:func:`_deaths`) is its row; the
    others run again. When no death can be told, of the tasks that had started one alone is
    the one that died (none started: every one is), several each run again alone."""
    if not broken:
        return [], []
    dead = _deaths(broken, running, processes)
    if not dead:
        suspects = sorted(i for i in broken if i in running.values())
        if len(suspects) > 1:
            return sorted(set(broken) - set(suspects)), suspects
        dead = dict.fromkeys(suspects or broken, "a signal, or the system ended it")
    for i, why in dead.items():
        results[i] = lost(tasks[i], f"task failed: BrokenProcessPool: its process died ({why})")
        if done:
            done(1)
    return sorted(set(broken) - set(dead)), []


def _deaths(broken: list[int], running: dict[int, int], processes: dict[int, Any]
            ) -> dict[int, str]:
    """``{task: how its process ended}`` for each task of ``broken`` whose pool process ended
    by itself (an exit code, or a signal other than the SIGTERM the broken pool sends the
    rest), waiting a few seconds for the pool to end its processes."""
    import signal

    dead: dict[int, str] = {}
    for pid, process in processes.items():
        if running.get(pid) not in broken:
            continue  # its last task finished: not the one that died
        process.join(BREAK_WAIT)
        code = process.exitcode
        if code is None or code in (0, -signal.SIGTERM):
            continue
        # "signal SIGKILL"; "signal 77" for a number no signal has (once "exit code -77")
        dead[running[pid]] = (f"signal {signal_name(-code).removeprefix('signal ')}"
                              if code < 0 else f"exit code {code}")
    return dead


def _with_deadline(piece: Callable[..., bytes], seconds: float, task: Task) -> bytes:
    """``piece(path, start, stop, window)`` of ``task`` (its window planned once for all the
    pieces of its capture, :func:`forensics.fleet.tasks.plan`, crosses to the process as
    data; a step range's ``planned=`` and ``origins=`` too) in a pool's process or a Ray
    worker, ended once it runs ``seconds`` (:func:`forensics.budget.alarm_deadline`: both
    run a task on their process's main thread); a task so ended gives its row ``error: timed
    out after N s``."""
    try:
        with alarm_deadline(seconds):
            return piece(task.path, task.start, task.stop, task.window,
                         **({} if task.planned is None else {"planned": task.planned}),
                         **({"origins": task.origins} if task.origins else {}))
    except DeadlineError as exc:
        return lost(task, str(exc))


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
        return failed(task, exc)


def failed(task: Task, exc: BaseException) -> bytes:
    """The row of a task that raised ``exc``: ``task failed: TYPE: MESSAGE`` on one line."""
    return lost(task, f"task failed: {type(exc).__name__}: {reason(exc, 2000)}")


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
    if not started:
        check_joined(ray)
    if started and address in (None, "local"):
        start_local_ray()
    elif started:
        init_ray(address=address, log_to_driver=False)
    try:
        remote = ray.remote(num_returns="streaming", max_retries=retries,
                            retry_exceptions=False)(_deadlined(piece, child_deadline()))
        # a worker runs in a folder of its own (:func:`init_ray`): each path as meant here
        whole = [dataclasses.replace(t, path=os.path.abspath(t.path)) for t in tasks]
        return _gather(ray, remote.remote, whole, done)
    finally:
        if started:
            ray.shutdown()


#: what a Ray task yields first, as it starts running: its deadlines count from there
STARTED = b""


def _deadlined(piece: Callable[..., bytes], seconds: float) -> Callable[..., Iterator[bytes]]:
    """The body of a Ray task: :data:`STARTED` as it begins, then ``piece`` under
    :func:`_with_deadline` (a closure, so Ray ships ``piece`` with it as it shipped ``piece``
    itself)."""
    def task(given: Task) -> Iterator[bytes]:
        yield STARTED
        yield _with_deadline(piece, seconds, given)
    return task


def _gather(ray: Any, submit: Callable[[Task], Any], tasks: Sequence[Task],
            done: Done | None) -> list[bytes]:
    """Each task's bytes as it finishes, submitting no more tasks than the cluster has CPUs; a
    task Ray reports failed becomes its error row, and one running past :func:`backstop` since
    it started (its :data:`STARTED`: a worker slow to start on a loaded machine is not the
    task's time) is cancelled (its worker killed) and becomes its row ``timed out after N s``;
    one not started :data:`RAY_START_WAIT` after it was sent, its row ``not started ...``."""
    limit, slots = backstop(), max(1, int(ray.cluster_resources().get("CPU", 1)))
    results: list[bytes] = [b""] * len(tasks)
    queue = deque(range(len(tasks)))
    flying: dict[Any, tuple[int, float, bool]] = {}  # a task's stream: index, since, started
    while queue or flying:
        while queue and len(flying) < slots:
            i = queue.popleft()
            flying[submit(tasks[i])] = (i, time.monotonic(), False)
        ready, _ = ray.wait(list(flying), num_returns=1, timeout=HEARTBEAT)
        now = time.monotonic()
        for stream in ready:
            i, _, began = flying.pop(stream)
            answer = _ray_result(ray, next(stream, None), tasks[i])
            if not began and answer == STARTED:
                flying[stream] = (i, now, True)
            else:
                results[i] = _reported(answer, done)
        for stream, (i, since, began) in list(flying.items()):
            if now - since > (limit if began else RAY_START_WAIT):
                ray.cancel(stream, force=True)
                del flying[stream]
                why = (past_backstop() if began else
                       f"not started on Ray after {RAY_START_WAIT:g} s")
                results[i] = _reported(lost(tasks[i], why), done)
    return results


def _reported(row: bytes, done: Done | None) -> bytes:
    """``row``, once ``done`` has been told a task ended."""
    if done:
        done(1)
    return row


def _ray_result(ray: Any, ref: Any, task: Task) -> bytes:
    """A Ray task's next answer (``ref``; None: it ended without one), or the lost-task row of
    its failure."""
    if ref is None:
        return lost(task, "task lost on Ray: it ended without a row")
    try:
        return bytes(ray.get(ref))
    except Exception as exc:  # noqa: BLE001  (a lost task is reported, not dropped)
        return lost(task, f"task lost on Ray: {type(exc).__name__}: {reason(exc, 300)}")


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
            init_ray(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False,
                     _node_ip_address="127.0.0.1")
            return
        except Exception:
            ray.shutdown()
            if attempt == attempts - 1:
                raise


def init_ray(**options: Any) -> None:
    """``ray.init(**options)`` with the runtime environment of a triage's workers: an empty
    working directory of their own (``working_dir``) and the ``forensics`` package this
    process imported (``py_modules``: the code that judges here judges there). Without a
    working directory Ray put the driver's working directory (and its script's) first on
    every worker's path: a ``forensics`` package, or a module a worker imports later
    (``pyarrow``), planted in the folder a triage was run in (a folder of captures others
    write) ran in each worker."""
    import tempfile

    import forensics

    ray = require_ray()
    with tempfile.TemporaryDirectory(prefix="forensics-ray-") as empty:  # uploaded by init
        ray.init(runtime_env={"working_dir": empty,
                              "py_modules": [os.path.dirname(forensics.__file__)],
                              "excludes": ["__pycache__"]}, **options)


def check_joined(ray: Any) -> None:
    """Refuse a Ray this process initialised before the triage (``ray.init`` of the caller's)
    whose job has no working directory of its own: Ray then put the folder ``ray.init`` ran in
    (and its script's) first on every worker's path, and a ``forensics`` package planted there
    ran in each worker; a job-wide runtime environment is set once, at ``ray.init``, and a
    task's own may name no folder to upload. A job with a ``working_dir`` (the triage's own,
    :func:`init_ray`, or one the caller chose) runs its workers there.

    Raises:
        ConfigurationError: one line saying what to do instead.
    """
    if not (ray.get_runtime_context().runtime_env or {}).get("working_dir"):
        raise ConfigurationError(
            "triage --ray: Ray was started in this process before the triage (ray.init) "
            "without a working_dir, so its workers import from the folder it was started in "
            "(a forensics package planted there would run in them); call ray.shutdown() first "
            "and let the triage start or join the cluster (--ray local, --ray ADDRESS), or "
            "start Ray with ray.init(runtime_env={'working_dir': AN_EMPTY_FOLDER})")


def require_ray() -> Any:
    """The ``ray`` module; MissingDependencyError naming the extra when it is absent."""
    try:
        import ray
    except ImportError:
        raise MissingDependencyError("forensics triage --ray needs Ray: pip install "
                                     "'vllm-forensics[fleet]'") from None
    return ray
