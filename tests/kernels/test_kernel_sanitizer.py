"""The flight recorder and ``forensics kernels`` on launches of REAL vLLM kernels, on CPU.

One subprocess records every case (``record_launches.py``: Triton's interpreter, the probe with
``FORENSICS_KERNELS=all``), one ``forensics kernels --json`` replays the capture. Cases come
from hypothesis (``idx_mapping`` of ``_prepare_pos_seq_lens_kernel``, in and out of range) and
by hand (slot mappings past a block-table row, the combine kernel). The truth each finding is
held to is what the kernel reads: ``num_computed_tokens[idx_mapping[i]]`` in program ``i``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

HERE = Path(__file__).resolve().parent
SLOTS = 4  # request slots of the recorded per-slot tensors
CASES: list[dict] = []


@settings(max_examples=10, database=None, deadline=None)
@given(st.lists(st.integers(min_value=-2, max_value=SLOTS + 2), min_size=1, max_size=4))
def _collect(idx: list[int]) -> None:
    """Collect ``idx_mapping`` cases (hypothesis draws; the replay judges them below)."""
    CASES.append({"kernel": "pos_seq_lens", "idx": idx})


HAND = [
    {"kernel": "pos_seq_lens", "idx": [2, 0, 3]},             # clean
    {"kernel": "pos_seq_lens", "idx": [0, SLOTS]},            # one past the last slot
    {"kernel": "slot_mappings", "idx": [1, 0], "pos": [0, 1, 5, 11]},   # clean
    {"kernel": "slot_mappings", "idx": [1, 2], "pos": [0, 1, 12, 13]},  # block 3 of 3
    {"kernel": "combine", "idx": [1, 3]},                     # clean
    {"kernel": "slot_mappings", "idx": [-1, 2], "pos": [40, 41, 0, 1]},  # a masked request
]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict], dict]:
    """(the cases, in step order; the ``forensics kernels --json --coverage`` answer)."""
    _collect()
    cases = HAND + CASES
    root = tmp_path_factory.mktemp("kernels")
    (root / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    done = subprocess.run([sys.executable, str(HERE / "record_launches.py"), str(root / "caps"),
                           str(root / "cases.jsonl")], capture_output=True, text=True,
                          timeout=900, check=True)
    capture = done.stdout.strip().splitlines()[-1]
    answer = subprocess.run([sys.executable, "-m", "forensics.cli", "kernels", capture, "--json",
                             "--coverage"], capture_output=True, text=True, timeout=900)
    assert answer.returncode in (0, 1), answer.stderr
    return cases, json.loads(answer.stdout)


def _at(answer: dict, step: int, kind: str | None = None) -> list[dict]:
    return [f for f in answer["findings"] if f["step"] == step
            and (kind is None or f["kind"] == kind)]


def test_every_launch_is_recorded_and_replayed(report: tuple[list[dict], dict]) -> None:
    cases, answer = report
    assert [launch["step"] for launch in answer["launches"]] == list(range(len(cases)))
    assert {launch["status"] for launch in answer["launches"]} == {"replayed"}


def test_idx_mapping_one_past_the_last_slot_is_an_out_of_allocation_read(
        report: tuple[list[dict], dict]) -> None:
    _, answer = report
    [read] = _at(answer, 1, "kernel_out_of_bounds")
    assert (read["kernel"], read["argument"], read["op"], read["elements"],
            read["program_id"]) == ("_prepare_pos_seq_lens_kernel", "num_computed_tokens_ptr",
                                    "load", [SLOTS], [1, 0, 0])
    [contract] = _at(answer, 1, "kernel_contract")
    assert (contract["argument"], contract["elements"], contract["values"],
            contract["upper"]) == ("idx_mapping_ptr", [1], [SLOTS], SLOTS)


def test_the_sanitizer_matches_what_the_kernel_reads(report: tuple[list[dict], dict]) -> None:
    """Every drawn idx_mapping: an out-of-range entry at row i is a load of
    num_computed_tokens at that entry by program i; an in-range batch has no finding and
    replays equal to live."""
    cases, answer = report
    for step, case in enumerate(cases):
        if case["kernel"] != "pos_seq_lens":
            continue
        expected = sorted((row, value) for row, value in enumerate(case["idx"])
                          if not 0 <= value < SLOTS)
        reads = sorted((f["program_id"][0], element)
                       for f in _at(answer, step, "kernel_out_of_bounds")
                       if f["argument"] == "num_computed_tokens_ptr" for element in f["elements"])
        assert reads == expected, (case, reads)
        if not expected:
            assert _at(answer, step) == [], case


def test_a_block_index_past_its_row_is_a_contract_finding(report: tuple[list[dict], dict]
                                                          ) -> None:
    """Position 12 with block size 4 is block 3 of a 3-block row: the read stays inside the
    block table (request 2's row spills into request 3's), so only the contract sees it."""
    _, answer = report
    assert _at(answer, 3, "kernel_out_of_bounds") == []
    [contract] = _at(answer, 3, "kernel_contract")
    assert (contract["kernel"], contract["argument"], contract["contract"],
            contract["elements"], contract["positions"]) == (
        "_compute_slot_mappings_kernel", "pos", "block index", [2, 3], [12, 13])


def test_a_masked_requests_positions_read_no_block_table_row(
        report: tuple[list[dict], dict]) -> None:
    """Request 0's ``idx_mapping`` is -1 (a dummy): vLLM's kernel reads no block-table row for
    it (``mask=is_local & is_real_req``), whatever its positions (40 and 41: block 10 of a
    3-block row). The replay of the real kernel reads nothing out of bounds, and the
    block-index contract, which judged those positions, no longer does."""
    _, answer = report
    assert _at(answer, 5) == []


def test_clean_launches_replay_in_bounds_and_equal_to_live(report: tuple[list[dict], dict]
                                                           ) -> None:
    _, answer = report
    for step in (0, 2, 4):
        assert _at(answer, step) == []


def test_coverage_lists_every_installed_kernel(report: tuple[list[dict], dict]) -> None:
    from forensics.kernels.coverage import installed_kernels

    _, answer = report
    rows = {(r["module"], r["kernel"]): r for r in answer["coverage"]}
    assert set(installed_kernels()) <= set(rows)
    recorded = {k for (_, k), r in rows.items() if r["status"] == "recorded"}
    assert recorded == {"_prepare_pos_seq_lens_kernel", "_compute_slot_mappings_kernel",
                        "_combine_sampled_and_draft_tokens_kernel"}
    assert {r["status"] for r in rows.values()} <= {"recorded", "never_launched"}
