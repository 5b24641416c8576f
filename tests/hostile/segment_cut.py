"""A segment file truncated to nothing in the moment after the reader's check finds it whole
(:meth:`forensics.store.segment.Segment.check_whole`) and before it reads it, in whichever
process reads it: a command run as its own process (:func:`run_cut`), with this module
installed in it and in every Python process it starts (a triage's spawned workers) by a
``sitecustomize`` on their path. ``at``: ``open`` (the check as the segment is opened, before
its schema is read) or ``batch`` (a check before a batch is read); ``where``: ``any`` process
or only a ``worker`` (not the command's own)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

#: what the command's processes read their cut from (JSON: target, at, where)
ENV = "FORENSICS_TEST_SEGMENT_CUT"
ROOT = Path(__file__).resolve().parents[2]


def install() -> None:
    """Cut the target as :data:`ENV` says, once, in this process (nothing without it)."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    import multiprocessing

    from forensics.store import segment

    said = json.loads(spec)
    target, real, cut = Path(said["target"]), segment.Segment.check_whole, []
    opening = said["at"] == "open"

    def check_whole(self: Any) -> None:
        """The real check; then, the first time it finds the target whole, the cut."""
        real(self)
        worker = multiprocessing.current_process().name != "MainProcess"
        if not cut and self.path == target and opening != hasattr(self, "schema") and \
                (said["where"] == "any" or worker):
            cut.append(1)
            os.truncate(target, 0)

    segment.Segment.check_whole = check_whole  # type: ignore[method-assign]


def run_cut(argv: list[str], target: Path, at: str, scratch: Path, where: str = "any"
            ) -> subprocess.CompletedProcess[str]:
    """``forensics ARGV`` run in its own process (in ``scratch``) with ``target`` cut there
    (:func:`install`); what it exited with and wrote."""
    site = scratch / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text("import segment_cut\nsegment_cut.install()\n")
    env = {**os.environ, ENV: json.dumps({"target": str(target), "at": at, "where": where}),
           "PYTHONPATH": os.pathsep.join([str(site), str(Path(__file__).parent), str(ROOT)])}
    code = "import sys; from forensics.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                          env=env, cwd=scratch, timeout=600, check=False)
