"""Keep the probe's writer thread off the cores vLLM pins its worker to.

vLLM's CPU worker binds its threads to a set of cores (``VLLM_CPU_OMP_THREADS_BIND``) and a
thread it starts inherits that set, so the probe's writer thread (Arrow encoding, fsync) would
compete with the model for the engine's own core. Called from inside the writer thread, this
moves that thread alone (Linux ``sched_setaffinity`` on thread id 0) to the machine's other
cores, when there are any.
"""

from __future__ import annotations

import os


def online_cpus() -> set[int]:
    """The CPUs this machine has online (``/sys/devices/system/cpu/online``), else ``0..n-1``."""
    try:
        with open("/sys/devices/system/cpu/online", encoding="ascii") as handle:
            return parse_cpu_list(handle.read())
    except OSError:
        return set(range(os.cpu_count() or 1))


def parse_cpu_list(text: str) -> set[int]:
    """Parse a kernel CPU list such as ``0-3,8,10-11``."""
    cpus: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def leave_engine_cores(available: set[int] | None = None) -> dict[str, list[int]]:
    """Move the calling thread to the CPUs outside its current (inherited) set.

    Returns ``{"engine_cpus": [...], "writer_cpus": [...]}``: the set the thread inherited and
    the one it runs on now (unchanged when every CPU is the engine's, or the call is refused).
    Never raises.
    """
    if not hasattr(os, "sched_getaffinity"):
        return {"engine_cpus": [], "writer_cpus": []}
    engine = set(os.sched_getaffinity(0))
    others = (online_cpus() if available is None else available) - engine
    writer = engine
    if others:
        try:
            os.sched_setaffinity(0, others)
            writer = set(os.sched_getaffinity(0))
        except OSError:  # a cpuset that does not allow them: stay where we are
            writer = engine
    return {"engine_cpus": sorted(engine), "writer_cpus": sorted(writer)}
