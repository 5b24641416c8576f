"""The system tools the test suite needs that ``uv.lock`` cannot hold, declared once.

``make test`` runs this first. Each tool present: nothing to do. Missing ones are installed
where the machine allows it (Debian or Ubuntu, as root: ``apt-get``); anywhere else it stops
within seconds with one line naming what is missing and the command that installs it.
Standard library only: it runs before ``.venv`` exists.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class SystemTool:
    """A program on PATH that some tests run, and the Debian package that provides it."""

    command: str
    debian_package: str
    needed_for: str


#: every program outside the lock that a test runs (tests/test_readme_commands.py holds the
#: tests to this list, and the README's "Before you start" names each one)
SYSTEM_TOOLS = (
    SystemTool("chromium", "chromium", "the report's browser tests (headless Chromium)"),
    SystemTool("chromedriver", "chromium-driver", "driving Chromium from the browser tests"),
    SystemTool("valgrind", "valgrind", "the linear-time tests (callgrind counts instructions)"),
    SystemTool("callgrind_control", "valgrind",
               "the linear-time tests (turns callgrind's instrumentation on after the imports)"),
)


def missing(tools: tuple[SystemTool, ...] = SYSTEM_TOOLS) -> list[SystemTool]:
    """The tools not found on PATH."""
    return [tool for tool in tools if shutil.which(tool.command) is None]


def can_install() -> bool:
    """True on a machine where this script may install packages: apt-get present, run as root."""
    return shutil.which("apt-get") is not None and hasattr(os, "geteuid") and os.geteuid() == 0


def install(tools: list[SystemTool]) -> int:
    """Install ``tools`` with apt-get; return its exit status."""
    packages = sorted({tool.debian_package for tool in tools})
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    print(f"installing {', '.join(packages)} with apt-get (for "
          f"{'; '.join(tool.needed_for for tool in tools)})", flush=True)
    update = subprocess.run(["apt-get", "update", "-qq"], env=env, check=False)
    if update.returncode:
        return update.returncode
    return subprocess.run(["apt-get", "install", "-y", "-qq", *packages], env=env,
                          stdout=subprocess.DEVNULL, check=False).returncode


def instruction(tools: list[SystemTool]) -> str:
    """One line: what is missing and the command that installs it."""
    names = ", ".join(tool.command for tool in tools)
    packages = " ".join(sorted({tool.debian_package for tool in tools}))
    return (f"make test needs {names} on PATH ({'; '.join(t.needed_for for t in tools)}); "
            f"install them first: sudo apt-get install -y {packages} (Debian/Ubuntu; elsewhere "
            f"your system's packages of the same names)")


def main() -> int:
    """Check, and install where allowed; return 0 when every tool is there."""
    absent = missing()
    if not absent:
        print("system tools present: " + ", ".join(t.command for t in SYSTEM_TOOLS))
        return 0
    if not can_install():
        print(instruction(absent), file=sys.stderr)
        return 1
    status = install(absent)
    still = missing()
    if status or still:
        print(instruction(still or absent), file=sys.stderr)
        return 1
    print("system tools installed: " + ", ".join(t.command for t in absent))
    return 0


if __name__ == "__main__":
    sys.exit(main())
