"""Round 16, fix D: what this round's attackers found and left (issue 38, "Hostile input,
round 3").

- ``replay`` of a V2 ``post_update`` record was quadratic below the allocation budget: each row
  reads ``num_sampled`` ids from its start in the flat ``sampled_tokens``, on into the next
  rows', and each read was planned (500 rows each claiming 2**30: about 6 s and 1.05 GB)
  (T90a).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.instructions import assert_linear, scaling

#: the site tests' record builders (``site_records``, ``v2_records``)
SITES = Path(__file__).resolve().parent.parent / "sites"


# ------------------------------- T90a: post_update's reads past a row are planned in linear time

def _post_update_of(rows: int) -> Any:
    """A ``post_update`` record of ``rows`` rows of one sampled id each (the last row's
    ``vocab_size``, past the vocabulary), each row claiming 2**30, all of slot 0 (counts kept:
    the ids read index ``output_bin_counts``)."""
    if str(SITES) not in sys.path:
        sys.path.insert(0, str(SITES))
    from site_records import record
    from v2_records import VOCAB

    sampled = np.ones((rows, 1), np.int32)
    sampled[-1, 0] = VOCAB
    return record("post_update", idx_mapping=np.zeros(rows, np.int64),
                  num_computed_tokens=np.zeros(1, np.int32),
                  last_sampled_tokens=np.zeros(1, np.int32), sampled_tokens=sampled,
                  num_sampled=np.full(rows, 2**30, np.int32),
                  num_rejected=np.zeros(rows, np.int32), total_len=np.zeros(1, np.int32),
                  query_start_loc=np.arange(rows + 1, dtype=np.int32),
                  req_ids=[f"r{i}" for i in range(rows)], all_token_ids_width=2**40,
                  bin_counts_rows=1, bin_counts_width=VOCAB, vocab_size=VOCAB)


CASES = {"upstream": False, "patched": True}


def make_work(case: str, size: int, scratch: Path) -> Callable[[], object]:
    """The ``case`` model of ``post_update`` on a record of ``size`` such rows (run by
    :mod:`tests.instructions`)."""
    from forensics.sites import post_update

    record = _post_update_of(size)
    return lambda: post_update._run(record, CASES[case])


@pytest.mark.parametrize("case", list(CASES))
def test_post_update_reads_past_a_row_are_planned_in_linear_time(case: str,
                                                                 tmp_path: Path) -> None:
    """4x the rows, each claiming 2**30 ids, cost under 6x the instructions (each row's reads
    on into the next rows' were each planned: 16x)."""
    assert_linear(scaling(__file__, dict.fromkeys(CASES, 150), tmp_path)[case])


def test_a_rows_reads_past_it_are_found_first_last_and_at_an_id_outside(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """600 such rows (past the 1 GiB budget before T90a, refused) are replayed: each row's
    reads past its own row are findings at their first and last column (``past the end by
    1`` and by all of them, to the read past the buffer, an illegal access), and the id
    outside the vocabulary the rows before the last read from it is found as the index of
    ``output_bin_counts`` it is."""
    from forensics.cli import main
    from forensics.store.writer import write_capture

    rows = 600
    root = write_capture(tmp_path / "p.capture", [_post_update_of(rows)], manifest={"notes": "x"})
    assert main(["replay", str(root), "--variant", "upstream", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["outcomes"]["upstream"]["index_error"] == 1, found["outcomes"]
    rows_of = [f for f in found["findings"] if f["tensor"] == "sampled_tokens" and f["row"] == 3]
    assert {f["element"] for f in rows_of} >= {1, rows - 3}, rows_of
    assert all(f["value"] == f["element"] and f["upper"] == 1 for f in rows_of), rows_of
    bins = [f for f in found["findings"] if f["tensor"] == "output_bin_counts"]
    assert {f["row"] for f in bins} == set(range(rows)), len(bins)
    outside = {(f["row"], f["element"]) for f in bins if f["value"] == f["upper"]}
    assert outside == {(r, rows - 1 - r) for r in range(rows)}, sorted(outside)[:3]
