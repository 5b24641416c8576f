"""``make bench-engine`` at its smallest: it must not break silently again (issue 41, point 4).

Its V2 half failed because the Makefile passes a relative ``--workdir`` and each engine runs
with that folder as its working directory (the harness then looked for
``benchmarks/work/engine-v2/off/harness.jsonl`` inside it). This runs ``benchmarks/engine.py``
on Model Runner V2 with a relative ``--workdir`` and ``--out``, one round of one prompt of two
tokens, and checks that every figure the Makefile's run reports is there and finite. Timings
are never asserted.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_v2_engine_benchmark_runs_with_a_relative_workdir(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "engine.py"), "--runner", "v2",
         "--workdir", "work/engine-v2", "--out", "engine-v2.json", "--rounds", "1",
         "--prompts", "1", "--max-tokens", "2"],
        cwd=tmp_path, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((tmp_path / "engine-v2.json").read_text())
    figures = [*report["median_tokens_per_s"].values(), report["record_overhead"],
               report["guard_overhead"], *report["cpu_us_per_call"].values()]
    assert len(report["median_tokens_per_s"]) == 3
    assert all(isinstance(f, (int, float)) and math.isfinite(f) for f in figures), report
    assert list((tmp_path / "work" / "engine-v2" / "record").glob("captures/*.capture"))
