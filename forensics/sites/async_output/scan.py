"""``scan`` of ``async_output``: the sampled ids each record's previous rows hold, counted against
the vocabulary without replaying a call."""

from __future__ import annotations

import numpy as np

from forensics.sites.async_output.lines import sampled_count
from forensics.sites.async_output.records import SAMPLED
from forensics.sites.scan_counts import IndexCount, ScanColumns, count_outside, distinct


def scan_indices(cols: ScanColumns) -> list[IndexCount]:
    """The captured index checks (see :mod:`forensics.sites.scan_counts`): the ids vLLM
    counts in each row of ``sampled_token_ids_cpu`` (all when the last is not ``-1``, else
    those before the first ``-1``), valid in ``[0, vocab_size)``. A screen
    (``replay=False``): an out-of-vocabulary sampled id is a finding of the replay only
    when the call writes it."""
    flat, sizes, present = cols.tensor(SAMPLED)
    rows = cols.first_dim(SAMPLED)
    width = sizes // np.maximum(rows, 1)
    used = present & (rows > 0) & (width > 0)
    vocab = cols.ints("vocab_size")
    checked = bad = 0
    for k in distinct(width[used]):  # one pass per row width (usually one)
        mine = used & (width == k)
        block = flat if mine.all() else flat[np.repeat(mine, sizes)]
        n, b = _scan_sampled(block.reshape(-1, k), vocab[mine], rows[mine], cols)
        checked += n
        bad += b
    return [IndexCount(SAMPLED, checked, bad, replay=False)]


def _scan_sampled(block: np.ndarray, vocab: np.ndarray, rows: np.ndarray, cols: ScanColumns
                  ) -> tuple[int, int]:
    """Ids vLLM counts in the rows of ``block`` (each record's ``rows`` rows against its
    ``vocab``): how many, and how many lie outside ``[0, vocab)``."""
    minus = np.equal(block, -1, out=cols.bools("minus", block.size).reshape(block.shape))
    if not _scan_gaps(minus, cols) and vocab.min() == vocab.max():
        # every row's -1s form a suffix (the padding): the counted ids are the others
        high, padding = int(vocab[0]), int(np.count_nonzero(minus))
        # outside [0, high) but -1 (when high >= 0, -1 is outside: count all, take the -1s)
        compare = cols.bools("compare", block.size).reshape(block.shape)
        bad = count_outside(block, high, compare) - padding if high >= 0 else \
            int(np.count_nonzero((block < -1) | (block >= high)))
        return block.size - padding, bad
    counted = _scan_counted(block)
    ids = block[counted]
    bound = np.broadcast_to(np.repeat(vocab, rows)[:, None], block.shape)[counted]
    return len(ids), int(np.count_nonzero((ids < 0) | (ids >= bound)))


def _scan_gaps(minus: np.ndarray, cols: ScanColumns) -> bool:
    """Whether a row of ``minus`` (rows x k, True at each -1) has a -1 followed by an id: one
    contiguous comparison of neighbours, the pairs that straddle two rows left out."""
    flat = minus.reshape(-1)
    rises = np.greater(flat[:-1], flat[1:], out=cols.bools("rises", max(len(flat) - 1, 0)))
    rises[minus.shape[1] - 1::minus.shape[1]] = False  # last of a row, first of the next
    return bool(rises.any())


def _scan_counted(block: np.ndarray) -> np.ndarray:
    """Mask of the ids vLLM counts in each row: all when the last is not -1, else those before
    the first -1."""
    minus = block == -1
    first = sampled_count(block.shape[1], minus.argmax(axis=1), minus[:, -1])
    return np.arange(block.shape[1]) < first[:, None]
