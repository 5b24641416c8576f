"""Shared fixtures: tiny captures built in memory (no simulator needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from forensics.records import Record

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"


def embedding_records(bad_step: int | None = None, steps: int = 4) -> list[Record]:
    """Embedding records over ``steps`` steps; ``bad_step`` carries the id 248320 (= the bound)."""
    records = []
    for step in range(steps):
        ids = np.array([1, 2, 3, 248319], dtype=np.int64)
        if step == bad_step:
            ids[2] = 248320
        records.append(Record("embedding", step, 0, {"input_ids": ids,
                                                     "num_embeddings": 248320}))
    return records


@pytest.fixture
def make_capture(tmp_path: Path):
    """Factory: write records into ``tmp_path/NAME.capture`` and return its path."""
    from forensics.store.writer import write_capture

    def make(name: str, records: list[Record]) -> Path:
        return write_capture(tmp_path / f"{name}.capture", records,
                             manifest={"notes": "test fixture"})

    return make
