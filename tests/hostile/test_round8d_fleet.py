"""Hostile input, round 8 (leftovers D): ``open_many`` keeps captures apart by what they are.

A capture whose folder name is not UTF-8 was labelled ``...\\udc80...`` in the ``capture``
column, the label of a folder spelled with that text; ``fit_together`` left out unfit captures
by label, so an unfit capture took an innocent one of the same label with it. Captures are now
left out by their own key, and their labels are apart (:func:`forensics.escaping.unicode_path`).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from forensics.records import Record
from forensics.store.writer import write_capture


def _capture(root: Path, name: bytes, ids: list[int], dtype: type) -> str:
    path = Path(os.fsdecode(os.fsencode(root) + b"/" + name))
    return str(write_capture(path, [Record("embedding", 0, 0, {
        "input_ids": np.array(ids, dtype=dtype), "num_embeddings": 10})]))


def test_an_unfit_capture_takes_no_innocent_one_of_a_like_label(tmp_path: Path) -> None:
    """The unfit capture (a uint64 id past int64) has an undecodable byte in its name; the
    innocent one is spelled with the text of that byte's escape."""
    from forensics.fleet.dataset import open_many

    unfit = _capture(tmp_path, b"a\x80.capture", [0, 2**63 + 5], np.uint64)
    innocent = _capture(tmp_path, b"a\\udc80.capture", [0, 1], np.int64)
    plain = _capture(tmp_path, b"b.capture", [0, 2], np.int64)
    table = open_many([unfit, innocent, plain], on_error="skip")["embedding"].to_table()
    labels = set(table["capture"].to_pylist())
    assert len(labels) == 2 and str(Path(plain)) in labels, labels
    assert table.num_rows == 2


def test_labels_of_two_such_captures_differ(tmp_path: Path) -> None:
    from forensics.fleet.dataset import open_many

    first = _capture(tmp_path, b"a\x80.capture", [0, 1], np.int64)
    second = _capture(tmp_path, b"a\\udc80.capture", [0, 1], np.int64)
    table = open_many([first, second])["embedding"].to_table()
    assert len(set(table["capture"].to_pylist())) == 2
