"""Benchmarks at soak scale (issue 9): ``python benchmarks/run.py --scale {tiny,small,full}``.

One run generates the ``soak`` scenario (batch 64, 4 drafts) as a capture the way ``forensics
simulate soak -o`` does (timed: issue 6), writes its first steps record by record and as one
``torch.save`` file per step (what ad-hoc probes do), then measures side by side, on the same
records: write, load, open, scan, replay, probe (V1's and V2's call sites) and memory. It
prints a table and writes ``benchmarks/latest.json`` (``--json`` to change). Baselines that
would take hours at full scale (the ``torch.save`` directory, the per-record Python loop) are
measured on the first steps or records and scaled linearly: the table says so on their rows.
Timings are wall-clock on a shared machine: ratios from one run, never unit-test assertions.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gc
import json
import math
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BATCH, DRAFTS, SITES_PER_STEP = 64, 4, 4


@dataclass(frozen=True)
class Scale:
    """How many steps to simulate, and how many the slow baselines measure before scaling."""

    name: str
    steps: int
    baseline_steps: int   # steps written/read as torch.save files
    loop_records: int     # records of the per-record Python replay loop
    probe_calls: int
    repeats: int          # replays (and loops) alternated: the best of each counts


SCALES = {
    "tiny": Scale("tiny", 250, 250, 1_000, 500, 1),
    "small": Scale("small", 25_000, 500, 3_000, 2_000, 3),
    "full": Scale("full", 250_000, 10_000, 40_000, 20_000, 2),
}
TARGETS = {"soak_generate_seconds_per_250k": ("<", 60.0), "open_seconds": ("<", 1.0),
           "load_speedup": (">=", 20.0), "replay_speedup": (">=", 20.0),
           "scan_fraction_of_numpy": (">=", 0.5), "probe_us_per_call": ("<=", 20.0),
           "probe_cpu_us_per_call": ("<=", 10.0),
           "probe_v2_record_cpu_us_per_call": ("<=", 20.0),
           "probe_v2_guard_cpu_us_per_call": ("<=", 20.0),
           "replay_rss_over_capture": ("<=", 2.0), "replay_added_rss_over_capture": ("<=", 0.5),
           "report_over_replay": ("<=", 2.0), "report_over_replay_cpu": ("<=", 2.0)}


def _clock() -> float:
    return time.perf_counter()


# --------------------------------------------------------------------------- write


def _step_payload(records: list[Any]) -> list[dict[str, Any]]:
    """One step's records as an ad-hoc probe would ``torch.save`` them."""
    import torch

    return [{"site": r.site, "step": r.step, "rank": r.rank,
             "fields": {k: torch.from_numpy(np.ascontiguousarray(v))
                        if isinstance(v, np.ndarray) else v for k, v in r.fields.items()}}
            for r in records]


def write_phase(scale: Scale, work: Path) -> dict[str, Any]:
    """Generate the soak capture the way ``forensics simulate soak -o`` does
    (:func:`~forensics.simulator.columns.write_simulation`: simulate, encode, write, fsync, all
    timed by the wall clock, issue 6), then, on the first ``baseline_steps`` steps of a fresh
    simulator (the capture's first records), the per-record measures: simulating them as
    records, the trusted and the checked ``CaptureWriter.append`` into scratch captures, and
    one ``torch.save`` file per step. Only the generating and the writing are timed."""
    import torch

    from forensics.simulator.columns import write_simulation
    from forensics.simulator.runs import Simulator
    from forensics.simulator.scenarios import configure, manifest_for
    from forensics.store.writer import FLUSH_EVERY, CaptureWriter

    sc = configure("soak", steps=scale.steps, batch=BATCH, spec_tokens=DRAFTS)
    capture, pt_dir = work / "soak.capture", work / "pt"
    trusted, checked = work / "trusted.capture", work / "checked.capture"
    pt_dir.mkdir(parents=True, exist_ok=True)
    t = {"generate": 0.0, "simulate": 0.0, "write": 0.0, "write_checked": 0.0,
         "torch_save": 0.0}
    cpu0 = _cpu_seconds()
    t0 = _clock()
    write_simulation(capture, Simulator(sc, seed=0), scale.steps, manifest_for(sc, 0))
    t["generate"] = _clock() - t0
    generate_cpu = _cpu_seconds() - cpu0

    base = min(scale.baseline_steps, scale.steps)
    sim = Simulator(sc, seed=0)
    baseline_records = 0
    with CaptureWriter(trusted, manifest_for(sc, 0), process="w0") as writer, \
            CaptureWriter(checked, manifest_for(sc, 0), process="w0") as slow:
        for step in range(base):
            t0 = _clock()
            recs = sim.step()
            t1 = _clock()
            for r in recs:
                writer.append(r, validated=True)
            baseline_records += len(recs)
            if baseline_records % FLUSH_EVERY < len(recs):
                writer.flush()
            t2 = _clock()
            for r in recs:
                slow.append(r)
            t3 = _clock()
            payload = _step_payload(recs)
            t4 = _clock()
            torch.save(payload, pt_dir / f"step{step:07d}.pt")
            t["simulate"] += t1 - t0
            t["write"] += t2 - t1
            t["write_checked"] += t3 - t2
            t["torch_save"] += _clock() - t4
        t["write"] += _timed(writer.flush)
        t["write_checked"] += _timed(slow.flush)
    shutil.rmtree(trusted)
    shutil.rmtree(checked)
    return {"records": scale.steps * SITES_PER_STEP * sc.ranks, "seconds": t,
            "generate_cpu_seconds": generate_cpu, "baseline_steps": base,
            "baseline_records": baseline_records, "capture": str(capture),
            "pt_dir": str(pt_dir)}


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process and of its reaped children (the forked
    block writers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _timed(fn: Any) -> float:
    t0 = _clock()
    fn()
    return _clock() - t0


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# --------------------------------------------------------------------------- read


def open_phase(capture: Path) -> dict[str, float]:
    """Best of three: ``load(path)`` + ``summary()`` (what ``forensics inspect`` does)."""
    from forensics.store.reader import load

    times = []
    for _ in range(3):
        t0 = _clock()
        summary = load(capture).summary()
        times.append(_clock() - t0)
    assert summary["records"] > 0
    return {"open_seconds": min(times)}


def load_phase(capture: Path, pt_dir: Path) -> dict[str, float]:
    """Open and materialise every record (decoded and validated), against ``torch.load``
    (``weights_only=True``) of the per-step files."""
    import torch

    from forensics.store.reader import load

    t0 = _clock()
    count = sum(1 for _ in load(capture))
    ours = _clock() - t0
    files = sorted(pt_dir.glob("*.pt"))
    t0 = _clock()
    loaded = sum(len(torch.load(f, weights_only=True)) for f in files)
    theirs = _clock() - t0
    return {"load_seconds": ours, "load_records": count, "torch_load_seconds_measured": theirs,
            "torch_load_files": len(files), "torch_load_records": loaded}


# --------------------------------------------------------------------------- scan


def scan_phase(capture: Path, rounds: int = 3) -> dict[str, Any]:
    """``forensics.judge.scan`` against a bare numpy comparison over the same index arrays
    (zero-copy views at their captured width, scalar bound), in alternating rounds so that both see
    the same load on a shared machine. Each round of either opens the capture afresh (untimed):
    both read pages just mapped, from a warm page cache. The best round of each counts; the
    CPU seconds of that round come beside its wall seconds. ``numpy_warm_seconds``: bare numpy
    again on arrays whose pages it just touched (the baseline before 2026-12-01's third run),
    kept to show what the fresh opens change."""
    from forensics.judge.scan import scan
    from forensics.store.reader import load

    scans: list[tuple[float, float, Any]] = []
    bare: list[tuple[float, float]] = []
    warm: list[float] = []
    for _ in range(rounds):
        opened = load(capture)
        cpu0 = _cpu_seconds()
        result = scan(opened)
        scans.append((result.seconds, _cpu_seconds() - cpu0, result))
        arrays = _index_arrays(load(capture))
        cpu0, t0 = _cpu_seconds(), _clock()
        _bare_numpy(arrays)
        bare.append((_clock() - t0, _cpu_seconds() - cpu0))
        warm.append(_timed(lambda a=arrays: _bare_numpy(a)))  # the same arrays, pages touched
    seconds, cpu, result = min(scans, key=lambda s: s[0])
    numpy_seconds, numpy_cpu = min(bare)
    return {"scan_seconds": seconds, "scan_cpu_seconds": cpu, "scan_indices": result.checked,
            "scan_out_of_range": result.out_of_range, "numpy_seconds": numpy_seconds,
            "numpy_cpu_seconds": numpy_cpu, "numpy_warm_seconds": min(warm),
            "numpy_indices": sum(len(a) * n for a, n in arrays),
            "scan_entries": result.to_json()["entries"]}


def scan_rates(figures: dict[str, Any]) -> tuple[float, float]:
    """Indices per second of the scan and of bare numpy, from :func:`scan_phase`'s figures
    (their ratio is ``scan_fraction_of_numpy``)."""
    return (figures["scan_indices"] / max(figures["scan_seconds"], 1e-12),
            figures["numpy_indices"] / max(figures["numpy_seconds"], 1e-12))


def _bare_numpy(arrays: list[tuple[np.ndarray, int]]) -> int:
    bad = 0
    for array, times in arrays:
        for _ in range(times):
            bad += int(np.count_nonzero((array < 0) | (array >= 1 << 30)))
    return bad


def _index_arrays(capture: Any) -> list[tuple[np.ndarray, int]]:
    """The flat index arrays the scan reads, with how many bounds each is compared to."""
    uses = {"embedding": {"input_ids": 1}, "batch_change": {"prev_positions": 3},
            "prepare_input_ids": {"prev_positions": 1, "draft_token_ids": 1},
            "async_output": {"sampled_token_ids_cpu": 1}}
    arrays = []
    for view in capture.batches():
        for name, times in uses[view.site].items():
            if name in view.columns:
                view._tensor_parts(name)
                flat, offsets = view._tensors[name][:2]
                arrays.append((flat[offsets[0]:offsets[-1]], times))
    return arrays


# --------------------------------------------------------------------------- replay


def replay_child(capture: str) -> None:
    """In a fresh process: replay upstream + patched over every record; print timings and the
    peak RSS as one JSON line."""
    import pandas  # noqa: F401  (imports are not the replay's work: the loop pays none)
    import torch  # noqa: F401

    from forensics.replaying import replay  # the package's modules, as the loop's are imported
    from forensics.store.reader import load

    base = peak_rss()
    t0, cpu0 = _clock(), _cpu_seconds()
    result = replay(load(capture), variants=("upstream", "patched"))
    seconds, cpu = _clock() - t0, _cpu_seconds() - cpu0
    peak = peak_rss()
    tables = {}  # the outcomes and bounds tables are built when first read: timed apart
    for name in ("outcomes", "bounds"):
        t0 = _clock()
        tables[f"{name}_rows"] = len(getattr(result, name))
        tables[f"{name}_seconds"] = _clock() - t0
    print(json.dumps({"replay_seconds": seconds, "replay_cpu_seconds": cpu,
                      "records": len(result.records),
                      "findings": len(result.findings), "rss_peak_bytes": peak,
                      "rss_before_bytes": base, "verdicts": result.verdicts, **tables,
                      "rss_peak_with_tables_bytes": peak_rss()}))


def peak_rss() -> int:
    """This process's peak resident set size in bytes: ``VmHWM`` of ``/proc/self/status``
    (Linux; it starts afresh at ``exec``), else ``getrusage``'s ``ru_maxrss``, which Linux
    carries over ``fork`` and ``exec`` from the parent and would count the benchmark's own
    memory (the mapped capture after the load phase) as the replay's."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB elsewhere
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def replay_phase(capture: Path, loop_records: int, repeats: int) -> dict[str, Any]:
    """Our replay in a subprocess (time and peak RSS), and the fixed per-record loop of
    :mod:`benchmarks.baseline` over the first ``loop_records`` records (in memory),
    alternated ``repeats`` times (the machine is shared: the best of each counts, every time
    is kept)."""
    from benchmarks import baseline
    from forensics.store.reader import load

    need, free = _du(capture) + 2**30, _available_memory()
    if free and need > free:
        print(f"bench: warning: the replay may need ~{need / 2**30:.0f} GiB (the interpreter "
              f"and up to the capture's size), {free / 2**30:.0f} GiB are available",
              file=sys.stderr)
    batch = list(load(capture).records()[:loop_records])
    children, loops = [], []
    for _ in range(repeats):
        children.append(_replay_child(capture))
        t0 = _clock()
        baseline.run(batch)
        loops.append(_clock() - t0)
    child = min(children, key=lambda c: c["replay_seconds"])
    return {**child, "replay_seconds_all": [c["replay_seconds"] for c in children],
            "loop_seconds_measured": min(loops), "loop_seconds_all": loops,
            "loop_records": len(batch), "loop": "benchmarks/baseline.py"}


def _replay_child(capture: Path) -> dict[str, Any]:
    """One replay in a fresh process (:func:`replay_child`): its JSON line."""
    out = subprocess.run([sys.executable, __file__, "--replay-child", str(capture)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"the replay process failed (exit {out.returncode}; killed for "
                           f"memory?): {out.stderr[-1000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _available_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError):
        return 0


# --------------------------------------------------------------------------- probe


PROBE_ROUND = 250  # calls per round; plain and probed rounds alternate


def probe_phase(calls: int, work: Path) -> dict[str, Any]:
    """Host-side cost per recorded ``batch_change`` call in record mode (CPU tensors): the
    probe's wrapper around the plain function, its copies, its ring and its flushes to a real
    capture (its writer thread working meanwhile), minus the plain call. Rounds of
    :data:`PROBE_ROUND` plain calls and probed calls alternate (a shared, noisy machine drifts
    between rounds); the figures are medians over rounds, per call: ``probe_us_per_call``
    (wall clock, plus the final ``close()`` spread over the calls) and
    ``probe_cpu_us_per_call`` (the calling thread's CPU alone, ``time.thread_time``: what the
    engine's own thread pays). ``probe_process_cpu_us_per_call`` adds the writer thread's CPU
    (``time.process_time``); ``probe_writer_process_cpu_us_per_call`` is the writer
    process's CPU over all the calls (start included), where the code has one. The calls run
    under ``torch.inference_mode()``, as in vLLM.
    Falls back to ``CaptureWriter.append`` when the probe is missing."""
    try:
        bench = ProbeBench(work)
    except ImportError:
        return _append_cost(calls, work)
    session = bench.session
    rounds = max(calls // PROBE_ROUND, 1)
    plain: list[tuple[float, float, float]] = []
    probed: list[tuple[float, float, float]] = []
    for _ in range(rounds):
        p, q = bench.round()
        plain.append(p)
        probed.append(q)
    total_calls = rounds * PROBE_ROUND
    writer_cpu = bench.writer_process_cpu()
    close = _round(session.close, 1)
    per_call = [(_median(probed, i) - _median(plain, i)) / PROBE_ROUND * 1e6 for i in range(3)]
    return {"plain_seconds": sum(r[0] for r in plain), "probe_calls": total_calls,
            "probe_rounds": rounds, "probe_seconds": sum(r[0] for r in probed) + close[0],
            "probe_close_seconds": close[0], "probe_written": session.counts["written"],
            "probe_dropped": session.counts["dropped"],
            "probe_mode": "forensics.probe record mode, CPU tensors",
            "probe_us_per_call": max(per_call[0] + close[0] / total_calls * 1e6, 0.0),
            "probe_cpu_us_per_call": max(per_call[1], 0.0),
            "probe_process_cpu_us_per_call": max(per_call[2] + close[2] / total_calls * 1e6,
                                                 0.0),
            "probe_writer_process_cpu_us_per_call": writer_cpu / total_calls * 1e6}


class ProbeBench:
    """A probe session (record mode unless ``mode`` says) writing to ``work`` and a wrapped
    ``batch_change`` reference: what the probe phases and ``probe_compare.py`` time
    (ImportError without the probe)."""

    def __init__(self, work: Path, mode: str = "record") -> None:
        import torch

        from forensics.probe import hooks
        from forensics.probe.reference import batch_change_reference
        from forensics.probe.session import ProbeSession
        from forensics.probe.settings import Settings

        capture = work / ("probe.capture" if mode == "record" else f"probe-{mode}.capture")
        self.hooks, self.call = hooks, batch_change_reference
        # the session's own writer, as in vLLM (a writer process where the code has one);
        # $FORENSICS_WRITER picks it where the code has the setting
        writer = os.environ.get("FORENSICS_WRITER", "").strip().lower()
        chosen = {"writer": writer} if writer and "writer" in Settings.__dataclass_fields__ \
            else {}
        self.session = ProbeSession(Settings(directory=work, capture=capture, mode=mode,
                                             **chosen))
        self.wrapped = hooks.wrap_batch_change(batch_change_reference)
        self.args = _batch_change_args(torch)

    def writer_process_cpu(self) -> float:
        """CPU seconds of the session's writer process so far (:func:`writer_process_cpu`)."""
        return writer_process_cpu(self.session)

    def round(self) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
        """One round of plain calls, then one of probed calls (see :func:`_round`)."""
        args, session = self.args, self.session
        plain = _round(lambda: self.call(*_fresh(args)), inference=True)
        self.hooks.activate(session)
        try:
            probed = _round(lambda: (session.begin_step(), self.wrapped(*_fresh(args))),
                            inference=True)
        finally:
            self.hooks.activate(None)
        return plain, probed


def probe_v2_phase(calls: int, work: Path) -> dict[str, Any]:
    """The probe's cost per call on Model Runner V2's call sites (``benchmarks/probe_v2.py``)
    beside V1's ``batch_change``, in record and guard mode, interleaved: each round runs
    :data:`PROBE_ROUND` plain and as many probed calls of every (runner's site, mode), each
    mode's calls recording into its own capture, its writer process working meanwhile.
    ``calls`` / 4 calls a case (V2's guard checks cost about 1 ms a call). Per case, medians
    over rounds of probed minus plain per call: ``us_per_call`` (wall), ``cpu_us_per_call``
    (the calling thread's CPU) and ``process_cpu_us_per_call`` (the recording process's);
    the headline figures are the costlier V2 site's."""
    from benchmarks import probe_v2

    rounds = max(calls // (4 * PROBE_ROUND), 1)
    v1 = {mode: ProbeBench(work, mode) for mode in probe_v2.MODES}
    v2 = {mode: probe_v2.V2Bench(work, mode, _round) for mode in probe_v2.MODES}
    cases: dict[str, Any] = {f"v1_batch_change_{m}": v1[m].round for m in probe_v2.MODES}
    cases.update({f"v2_{site}_{m}": (lambda b=v2[m], site=site: b.round(site))
                  for m in probe_v2.MODES for site in probe_v2.SITES})
    timed: dict[str, list[Any]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, one in cases.items():
            timed[name].append(one())
    sessions = {f"v1_{m}": b.session for m, b in v1.items()}
    sessions.update({f"v2_{m}": b.session for m, b in v2.items()})
    writers = {name: writer_process_cpu(s) for name, s in sessions.items()}
    for session in sessions.values():
        session.close()
    out: dict[str, Any] = {"rounds": rounds, "calls_per_round": PROBE_ROUND,
                           "mode": "forensics.probe, CPU tensors, torch.inference_mode()",
                           "writer_process_cpu_seconds": writers,
                           "counts": {name: dict(s.counts) for name, s in sessions.items()}}
    for name, got in timed.items():
        plain, probed = [p for p, _ in got], [q for _, q in got]
        per_call = [(_median(probed, i) - _median(plain, i)) / PROBE_ROUND * 1e6
                    for i in range(3)]
        out[name] = {"us_per_call": per_call[0], "cpu_us_per_call": per_call[1],
                     "process_cpu_us_per_call": per_call[2],
                     "plain_us_per_call": _median(plain, 0) / PROBE_ROUND * 1e6}
    for mode in probe_v2.MODES:
        worst = max((out[f"v2_{site}_{mode}"] for site in probe_v2.SITES),
                    key=lambda case: case["cpu_us_per_call"])
        out[f"v2_{mode}_us_per_call"] = worst["us_per_call"]
        out[f"v2_{mode}_cpu_us_per_call"] = worst["cpu_us_per_call"]
    return out


#: the probe_v2 phase's figures that ``latest.json`` carries at its top level (``probe_``
#: before each): the costlier V2 site's, per mode
V2_HEADLINES = ("v2_record_us_per_call", "v2_record_cpu_us_per_call", "v2_guard_us_per_call",
                "v2_guard_cpu_us_per_call")


def probe_v2_rows(raw: dict[str, Any]) -> list[tuple[str, ...]]:
    """The table's rows of the probe_v2 phase (absent from older result files): each V2
    site and mode, V1's ``batch_change`` of the same rounds as the baseline column."""
    v2 = raw.get("probe_v2")
    if v2 is None:
        return []
    from benchmarks import probe_v2

    def cost(case: dict[str, Any]) -> str:
        return (f"{case['us_per_call']:.1f} us/call; calling thread's CPU "
                f"{case['cpu_us_per_call']:.1f} us/call")

    return [(f"probe on V2, {site} ({mode} mode, CPU tensors, batch {probe_v2.BATCH}, "
             f"{probe_v2.DRAFTS} drafts)", cost(v2[f"v2_{site}_{mode}"]),
             f"V1 batch_change, same rounds: {cost(v2[f'v1_batch_change_{mode}'])}", "-",
             "CPU <= 20 us")
            for mode in probe_v2.MODES for site in probe_v2.SITES]


def writer_process_cpu(session: Any) -> float:
    """CPU seconds of ``session``'s writer process so far (its start included; 10 ms ticks of
    ``/proc``), 0 without one (a writer thread, or code before the writer process)."""
    channel = getattr(getattr(session, "backend", None), "channel", None)
    channel = channel or getattr(session, "_channel", None)  # the code before the backends
    proc: Any = getattr(channel, "proc", None)
    try:
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (AttributeError, OSError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _round(call: Any, count: int = PROBE_ROUND, *, inference: bool = False
           ) -> tuple[float, float, float]:
    """Wall, calling-thread CPU and process CPU seconds of ``count`` calls of ``call``; with
    ``inference``, under ``torch.inference_mode()``, as vLLM's ``execute_model`` runs the
    calls the probe wraps (torch's ops cost less there)."""
    with _inference_mode(inference):
        wall, thread, process = _clock(), time.thread_time(), time.process_time()
        for _ in range(count):
            call()
        return _clock() - wall, time.thread_time() - thread, time.process_time() - process


def _inference_mode(on: bool) -> Any:
    """``torch.inference_mode()`` if ``on``, else a context that does nothing."""
    if not on:
        return contextlib.nullcontext()
    import torch

    return torch.inference_mode()


def _median(rounds: list[tuple[float, float, float]], i: int) -> float:
    values = sorted(r[i] for r in rounds)
    return values[len(values) // 2] if len(values) % 2 else \
        (values[len(values) // 2 - 1] + values[len(values) // 2]) / 2


def _append_cost(calls: int, work: Path) -> dict[str, Any]:
    from forensics.simulator.runs import simulate
    from forensics.store.writer import CaptureWriter

    simulated = simulate("soak", steps=calls + 1, batch=BATCH, spec_tokens=DRAFTS)
    assert isinstance(simulated, list)
    records = [r for r in simulated if r.site == "batch_change"][:calls]
    with CaptureWriter(work / "probe.capture", process="probe") as writer:
        t0 = _clock()
        for record in records:
            writer.append(record)
        total = _clock() - t0
    return {"probe_seconds": total, "plain_seconds": 0.0, "probe_calls": len(records),
            "probe_mode": "CaptureWriter.append (forensics.probe not importable)",
            "probe_us_per_call": total / len(records) * 1e6}


def _batch_change_args(torch: Any) -> tuple[Any, ...]:
    i32 = torch.int32
    pp = torch.arange(BATCH, dtype=torch.int64)
    pp[::7] = -1
    return (torch.arange(BATCH * 4, dtype=i32), torch.ones(BATCH, dtype=i32), pp,
            torch.full((BATCH,), 3, dtype=i32), torch.full((BATCH * 4,), DRAFTS, dtype=i32),
            torch.arange(BATCH, dtype=i32))


def _fresh(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return (args[0].clone(), args[1].clone(), *args[2:])


# --------------------------------------------------------------------------- report phase


#: rounds of (replay, report) in the report row, interleaved: the best of each is kept
REPORT_ROUNDS = 3


def report_phase(work: Path, rounds: int = REPORT_ROUNDS) -> dict[str, Any]:
    """``forensics replay`` and ``forensics report`` of a 2-record capture, each a fresh
    process as a user runs them, interleaved ``rounds`` times: the best wall and the best CPU
    seconds of each, and the report's peak RSS."""
    from forensics.records import Record
    from forensics.store.writer import write_capture

    capture = work / "two-records.capture"
    ids = [np.array([1, 2, 3]), np.array([1, 248320, 3])]
    write_capture(capture, [Record("embedding", step, 0, {"input_ids": i, "num_embeddings": 248320})
                            for step, i in enumerate(ids)], force=True)
    cli = [sys.executable, "-m", "forensics.cli"]
    runs: dict[str, list[tuple[float, float]]] = {"replay": [], "report": []}
    figures: dict[str, Any] = {"rounds": rounds}
    for _ in range(rounds):
        for name, args in (("replay", ["replay", str(capture)]),
                           ("report", ["report", str(capture), "-o", str(work / "two.html")])):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = _clock()
            subprocess.run([*cli, *args], check=True, capture_output=True, timeout=600)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            runs[name].append((_clock() - t0, after.ru_utime + after.ru_stime
                               - before.ru_utime - before.ru_stime))
            if name == "report":  # the largest child so far: the report is the larger
                figures["report_peak_rss_bytes"] = after.ru_maxrss * 1024
    for name, times in runs.items():
        figures[f"{name}_seconds"] = min(wall for wall, _ in times)
        figures[f"{name}_cpu_seconds"] = min(cpu for _, cpu in times)
    shutil.rmtree(capture, ignore_errors=True)
    return figures


# --------------------------------------------------------------------------- report


def machine() -> dict[str, Any]:
    """Cores, CPU model, RAM and platform of this machine."""
    model = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        ram = 0
    import torch

    return {"cores": os.cpu_count(), "cpu": model, "ram_gib": round(ram / 2**30, 1),
            "python": platform.python_version(), "numpy": np.__version__,
            "torch": torch.__version__, "platform": platform.platform()}


def loop_seconds(rp: dict[str, Any], records: int) -> float:
    """The per-record loop's time scaled from the records it ran to ``records``."""
    return float(rp["loop_seconds_measured"] * records / max(rp["loop_records"], 1))


def replay_ratios(rp: dict[str, Any], records: int, capture_bytes: int) -> dict[str, float]:
    """The replay's headline ratios from its phase's figures ``rp``: the speed-up over the
    per-record loop (scaled to ``records``) and its peak and added RSS over the capture."""
    return {"replay_speedup": loop_seconds(rp, records) / rp["replay_seconds"],
            "replay_rss_over_capture": rp["rss_peak_bytes"] / capture_bytes,
            "replay_added_rss_over_capture": (rp["rss_peak_bytes"] - rp["rss_before_bytes"])
            / capture_bytes}


def summarise(scale: Scale, w: dict[str, Any], o: dict[str, float], ld: dict[str, Any],
              sc: dict[str, Any], rp: dict[str, Any], pr: dict[str, Any],
              capture_bytes: int, pt_bytes: int) -> dict[str, Any]:
    """The ``latest.json`` object: headline ratios, raw timings, machine and date."""
    steps, base = scale.steps, min(scale.baseline_steps, scale.steps)
    factor = steps / base
    records = w["records"]
    torch_load = ld["torch_load_seconds_measured"] * factor
    torch_save = w["seconds"]["torch_save"] * factor
    generate = w["seconds"]["generate"]
    scan_rate, numpy_rate = scan_rates(sc)
    return {
        "scale": scale.name, "records": records, "steps": steps, "batch": BATCH,
        "drafts": DRAFTS,
        "generate_seconds": generate,
        "soak_generate_seconds_per_250k": generate * 250_000 / steps,
        "open_seconds": o["open_seconds"],
        "load_speedup": torch_load / ld["load_seconds"],
        "scan_fraction_of_numpy": scan_rate / numpy_rate,
        "probe_us_per_call": pr["probe_us_per_call"],
        "probe_cpu_us_per_call": pr.get("probe_cpu_us_per_call", float("nan")),
        **replay_ratios(rp, records, capture_bytes),
        "write_speedup": w["seconds"]["torch_save"] / w["seconds"]["write"],
        "scaled_from": {"torch_save_steps": base, "baseline_records": w["baseline_records"],
                        "torch_load_files": ld["torch_load_files"],
                        "loop_records": rp["loop_records"], "factor_steps": factor},
        "raw": {"write": w["seconds"], "generate_cpu_seconds": w["generate_cpu_seconds"],
                "open": o, "load": ld, "scan": sc, "replay": rp,
                "probe": pr, "torch_save_seconds_scaled": torch_save,
                "torch_load_seconds_scaled": torch_load,
                "loop_seconds_scaled": loop_seconds(rp, records),
                "scan_indices_per_second": scan_rate, "numpy_indices_per_second": numpy_rate,
                "capture_bytes": capture_bytes, "torch_save_bytes_measured": pt_bytes,
                "torch_save_bytes_scaled": int(pt_bytes * factor)},
        "machine": machine(),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def _write_rows(s: dict[str, Any]) -> list[tuple[str, ...]]:
    """The generate row (issue 6: the whole capture as ``forensics simulate soak -o`` writes
    it) and the per-record write row (trusted append against ``torch.save``, same steps)."""
    sf, w = s["scaled_from"], s["raw"]["write"]
    generate, steps = s["generate_seconds"], s["steps"]
    per250k = s["soak_generate_seconds_per_250k"]
    generate_note = "" if steps == 250_000 else f", scaled from {steps:,} steps"
    base = sf["torch_save_steps"]
    base_records = max(sf["baseline_records"], 1)
    return [
        ("simulate soak -o (generate)",
         f"{generate:.1f} s for {steps:,} steps ({generate / steps * 1e6:.0f} us/step; "
         f"{per250k:.1f} s per 250,000 steps{generate_note})", "-", "-",
         "< 60 s per 250,000 steps"),
        (f"write (per record, first {base:,} steps)",
         f"{w['write']:.2f} s ({w['write'] / base_records * 1e6:.0f} us/record, trusted "
         f"append; checked append {w['write_checked'] / base_records * 1e6:.0f} us/record)",
         f"torch.save per step: {w['torch_save']:.2f} s (same {base:,} steps)",
         f"{s['write_speedup']:.1f}x", "-"),
    ]


def _probe_process_note(probe: dict[str, Any]) -> str:
    """The probe row's process CPU: the recording process's, and the writer process's where
    the run had one (older result files have neither, or only the first)."""
    note = ""
    if "probe_process_cpu_us_per_call" in probe:
        cpu = probe["probe_process_cpu_us_per_call"]
        note += f"; the recording process's CPU {cpu:.1f} us/call"
    if probe.get("probe_writer_process_cpu_us_per_call"):
        writer = probe["probe_writer_process_cpu_us_per_call"]
        note += f", the writer process's {writer:.1f} us/call (its start included)"
    return note


def _tables_note(replay: dict[str, Any]) -> str:
    """The time and peak memory of the ``outcomes`` and ``bounds`` tables, built when first
    read after the replay."""
    if "outcomes_seconds" not in replay:
        return ""
    return (f"; then reading `result.outcomes` ({replay['outcomes_rows']:,} rows) "
            f"{replay['outcomes_seconds']:.2f} s and `result.bounds` "
            f"({replay['bounds_rows']:,} rows) {replay['bounds_seconds']:.2f} s, peak RSS "
            f"{replay['rss_peak_with_tables_bytes'] / 2**20:.0f} MiB")


def table(s: dict[str, Any]) -> str:
    """The result as a Markdown table (ours, baseline, ratio, target)."""
    raw, sf = s["raw"], s["scaled_from"]
    scaled = "" if sf["factor_steps"] == 1 else f" (measured on {sf['torch_save_steps']:,} " \
        f"steps, scaled x{sf['factor_steps']:g})"
    loop_note = "" if sf["loop_records"] >= s["records"] else \
        f" (measured on {sf['loop_records']:,} records, scaled)"
    rows = _write_rows(s) + [
        ("load", f"{raw['load']['load_seconds']:.2f} s",
         f"torch.load per step: {raw['torch_load_seconds_scaled']:.2f} s{scaled}",
         f"{s['load_speedup']:.1f}x", ">= 20x"),
        ("open (inspect)", f"{s['open_seconds'] * 1e3:.1f} ms", "-", "-", "< 1 s"),
        ("scan", f"{raw['scan_indices_per_second'] / 1e6:.0f} M indices/s "
                 f"({raw['scan']['scan_indices']:,} in {raw['scan']['scan_seconds']:.2f} s)",
         f"bare numpy: {raw['numpy_indices_per_second'] / 1e6:.0f} M indices/s",
         f"{s['scan_fraction_of_numpy']:.2f}x", ">= 0.5x"),
        ("replay (upstream+patched)", f"{raw['replay']['replay_seconds']:.2f} s"
         + _tables_note(raw["replay"]),
         f"fixed per-record loop (benchmarks/baseline.py, upstream only): "
         f"{raw['loop_seconds_scaled']:.2f} s{loop_note}",
         f"{s['replay_speedup']:.2f}x", ">= 20x"),
        ("probe (record mode, CPU tensors)", f"{s['probe_us_per_call']:.1f} us/call; "
         f"calling thread's CPU {s.get('probe_cpu_us_per_call', math.nan):.1f} us/call"
         + _probe_process_note(raw["probe"]),
         raw["probe"]["probe_mode"], "-", "<= 20 us (CPU <= 10 us)"),
        ("memory (replay peak RSS)", f"{raw['replay']['rss_peak_bytes'] / 2**20:.0f} MiB "
         f"({raw['replay']['rss_before_bytes'] / 2**20:.0f} MiB before the replay: Python, "
         "torch, pandas)",
         f"capture on disk: {raw['capture_bytes'] / 2**20:.0f} MiB",
         f"{s['replay_rss_over_capture']:.2f}x", "<= 2x"),
        ("memory added by the replay (peak RSS minus RSS before it)",
         f"{(raw['replay']['rss_peak_bytes'] - raw['replay']['rss_before_bytes']) / 2**20:.0f}"
         " MiB", f"capture on disk: {raw['capture_bytes'] / 2**20:.0f} MiB",
         f"{s.get('replay_added_rss_over_capture', float('nan')):.2f}x", "<= 0.5x"),
        *probe_v2_rows(raw),
        *_report_rows(s),
    ]
    if "triage" in raw:
        from benchmarks import fleet

        rows.append(fleet.triage_row(raw["triage"]))
    lines = ["| measure | ours | baseline | ratio | target |", "|---|---|---|---|---|"]
    lines += [f"| {' | '.join(r)} |" for r in rows]
    m = s["machine"]
    lines.append("")
    lines.append(f"{s['records']:,} records ({s['steps']:,} steps of the `soak` scenario, batch "
                 f"{s['batch']}, {s['drafts']} drafts), {s['date']}; {m['cores']} cores, "
                 f"{m['cpu']}, {m['ram_gib']} GiB RAM, Python {m['python']}, torch "
                 f"{m['torch']}.")
    return "\n".join(lines)


def _report_rows(s: dict[str, Any]) -> list[tuple[str, ...]]:
    """The report row (issue 29): ``forensics report`` of a 2-record capture against its
    ``forensics replay``, wall and CPU (absent from older result files)."""
    rep = s["raw"].get("report")
    if rep is None:
        return []
    cpu = s.get("report_over_replay_cpu")
    rounds = f", best of {rep['rounds']} interleaved" if "rounds" in rep else ""
    return [(f"report (2-record capture, a fresh process{rounds})",
             f"{rep['report_seconds']:.1f} s ({rep['report_cpu_seconds']:.1f} s CPU, peak "
             f"{rep['report_peak_rss_bytes'] / 2**20:.0f} MiB)",
             f"forensics replay of it: {rep['replay_seconds']:.1f} s "
             f"({rep['replay_cpu_seconds']:.1f} s CPU)",
             f"{s['report_over_replay']:.2f}x" + (f" ({cpu:.2f}x CPU)" if cpu else ""),
             "<= 2x")]


def targets(s: dict[str, Any]) -> list[str]:
    """One line per target: met or missed."""
    out = []
    for key, (op, bound) in TARGETS.items():
        if key not in s:
            out.append(f"absent {key} (an older benchmark file)")
            continue
        value = s[key]
        ok = {"<": value < bound, "<=": value <= bound, ">=": value >= bound}[op]
        out.append(f"{'met   ' if ok else 'MISSED'} {key} = {value:.3g} (target {op} {bound:g})")
    return out


# --------------------------------------------------------------------------- main


def run(scale: Scale, work: Path, out: Path | None) -> dict[str, Any]:
    """Run every phase at ``scale`` in ``work``; write ``out`` (JSON); return the summary."""
    work.mkdir(parents=True, exist_ok=True)
    phases = [("write", lambda: write_phase(scale, work))]
    w = _phase(*phases[0])
    capture, pt_dir = Path(w["capture"]), Path(w["pt_dir"])
    o = _phase("open", lambda: open_phase(capture))
    ld = _phase("load", lambda: load_phase(capture, pt_dir))
    sc = _phase("scan", lambda: scan_phase(capture))
    rp = _phase("replay", lambda: replay_phase(capture, scale.loop_records, scale.repeats))
    pr = _phase("probe", lambda: probe_phase(scale.probe_calls, work))
    summary = summarise(scale, w, o, ld, sc, rp, pr, _du(capture), _du(pt_dir))
    summary["raw"]["probe_v2"] = v2 = _phase("probe_v2", lambda: probe_v2_phase(
        scale.probe_calls, work))
    summary.update({f"probe_{key}": v2[key] for key in V2_HEADLINES})
    summary["raw"]["report"] = rep = _phase("report", lambda: report_phase(work))
    summary["report_over_replay"] = rep["report_seconds"] / rep["replay_seconds"]
    summary["report_over_replay_cpu"] = rep["report_cpu_seconds"] / rep["replay_cpu_seconds"]
    from benchmarks import fleet

    summary["raw"]["triage"] = _phase("triage", lambda: fleet.triage_phase(scale.name, work))
    for key, value in summary.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise RuntimeError(f"benchmark value {key} is not finite: {value}")
    if out is not None:
        out.write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def _phase(name: str, fn: Any) -> Any:
    print(f"bench: {name} ...", file=sys.stderr, flush=True)
    gc.collect()
    t0 = _clock()
    result = fn()
    print(f"bench: {name} done in {_clock() - t0:.1f} s", file=sys.stderr, flush=True)
    return result


def _only_phase(name: str, work: Path | None, run: Callable[[Path], dict[str, Any]],
                rows: Callable[[dict[str, Any]], list[tuple[str, ...]]] | None = None) -> int:
    """``--only NAME`` for a phase that needs only a scratch directory: ``run(directory)``
    alone, its figures printed as JSON, then as the table's ``rows`` of them when given."""
    prefix = f"forensics-bench-{name.replace('_', '-')}-"
    directory = Path(tempfile.mkdtemp(prefix=prefix, dir=work))
    try:
        figures = _phase(name, lambda: run(directory))
        print(json.dumps(figures, indent=2))
        for row in rows(figures) if rows is not None else []:
            print(" | ".join(row))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return 0


def _only_replay(scale: Scale, work: Path | None) -> int:
    """``--only replay``: the soak simulated (untimed), then the replay phase alone (our
    replay in fresh processes alternated with the per-record loop), its figures printed as
    JSON with the speed-up and the memory ratios of the full run."""
    from forensics.simulator.columns import write_simulation
    from forensics.simulator.runs import Simulator
    from forensics.simulator.scenarios import configure, manifest_for

    directory = Path(tempfile.mkdtemp(prefix="forensics-bench-replay-", dir=work))
    try:
        capture = directory / "soak.capture"
        sc = configure("soak", steps=scale.steps, batch=BATCH, spec_tokens=DRAFTS)
        write_simulation(capture, Simulator(sc, seed=0), scale.steps, manifest_for(sc, 0))
        rp = _phase("replay", lambda: replay_phase(capture, scale.loop_records, scale.repeats))
        print(json.dumps({**replay_ratios(rp, rp["records"], _du(capture)), "raw": rp},
                         indent=2))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return 0


def _only_scan(scale: Scale, work: Path | None) -> int:
    """``--only scan``: the scan phase alone on the soak, its figures printed as JSON with
    ``scan_fraction_of_numpy``. The soak is simulated (untimed) unless ``work`` holds the
    capture a ``--keep`` run left (``<work>/<scale>/soak.capture``), which is reused."""
    from forensics.simulator.columns import write_simulation
    from forensics.simulator.runs import Simulator
    from forensics.simulator.scenarios import configure, manifest_for

    kept = work / scale.name / "soak.capture" if work is not None else None
    directory = None if kept is not None and kept.is_dir() else \
        Path(tempfile.mkdtemp(prefix="forensics-bench-scan-", dir=work))
    try:
        if directory is None:
            assert kept is not None
            capture = kept
        else:
            capture = directory / "soak.capture"
            sc = configure("soak", steps=scale.steps, batch=BATCH, spec_tokens=DRAFTS)
            write_simulation(capture, Simulator(sc, seed=0), scale.steps, manifest_for(sc, 0))
        figures = _phase("scan", lambda: scan_phase(capture))
        scan_rate, numpy_rate = scan_rates(figures)
        print(json.dumps({"scan_fraction_of_numpy": scan_rate / numpy_rate, "raw": figures},
                         indent=2))
    finally:
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--scale``, ``--work``, ``--json``, ``--keep``,
    ``--only probe|probe_v2|replay|scan|report|triage``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", choices=sorted(SCALES), default="small")
    parser.add_argument("--work", type=Path, default=None,
                        help="directory for generated data (default: a temporary directory)")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "latest.json")
    parser.add_argument("--keep", action="store_true", help="keep the generated data")
    parser.add_argument("--table", action="store_true",
                        help="print the table and targets of the --json file, run nothing")
    parser.add_argument("--only", choices=["probe", "probe_v2", "replay", "scan", "report",
                                           "triage"],
                        help="run only this phase and print its figures (--json untouched)")
    parser.add_argument("--replay-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    scale = SCALES[args.scale]
    if args.only == "probe":
        return _only_phase("probe", args.work,
                           lambda directory: probe_phase(scale.probe_calls, directory))
    if args.only == "probe_v2":
        return _only_phase("probe_v2", args.work,
                           lambda directory: probe_v2_phase(scale.probe_calls, directory),
                           lambda figures: probe_v2_rows({"probe_v2": figures}))
    if args.only == "replay":
        return _only_replay(scale, args.work)
    if args.only == "scan":
        return _only_scan(scale, args.work)
    if args.only == "report":
        return _only_phase("report", args.work, report_phase)
    if args.only == "triage":
        from benchmarks import fleet

        return _only_phase("triage", args.work,
                           lambda directory: fleet.triage_phase(scale.name, directory),
                           lambda figures: [fleet.triage_row(figures)])
    if args.replay_child:
        replay_child(args.replay_child)
        return 0
    if args.table:
        summary = json.loads(args.json.read_text())
        print(table(summary) + "\n\n" + "\n".join(targets(summary)))
        return 0
    work = args.work or Path(tempfile.mkdtemp(prefix="forensics-bench-"))
    started = _clock()
    try:
        summary = run(SCALES[args.scale], work / args.scale, args.json)
    finally:
        if not args.keep:
            shutil.rmtree(work / args.scale, ignore_errors=True)
            if args.work is None:
                shutil.rmtree(work, ignore_errors=True)
    print(table(summary))
    print()
    print("\n".join(targets(summary)))
    print(f"\ntotal {_clock() - started:.1f} s; wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
