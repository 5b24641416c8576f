"""A fleet task that never returns for a capture named ``stuck`` (for the deadline test of
``forensics.fleet.runners.run_local``); any other gives a row naming its capture."""

from __future__ import annotations

import os
import time

from forensics.fleet.piece import to_ipc


def piece(path: str, start: int | None, stop: int | None,
          window: tuple[tuple[int, int], ...] | None = None) -> bytes:
    """The row of ``path``, or no answer ever when its name is ``stuck``."""
    if os.path.basename(path) == "stuck":
        while True:
            time.sleep(60)
    return to_ipc([{"capture": path, "name": os.path.basename(path), "start": start,
                    "stop": stop, "error": None}])
