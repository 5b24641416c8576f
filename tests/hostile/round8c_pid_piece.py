"""A fleet task body for ``test_round8c_workers.py``: the row of its capture, its ``error``
the id of the process that ran it."""

from __future__ import annotations

import os

from forensics.fleet.piece import to_ipc


def piece(path: str, start: int | None, stop: int | None,
          window: tuple[tuple[int, int], ...] | None = None) -> bytes:
    """The row of ``path``, naming the process it ran in."""
    return to_ipc([{"capture": path, "name": os.path.basename(path), "start": start,
                    "stop": stop, "error": str(os.getpid())}])
