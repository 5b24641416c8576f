"""The global rank a probe reports: torch.distributed's once its process group is up, else
``$RANK`` (read once), else 0; while it is not final, asked at most once per step."""

from __future__ import annotations

import logging
import os
from typing import Any

from forensics.digits import ascii_int
from forensics.records import MAX_RANK

LOG = logging.getLogger("forensics.probe")
_DIST: Any = None
MAX_DIGITS = 19  # a longer $RANK is no rank (and never converted)


class RankTracker:
    """The rank of one process, final once torch.distributed gives it."""

    def __init__(self) -> None:
        self._rank: int | None = None
        self._rank_step, self._rank_guess = -2, 0  # a provisional rank and its step
        self._env_rank: int | None = None  # $RANK, read once

    def at(self, step: int) -> int:
        """The rank at engine step ``step`` (torch.distributed once initialised, else
        ``$RANK``, else 0)."""
        if self._rank is None:
            if self._rank_step == step:  # asked once per step until it is final
                return self._rank_guess
            rank = distributed_rank()
            if rank is None:  # not final: $RANK (read once), else 0
                if self._env_rank is None:
                    self._env_rank = env_rank()
                self._rank_step, self._rank_guess = step, self._env_rank
                return self._env_rank
            self._rank = rank
        return self._rank


def distributed_rank() -> int | None:
    """The torch.distributed rank once its process group is initialised (and it is a rank:
    :func:`is_rank`), else None."""
    global _DIST
    try:
        if _DIST is None:
            import torch.distributed as dist

            _DIST = dist if dist.is_available() else False
        if _DIST and _DIST.is_initialized():
            rank = int(_DIST.get_rank())
            return rank if is_rank(rank) else None
    except Exception:  # an uninitialised or torn-down process group
        pass
    return None


def env_rank() -> int:
    """``$RANK`` (torchrun and most launchers set it) when it is a rank (:func:`is_rank`)
    written in ASCII digits (:func:`~forensics.digits.ascii_int`), else 0; a ``$RANK`` that is
    no rank (``-1``, a number past int32, text, another script's digits ``٣``, ``+3``,
    ``1_0``) is said in one log line, never raised into the engine: a record of rank -1 would
    go to a segment no reader opens, and ``int()`` read ``٣`` as rank 3."""
    raw = os.environ.get("RANK", "").strip()
    rank = ascii_int(raw or "0", MAX_DIGITS)
    if rank is not None and is_rank(rank):
        return rank
    LOG.warning("forensics probe: $RANK=%r is not a rank (0 to %d); the records say rank 0",
                raw[:40], MAX_RANK - 1)
    return 0


def is_rank(rank: int) -> bool:
    """True when ``rank`` is a rank a capture holds: 0 up to :data:`MAX_RANK` - 1."""
    return 0 <= rank < MAX_RANK
