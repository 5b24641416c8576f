"""Write environment.yml from uv.lock, so the conda environment carries the same pins.

Usage: python scripts/sync_environment.py [--check]
With --check it exits 1 when environment.yml differs from what uv.lock implies.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENV_FILE = ROOT / "environment.yml"
HEADER = """\
# Generated from uv.lock by scripts/sync_environment.py; do not edit by hand.
# conda env create -f environment.yml && conda activate vllm-forensics
name: vllm-forensics
channels:
  - conda-forge
dependencies:
  - python=3.11
  - pip
  - pip:
"""


def find_uv() -> str:
    """Return the path of the uv executable (on PATH or in ~/.local/bin)."""
    found = shutil.which("uv") or os.path.expanduser("~/.local/bin/uv")
    if not os.path.exists(found):
        raise SystemExit("uv not found; run `make env` first (it installs uv)")
    return found


def locked_requirements() -> list[str]:
    """The exact pins of every locked dependency (all extras), with their platform markers."""
    out = subprocess.run(
        [find_uv(), "export", "--all-extras", "--no-hashes", "--no-emit-project",
         "--no-header", "--frozen", "--format", "requirements-txt"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout
    return [line.strip() for line in out.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def render() -> str:
    """The text environment.yml must have."""
    lines = [f"      - \"{req}\"" for req in locked_requirements()]
    lines.append("      - \"-e .[notebooks,vllm,dev,fleet]\"")
    return HEADER + "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    text = render()
    if args.check:
        same = ENV_FILE.exists() and ENV_FILE.read_text() == text
        print("environment.yml matches uv.lock" if same else
              "environment.yml drifted from uv.lock: run python scripts/sync_environment.py")
        return 0 if same else 1
    ENV_FILE.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
