"""Hostile input, round 9 (issue 38, "Hostile input, round 3"): ``shrink``, ``redact``,
``summary`` and ``findings`` against a hostile capture author.

T44a: the round-8 chain (every step needed while it keeps all its records) was left whole by
``shrink`` past about 32 steps: ddmin over its steps could drop none, and ddmin over its
records spent its budget before it dropped any. The records that witness the evidence are
now replayed alone when all the records of their steps do not keep it: the chain keeps 3.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from test_round8_shrink import chain

import forensics
from forensics.share.evidence import differences, evidence_of
from forensics.share.shrinking import shrink
from forensics.store.writer import write_capture


def _same(a: object, b: object) -> bool:
    return not differences(evidence_of(forensics.replay(a), crash=True),
                           evidence_of(forensics.replay(b), crash=True))


# ------------------------------------------------------------------ T44a: the witnesses alone

@pytest.mark.parametrize("steps", [33, 64])
def test_a_chain_of_needed_steps_shrinks_to_its_witness_records(tmp_path: Path,
                                                                steps: int) -> None:
    """Measured before (CPU): 32 steps 15.7 s kept 94 of 96 records, 64 steps 22.4 s kept
    192 of 192 (the search stopped at its budget); now 3 records, the search complete, and
    the records replayed in all fewer than the capture holds (11,997 and 24,564 before)."""
    source = write_capture(tmp_path / "chain.capture", chain(steps))
    result = shrink(source, tmp_path / "small.capture")
    assert result.complete and result.records_kept == 3, result
    assert result.records_replayed < result.records_before
    assert _same(source, result.path)
    kept = list(forensics.load(result.path))
    for drop in range(len(kept)):  # 1-minimal: each kept record is needed
        assert not _same(kept, kept[:drop] + kept[drop + 1:]), drop


def test_shrinking_the_chain_costs_a_few_replays_of_it(tmp_path: Path) -> None:
    """64 steps: the whole shrink (reference replay, search, write, verify) under 8 times the
    CPU time of one replay of the capture, measured in this run (57x before: 22.4 s)."""
    source = write_capture(tmp_path / "chain.capture", chain(64))
    forensics.replay(source)  # warm
    start = time.process_time()
    forensics.replay(source)
    one = time.process_time() - start
    start = time.process_time()
    shrink(source, tmp_path / "small.capture")
    whole = time.process_time() - start
    assert whole < 8 * one, f"shrink took {whole / one:.1f} replays ({one:.2f} s each)"
