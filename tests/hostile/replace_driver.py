"""Kill a capture replacement at each of its renames and unlinks (a real SIGKILL), then open.

Usage: ``python replace_driver.py WORKDIR``. For k = 1, 2, ... a forked child replaces an old
capture (3 records) with a new one (5 records) and SIGKILLs itself just before its k-th call of
``os.rename``, ``os.replace``, ``os.unlink``, ``os.rmdir`` or ``os.link``; the parent then opens
the path (the next command) and prints one JSON line per k: the records it found, what is left
in the folder, and the same after one more replacement (the next writer). The last k is the
first that the child survives (the replacement done).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import numpy as np

from forensics.records import Record
from forensics.store.reader import load
from forensics.store.writer import write_capture

STEPS = ("rename", "replace", "unlink", "rmdir", "link")


def records(count: int) -> list[Record]:
    """``count`` embedding records, one per step."""
    return [Record("embedding", step, 0, {"input_ids": np.arange(4, dtype=np.int32),
                                          "num_embeddings": 10}) for step in range(count)]


def kill_before(k: int) -> None:
    """Make this process SIGKILL itself just before its k-th rename/replace/unlink/rmdir/link."""
    calls = [0]
    for name in STEPS:
        real = getattr(os, name)

        def step(*args: object, _real: object = real, **kwargs: object) -> object:
            calls[0] += 1
            if calls[0] == k:
                os.kill(os.getpid(), signal.SIGKILL)
            return _real(*args, **kwargs)  # type: ignore[operator]

        setattr(os, name, step)


def trial(root: Path, k: int) -> dict[str, object]:
    """Replace under a kill at step ``k``; open the path afterwards."""
    root.mkdir()
    out = root / "x.capture"
    write_capture(out, records(3))
    pid = os.fork()
    if pid == 0:
        kill_before(k)
        write_capture(out, records(5), force=True)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    capture = load(out)  # the next command on that path
    found = [int(r.step) for r in capture]
    left = sorted(os.listdir(root))
    write_capture(out, records(7), force=True)  # the next writer also clears dead builds
    return {"k": k, "killed": killed, "records": len(found),
            "whole": found == list(range(len(found))), "left": left,
            "after_write": sorted(os.listdir(root)), "rewritten": len(load(out))}


def main() -> None:
    """Run trials until the child survives; one JSON line each."""
    work = Path(sys.argv[1])
    for k in range(1, 200):
        result = trial(work / f"k{k}", k)
        print(json.dumps(result), flush=True)
        if not result["killed"]:
            return


if __name__ == "__main__":
    main()
