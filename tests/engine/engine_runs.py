"""Start real vLLM engines (``.venv-engine``, vLLM's CPU build) for the live-engine tests.

Each :class:`Scenario` is one engine run of ``drive.py`` with its own environment: probe
settings, harness switches and faults. The runs go two at a time (each engine worker is pinned
to one core) and each test reads the :class:`Run` of the scenario it checks; several checks share
one run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
ENGINE_PYTHON = ROOT / ".venv-engine" / "bin" / "python"
HERE = Path(__file__).resolve().parent
HARNESS = HERE / "harness"
MODEL_DIR = ROOT / ".cache" / "engine-model"
VOCAB = 512
#: engine runs at once: each worker is pinned to one core, the machine has two
PARALLEL = 2


@dataclass(frozen=True)
class Scenario:
    """One engine run: the driver's options and the environment added to the base one."""

    name: str
    env: dict[str, str] = field(default_factory=dict)
    spec: int = 3
    max_tokens: int = 32
    probe: bool = True
    kill_after_records: int = 0  # > 0: kill the recording worker once this many are flushed
    kill_signal: int = signal.SIGKILL  # the signal it is killed with
    kill_delay: float = 0.0  # seconds from reaching kill_after_records to the kill
    legacy_names: bool = False  # give the probe settings their older VLLM_FORENSICS_* names


@dataclass
class Run:
    """What one scenario's engine did."""

    scenario: Scenario
    returncode: int
    result: dict[str, Any]
    log: str
    capture: Path | None
    faults: list[dict[str, Any]]
    extra: dict[str, Any] = field(default_factory=dict)

    def scenario_env_names(self) -> set[str]:
        """The names of the variables the engine ran with."""
        return set(self.extra.get("env", {}))

    @property
    def error(self) -> dict[str, Any] | None:
        """The exception generation raised in the driver (type, message, traceback), or None."""
        return self.result.get("error")


def build_model() -> Path:
    """Build (or reuse) the tiny random Llama and its tokenizer under ``.cache/``."""
    subprocess.run([str(ENGINE_PYTHON), str(HERE / "make_model.py"), str(MODEL_DIR)], check=True,
                   env={**_base_env(), "HF_HUB_OFFLINE": "1"}, capture_output=True, timeout=600)
    return MODEL_DIR


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("FORENSICS_", "VLLM_FORENSICS_", "VLLM_"))}
    env.pop("PYTHONPATH", None)
    return env


def scenario_env(scenario: Scenario, workdir: Path) -> dict[str, str]:
    """The run's environment: offline, the harness on PYTHONPATH, async scheduling on, a small
    KV cache, the probe writing into ``workdir/captures`` (unless off), then ``scenario.env``."""
    env = {**_base_env(), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(HARNESS),
           "FORENSICS_HARNESS_ASYNC": "1", "FORENSICS_HARNESS_LOG": str(workdir / "harness.jsonl"),
           "VLLM_CPU_KVCACHE_SPACE": "1", "FORENSICS_FLUSH_EVERY": "16"}
    if scenario.probe:
        env["FORENSICS_DIR"] = str(workdir / "captures")
    env.update(scenario.env)
    if scenario.legacy_names:
        for name in [n for n in env if n.startswith("FORENSICS_") and "HARNESS" not in n]:
            env["VLLM_" + name] = env.pop(name)
    return env


def start(scenario: Scenario, model: Path, workdir: Path) -> tuple[subprocess.Popen[bytes], Any]:
    """Start the driver of ``scenario``; return the process and its open log file."""
    workdir.mkdir(parents=True, exist_ok=True)
    command = [str(ENGINE_PYTHON), str(HERE / "drive.py"), "--model", str(model), "--out",
               str(workdir / "result.json"), "--spec", str(scenario.spec), "--penalties",
               "--max-tokens", str(scenario.max_tokens)]
    log = open(workdir / "engine.log", "wb")  # noqa: SIM115  (closed by finish)
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=workdir,
                               env=scenario_env(scenario, workdir), start_new_session=True)
    return process, log


def finish(scenario: Scenario, process: subprocess.Popen[bytes], log: Any, workdir: Path,
           timeout: float = 480) -> Run:
    """Wait for the driver (killing its process group on ``timeout``) and collect the Run."""
    try:
        returncode = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        returncode = process.wait()
    log.close()
    result_path = workdir / "result.json"
    result = json.loads(result_path.read_text()) if result_path.exists() else {}
    captures = sorted((workdir / "captures").glob("*.capture"))
    harness = workdir / "harness.jsonl"
    faults = [json.loads(line) for line in harness.read_text().splitlines()] \
        if harness.exists() else []
    return Run(scenario, returncode, result, (workdir / "engine.log").read_text(errors="replace"),
               captures[0] if captures else None, faults,
               {"env": scenario_env(scenario, workdir)})


def recording_pid(capture: Path) -> int | None:
    """The pid of the process that writes segments into ``capture`` (from the segment names,
    ``SITE.rRANK.HOST-PID.NNNN.arrows``), or None before the first segment."""
    for segment in capture.glob("*.arrows"):
        return int(segment.name.split(".")[2].rsplit("-", 1)[1])
    return None


def flushed_records(capture: Path) -> int:
    """Records readable in ``capture`` now (0 while it cannot be opened yet)."""
    import forensics

    try:
        return len(list(forensics.load(capture)))
    except Exception:  # not written yet, or the manifest is not there yet
        return 0


def run_and_kill(scenario: Scenario, model: Path, workdir: Path) -> Run:
    """Run ``scenario`` and kill the recording worker mid-generation (its ``kill_signal``),
    once its capture holds ``kill_after_records`` readable records; the Run's ``extra`` holds
    how many were readable just before the kill. (The scenario slows each step down a little
    through the harness, so generation is still going on then.)"""
    process, log = start(scenario, model, workdir)
    deadline, before, pid = time.monotonic() + 420, 0, None
    while time.monotonic() < deadline and process.poll() is None:
        captures = sorted((workdir / "captures").glob("*.capture"))
        pid = recording_pid(captures[0]) if captures else None
        if pid is not None:
            before = flushed_records(captures[0])
            if before >= scenario.kill_after_records:
                time.sleep(scenario.kill_delay)  # steps go on past the last flush
                os.kill(pid, scenario.kill_signal)
                break
        time.sleep(0.2)
    run = finish(scenario, process, log, workdir)
    run.extra.update(records_before_kill=before, killed_pid=pid)
    return run


def run(scenario: Scenario, model: Path, workdir: Path) -> Run:
    """Run ``scenario`` to its end."""
    if scenario.kill_after_records:
        return run_and_kill(scenario, model, workdir)
    process, log = start(scenario, model, workdir)
    return finish(scenario, process, log, workdir)


class Runs:
    """All scenarios, started at once two at a time; :meth:`get` waits for one."""

    def __init__(self, scenarios: list[Scenario], model: Path, root: Path) -> None:
        self._pool = ThreadPoolExecutor(PARALLEL)
        self._futures: dict[str, Future[Run]] = {
            s.name: self._pool.submit(run, s, model, root / s.name) for s in scenarios}

    def get(self, name: str) -> Run:
        """The Run of scenario ``name`` (waits for it)."""
        return self._futures[name].result()

    def close(self) -> None:
        """Wait for every run (none is left running after the tests)."""
        self._pool.shutdown(wait=True)


def forensics_cli(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m forensics.cli ARGS`` (the project's CLI in that environment)."""
    return subprocess.run([str(python), "-m", "forensics.cli", *args], capture_output=True,
                          text=True, timeout=600, env={**_base_env(), "HF_HUB_OFFLINE": "1"})


def replay_json(python: Path, capture: Path, *variants: str) -> dict[str, Any]:
    """``forensics replay CAPTURE --variant ... --json`` in ``python``'s environment."""
    args = [str(capture), "--json"]
    for variant in variants:
        args += ["--variant", variant]
    done = forensics_cli(python, "replay", *args)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


PROJECT_PYTHON = Path(sys.executable)
