"""Round 20's fix20b (issue 38, "Hostile input, round 3"): false sentences found this round and
left open (T119a.. of docs/threat-model.md).

- T119a: a variant that cannot see a Model Runner V2 ``post_update`` finding (its count of an id
  vocab_size lands in the next slot's row of ``output_bin_counts``, inside the buffer) was said
  to miss "a read inside an allocation": the kernel adds to the count, a read-modify-write.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import forensics
from forensics.outcome import Outcome
from forensics.present.conclusion import conclude, next_steps
from forensics.records import Record
from forensics.sites import SITES, get_site
from forensics.sites.base import READ, READ_MODIFY_WRITE, WRITE

DATA = Path(__file__).resolve().parents[2] / "data"


# ------------------------------ T119a: what the access does, as the site declares it


def _counted_past_the_row() -> Record:
    """``v2-vocab-sample``'s ``post_update`` record of step 11 whose request 'req-5' samples
    the id vocab_size second: its count lands in the next slot's row of ``output_bin_counts``
    (inside the buffer: nothing raises)."""
    [record] = [r for r in forensics.load(DATA / "v2-vocab-sample.capture").records()
                if r.site == "post_update" and r.step == 11]
    fields = dict(record.fields)
    sampled = np.array(fields["sampled_tokens"]).copy()
    sampled[1] = [108621, 80594, 151936, 52827]
    after = np.array(fields["last_sampled_tokens_after"]).copy()
    after[1] = 52827
    fields.update(sampled_tokens=sampled, last_sampled_tokens_after=after)
    return Record("post_update", 11, 0, fields)


def _blind(record: Record) -> Outcome:
    """Code that raises nothing and shows no accesses (as the V2 kernel in the interpreter)."""
    return Outcome("ok", "", {}, None)


def test_an_unseen_count_is_a_read_modify_write() -> None:
    """The paragraph and the next step name what the kernel does to ``output_bin_counts``."""
    result = forensics.replay([_counted_past_the_row()], {"upstream": None, "blind": _blind})
    unseen = result.findings[result.findings["variant"] == "blind"]
    assert list(unseen["tensor"]) == ["output_bin_counts"] and not unseen["judged"].any()
    conclusion = conclude(result)
    text = conclusion.paragraph()
    assert "a read inside an allocation" not in text, text
    assert ("blind cannot see 1 of the 1 upstream out-of-bounds findings (a read-modify-write "
            "inside an allocation raises nothing and blind shows no accesses)") in text, text
    step = next(s for s in next_steps(conclusion) if "blind cannot see" in s)
    assert "(read-modify-writes inside an allocation)" in step, step
    assert json.loads(json.dumps(conclusion.to_json()))["unseen_access"] == {
        "blind": [READ_MODIFY_WRITE]}


#: what each V2 kernel does to each tensor it indexes (its module docstring; vLLM 0.32/0.33)
DECLARED = {
    "post_update": {"num_computed_tokens": READ_MODIFY_WRITE, "total_len": READ_MODIFY_WRITE,
                    "output_bin_counts": READ_MODIFY_WRITE, "last_sampled_tokens": WRITE,
                    "draft_tokens_out": WRITE, "all_token_ids": WRITE,
                    "sampled_tokens": READ},
    "combine_tokens": {"input_ids": WRITE, "prefill_len": READ, "last_sampled_tokens": READ,
                       "draft_tokens": READ, "draft_tokens.column": READ},
}


@pytest.mark.parametrize("site", sorted(DECLARED))
def test_each_kernels_accesses_have_their_true_word(site: str) -> None:
    """Every tensor the V2 kernels index has the word of what the kernel does to it."""
    for tensor, word in DECLARED[site].items():
        assert get_site(site).access_word(tensor) == word, (site, tensor)


def test_only_the_kernels_that_write_declare_writes() -> None:
    """The other sites' code reads at every index it checks (gathers, lookups, embedding)."""
    assert {name for name in SITES if get_site(name).writes} == set(DECLARED)
