"""The triage row of ``make bench``: captures per second on local processes and on Ray, in the
same run, with the CPU time beside the wall time (issue 31)."""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path
from typing import Any

#: generated captures triaged at each scale (small ones: the row measures per-capture cost)
TRIAGE_CAPTURES = {"tiny": 12, "small": 50, "full": 200}


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and its reaped children (the local
    workers; Ray's raylet and its workers once the cluster is shut down)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def triage_phase(scale: str, work: Path) -> dict[str, Any]:
    """Generate the fleet, triage it locally, then on a Ray cluster started here; the Ray
    figures are None with the reason when Ray is absent or does not start."""
    from forensics.fleet.generate import simulate_fleet
    from forensics.fleet.triage import triage

    count = TRIAGE_CAPTURES[scale]
    fleet = simulate_fleet(work / "fleet", count=count, steps=8, batch=3)
    cpu, start = cpu_seconds(), time.perf_counter()
    local = triage([fleet.root])
    figures: dict[str, Any] = {"captures": count, "workers": os.cpu_count(),
                               "local_seconds": time.perf_counter() - start,
                               "local_cpu_seconds": cpu_seconds() - cpu}
    figures.update(_on_ray(fleet.root, local.rows))
    return figures


def _on_ray(root: Path, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Ray's start time, triage wall and CPU seconds and whether its rows equal ``rows``."""
    try:
        import ray
    except ImportError:
        return {"ray_seconds": None, "ray_note": "Ray not installed (the fleet extra)"}
    from forensics.fleet.runners import RAY_STARTS, start_local_ray
    from forensics.fleet.triage import triage

    cpu, start = own_cpu_seconds(), time.perf_counter()
    try:
        start_local_ray()
    except Exception as exc:  # noqa: BLE001  (the row says why it has no Ray figure)
        return {"ray_seconds": None,
                "ray_note": f"Ray did not start in {RAY_STARTS} tries: {str(exc)[:80]}"}
    started = time.perf_counter()
    try:
        on_ray = triage([root], ray="local")
        seconds = time.perf_counter() - started
        cluster_cpu = _children_cpu()  # Ray's processes, read while they are alive
    finally:
        ray.shutdown()
    return {"ray_start_seconds": started - start, "ray_seconds": seconds,
            "ray_cpu_seconds": own_cpu_seconds() - cpu + cluster_cpu,
            "ray_equal": on_ray.rows == rows}


def own_cpu_seconds() -> float:
    """User + system CPU seconds of this process alone."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def _children_cpu() -> float:
    """CPU seconds of this process's living descendants (Ray's GCS, raylet, agents, workers)
    and of the children they reaped."""
    import psutil

    total = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


def triage_row(figures: dict[str, Any]) -> tuple[str, ...]:
    """The table row: local captures/s, Ray's, and Ray over local."""
    n = figures["captures"]
    local = n / figures["local_seconds"]
    ours = (f"local processes: {local:.1f} captures/s ({figures['local_seconds']:.1f} s wall, "
            f"{figures['local_cpu_seconds']:.1f} s CPU, {figures['workers']} workers)")
    if figures.get("ray_seconds") is None:
        return (f"triage ({n} captures)", ours, figures.get("ray_note", "-"), "-", "-")
    ray = n / figures["ray_seconds"]
    theirs = (f"Ray here: {ray:.1f} captures/s ({figures['ray_seconds']:.1f} s wall after a "
              f"{figures['ray_start_seconds']:.1f} s start; {figures['ray_cpu_seconds']:.1f} s "
              f"CPU, the cluster's start included; rows equal: {figures['ray_equal']})")
    return (f"triage ({n} captures; ratio: Ray over local)", ours, theirs,
            f"{ray / local:.2f}x", "-")
