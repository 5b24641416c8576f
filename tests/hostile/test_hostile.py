"""The hostile-input suite: every case of ``cases.py`` through the real CLI, each in its own
process under a wall clock and an address-space limit (``hostile_driver.py``)."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cases import CASES, Case

DRIVER = Path(__file__).with_name("hostile_driver.py")
CANARY = "canary: must never change\n"


def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Build every case, run them all through the driver; results by case name."""
    root = tmp_path_factory.mktemp("hostile")
    outside = root / "outside"
    outside.mkdir()
    (outside / "canary.txt").write_text(CANARY)
    before = _snapshot(outside)
    built: dict[str, Case] = {}
    for name, builder in CASES.items():
        work = root / "work" / name
        work.mkdir(parents=True)
        built[name] = builder(work, outside)
        built[name].extra["cwd"] = str(work)
    spec = [{"name": n, "argv": [str(a) for a in c.argv], "cwd": c.extra["cwd"]}
            for n, c in built.items()]
    (root / "cases.json").write_text(json.dumps(spec))
    run = subprocess.run([sys.executable, str(DRIVER), str(root / "cases.json")],
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    results = {r["name"]: r for r in map(json.loads, run.stdout.splitlines())}
    return {"cases": built, "results": results, "outside": outside, "before": before}


@pytest.mark.parametrize("name", sorted(CASES))
def test_case_ends_in_exit_0_or_2_with_one_line(suite: dict[str, Any], name: str) -> None:
    case, result = suite["cases"][name], suite["results"][name]
    assert result["code"] in case.codes, result
    err = result["stderr"].strip()
    if result["code"] == 2:
        assert len(err.splitlines()) == 1, result
        assert err.startswith(f"forensics {case.argv[0]}: error: "), result
        assert "internal error" not in err and "out of memory" not in err, result
        text = err
    elif case.warn:
        assert len(err.splitlines()) == 1 and err.startswith("forensics: warning: "), result
        assert re.search(case.warn, err), (case.warn, result)
        text = result["stdout"]
    else:
        assert err == "", result
        text = result["stdout"]
    assert re.search(case.expect, text, re.S), (case.expect, result)


def test_nothing_outside_the_working_folders_changed(suite: dict[str, Any]) -> None:
    outside: Path = suite["outside"]
    assert _snapshot(outside) == suite["before"]
    assert not (outside / "code-ran").exists()
    assert (outside / "canary.txt").read_text() == CANARY


def test_every_case_ran(suite: dict[str, Any]) -> None:
    assert sorted(suite["results"]) == sorted(CASES)
