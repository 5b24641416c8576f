"""Foundation checks: light import, pinned environment, notebooks stored without outputs."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "vllm", "matplotlib", "pyarrow")


@pytest.mark.parametrize("module", ["forensics", "forensics.sites", "forensics.variants",
                                    "forensics.validate", "forensics.cli"])
def test_import_is_light(module: str) -> None:
    code = (f"import sys, {module}; "
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout.strip()
    assert out == "", f"import {module} pulled in {out}"


def test_heavy_modules_are_detected_when_imported() -> None:
    """Guards the test above: the same probe does see a heavy import."""
    code = "import sys, pyarrow; print('pyarrow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout.strip()
    assert out == "True"


def test_environment_yml_matches_lock() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "scripts/sync_environment.py"),
                             "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_lock_pins_vllm_and_its_torch() -> None:
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    versions = {p["name"]: p["version"] for p in lock["package"]}
    assert versions["vllm"] == "0.33.0"
    assert versions["torch"] == "2.14.0"
    text = (ROOT / "environment.yml").read_text()
    assert '"vllm==0.33.0"' in text and '"torch==2.14.0"' in text
    assert "python=3.11" in text


def test_installed_versions_are_the_locked_ones() -> None:
    import importlib.metadata as md

    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    versions = {p["name"]: p["version"] for p in lock["package"]}
    for name in ("torch", "vllm", "numpy", "pandas", "pyarrow", "matplotlib"):
        assert md.version(name) == versions[name], name


def _notebooks() -> list[Path]:
    return sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_committed_notebooks_carry_no_outputs() -> None:
    dirty = []
    for path in _notebooks():
        for cell in json.loads(path.read_text())["cells"]:
            if cell.get("cell_type") == "code" and (cell.get("outputs")
                                                    or cell.get("execution_count")):
                dirty.append(path.name)
                break
    assert not dirty, f"clear outputs before committing: {dirty}"
