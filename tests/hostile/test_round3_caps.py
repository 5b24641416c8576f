"""Hostile input, round 3 (issue 38, points 3 and 4): caps from evidence, one allocation
budget, and deadlines for child processes.

Each attack runs first as the issue found it: through the real CLI in a forked child under an
address-space limit and a wall clock (``hostile_driver.py``), so a regression fails the test
instead of taking the machine down.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from forensics.records import Record
from forensics.store.writer import write_capture
from forensics.validate import validate_record

DRIVER = Path(__file__).with_name("hostile_driver.py")
VOCAB = 50


def run_cases(root: Path, cases: dict[str, list[object]], env: dict[str, str] | None = None
              ) -> dict[str, dict[str, Any]]:
    """Run each ``name: argv`` through the CLI in ``hostile_driver.py`` (a forked child under
    an address-space limit of 3 GiB past its imports, and 30 s); results by name."""
    spec = [{"name": name, "argv": [str(a) for a in argv], "cwd": str(root)}
            for name, argv in cases.items()]
    (root / "cases.json").write_text(json.dumps(spec))
    done = subprocess.run([sys.executable, str(DRIVER), str(root / "cases.json")],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {r["name"]: r for r in results}


def i32(*values: int) -> np.ndarray:
    """An int32 vector."""
    return np.array(values, dtype=np.int32)


def post(step: int = 0, **change: Any) -> Record:
    """A ``post_update`` record: row 0 (slot 3) sampled two ids, row 1 (slot 0) one."""
    fields: dict[str, Any] = dict(
        idx_mapping=np.array([3, 0], np.int64), num_computed_tokens=i32(6, 0, 0, 7),
        last_sampled_tokens=i32(21, 0, 0, 11),
        sampled_tokens=np.array([(5, 6, -1), (22, -1, -1)], np.int32),
        num_sampled=i32(2, 1), num_rejected=i32(1, 0), total_len=i32(7, 0, 0, 9),
        all_token_ids_width=64, bin_counts_rows=4, bin_counts_width=VOCAB, vocab_size=VOCAB,
        query_start_loc=i32(0, 3, 4), req_ids=["a", "b"])
    fields.update(change)
    return validate_record(Record("post_update", step, 0, fields), "test record")


# ------------------------------------------------ 1. a sampled count sizes nothing past the data


def test_a_huge_num_sampled_is_capped_by_the_stored_ids(tmp_path: Path) -> None:
    """``num_sampled`` of 2**31 - 1 once sized a Python loop (gigabytes, then out of
    memory); the loop now reads what ``sampled_tokens`` stores and the first read past it,
    which is the finding."""
    capture = write_capture(tmp_path / "big.capture", [
        post(0), post(1, num_sampled=i32(2**31 - 1, 1)), post(2)])
    result = run_cases(tmp_path, {"replay": ["replay", capture]})["replay"]
    assert result["code"] in (0, 1), result
    assert "MemoryError" not in result["stderr"] + result["stdout"], result
    assert "upstream: ok 2, index_error 1, error 0" in result["stdout"], result
    assert "patched: ok 3" in result["stdout"], result
