"""A fleet task body for ``test_round14_tri14.py``: the row of its capture, its ``error`` the
race window it was handed (JSON), as the process that ran it received it."""

from __future__ import annotations

import json
import os

from forensics.fleet.piece import to_ipc


def piece(path: str, start: int | None, stop: int | None,
          window: tuple[tuple[int, int], ...] | None = None,
          planned: tuple[int, int, int] | None = None) -> bytes:
    """The row of ``path``, naming the window it was given (``planned``, what the capture
    held when cut, is the real task's to check)."""
    return to_ipc([{"capture": path, "name": os.path.basename(path), "start": start,
                    "stop": stop, "error": json.dumps(window)}])
