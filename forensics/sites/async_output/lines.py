"""Counting ids on lines of sampled ids, vectorised: the rule vLLM counts a sampled row's ids
by (:func:`sampled_count`), where each output list's trailing ``-1`` placeholders start, and the
first flagged column of each line of a short matrix (one byte of flags per line)."""

from __future__ import annotations

from typing import Any

import numpy as np

from forensics.sites.core import (
    owner,
    starts_of,
    within,
)


def sampled_lines(sampled: np.ndarray, base: np.ndarray, k: np.ndarray) -> np.ndarray:
    """The sampled row of each selected row as one line of a matrix of ``max(k)`` columns:
    ``k[i]`` ids from flat position ``base[i]``, then ``-1``."""
    width = int(k.max(initial=0))
    if not len(k) or not width:
        return np.full((len(k), width), -1, dtype=sampled.dtype)
    out = np.full((len(k), width), -1, dtype=sampled.dtype)
    column = within(k)
    out[owner(k), column] = sampled[np.repeat(base, k) + column]
    return out


def first_within(mask: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Per line of a matrix: the column of its first True among its first ``k`` columns, or
    ``k`` when none."""
    return np.minimum(first_true(mask), k)


def trailing_start(values: np.ndarray, lengths: np.ndarray,
                   runs: np.ndarray | None = None) -> np.ndarray:
    """Per run (of ``runs`` only, when given): the position of the first of its trailing
    ``-1`` placeholders (its length when it does not end in ``-1``): one past its last id
    that is not ``-1``."""
    out = _tails_of_one_id(values, lengths)
    if out is None:
        out = _past_last_id(values, lengths)
    return out if runs is None else out[runs]


def _tails_of_one_id(values: np.ndarray, lengths: np.ndarray) -> np.ndarray | None:
    """:func:`trailing_start` of runs that hold at most one id that is not ``-1``, first
    (the tails the probe records: the trailing placeholders and the id before them): 1
    where a run starts with such an id, else 0. None when some id that is not ``-1`` is not
    the first of its run (one count over the values tells)."""
    if not len(values):
        return np.zeros(len(lengths), dtype=np.int64)
    first = np.minimum(starts_of(lengths), len(values) - 1)
    leading = (values[first] != -1) & (lengths > 0)
    if np.count_nonzero(values != -1) != np.count_nonzero(leading):
        return None
    return leading.astype(np.int64)


def _past_last_id(values: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """:func:`trailing_start` of any runs: one running maximum over all the values of ``1 +``
    the position of each id that is not ``-1`` (0 for a ``-1``), read at each run's end."""
    if not len(values):
        return np.zeros(len(lengths), dtype=np.int64)
    index = np.int32 if len(values) < 2**31 - 1 else np.int64  # half the bytes to scan
    last = np.arange(1, len(values) + 1, dtype=index)
    np.multiply(last, values != -1, out=last)
    np.maximum.accumulate(last, out=last)  # 1 + the last id not -1 so far (0: none)
    ends = np.cumsum(lengths)
    begin = ends - lengths
    return np.where(lengths > 0, np.maximum(last[np.maximum(ends - 1, 0)] - begin, 0), 0)


def sampled_count(size: Any, first_minus: Any, last_minus: Any) -> Any:
    """vLLM's count of the ids in a row of ``sampled_token_ids_cpu`` (the one rule, for
    arrays or ints): all ``size`` of them when the last is not ``-1`` (``last_minus`` false),
    else those before the first ``-1`` (at ``first_minus``)."""
    return np.where(last_minus, first_minus, size)


def only_minus_outside(matrix: np.ndarray, vocab: np.ndarray) -> bool:
    """Whether every id of ``matrix`` lies in ``[-1, vocab)`` for the smallest ``vocab``
    (then the only ids the vocabulary guard stops at are the ``-1`` ones)."""
    return not matrix.size or (int(matrix.min()) >= -1 and int(matrix.max()) < int(vocab.min()))


def outside_vocab(matrix: np.ndarray, vocab: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Where the ids of ``matrix`` lie outside ``[0, vocab)`` (``vocab`` per record, whose
    sampled rows are ``rows`` lines of ``matrix``): one unsigned comparison when every record
    shares a vocabulary within the dtype's range (a negative id reads as a large one)."""
    if len(vocab) and vocab.min() == vocab.max() and matrix.dtype.kind == "i" \
            and 0 < int(vocab[0]) <= np.iinfo(matrix.dtype).max:
        return matrix.view(matrix.dtype.str.replace("i", "u")) >= int(vocab[0])
    bound = np.repeat(vocab, rows)[:, None]
    return (matrix < 0) | (matrix >= bound)


def first_true(mask: np.ndarray) -> np.ndarray:
    """Per line of a boolean matrix: the column of its first True, or its width when none.
    Up to 8 columns, a table of 256 entries gives the lowest set bit of each line's byte
    of flags (:func:`line_bits`: no reduction along the short axis)."""
    lines, width = mask.shape
    bits = line_bits(mask)
    if bits is None:
        first = mask.argmax(axis=1) if width else np.zeros(lines, dtype=np.int64)
        return np.where(mask[np.arange(lines), first] if width else False, first, width)
    return np.minimum(LOWEST_BIT, width)[bits]


def line_bits(mask: np.ndarray) -> np.ndarray | None:
    """Per line of a boolean matrix of 1 to 8 columns: its flags as the bits of one byte
    (column ``j`` is bit ``j``; one pass per column). None for other widths."""
    lines, width = mask.shape
    if not 0 < width <= 8:
        return None
    bits = mask[:, 0].astype(np.uint8)
    column = np.empty(lines, dtype=np.uint8)
    for j in range(1, width):
        np.left_shift(mask[:, j].view(np.uint8), j, out=column)
        bits |= column
    return bits


#: the position of the lowest set bit of each byte (8 for 0)
LOWEST_BIT = np.array([(b & -b).bit_length() - 1 if b else 8 for b in range(256)],
                       dtype=np.int64)


def line_prefixes(matrix: np.ndarray, lines: np.ndarray, count: np.ndarray) -> np.ndarray:
    """The first ``count[i]`` ids of line ``lines[i]`` of ``matrix`` (at most 8 columns),
    end to end: the lines taken whole, then the ids kept by one mask (each line's mask
    read from a table of 9 words, one per count)."""
    keep = _PREFIX_WORDS[count].view(np.bool_).reshape(-1, 8)[:, :matrix.shape[1]]
    return np.compress(np.ascontiguousarray(keep).reshape(-1),
                       np.take(matrix, lines, axis=0).reshape(-1))


#: per count ``c`` from 0 to 8: 8 flags, the first ``c`` True, as one 64-bit word
_PREFIX_WORDS = (np.arange(8) < np.arange(9)[:, None]).view(np.uint64).reshape(-1)
