"""The README's commands work as written: plain ``pytest`` (not ``python -m pytest``) collects
the suite, and every capture named in a command's ``--help`` example exists."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

from forensics.cli import COMMANDS

ROOT = Path(__file__).resolve().parent.parent


def test_plain_pytest_collects_the_tests_and_captures() -> None:
    pytest_bin = Path(sys.executable).parent / "pytest"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [str(pytest_bin), "--collect-only", "-q", "-p", "no:cacheprovider",
         "--forensics-captures", "data", "tests/test_conclusion.py", "tests/test_report.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "test_conclusion_of_incident_b" in done.stdout
    assert "incident-b-vocab-sentinel.capture" in done.stdout


def test_help_examples_name_captures_that_exist() -> None:
    named = []
    for module_name, _ in COMMANDS.values():
        example = getattr(importlib.import_module(f"forensics.commands.{module_name}"),
                          "EXAMPLE", "") or ""
        named += re.findall(r"\b(data/\S+?\.capture)\b", example)
    assert named, "the examples name bundled captures"
    missing = [path for path in named if not (ROOT / path).is_dir()]
    assert not missing, missing
