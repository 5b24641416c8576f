"""benchmarks/run.py at the tiny scale: it runs end to end and writes finite figures.

Timings are never asserted (shared, noisy machines); only that every headline key exists and
is a finite number.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KEYS = ("records", "generate_seconds", "soak_generate_seconds_per_250k", "write_speedup",
        "open_seconds", "load_speedup", "replay_speedup", "scan_fraction_of_numpy",
        "probe_us_per_call", "probe_cpu_us_per_call", "replay_rss_over_capture",
        "replay_added_rss_over_capture", "report_over_replay", "report_over_replay_cpu")


def test_tiny_benchmark_writes_finite_figures(tmp_path: Path) -> None:
    out = tmp_path / "latest.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--scale",
                           "tiny", "--work", str(tmp_path / "work"), "--json", str(out)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(out.read_text())
    for key in KEYS:
        assert isinstance(summary[key], (int, float)) and math.isfinite(summary[key]), key
    assert summary["records"] == 1000
    assert summary["soak_generate_seconds_per_250k"] == pytest.approx(
        summary["generate_seconds"] * 1000)  # 250 steps, scaled to 250,000
    assert math.isfinite(summary["raw"]["generate_cpu_seconds"])
    assert summary["scaled_from"]["baseline_records"] == 1000
    assert summary["raw"]["replay"]["records"] == summary["records"]
    assert summary["raw"]["scan"]["scan_indices"] > 0
    assert {"cores", "cpu", "ram_gib"} <= set(summary["machine"]) and summary["date"]
    assert "| measure |" in proc.stdout
    triage = summary["raw"]["triage"]  # the fleet row: local always, Ray or why not
    assert triage["captures"] == 12 and math.isfinite(triage["local_seconds"])
    assert "| triage (12 captures" in proc.stdout
    assert "| simulate soak -o (generate) |" in proc.stdout
    assert "soak_generate_seconds_per_250k" in proc.stdout  # the issue-6 target line
    assert not (tmp_path / "work" / "tiny").exists()  # generated data removed
