"""A site and a variant added by a third party through entry points, without editing the
package: the toy site of ``tests/plugins/toy_site.py`` goes through load, replay, findings,
tables and a plot in a fresh interpreter that sees its distribution's entry points."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import forensics.sites
from forensics.sites import SITES

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


def _distribution(root: Path, sites: str = "toy = toy_site:SITE\n") -> None:
    """A distribution declaring ``sites`` (entry-point lines) and the toy variant."""
    info = root / "toy_forensics_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-forensics-plugin\n"
                                   "Version: 1.0\n")
    (info / "entry_points.txt").write_text(f"[forensics.sites]\n{sites}\n"
                                           "[forensics.variants]\ntoy_fix = toy_variant:ToyFix\n")


def _run(root: Path, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``script`` in a fresh interpreter that sees the distribution under ``root``."""
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONPATH=os.pathsep.join(
        [str(root), str(ROOT / "tests" / "plugins"), str(ROOT)]))
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                          text=True, env=env, timeout=300)


def test_a_toy_site_and_variant_from_entry_points_go_through_the_whole_pipeline(
        tmp_path: Path) -> None:
    _distribution(tmp_path)
    figure = tmp_path / "toy.png"
    proc = _run(tmp_path, SCRIPT, str(tmp_path / "toy.capture"), str(figure))
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    built_in = [site for site in SITES if site != "embedding"]
    assert out["sites"] == [*built_in, "toy_gather", "embedding"]
    assert out["loaded"] == 3
    assert out["verdicts"] == {"upstream": {"toy_gather": "violation"},
                               "patched": {"toy_gather": "ok"},
                               "toy_fix": {"toy_gather": "ok"}}
    assert out["findings"] == [["upstream", 1, 1, 5, 4], ["upstream", 2, 0, -1, 4]]
    assert out["summary_sites"] == ["toy_gather"]
    assert out["bounds"] == 9  # three records, three variants: one checked range each
    assert figure.stat().st_size > 0


MALFORMED = r'''
import json, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from forensics.sites import SITES
print(json.dumps({"sites": list(SITES), "warnings": [str(w.message) for w in caught]}))
'''


def test_a_site_plugin_that_is_not_a_site_is_skipped_naming_what_it_lacks(
        tmp_path: Path) -> None:
    _distribution(tmp_path, "module = toy_site\nnumber = toy_site:NAME\n"
                            "broken = toy_site:NO_SUCH_NAME\ntwice = toy_site:SITE\n"
                            "again = toy_site:SITE\nbad = bad_site:SITE\n")
    proc = _run(tmp_path, MALFORMED)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    built_in = [site for site in SITES if site != "embedding"]
    assert out["sites"] == [*built_in, "toy_gather", "embedding"]
    texts = {w.split("'")[1]: w for w in out["warnings"] if "forensics.sites plugin" in w}
    assert set(texts) == {"module", "number", "broken", "again", "bad"}
    assert "names a module, not a forensics.sites.Site (it lacks name, fields, " \
           "output_fields, summary_bound, summary_tensor)" in texts["module"]
    assert "toy_site:SITE" not in texts["module"] and "my_site:SITE" in texts["module"]
    assert "names str, not a forensics.sites.Site (it lacks name, fields" in texts["number"]
    assert "AttributeError" in texts["broken"]
    assert "the site name 'toy_gather' is taken" in texts["again"]
    assert ("SiteDefinitionError: site 'bad_gather': 'checks' must be a function, "
            "got NoneType") in texts["bad"]


FOR_FREE = r'''
import json, sys
from pathlib import Path
import numpy as np
import forensics
from forensics import plots
from forensics.errors import NoAdapterError
from forensics.records import Record
from forensics.share.redaction import redact
from forensics.judge.scan import scan
from forensics.share.shrinking import shrink
from forensics.store.writer import write_capture
from forensics.variants.vllm_adapters import adapter_of
from forensics.probe.guard import bounds_error
from forensics.probe.v2_hooks import checker, violation_of
work = Path(sys.argv[1])
toy = [Record("toy_gather", step, fields={"index": np.array(ix, np.int32), "size": 4})
       for step, ix in enumerate([[0, 1, 2], [3, 5, 1], [0, 2], [1, 1]])]
toy.append(Record("toy_gather", 3, fields={"min": 0, "max": 9, "size": 4}, summary=True))
sink = [Record("embedding", step, fields={"input_ids": np.array(ids, np.int32),
                                          "num_embeddings": 8})
        for step, ids in enumerate([[1, 2], [3, 4], [5, 6], [7, 9]])]
path = write_capture(work / "toy.capture", toy + sink)
result = forensics.replay(path)
table = forensics.findings_table(result)
sink_rows = table[(table["site"] == "embedding") & (table["variant"] == "upstream")]
redacted = redact(path, work / "redacted.capture")
shrunk = shrink(path, work / "shrunk.capture")
scanned = scan(path)
ax = plots.plot_bounds_timeline(result, site="toy_gather")
ax.figure.savefig(work / "toy.png")
try:
    adapter_of("toy_gather")
    adapter = "found"
except NoAdapterError as exc:
    adapter = str(exc)
guard = checker("toy_gather")
import toy_site
guarded = [guard(dict(r.fields)) for r in toy if not r.summary]
upstream = [violation_of("toy_gather", dict(r.fields)) for r in toy if not r.summary]
print(json.dumps({
    "guard": [None if v is None else [v.row, v.tensor, v.value, v.upper, v.used]
              for v in guarded],
    "guard_is_upstream": guarded == upstream, "own_guard": guard is toy_site.guard,
    "guard_error": [str(bounds_error(v, 1, 0, path)) for v in guarded if v is not None],
    "origins": sink_rows[["step", "value", "origin"]].values.tolist(),
    "redacted": [redacted.records, forensics.replay(redacted.path).verdicts == result.verdicts],
    "shrunk": [shrunk.records_before, shrunk.records_kept,
               forensics.replay(shrunk.path).verdicts == result.verdicts],
    "scan": [(e.site, e.tensor, e.checked, e.out_of_range) for e in scanned.entries.values()],
    "adapter": adapter}))
'''


def test_a_plugin_site_gets_redaction_origin_scan_shrink_and_plots_from_its_site_alone(
        tmp_path: Path) -> None:
    """The toy site declares only its schema, models and guard; the rest comes from the
    registry: its summary record's ``max`` (9) is the origin of the sink's 9 at the same step,
    redact, shrink, scan and plot run on its capture (redact used to raise a bare KeyError),
    and the probe's guard mode checks a call with the site's own ``guard``, which finds what
    the upstream model finds (the 5 off the table of 4 at step 1) and raises naming it."""
    _distribution(tmp_path)
    proc = _run(tmp_path, FOR_FREE, str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["guard"] == [None, [1, "table", 5, 4, True], None, None]
    assert out["guard_is_upstream"] and out["own_guard"]
    assert len(out["guard_error"]) == 1
    assert "site 'toy_gather' step 1 rank 0 row 1: table value 5 is outside [0, 4)" in \
        out["guard_error"][0]
    assert out["origins"] == [[3, 9, "toy_gather"]]
    assert out["redacted"] == [9, True]
    assert out["shrunk"][0] == 9 and out["shrunk"][1] < 9 and out["shrunk"][2]
    assert out["scan"] == [["toy_gather", "table", 10, 1], ["embedding", "input_ids", 8, 1]]
    assert "site 'toy_gather' has no real-code adapter" in out["adapter"]
    assert (tmp_path / "toy.png").stat().st_size > 0


LOG = r'''
import json, sys
from pathlib import Path
from forensics.importers import logs
log = Path(sys.argv[1])
log.write_text("start\nTOY-GATHER: max=9 size=4 step=3\n"
               "SM70-TEMB: rows=8 input=(2,) dtype=int32 min=1 max=9\n")
read = logs.read(log)
print(json.dumps([[r.site, r.step, r.fields] for r in read.records]))
'''


def test_a_plugin_sites_log_line_is_read_into_its_summary_record(tmp_path: Path) -> None:
    """The toy site's ``log_line`` is all the log importer needs: its line becomes a summary
    record of the toy site, beside the built-in embedding line."""
    _distribution(tmp_path)
    proc = _run(tmp_path, LOG, str(tmp_path / "run.log"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [
        ["toy_gather", 3, {"min": 0, "max": 9, "size": 4, "line": 2}],
        ["embedding", 4, {"min": 1, "max": 9, "num_embeddings": 8, "num_tokens": 2,
                          "dtype": "int32", "line": 3}]]


def test_the_plugin_contributing_shows_is_the_toy_site_whole_on_public_api_only() -> None:
    """CONTRIBUTING.md's plugin is ``tests/plugins/toy_site.py`` as it is: under 60 lines,
    importing nothing of ``forensics`` but the plugin API of ``forensics.sites``."""
    source = (ROOT / "tests" / "plugins" / "toy_site.py").read_text()
    shown = (ROOT / "CONTRIBUTING.md").read_text().partition(
        "## A site of your own")[2].partition("```python\n")[2].partition("```")[0]
    assert shown == source
    assert len(source.splitlines()) < 60
    tree = ast.parse(source)
    imported = {n.module if isinstance(n, ast.ImportFrom) else a.name
                for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in n.names}
    assert {m for m in imported if m and m.startswith("forensics")} == {"forensics.sites"}
    used = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name) and n.value.id == "fs"}
    assert used <= set(forensics.sites.PLUGIN_API) <= set(forensics.sites.__all__)
