"""A fresh machine: the README's two commands are the whole set-up.

The README's prerequisites and commands are held to the Makefile, the CLI and the system tools
the tests run; ``make test`` provisions or stops at once with one line; its stages are announced
and timed; ``make demo`` prints the answer and the report's path.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from forensics.cli import COMMANDS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
MAKEFILE = (ROOT / "Makefile").read_text()
sys.path.insert(0, str(ROOT / "scripts"))
import provision_system  # noqa: E402


def _make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][a-z-]*):", MAKEFILE, flags=re.M))


def _readme_code() -> str:
    return "\n".join(re.findall(r"```[a-z]*\n(.*?)```", README, flags=re.S)) + "\n" + \
        "\n".join(re.findall(r"`([^`\n]+)`", README))


def test_every_make_target_the_readme_names_exists() -> None:
    named = set(re.findall(r"\bmake ([a-z][a-z-]*)", _readme_code()))
    assert {"demo", "test"} <= named
    assert named <= _make_targets(), named - _make_targets()


def test_every_forensics_command_the_readme_names_exists() -> None:
    command = r"^[ \t]*(?:\$ )?(?:\.venv/bin/)?forensics[ \t]+([a-z][a-z-]+)"
    named = set(re.findall(command, _readme_code(), flags=re.M))
    assert {"replay", "inspect", "report", "triage"} <= named
    assert named <= set(COMMANDS), sorted(named - set(COMMANDS))


def _programs_the_code_looks_up() -> set[str]:
    """Every literal passed to ``shutil.which`` in tests/, forensics/, scripts/, benchmarks/."""
    found: set[str] = set()
    for folder in ("tests", "forensics", "scripts", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "which" \
                        and node.args and isinstance(node.args[0], ast.Constant) \
                        and isinstance(node.args[0].value, str):
                    found.add(node.args[0].value)
    return found


def test_every_system_tool_a_test_needs_is_provisioned_and_listed() -> None:
    provisioned = {tool.command for tool in provision_system.SYSTEM_TOOLS}
    looked_up = _programs_the_code_looks_up() - {"uv", "apt-get"}  # uv: the Makefile's own
    assert "chromium" in looked_up  # the scan sees the browser tests' look-ups
    assert looked_up <= provisioned, looked_up - provisioned
    before_you_start = README.split("### Before you start", 1)[1].split("\n## ", 1)[0]
    for tool in provision_system.SYSTEM_TOOLS:
        assert f"`{tool.command}`" in before_you_start, tool.command
    for prerequisite in ("Python 3.11", "`make`"):
        assert prerequisite in before_you_start


def test_ci_runs_the_readme_test_command_and_nothing_else() -> None:
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    commands = [line for line in lines if not line.startswith(("set ", "cd "))]
    assert commands == ["make test"], commands
    assert "make test" in README


def test_make_test_runs_its_stages_through_the_stage_runner() -> None:
    recipe = MAKEFILE.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "scripts/make_test.py" in recipe
    import make_test

    names = [stage.name for stage in make_test.stages("make")]
    assert names[0] == "system" and names[-1] == "test-engine"
    assert set(names) - {"system"} <= _make_targets()


def _python_only_path(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH holds only this Python: no chromium, no apt-get."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    return {**os.environ, "PATH": str(bin_dir)}


def test_missing_browser_without_apt_stops_with_one_line(tmp_path: Path) -> None:
    env = _python_only_path(tmp_path)
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "provision_system.py")],
                          env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "chromium" in lines[0] and "chromedriver" in lines[0] and "valgrind" in lines[0]
    assert "apt-get install -y chromium chromium-driver" in lines[0]


def test_stage_runner_announces_times_and_stops_at_the_first_failure(tmp_path: Path) -> None:
    fake_make = tmp_path / "make"
    fake_make.write_text(
        "#!/bin/sh\n"
        'case "$2" in\n'
        "  unit) echo '.... [100%]'; echo '7 passed, 1 skipped in 2.0s'; exit 0;;\n"
        "  test-engine) echo '3 passed, 2 failed in 9.1s'; exit 1;;\n"
        "  *) echo \"made $2\"; exit 0;;\n"
        "esac\n")
    fake_make.chmod(0o755)
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_test.py"), "--make", str(fake_make),
         "--only", "env", "--only", "unit", "--only", "test-engine"],
        capture_output=True, text=True, timeout=60, check=False)
    out = done.stdout
    assert done.returncode == 1
    assert "[1/3] env" in out and "[2/3] unit" in out and "[3/3] test-engine" in out
    assert "test-engine: FAILED (exit 1)" in out
    assert "time per stage" in out and "total" in out
    assert out.strip().splitlines()[-1] == "tests: 10 passed, 2 failed, 1 skipped"


def test_stage_runner_rejects_an_unknown_stage() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_test.py"),
                           "--only", "nope"], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 2 and "nope" in done.stderr and "unit" in done.stderr


def test_contributing_names_the_longest_stages_and_how_to_run_one() -> None:
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    assert "scripts/make_test.py --only" in contributing
    for stage in ("test-engine", "unit"):
        assert f"`{stage}`" in contributing


@pytest.mark.parametrize("recipe_line", ["$(VENV)/bin/forensics demo -o reports"])
def test_make_demo_prints_the_answer_and_the_report_path(tmp_path: Path,
                                                         recipe_line: str) -> None:
    """``make demo`` is this command; run it (into a scratch folder) and read what it prints."""
    assert recipe_line in MAKEFILE.split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    forensics_bin = Path(sys.executable).parent / "forensics"
    out = tmp_path / "reports"
    done = subprocess.run([str(forensics_bin), "demo", "-o", str(out)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "incident-b-vocab-sentinel" in done.stdout and "violation" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == f"wrote {out}/index.html"
    assert (out / "index.html").is_file()
