"""Run CLI cases, each in a forked child under an address-space limit and a wall clock.

Usage: ``python hostile_driver.py CASES.json``: a list of ``{"name", "argv", "cwd"}``. The
driver imports the CLI and its heavy libraries once, then forks one child per case: the child
sets ``RLIMIT_AS`` (its current size plus :data:`HEADROOM`), sends stdout and stderr to files
and runs ``forensics.cli.main(argv)``; the parent SIGKILLs a child that outlives
:data:`WALL_SECONDS`. Prints one JSON line per case: exit code (or "timeout"), stdout, stderr.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time
from pathlib import Path

HEADROOM = 3 << 30  # bytes of address space a case may add to the driver's
WALL_SECONDS = float(os.environ.get("HOSTILE_WALL_SECONDS", "30"))  # cases that start vLLM: more


def _address_space() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize")


def _child(case: dict[str, object], out: Path, err: Path) -> None:
    from forensics import cli

    os.chdir(str(case["cwd"]))
    limit = _address_space() + HEADROOM
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    for fd, path in ((1, out), (2, err)):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
    try:
        code = cli.main([str(a) for a in case["argv"]])  # type: ignore[union-attr]
    except SystemExit as exc:  # argparse usage errors
        code = exc.code if isinstance(exc.code, int) else 2
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run(case: dict[str, object], scratch: Path) -> dict[str, object]:
    """Run one case in a forked child; its exit code, output and wall time."""
    out, err = scratch / "stdout", scratch / "stderr"
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            _child(case, out, err)
        finally:
            os._exit(99)
    code: object = "timeout"
    while time.monotonic() - start < WALL_SECONDS:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            break
        time.sleep(0.01)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return {"name": case["name"], "code": code, "seconds": round(time.monotonic() - start, 2),
            "stdout": out.read_text(errors="replace")[-4000:] if out.exists() else "",
            "stderr": err.read_text(errors="replace")[-4000:] if err.exists() else ""}


def main() -> None:
    """Import once, then run every case of the file named on the command line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401  (heavy imports once here, not in every child)
    import pandas  # noqa: F401
    import torch  # noqa: F401

    import forensics.cli  # noqa: F401
    import forensics.replaying  # noqa: F401

    cases = json.loads(Path(sys.argv[1]).read_text())
    scratch = Path(sys.argv[1]).parent
    for case in cases:
        print(json.dumps(run(case, scratch)), flush=True)


if __name__ == "__main__":
    main()
