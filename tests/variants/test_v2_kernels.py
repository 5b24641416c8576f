"""Model Runner V2's sites against vLLM's own Triton kernels, run in Triton's interpreter
(``forensics.variants.triton_kernels``): generated records, out-of-range ones included, give
the same outcome and outputs from ``upstream`` and from the kernel (the ``vllm`` variant), and
every access the kernel makes outside its buffers is observed, never performed."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.outcome import Outcome
from forensics.records import Record
from forensics.sites import get_site
from forensics.validate import validate_record
from forensics.variants import triton_kernels

VOCAB = 20
EXAMPLES = 1000
_SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                     suppress_health_check=list(HealthCheck))


def _ids(data: st.DataObject, n: int) -> list[int]:
    """``n`` ids, mostly in the vocabulary, sometimes -1, ``VOCAB`` or past it."""
    return data.draw(st.lists(st.one_of(st.integers(0, VOCAB - 1) | st.integers(0, VOCAB - 1),
                                        st.sampled_from([-1, -2, VOCAB, VOCAB + 3])),
                              min_size=n, max_size=n))


def _slots(data: st.DataObject, n: int, m: int, low: int) -> np.ndarray:
    """``n`` slots of ``m``, sometimes one outside ``[0, m)`` (down to ``low``)."""
    inside = st.integers(0, m - 1)
    return np.array(data.draw(st.lists(st.one_of(inside, inside, inside, st.integers(low, m + 2)),
                                       min_size=n, max_size=n)), np.int64)


def combine_record(data: st.DataObject) -> Record:
    """A ``combine_tokens`` record: a few rows of decodes, drafts and prompts."""
    m, s, n = data.draw(st.integers(1, 5)), data.draw(st.integers(0, 3)), data.draw(
        st.integers(1, 4))
    new = 1 if s == 0 else data.draw(st.sampled_from([1, 1, 1, 0]))
    logits = [new + data.draw(st.integers(0, s + 1)) for _ in range(n)]
    queries = [k + data.draw(st.integers(0, 2)) for k in logits]
    qsl = np.concatenate([[0], np.cumsum(queries)]).astype(np.int32)
    tokens = int(qsl[-1]) + data.draw(st.sampled_from([0, 0, 0, 2, -1]))
    return validate_record(Record("combine_tokens", 0, 0, dict(
        input_ids=np.full(max(tokens, 0), 7, np.int32), idx_mapping=_slots(data, n, m, -2),
        last_sampled_tokens=np.array(_ids(data, m), np.int64),
        query_start_loc=qsl, seq_lens=np.array(data.draw(st.lists(
            st.integers(0, 12), min_size=n, max_size=n)), np.int32),
        prefill_len=np.array(data.draw(st.lists(st.integers(0, 10), min_size=m, max_size=m)),
                             np.int32),
        draft_tokens=np.array(_ids(data, m * s), np.int64).reshape(m, s),
        cu_num_logits=np.concatenate([[0], np.cumsum(logits)]).astype(np.int32),
        num_new_sampled_tokens=new, vocab_size=VOCAB)), "generated")


def post_record(data: st.DataObject) -> Record:
    """A ``post_update`` record: sampled ids per row, per-slot state, counts maybe kept."""
    m, n, width = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 4)), data.draw(
        st.integers(1, 4))
    length = data.draw(st.integers(1, 8))
    fields: dict[str, Any] = dict(
        idx_mapping=_slots(data, n, m, -1),
        num_computed_tokens=np.array(data.draw(st.lists(st.integers(0, 9), min_size=m,
                                                        max_size=m)), np.int32),
        last_sampled_tokens=np.array(_ids(data, m), np.int64),
        sampled_tokens=np.array(_ids(data, n * width), np.int64).reshape(n, width),
        num_sampled=np.array(data.draw(st.lists(st.integers(0, width + 1), min_size=n,
                                                max_size=n)), np.int32),
        num_rejected=np.array(data.draw(st.lists(st.integers(0, width), min_size=n,
                                                 max_size=n)), np.int32),
        total_len=np.array(data.draw(st.lists(st.integers(0, length), min_size=m, max_size=m)),
                           np.int32),
        all_token_ids_width=length, bin_counts_rows=data.draw(st.sampled_from([0, m, m, m + 1])),
        bin_counts_width=data.draw(st.sampled_from([VOCAB, VOCAB, VOCAB - 2])), vocab_size=VOCAB)
    if data.draw(st.booleans()):
        fields["query_start_loc"] = np.arange(n + 1, dtype=np.int32) * 2
    if data.draw(st.integers(0, 3)) == 0:
        s = data.draw(st.integers(1, 3))
        fields["draft_tokens"] = np.array(_ids(data, n * s), np.int64).reshape(n, s)
        fields["draft_tokens_out"] = np.zeros((m, s), np.int64)
    return validate_record(Record("post_update", 0, 0, fields), "generated")


def drafts_record(data: st.DataObject) -> Record:
    """A ``rejection_drafts`` record: requests of one to four logits rows each (their drafts
    and bonus), the step's tokens and positions, sometimes a token index or slot outside its
    buffer, draft ids sometimes negative or past the vocabulary."""
    m, n = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 4))
    per = data.draw(st.lists(st.integers(1, 4), min_size=n, max_size=n))
    logits = sum(per)
    tokens = logits + data.draw(st.integers(0, 3))
    inside = st.integers(0, tokens - 1)
    indices = data.draw(st.lists(st.one_of(inside, inside, inside, st.integers(-2, tokens + 2)),
                                 min_size=logits, max_size=logits))
    return validate_record(Record("rejection_drafts", 0, 0, dict(
        input_ids=np.array(_ids(data, tokens), np.int32),
        positions=np.array(data.draw(st.lists(st.integers(0, 14), min_size=tokens,
                                              max_size=tokens)), np.int64),
        logits_indices=np.array(indices, np.int64),
        expanded_idx_mapping=np.repeat(_slots(data, n, m, -2), per),
        expanded_local_pos=np.concatenate([np.arange(k) for k in per]).astype(np.int32),
        prefill_len=np.array(data.draw(st.lists(st.integers(0, 10), min_size=m, max_size=m)),
                             np.int32), vocab_size=VOCAB)), "generated")


def agree(record: Record, kernel: Outcome, seen: dict[str, int], patched: bool = False) -> None:
    """The kernel's outcome is the model's (``patched``: the patched model's): same status,
    and the same outputs when ``ok``; ``seen`` counts the statuses."""
    model: Outcome = get_site(record.site).model(patched)(record)
    assert kernel.status == model.status, (record.fields, model.message, kernel.message)
    seen[model.status] = seen.get(model.status, 0) + 1
    if model.status != "ok":
        assert kernel.message.startswith("IndexError: the Triton kernel made a ")
        return
    assert set(kernel.outputs) == set(model.outputs)
    for name, value in model.outputs.items():
        assert np.array_equal(np.asarray(kernel.outputs[name]).reshape(-1),
                              np.asarray(value).reshape(-1)), (name, record.fields)


def generated(build: Any) -> list[Record]:
    """``EXAMPLES`` records drawn by ``build`` (the same ones on every run)."""
    records: list[Record] = []

    @_SETTINGS
    @given(st.data())
    def generate(data: st.DataObject) -> None:
        records.append(build(data))

    generate()
    return records


@pytest.mark.parametrize("build", [combine_record, post_record, drafts_record],
                         ids=["combine", "post", "drafts"])
def test_the_model_of_each_v2_kernel_is_the_kernel(build: Any) -> None:
    records = generated(build)  # first; then the kernel runs them in one exchange with its worker
    seen: dict[str, int] = {}
    for record, kernel in zip(records, triton_kernels.run_kernels(records), strict=True):
        agree(record, kernel, seen)
    assert sum(seen.values()) >= EXAMPLES
    assert seen.get("ok", 0) > 100 and seen.get("index_error", 0) > 50, seen


def test_the_kernel_hands_a_draft_past_the_vocabulary_to_the_rejection_kernels() -> None:
    """The kernel's own ``draft_sampled``, judged by the site, is a finding at the draft's
    logits row, and the patched model hands a placeholder on instead."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sites"))
    from v2_records import VOCAB as V2_VOCAB
    from v2_records import drafts

    record = drafts(draft=V2_VOCAB + 1)
    kernel = triton_kernels.run_kernel(record)
    assert kernel.status == "ok" and kernel.outputs["draft_sampled"].tolist() == [
        5, V2_VOCAB + 1, 3, 8]
    spec = get_site(record.site)
    assert [(f["tensor"], f["element"], f["value"]) for f in spec.judge(record, kernel)] == [
        ("draft_sampled", 1, V2_VOCAB + 1)]
    assert spec.patched(record).outputs["draft_sampled"].tolist() == [5, -1, 3, 8]


def test_an_id_outside_the_vocabulary_is_written_by_both() -> None:
    """The out-of-range ids the kernels write (not an access fault) are in both outputs."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sites"))
    from v2_records import combine

    record = combine(draft=(7, -1))
    kernel = triton_kernels.run_kernel(record)
    assert kernel.status == "ok" and kernel.outputs["input_ids"].tolist()[:3] == [11, 7, -1]


def test_the_vllm_variant_runs_the_kernel_the_site_names() -> None:
    """``run_site`` sends a site with a ``Site.kernel`` to the kernel worker (no adapter)."""
    import sys
    from pathlib import Path

    from forensics.variants import vllm_adapters

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sites"))
    from v2_records import post

    record = post()
    assert get_site(record.site).kernel is not None and get_site(record.site).adapter is None
    def load() -> vllm_adapters.VllmCode:
        raise AssertionError("a V2 site loads no adapter code")

    real = vllm_adapters.run_site(load, record)
    model = get_site(record.site).upstream(record)
    assert real.status == model.status == "ok"
    assert {k: np.asarray(v).tolist() for k, v in real.outputs.items()} == {
        k: np.asarray(v).tolist() for k, v in model.outputs.items()}
