"""Fleet task bodies for ``test_round6_fleet.py``: one whose process dies abruptly for a capture
named ``dies`` (a capture that crashes its worker), slow for ``slow``, deaf to the deadline for
``deaf...``; any other gives a row naming its capture. :func:`killer` replays real captures and
sends its own process SIGKILL for one named ``killed``."""

from __future__ import annotations

import os
import time

from forensics.fleet.piece import to_ipc

to_ipc([{"capture": "warm-up"}])  # what a row needs is imported with the task's function,
#                                   not inside its deadline (a busy machine takes seconds)


def piece(path: str, start: int | None, stop: int | None,
          window: tuple[tuple[int, int], ...] | None = None) -> bytes:
    """The row of ``path``; the process ends abruptly (no answer, no exception) for ``dies``
    and the row comes after 3 s for ``slow``."""
    name = os.path.basename(path)
    if name == "dies":
        os._exit(1)
    if name == "slow":
        time.sleep(3)
    return to_ipc([{"capture": path, "name": name, "start": start, "stop": stop,
                    "error": None}])


def deaf(path: str, start: int | None, stop: int | None,
         window: tuple[tuple[int, int], ...] | None = None) -> bytes:
    """As :func:`piece`, but a capture named ``deaf...`` never returns and ignores the
    deadline's signal (a task stuck outside Python, where no signal reaches it)."""
    import signal

    if os.path.basename(path).startswith("deaf"):
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        while True:
            time.sleep(60)
    return piece(path, start, stop)


class Odd(Exception):
    """An exception that cannot be pickled (it holds a lock) and whose text spans lines."""

    def __init__(self) -> None:
        import threading

        super().__init__("first line\nsecond \x1b[31mline")
        self.lock = threading.Lock()


def odd(path: str, start: int | None, stop: int | None,
        window: tuple[tuple[int, int], ...] | None = None) -> bytes:
    """As :func:`piece`, but raises :class:`Odd` for a capture named ``odd``."""
    if os.path.basename(path) == "odd":
        raise Odd()
    return piece(path, start, stop)


def killer(path: str, start: int | None, stop: int | None,
           window: tuple[tuple[int, int], ...] | None = None) -> bytes:
    """The real task (:func:`forensics.fleet.piece.replay_piece`), but a capture named
    ``killed`` has the process send itself SIGKILL (what the OOM killer sends)."""
    import signal

    from forensics.fleet.piece import replay_piece

    if os.path.basename(path) == "killed":
        os.kill(os.getpid(), signal.SIGKILL)
    return replay_piece(path, start, stop, window)
