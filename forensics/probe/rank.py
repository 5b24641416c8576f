"""The global rank a probe reports: torch.distributed's once its process group is up, else
``$RANK`` (read once), else 0; while it is not final, asked at most once per step."""

from __future__ import annotations

import os
from typing import Any

_DIST: Any = None


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
    """The torch.distributed rank once its process group is initialised, else None."""
    global _DIST
    try:
        if _DIST is None:
            import torch.distributed as dist

            _DIST = dist if dist.is_available() else False
        if _DIST and _DIST.is_initialized():
            return int(_DIST.get_rank())
    except Exception:  # an uninitialised or torn-down process group
        pass
    return None


def env_rank() -> int:
    """``$RANK`` (torchrun and most launchers set it), else 0."""
    try:
        return int(os.environ.get("RANK", "0"))
    except ValueError:
        return 0
