"""Round 14's held-out attacks: a hostile capture author and a hostile local user against the
places earlier rounds touched least (ranks a segment name cannot hold, who may read a capture
written by a command, ...)."""

from __future__ import annotations

import stat
from pathlib import Path

import numpy as np
import pytest

from forensics.errors import CaptureFormatError
from forensics.records import Record
from forensics.store.reader import load
from forensics.store.writer import write_capture


def _embedding(step: int, rank: int = 0) -> Record:
    return Record("embedding", step, rank, {"input_ids": np.array([50], dtype=np.int64),
                                            "num_embeddings": 10})


@pytest.mark.parametrize("rank", [10**6, 2**63 - 1])
def test_a_rank_no_segment_name_holds_is_refused(tmp_path: Path, rank: int) -> None:
    """A record of rank 10**6 or more (accepted up to int64 by ``import`` and the writer) went
    to a segment ``embedding.r1000000...`` whose name no reader parses (six digits at most):
    ``import`` said "wrote X: 0 records", and ``replay`` of the capture said "no unresolved
    violation" of a record out of bounds. The record is refused in one line naming the rank."""
    with pytest.raises(CaptureFormatError, match=r"'rank' must be a rank from 0 to 999999"):
        write_capture(tmp_path / "r.capture", [_embedding(1, rank)])


def test_the_largest_rank_a_name_holds_is_read_back(tmp_path: Path) -> None:
    """The bound is the reader's: rank 999999 is written and read back, record for record."""
    path = write_capture(tmp_path / "r.capture", [_embedding(1, 10**6 - 1)])
    assert [(r.step, r.rank) for r in load(path)] == [(1, 10**6 - 1)]


def _others_may(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode) & 0o077


def test_a_capture_written_by_a_command_is_private(tmp_path: Path) -> None:
    """README: "Captures ... stay private (0600): a capture holds token ids and a manifest
    that may name hosts and paths until forensics redact has passed it". The manifest was
    0600, but ``import``, ``simulate``, ``shrink`` and the writer made the folder 0755 and
    every segment (token ids, request ids) and index 0644: readable by every user of a
    shared folder. Nothing of a capture is open to others now."""
    path = write_capture(tmp_path / "c.capture", [_embedding(1)])
    assert _others_may(path) == 0
    assert sorted(p.suffix for p in path.iterdir()) == [".arrows", ".idx", ".json"]
    assert [p.name for p in path.iterdir() if _others_may(p)] == []
