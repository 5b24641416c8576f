"""Hostile input, round 8 (T39t): ``forensics shrink`` on a capture whose every step the
evidence needs. ddmin then tests the complement of each of n chunks at every granularity, each
replay taking in nearly the whole window: records replayed quadratic in the steps (measured
before the budget, on :func:`chain`: 16 steps 7.7 s of CPU, 64 steps 59.6 s, 7.8x for 4x).
Each search now replays at most ``SEARCH_FACTOR`` times the records it starts from, and says
when it stopped there; what it writes still keeps the evidence."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import forensics
from forensics.cli import main
from forensics.records import Record
from forensics.share import shrinking
from forensics.share.evidence import differences, evidence_of
from forensics.share.shrinking import SEARCH_FACTOR, _Search
from forensics.store.writer import write_capture
from tests.instructions import assert_scales_linearly

VOCAB = 512
WRONG = 450  # the token step 0 stores for every later position: never the one fed there


def _ids(*values: int) -> np.ndarray:
    return np.array(values, np.int32)


def _token(step: int) -> int:
    return 1 + (step * 7) % 400


def chain(steps: int) -> list[Record]:
    """A Model Runner V2 capture of one request (slot 0) fed one token a step: step ``k`` feeds
    token ``_token(k)`` at position ``k`` and ``post_update`` stores ``_token(k + 1)`` for
    position ``k + 1``. Step 0 also stores :data:`WRONG` for every later position, then one id
    past the vocabulary (post_update's violation, upstream's first finding); the last step
    reads a padding id past the embedding's rows (patched's first finding). A step missing
    between two kept ones leaves the next step's token judged against step 0's :data:`WRONG`:
    a substitution, earlier than patched's first finding. So every step is needed."""
    out = []
    for k in range(steps):
        sampled = [_token(k + 1)] + ([WRONG] * steps + [VOCAB] if k == 0 else [])
        fed = _ids(_token(k), VOCAB) if k == steps - 1 else _ids(_token(k))
        out += [
            Record("combine_tokens", k, 0, {
                "input_ids": np.zeros(1, np.int32), "idx_mapping": np.array([0], np.int64),
                "last_sampled_tokens": _ids(_token(k)), "query_start_loc": _ids(0, 1),
                "seq_lens": _ids(k + 1), "prefill_len": _ids(1),
                "draft_tokens": np.zeros((1, 1), np.int32), "cu_num_logits": _ids(0, 1),
                "num_new_sampled_tokens": 1, "vocab_size": VOCAB, "req_ids": ["r"]}),
            Record("embedding", k, 0, {"input_ids": fed, "num_embeddings": VOCAB,
                                       "req_ids": ["r"], "cu_num_tokens": _ids(1)}),
            Record("post_update", k, 0, {
                "idx_mapping": np.array([0], np.int64), "num_computed_tokens": _ids(k),
                "last_sampled_tokens": _ids(_token(k)),
                "sampled_tokens": np.array([sampled], np.int32), "num_sampled": _ids(len(sampled)),
                "num_rejected": _ids(0), "total_len": _ids(k + 1), "all_token_ids_width": 1 << 20,
                "bin_counts_rows": 0, "bin_counts_width": VOCAB, "vocab_size": VOCAB,
                "query_start_loc": _ids(0, 1), "req_ids": ["r"]})]
    return out


def test_every_step_of_the_chain_is_needed() -> None:
    """The capture is what it claims: dropping any one step changes the evidence."""
    records = chain(6)
    expected = evidence_of(forensics.replay(records))
    assert expected.has_findings
    for step in range(6):
        got = evidence_of(forensics.replay([r for r in records if r.step != step]))
        assert differences(expected, got), step


def _search(steps: int, per_step: int, needed: Callable[[set[int]], bool],
            replayed: list[int]) -> _Search:
    """A search over ``per_step`` records a step, witnessed at the last step, whose replays
    keep the evidence exactly when ``needed`` holds of their positions; each replay does work
    in proportion to its records (as a replay does) and adds their count to ``replayed``."""
    search = object.__new__(_Search)
    search.index = pd.DataFrame({"step": np.repeat(np.arange(steps, dtype=np.int64), per_step),
                                 "site": "embedding"})
    search.replays, search.budgets, search.window_records, search.bar = 0, [], 0, None
    search.witnesses = lambda: {steps * per_step - 1}  # type: ignore[method-assign]

    def keeps(positions: Sequence[int]) -> bool:
        replayed.append(len(positions))
        np.repeat(np.asarray(positions, np.int64), 256).sum()  # a replay's work, per record
        return needed(set(positions))

    search.keeps = keeps  # type: ignore[method-assign]
    return search


def test_a_capture_whose_every_step_is_needed_shrinks_in_linear_time(tmp_path: Path) -> None:
    """300 steps of 3 records, each needed, then 1,200: 4x the steps cost under 6x the
    instructions of the whole search (it took 16x the time: each of ddmin's complements
    replayed nearly the whole window), and each search replays at most SEARCH_FACTOR times its
    records."""
    make_work("every step needed", 50, tmp_path)()
    assert_scales_linearly(__file__, "every step needed", 300, tmp_path)


def make_work(case: str, steps: int, scratch: Path) -> Callable[[], object]:
    """The search over ``steps`` steps of 3 records, each needed (:mod:`tests.instructions`)."""
    def work() -> None:
        replayed: list[int] = []
        search = _search(steps, 3, lambda kept: len(kept) == 3 * steps, replayed)
        assert search.run() == list(range(3 * steps))
        assert [b.exhausted for b in search.budgets] == [True, True]
        assert all(b.spent <= SEARCH_FACTOR * 3 * steps for b in search.budgets)
        assert sum(replayed) <= 2 * SEARCH_FACTOR * 3 * steps + 2 * 3 * steps  # + window
    return work


def test_a_search_within_its_budget_is_still_one_minimal() -> None:
    """One needed record at each of 5 steps among 2,000: the search runs to its end (well
    within its budget) and keeps exactly those records."""
    wanted = {0, 401, 902, 1503, 1999}
    replayed: list[int] = []
    search = _search(2000, 1, lambda kept: wanted <= kept, replayed)
    assert search.run() == sorted(wanted)
    assert not any(b.exhausted for b in search.budgets)


def test_shrink_says_when_it_stopped_at_its_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The chain of 12 steps through the command, with a budget of 4 times the records (the
    default stops such a chain past about 32 steps, after minutes of replays): the search over
    steps stops at it; the capture written keeps the evidence (it is replayed before it is
    renamed into place) and the output says, in one line, that it stopped and why. Its witnesses
    are narrowed to the last step's embedding, which alone does not keep the evidence."""
    monkeypatch.setattr(shrinking, "SEARCH_FACTOR", 4)
    # the chain's witness records alone keep its evidence (round 9, T44a): named only by the
    # last step's embedding, the search must go over the steps, whose every one is needed
    last = 3 * 12 - 2
    monkeypatch.setattr(_Search, "witnesses", lambda self: {last})
    source = write_capture(tmp_path / "chain.capture", chain(12))
    out = tmp_path / "small.capture"
    assert main(["shrink", str(source), "-o", str(out)]) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    notes = [line for line in printed if line.startswith("note:")]
    assert len(notes) == 1 and "(4 times the records" in notes[0], printed
    assert "36 for the first" in notes[0] and str(out) in notes[0]
    assert not differences(evidence_of(forensics.replay(source)),
                           evidence_of(forensics.replay(out)))
