"""A site and a variant added by a third party through entry points, without editing the
package: the toy site of ``tests/plugins/toy_site.py`` goes through load, replay, findings,
tables and a plot in a fresh interpreter that sees its distribution's entry points."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = r'''
import json, sys
import numpy as np
import forensics
from forensics import plots
from forensics.records import Record
from forensics.sites import SITES
from forensics.store.writer import write_capture
records = [Record("toy_gather", step, fields={"index": np.array(ix, np.int32), "size": 4})
           for step, ix in enumerate([[0, 1, 2], [3, 5, 1], [-1, 2]])]
path = write_capture(sys.argv[1], records)
capture = forensics.load(path)
result = forensics.replay(capture, variants=["upstream", "patched", "toy_fix"])
table = forensics.findings_table(result)
summary = forensics.summary_by_site(result)
ax = plots.plot_bounds_timeline(result, site="toy_gather")
ax.figure.savefig(sys.argv[2])
print(json.dumps({"sites": list(SITES), "loaded": len(capture), "verdicts": result.verdicts,
                  "findings": table[["variant", "step", "row", "value", "upper"]].values.tolist(),
                  "summary_sites": sorted(set(summary["site"])),
                  "bounds": len(result.bounds)}))
'''


def _distribution(root: Path) -> None:
    """A distribution declaring the toy site and variant in its entry points."""
    info = root / "toy_forensics_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-forensics-plugin\n"
                                   "Version: 1.0\n")
    (info / "entry_points.txt").write_text("[forensics.sites]\ntoy = toy_site\n\n"
                                           "[forensics.variants]\ntoy_fix = toy_variant:ToyFix\n")


def test_a_toy_site_and_variant_from_entry_points_go_through_the_whole_pipeline(
        tmp_path: Path) -> None:
    _distribution(tmp_path)
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONPATH=os.pathsep.join(
        [str(tmp_path), str(ROOT / "tests" / "plugins"), str(ROOT)]))
    figure = tmp_path / "toy.png"
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "toy.capture"),
                           str(figure)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["sites"] == ["batch_change", "prepare_input_ids", "async_output", "toy_gather",
                            "embedding"]
    assert out["loaded"] == 3
    assert out["verdicts"] == {"upstream": {"toy_gather": "violation"},
                               "patched": {"toy_gather": "ok"},
                               "toy_fix": {"toy_gather": "ok"}}
    assert out["findings"] == [["upstream", 1, 1, 5, 4], ["upstream", 2, 0, -1, 4]]
    assert out["summary_sites"] == ["toy_gather"]
    assert out["bounds"] == 9  # three records, three variants: one checked range each
    assert figure.stat().st_size > 0
