"""Round 13's held-out attacks: a hostile capture author and a hostile local user against the
places earlier rounds touched least (the histogram's axis, ``to_frame``, the pytest plugin's
failure lines, the demo's index, ...)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import forensics
from forensics.records import Record
from forensics.store.writer import write_capture


def _embedding(step: int, bound: int) -> Record:
    return Record("embedding", step, 0, {"input_ids": np.arange(4, dtype=np.int32),
                                         "num_embeddings": bound})


def test_the_histogram_axis_is_not_sized_by_a_records_bound(tmp_path: Path) -> None:
    """One record claiming ``num_embeddings`` 2**21 beside records of 10 (the most common
    bound, taken as the vocabulary) widened the histogram's window to the distance between
    them: a bin per value, 2 million here; 2**24 (the cap) took 5.6 GB and over 10 minutes in
    ``plot --kind histogram`` and the report. The axis keeps at most a few thousand bins."""
    from forensics.present.scene.histogram import histogram_data

    records = [_embedding(s, 10) for s in range(5)] + [_embedding(5, 2**21)]
    path = write_capture(tmp_path / "wide.capture", records)
    result = forensics.replay(path, variants=["upstream"])
    data = histogram_data(result, site="embedding", variant="upstream")
    assert data.edges is not None
    assert len(data.edges) <= 10_000
    assert data.inside is not None and int(data.inside.sum()) == 12  # every in-range extreme
