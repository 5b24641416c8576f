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
        "replay_added_rss_over_capture", "report_over_replay", "report_over_replay_cpu",
        "probe_v2_record_us_per_call",
        "probe_v2_record_cpu_us_per_call", "probe_v2_guard_us_per_call",
        "probe_v2_guard_cpu_us_per_call")
#: the probe_v2 phase's cases (runner, site, mode), each with its figures per call
PROBE_V2_CASES = [f"{case}_{mode}" for case in ("v1_batch_change", "v2_combine", "v2_post_update")
                  for mode in ("record", "guard")]
PROBE_V2_FIGURES = ("us_per_call", "cpu_us_per_call", "process_cpu_us_per_call")


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
    probe_v2 = summary["raw"]["probe_v2"]  # V2's call sites beside V1's, record and guard
    for case in PROBE_V2_CASES:
        for figure in PROBE_V2_FIGURES:
            assert math.isfinite(probe_v2[case][figure]), (case, figure)
    for name, counts in probe_v2["counts"].items():  # every call recorded, nothing lost
        assert counts["written"] == counts["records"] > 0 and not counts["dropped"], name
        assert counts["violations"] == counts["errors"] == 0, name
    assert "| probe on V2, combine (guard mode" in proc.stdout
    assert "| measure |" in proc.stdout
    triage = summary["raw"]["triage"]  # the fleet row: local always, Ray or why not
    assert triage["captures"] == 12 and math.isfinite(triage["local_seconds"])
    assert "| triage (12 captures" in proc.stdout
    assert "| simulate soak -o (generate) |" in proc.stdout
    assert "soak_generate_seconds_per_250k" in proc.stdout  # the issue-6 target line
    assert not (tmp_path / "work" / "tiny").exists()  # generated data removed
