"""Round 16, fix D: what this round's attackers found and left (issue 38, "Hostile input,
round 3").

- ``replay`` of a V2 ``post_update`` record was quadratic below the allocation budget: each row
  reads ``num_sampled`` ids from its start in the flat ``sampled_tokens``, on into the next
  rows', and each read was planned (500 rows each claiming 2**30: about 6 s and 1.05 GB)
  (T90a).
- ``kernels``: the findings of a launch whose record names another source hash than the
  installed kernel's printed bare, as the engine's kernel's; only a separate "replayed, but"
  line said the source differs (T90b).
- Validation checked only a summary record's ``min``, ``max`` and bound: it might carry any
  number of other fields, past the importers' cap (T90c).
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



def test_the_least_and_greatest_id_of_any_stretch_are_found() -> None:
    """The least and the greatest id of a stretch of ``sampled_tokens`` (where any read of a
    row past its own row that a check finds is found) are those a scan of the stretch finds,
    across and within the table's blocks."""
    from forensics.sites.post_update import _Flat

    rng = np.random.default_rng(0)
    for size in (1, 63, 64, 65, 130, 1000, 5000):
        flat = rng.integers(-5, 5, size).astype(np.int64)
        found = _Flat(flat, 3, "x")
        for _ in range(500):
            a = int(rng.integers(0, size))
            b = int(rng.integers(a + 1, size + 1))
            lo, hi = found.extremes(a, b)
            assert a <= lo < b and a <= hi < b, (size, a, b, lo, hi)
            assert (flat[lo], flat[hi]) == (flat[a:b].min(), flat[a:b].max()), (size, a, b)


# ------------------------------- T90b: a finding of a replay by another source says so

ACCESS = {"argument": "idx_mapping_ptr", "op": "load", "masked": False,
          "program_id": [0, 0, 0], "elements": [-1], "count": 1}
WRAP = {"operation": "mul", "program_id": [0, 0, 0], "exact": 2**31, "wrapped": -(2**31)}
DIFFER = {"argument": "idx_mapping_ptr", "span": "storage", "count": 1,
          "elements": [[0, 0, 1]]}
#: the replay worker's note of a launch whose record names another source hash
DIFFERS = "the installed kernel's source differs from the recorded one's"


def _kernels_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                  capsys: pytest.CaptureFixture[str], source: str) -> str:
    """``kernels``' text of one launch whose record names the source hash ``source``,
    replayed by a stand-in whose answer is one out-of-bounds load, one int32 wrap and one
    difference from live, and says what the worker says of a source hash unlike the
    installed kernel's (``source`` "00")."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_round4_kernels import KERNEL, MODULE, launch, write_capture

    from forensics.cli import main
    from forensics.kernels import sanitizer

    differs = source == "00"
    monkeypatch.setattr(sanitizer, "installed_kernels", lambda: [(MODULE, KERNEL)])
    monkeypatch.setattr(sanitizer.Worker, "ask", lambda self, event, most=0.0: {
        "status": "replayed", "reason": DIFFERS if differs else "",
        "accesses": [dict(ACCESS)], "overflows": [dict(WRAP)], "differs": [dict(DIFFER)],
        "source_differs": differs})
    event = launch()
    event["kernel"]["source_sha256"] = source
    assert main(["kernels", str(write_capture(tmp_path / "k.capture", [event]))]) == 1
    return capsys.readouterr().out


def test_each_finding_of_a_replay_by_another_source_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A launch whose record names another source hash than the installed kernel's was
    replayed by the installed kernel: its findings printed bare ("unmasked load of
    idx_mapping_ptr element(s) [-1]"), as the engine's kernel's, only a separate "replayed,
    but: ... source differs" line warning. Each says it is the installed kernel's, whose
    source differs, and that whether the engine's kernel made it is unknown; a launch of the
    installed source says its findings as before."""
    text = _kernels_text(tmp_path, monkeypatch, capsys, "00")
    lines = text.splitlines()
    tail = ", by the installed kernel, whose source differs from the engine's (the record's " \
           "source_sha256): "
    access = next(line for line in lines if line.startswith("kernel_out_of_b"))
    wrap = next(line for line in lines if line.startswith("offset_overflow"))
    differ = next(line for line in lines if line.startswith("live_differs"))
    assert access.endswith(tail + "whether the engine's kernel made this access is unknown"), text
    assert wrap.endswith(tail + "whether the engine's kernel made this wrap is unknown"), text
    assert differ.endswith(tail + "this difference may be that source's"), text
    same = _kernels_text(tmp_path / "same", monkeypatch, capsys, "")
    assert "source differs" not in same and "unmasked load of idx_mapping_ptr element(s) [-1]" \
        in same, same


def test_the_worker_marks_a_source_hash_of_another_kernel() -> None:
    """The replay worker's answer says, as a field the findings read (``source_differs``: its
    source note is :data:`SOURCE_DIFFERS`), when the record's source hash is another than the
    installed kernel's, in the words its ``reason`` says it in."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_round8b_kernels import _stand_in_kernel, idx_launch

    from forensics.kernels.format import source_hash
    from forensics.kernels.replay_worker import SOURCE_DIFFERS, source_note

    launch = idx_launch(np.array([0], dtype=np.int32))
    launch.source_sha256 = "0" * 64
    assert source_note(launch, _stand_in_kernel) == SOURCE_DIFFERS == DIFFERS
    launch.source_sha256 = source_hash(_stand_in_kernel)
    assert source_note(launch, _stand_in_kernel) != SOURCE_DIFFERS


# ------------------------------- T90c: a summary record's names are held to the importers' cap

def _summary(extra: int) -> Any:
    """A ``post_update`` summary record (``min``, ``max``, ``vocab_size``) with ``extra``
    more integer fields."""
    from forensics.records import Record

    fields = {"min": 0, "max": 5, "vocab_size": 10, **{f"x{i}": i for i in range(extra)}}
    return Record("post_update", 0, 0, fields, summary=True)


def test_a_summary_record_of_more_names_than_any_site_declares_is_refused() -> None:
    """Validation checked only a summary record's ``min``, ``max`` and bound: it might carry
    any number of other fields (the importers' cap, T87d, held only their own input). Every
    record validated is held to that cap (declared once): one line naming the record, the
    count and the cap; a summary of a few more names (a log's ``line``) is read."""
    from forensics.errors import CaptureFormatError
    from forensics.validate import META_KEYS, max_fields, validate_record

    cap = max_fields()
    assert validate_record(_summary(cap - len(META_KEYS) - 3), "r").summary
    with pytest.raises(CaptureFormatError) as raised:
        validate_record(_summary(1000), "record 0 in 'x.jsonl'")
    assert str(raised.value) == (
        f"record 0 in 'x.jsonl' (site 'post_update'): a record of {1003 + len(META_KEYS)} "
        f"field names, past the {cap} any site declares (with site, step, rank and summary); "
        "write one record's fields, one record per file")


def test_the_store_reader_refuses_a_summary_row_of_too_many_names(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A capture holding such a summary row (written by another writer: here ours, its check
    left out) is refused by the store's reader: exit 2, one line naming the capture's row, the
    count and the cap."""
    from forensics.cli import main
    from forensics.store import writer

    with monkeypatch.context() as unchecked:
        unchecked.setattr(writer, "validate_record", lambda record, where: record)
        root = writer.write_capture(tmp_path / "s.capture", [_summary(100)],
                                    manifest={"notes": "x"})
    assert main(["replay", str(root)]) == 2
    out, err = capsys.readouterr()
    assert not out and len(err.strip().splitlines()) == 1, err
    assert "batch 0, row 0 (site 'post_update'): a record of 107 field names, past the 23 " \
        "any site declares" in err, err
