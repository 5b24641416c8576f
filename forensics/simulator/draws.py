"""The simulator's random draws, made in large blocks so a run depends only on its seed and on
what its steps consume: numbers (:class:`Draws`) and, many steps ahead, each step's acceptance,
sampled ids, drafts and fault triggers (:class:`StepDraws`)."""

from __future__ import annotations

from typing import cast

import numpy as np

from forensics.simulator.scenarios import FAULTS


class Draws:
    """Random numbers drawn in large blocks (a few generator calls per thousand steps), so the
    sequence depends only on the seed and on what the steps consume."""

    BLOCK = 1 << 18

    def __init__(self, seed: int, vocab: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.vocab = vocab
        self._u = np.empty(0)
        self._iu = 0
        self._t = np.empty(0, np.int32)
        self._it = 0

    def uniform(self, count: int) -> np.ndarray:
        """``count`` floats in [0, 1) (a read-only view)."""
        if self._iu + count > len(self._u):
            self._u, self._iu = self.rng.random(max(self.BLOCK, count)), 0
        out = self._u[self._iu:self._iu + count]
        self._iu += count
        return out

    def tokens(self, count: int) -> np.ndarray:
        """``count`` int32 token ids in [0, vocab) (a view: copy before writing)."""
        if self._it + count > len(self._t):
            size = max(self.BLOCK, count)
            self._t, self._it = self.rng.integers(0, self.vocab, size, dtype=np.int32), 0
        out = self._t[self._it:self._it + count]
        self._it += count
        return out

    def integers(self, low: int, high: int, count: int) -> np.ndarray:
        """``count`` int64 values in [low, high)."""
        if count <= 4:  # the same values, computed in Python (cheaper for a few)
            span = high - low
            return np.array([low + int(u * span) for u in self.uniform(count).tolist()],
                            dtype=np.int64)
        return low + (self.uniform(count) * (high - low)).astype(np.int64)


class StepDraws:
    """Draws of acceptance, sampled ids, drafts and fault triggers, made for many steps at once.

    Row ``i`` of a step's table belongs to whichever request sits in batch row ``i``; rows are
    independent and identically distributed, so drawing them ahead changes nothing but speed.
    """

    CHUNK = 512

    def __init__(self, draws: Draws, rows: int, k: int, accept_rate: float,
                 rates: np.ndarray) -> None:
        self.draws, self.rows, self.k, self.rate, self.rates = draws, rows, k, accept_rate, rates
        self._next = self.CHUNK

    def step(self, n: int) -> tuple[np.ndarray, ...]:
        """(accepted [n], valid count [n] int32, sampled ids [n, k+1] with -1 after the valid
        ones, last valid id [n], drafts [n, k], last id then drafts [n, k+1]) for one step:
        views, to be copied before any change."""
        if self._next == self.CHUNK:
            self._fill()
        c = self._next
        self._next += 1
        return (self.acc[c, :n], self.valid[c, :n], self.tok[c, :n], self.last[c, :n],
                self.drafts[c, :n], self.block[c, :n])

    def faults(self) -> np.ndarray | None:
        """The fault triggers of the step :meth:`step` serves next (None: none fired)."""
        if self._next == self.CHUNK:
            self._fill()
        if not self.fire_any[self._next]:
            return None
        return cast(np.ndarray, self.fire[self._next])

    def _fill(self) -> None:
        c, b, k, k1 = self.CHUNK, self.rows, self.k, self.k + 1
        self.acc = np.zeros((c, b), np.int64)  # drafts accepted: leading accepted slots
        if k:
            ok = self.draws.uniform(c * b * k).reshape(c, b, k) < self.rate
            run = ok[:, :, 0].copy()
            for slot in range(k):
                if slot:
                    run &= ok[:, :, slot]
                self.acc += run
        self.valid = (self.acc + 1).astype(np.int32)
        drawn = self.draws.tokens(c * b * k1).reshape(c, b, k1)
        self.tok = np.where(np.arange(k1) > self.acc[:, :, None], np.int32(-1), drawn)
        self.block = self.draws.tokens(c * b * k1).reshape(c, b, k1).copy()
        self.last = np.take_along_axis(drawn, self.acc[:, :, None], axis=2)[:, :, 0]
        self.block[:, :, 0] = self.last
        self.drafts = self.block[:, :, 1:]
        self.fire = np.asarray(self.draws.uniform(c * len(FAULTS)).reshape(c, -1) < self.rates)
        self.fire_any: list[bool] = np.asarray(self.fire.any(axis=1)).tolist()
        self._next = 0
