"""Hypothesis strategies: records of each site with vLLM's real dtypes, reaching every path.

Dtypes follow vLLM 0.33.0: int64 ``prev_positions``, int32 for every other index and id tensor.
Every generated record passes ``validate_record`` (the site schemas and cross-field checks).
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from forensics.records import Record
from forensics.validate import validate_record

I32, I64 = np.int32, np.int64
VOCAB = 20  # small, so that sentinels and valid ids mix often


def _i32(values: list[int]) -> np.ndarray:
    return np.asarray(values, dtype=I32)


def _valid(record: Record) -> Record:
    return validate_record(record, "generated record")


def _prev_position(p: int) -> st.SearchStrategy[int]:
    """A previous row: new (-1, or another negative), in range, or stale (at or past ``p``)."""
    parts = [st.just(-1), st.integers(-3, -1), st.integers(p, p + 4)]
    if p > 0:
        parts += [st.integers(0, p - 1)] * 3
    return st.one_of(*parts)


def _req_ids(draw: st.DrawFn, n: int, prefix: str = "r") -> list[str]:
    return [f"{prefix}{i}" for i in draw(st.permutations(range(n)))]


# --- batch_change -------------------------------------------------------------------------------

@st.composite
def batch_change_records(draw: st.DrawFn) -> Record:
    """Mixed new, in-range, negative and stale rows; empty and short gathered tensors."""
    n = draw(st.integers(0, 6))
    p = draw(st.integers(0, 6))                  # valid_sampled_token_count (0: empty)
    m = draw(st.integers(n, n + 3))              # num_computed_tokens: a max_num_reqs buffer
    q = draw(st.one_of(st.just(m), st.integers(0, m)))  # prev_num_draft_tokens buffer
    small = st.integers(0, 4)
    fields = {
        "prev_positions": np.asarray(draw(st.lists(_prev_position(min(p, q, m)), min_size=n,
                                                   max_size=n)), dtype=I64),
        "valid_sampled_token_count": _i32(draw(st.lists(small, min_size=p, max_size=p))),
        "num_computed_tokens": _i32(draw(st.lists(st.integers(0, 99), min_size=m, max_size=m))),
        "num_accepted_tokens": _i32(draw(st.lists(small, min_size=n, max_size=n))),
        "prev_num_draft_tokens": _i32(draw(st.lists(st.integers(0, 3), min_size=q, max_size=q))),
        "cpu_num_computed_tokens": _i32(draw(st.lists(st.integers(0, 99), min_size=n,
                                                      max_size=n))),
    }
    if draw(st.booleans()):
        fields["req_ids"] = _req_ids(draw, n)
    return _valid(Record("batch_change", draw(st.integers(0, 9)), fields=fields))


# --- prepare_input_ids --------------------------------------------------------------------------

_ID = st.one_of(st.integers(0, VOCAB - 1), st.just(-1), st.just(VOCAB))


@st.composite
def _fast_layout(draw: st.DrawFn) -> tuple[list[int], list[int], list[int]]:
    """One token per row, the first k rows common in order (the fast path), the rest new."""
    n = draw(st.integers(1, 6))
    k = draw(st.integers(1, n))
    prev = list(range(k)) + [-1] * (n - k)
    drafts = [0] * n
    return prev, drafts, [1] * n


@st.composite
def _general_layout(draw: st.DrawFn) -> tuple[list[int], list[int], list[int]]:
    """Rows with drafts and prefill chunks; previous rows new, in range, stale or 'aligned'."""
    n = draw(st.integers(0, 6))
    drafts = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    extra = draw(st.lists(st.sampled_from([0, 0, 0, 1, 3]), min_size=n, max_size=n))
    tokens = [1 + d + e for d, e in zip(drafts, extra, strict=True)]
    cu = np.cumsum(tokens).tolist()
    prev = [draw(st.one_of(_prev_position(n), st.just(c - 1))) for c in cu]
    return prev, drafts, tokens


@st.composite
def prepare_input_ids_records(draw: st.DrawFn) -> Record:
    """Fast and slow paths, short sources, drafts present/absent/short, draft overruns."""
    prev, drafts, tokens = draw(st.one_of(_fast_layout(), _general_layout()))
    n = len(prev)
    cu = np.cumsum(tokens, dtype=I64).astype(I32) if n else np.zeros(0, dtype=I32)
    total = int(cu[-1]) if n else 0
    common = sum(1 for x in prev if x >= 0)
    p = draw(st.one_of(st.integers(0, n + 2), st.just(common), st.just(1)))
    spec = draw(st.integers(0, 3))
    fields = {
        "prev_positions": np.asarray(prev, dtype=I64),
        "prev_sampled_token_ids": _i32(draw(st.lists(_ID, min_size=p, max_size=p))).reshape(p, 1),
        "input_ids": _i32(draw(st.lists(_ID, min_size=total, max_size=total))),
        "cu_num_tokens": cu,
        "num_draft_tokens": _i32(drafts),
        "prev_num_spec_tokens": spec,
        "vocab_size": VOCAB,
    }
    if draw(st.booleans()):
        fields["input_ids_device"] = _i32(draw(st.lists(_ID, min_size=total, max_size=total)))
    if draw(st.booleans()):
        rows = draw(st.one_of(st.just(p), st.integers(0, p + 1)))
        cols = draw(st.one_of(st.just(spec), st.integers(0, 3)))
        values = draw(st.lists(_ID, min_size=rows * cols, max_size=rows * cols))
        fields["draft_token_ids"] = _i32(values).reshape(rows, cols)
    if draw(st.booleans()):
        fields["req_ids"] = _req_ids(draw, n)
    return _valid(Record("prepare_input_ids", draw(st.integers(0, 9)), fields=fields))


# --- async_output -------------------------------------------------------------------------------

@st.composite
def _sampled_rows(draw: st.DrawFn, p: int) -> np.ndarray:
    """[p, k] rows: ids, then -1 padding; sentinels (vocab_size, -1) before or after a -1."""
    k = draw(st.integers(0, 5))
    rows = []
    for _ in range(p):
        count = draw(st.integers(0, k))
        head = draw(st.lists(st.integers(0, VOCAB - 1), min_size=count, max_size=count))
        row = head + [-1] * (k - count)
        for _ in range(draw(st.integers(0, 2))):
            if k:
                row[draw(st.integers(0, k - 1))] = draw(st.sampled_from([VOCAB, -1, VOCAB + 3]))
        rows.append(row)
    return _i32(sum(rows, [])).reshape(p, k)


@st.composite
def _output_list(draw: st.DrawFn) -> list[int]:
    """An output list: ids (a -1 maybe among them), then 0..4 trailing -1 placeholders."""
    head = draw(st.lists(st.one_of(st.integers(0, VOCAB - 1), st.just(-1)), max_size=4))
    if head and head[-1] == -1 and draw(st.booleans()):
        head[-1] = 7
    return head + [-1] * draw(st.integers(0, 4))


def _tail(full: list[int], extra: int) -> list[int]:
    """The last ids of ``full``: every trailing -1 plus ``extra`` more (when there are)."""
    start = len(full)
    while start > 0 and full[start - 1] == -1:
        start -= 1
    start = max(start - extra, 0)
    if start == len(full) and full:
        start -= 1  # a non-empty list keeps a non-empty tail
    return full[start:]


@st.composite
def async_output_records(draw: st.DrawFn) -> Record:
    """Rows present/absent/discarded in the previous batch, rows past the sampled rows,
    sentinels, outputs with and without trailing placeholders, full lists or tails."""
    n = draw(st.integers(0, 5))
    req_ids = _req_ids(draw, n, "q")
    prev_len = draw(st.integers(0, n + 2))
    prev_ids: list[str | None] = [None] * prev_len
    for req in req_ids:
        slot = draw(st.integers(-1, prev_len - 1))   # -1: absent from the previous batch
        if slot >= 0 and prev_ids[slot] is None:
            prev_ids[slot] = req
    for slot in range(prev_len):
        if prev_ids[slot] is None and draw(st.booleans()):
            prev_ids[slot] = f"gone{slot}"           # a request no longer scheduled
    p = draw(st.one_of(st.just(prev_len), st.integers(0, prev_len + 1)))
    lists = [draw(_output_list()) for _ in range(n)]
    fields: dict[str, object] = {
        "req_ids": req_ids,
        "sampled_token_ids_cpu": draw(_sampled_rows(p)),
        "vocab_size": VOCAB,
    }
    if draw(st.booleans()):
        fields["prev_req_ids"] = prev_ids
    else:
        fields["prev_req_id_to_index"] = {r: i for i, r in enumerate(prev_ids) if r is not None}
    if draw(st.booleans()):
        fields["output_token_ids"] = lists
    else:
        fields["output_tail"] = [_tail(x, draw(st.integers(0, 2))) for x in lists]
        fields["output_len"] = _i32([len(x) for x in lists])
    return _valid(Record("async_output", draw(st.integers(0, 9)), fields=fields))


# --- embedding ----------------------------------------------------------------------------------

@st.composite
def embedding_records(draw: st.DrawFn) -> Record:
    """Ids inside, at and past the bound, and negative; one GPU or tensor parallel."""
    rows = draw(st.integers(1, 40))
    ids = draw(st.lists(st.one_of(st.integers(0, rows - 1), st.integers(-2, rows + 2)),
                        max_size=8))
    fields: dict[str, object] = {"input_ids": _i32(ids), "num_embeddings": rows}
    tp = draw(st.sampled_from([None, None, None, 1, 2]))
    if tp is not None:
        fields["tp_size"] = tp
    return _valid(Record("embedding", draw(st.integers(0, 9)), fields=fields))


STRATEGIES = {
    "batch_change": batch_change_records(),
    "prepare_input_ids": prepare_input_ids_records(),
    "async_output": async_output_records(),
    "embedding": embedding_records(),
}
