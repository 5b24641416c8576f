"""Fleet task bodies for ``test_round6_fleet.py``: one whose process dies abruptly for a capture
named ``dies`` (a capture that crashes its worker), one slow for ``slow``; any other gives a row
naming its capture."""

from __future__ import annotations

import os
import time

from forensics.fleet.piece import to_ipc


def piece(path: str, start: int | None, stop: int | None) -> bytes:
    """The row of ``path``; the process ends abruptly (no answer, no exception) for ``dies``
    and the row comes after 3 s for ``slow``."""
    name = os.path.basename(path)
    if name == "dies":
        os._exit(1)
    if name == "slow":
        time.sleep(3)
    return to_ipc([{"capture": path, "name": name, "start": start, "stop": stop,
                    "error": None}])
