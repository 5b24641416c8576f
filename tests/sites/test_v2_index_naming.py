"""Model Runner V2 findings name the bad index and what it indexes (issue 29, point 1 and 8).

The V2 sites' kernels index per-slot buffers with ``idx_mapping[i]``, a row's columns with
counts computed from ``cu_num_logits``, ``num_sampled`` or ``total_len``, and write token ids
that index the vocabulary. Before, their findings named the indexed buffer as if it held the
index ("`prefill_len[1] = 7`") and every id's range as "its range (151936 elements)".
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from v2_records import VOCAB, combine, post

import forensics
from forensics.judge.findings import finding_records
from forensics.present.conclusion import conclude, describe_finding
from forensics.present.demo import describe_finding as demo_line
from forensics.present.writeup import render
from forensics.records import Record
from tests.test_index_naming import ASSIGNMENT, assignments_not_held, holds


def v2_records() -> list[Record]:
    """A slot past ``prefill_len``, a ``-1`` draft written into ``input_ids``, a sampled id
    equal to the vocabulary's size stored for the next step, a row that claims more sampled
    ids than its row of ``sampled_tokens`` has, that id counted in ``output_bin_counts`` (the
    kernel's run stops there), and a ``-1`` draft stored in a 4x2 ``draft_tokens_out``."""
    made = [combine(idx_mapping=np.array([3, 7], np.int64)),
            combine(draft=(-1, 8)),
            post(sampled=(5, VOCAB, -1), bin_counts_rows=0),
            post(num_sampled=4, num_rejected=np.array([0, 0], np.int32)),
            post(sampled=(5, VOCAB, -1)),
            post(draft_tokens=np.array([[-1, 5], [1, 2]], np.int32),
                 draft_tokens_out=np.zeros((4, 2), np.int32))]
    return [replace(r, step=step) for step, r in enumerate(made)]  # record i at step i


@pytest.fixture(scope="module")
def result() -> Any:
    return forensics.replay(v2_records(), ["upstream", "patched"])


def _upstream(result: Any, step: int) -> list[dict[str, Any]]:
    found = finding_records(result.findings)
    return [f for f in found if f["variant"] == "upstream" and f["step"] == step]


def test_a_slot_names_idx_mapping_and_the_buffer_it_indexes(result: Any) -> None:
    first = _upstream(result, 0)[0]
    assert (first["tensor"], first["index_tensor"], first["index_at"], first["held"]) == (
        "prefill_len", "idx_mapping", 1, True)
    assert (first["indexed"], first["value"], first["upper"], first["value_class"]) == (
        "prefill_len", 7, 4, "past_end")
    assert describe_finding(first).endswith(
        "`idx_mapping[1] = 7` indexes `prefill_len` (4 elements): past the end by 4")


def test_an_id_written_or_stored_is_outside_the_vocabulary(result: Any) -> None:
    placeholder = next(f for f in _upstream(result, 1) if f["tensor"] == "out.input_ids")
    assert (placeholder["indexed"], placeholder["value_class"]) == ("vocabulary", "placeholder")
    assert f"is outside the vocabulary ({VOCAB} ids): a -1 placeholder" in demo_line(placeholder)
    stored = next(f for f in _upstream(result, 2) if f["tensor"] == "out.last_sampled_tokens")
    assert (stored["index_tensor"], stored["index_at"], stored["value_class"]) == (
        "out.last_sampled_tokens", 3, "vocab_size")
    assert f"is outside the vocabulary ({VOCAB} ids): the vocab_size sentinel" in \
        demo_line(stored)


def test_a_stored_draft_names_its_flat_position(result: Any) -> None:
    stored = next(f for f in _upstream(result, 5) if f["tensor"] == "out.draft_tokens_out")
    assert (stored["index_tensor"], stored["index_at"], stored["value_class"]) == (
        "out.draft_tokens_out.flatten()", 6, "placeholder")  # slot 3, column 0 of 2
    assert "`out.draft_tokens_out.flatten()[6] = -1` is outside the vocabulary" in \
        demo_line(stored)  # not `out.draft_tokens_out[6]`: the tensor has 4 rows


def test_a_sampled_id_counted_names_the_sampled_tokens_element(result: Any) -> None:
    counted = next(f for f in _upstream(result, 4) if f["tensor"] == "output_bin_counts")
    assert (counted["index_tensor"], counted["index_at"], counted["held"]) == (
        "sampled_tokens[0]", 1, True)
    assert f"`sampled_tokens[0][1] = {VOCAB}` indexes a row of `output_bin_counts` " \
           f"({VOCAB} elements): past the end by 1" in demo_line(counted)


def test_a_computed_column_names_what_it_is_computed_from(result: Any) -> None:
    column = next(f for f in _upstream(result, 3) if f["tensor"] == "sampled_tokens")
    assert (column["index_tensor"], column["index_at"], column["held"], column["value"]) == (
        "num_sampled", 0, False, 3)
    assert "index 3, computed from `num_sampled[0]`, indexes a row of `sampled_tokens` " \
           "(3 elements): past the end by 1" in demo_line(column)
    read_on = [f for f in _upstream(result, 3) if f["tensor"] == "output_bin_counts"]
    assert all(not f["held"] for f in read_on)  # ids read from the next row: no T[i] = v


def test_every_held_v2_finding_holds_its_value(result: Any) -> None:
    held = [f for f in finding_records(result.findings) if f["held"]]
    assert held
    for f in held:
        assert holds(result.records[f["record"]], f["index_tensor"], [f["index_at"]], f["value"]), f


def test_no_v2_text_writes_an_assignment_that_does_not_hold(result: Any) -> None:
    records = v2_records()
    found = finding_records(result.findings)
    texts = [conclude(result).paragraph(), render(result, "text"), render(result, "markdown")]
    texts += [describe_finding(f) for f in found] + [demo_line(f) for f in found]
    everything = "\n".join(texts)
    assert ASSIGNMENT.search(everything)
    assert assignments_not_held(everything, records) == []
    assert "its range" not in everything  # every V2 index says what it indexes
