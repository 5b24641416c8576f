"""A fleet task that never returns for a capture named ``stuck``, nor for one named ``deaf``
(asleep with SIGALRM blocked: no deadline's signal reaches it), for the deadline tests of
``forensics.fleet.runners.run_local``; any other gives a row naming its capture."""

from __future__ import annotations

import os
import signal
import time

from forensics.fleet.piece import to_ipc


def piece(path: str, start: int | None, stop: int | None,
          window: tuple[tuple[int, int], ...] | None = None) -> bytes:
    """The row of ``path``, or no answer ever when its name is ``stuck`` or ``deaf``."""
    if os.path.basename(path) == "deaf":
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    if os.path.basename(path) in ("stuck", "deaf"):
        while True:
            time.sleep(60)
    return to_ipc([{"capture": path, "name": os.path.basename(path), "start": start,
                    "stop": stop, "error": None}])
