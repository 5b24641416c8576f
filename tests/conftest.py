"""Shared fixtures: tiny captures built in memory (no simulator needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

from forensics.cpu_env import before_vllm_import
from forensics.records import Record

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"
#: the words a skip's reason must hold to count as a skip rather than a failure
GPU_ONLY = "GPU-only"
#: every vLLM import of the suite (here, in CLI children, in notebooks) skips humming's
#: background CUDA builds, as a replay does
before_vllm_import()
#: hypothesis draws the same examples on every run (a fixed seed per test, no example
#: database): a CI run tests what the last local run tested, and a red run is reproducible;
#: `pytest --hypothesis-profile=explore` draws new ones
settings.register_profile("repeatable", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile("repeatable")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """A skipped test fails unless its reason says it is a GPU-only check: a missing package,
    browser or core on this machine is a defect of the setup, never a pass."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = str(report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr)
        if GPU_ONLY not in reason:
            report.outcome = "failed"
            report.longrepr = f"skipped, and only GPU-only checks may skip: {reason}"


def embedding_records(bad_step: int | None = None, steps: int = 4) -> list[Record]:
    """Embedding records over ``steps`` steps; ``bad_step`` carries the id 248320 (= the bound)."""
    records = []
    for step in range(steps):
        ids = np.array([1, 2, 3, 248319], dtype=np.int64)
        if step == bad_step:
            ids[2] = 248320
        records.append(Record("embedding", step, 0, {"input_ids": ids,
                                                     "num_embeddings": 248320}))
    return records


@pytest.fixture
def make_capture(tmp_path: Path):
    """Factory: write records into ``tmp_path/NAME.capture`` and return its path."""
    from forensics.store.writer import write_capture

    def make(name: str, records: list[Record]) -> Path:
        return write_capture(tmp_path / f"{name}.capture", records,
                             manifest={"notes": "test fixture"})

    return make


@pytest.fixture(autouse=True)
def _torch_before_pytester(request: pytest.FixtureRequest) -> None:
    """A test using pytester imports torch first (autouse fixtures are set up before the ones
    a test asks for): pytester drops the modules first imported after it was set up when it
    ends (an in-process run's replay of the models imports torch), and torch imported a
    second time in one process fails ("module functions cannot set METH_CLASS"), then crashes
    the process in its garbage collection."""
    if "pytester" in request.fixturenames:
        import torch  # noqa: F401
