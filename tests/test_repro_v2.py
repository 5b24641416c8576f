"""``forensics repro`` of Model Runner V2's sites: ``combine_tokens`` and ``post_update`` get a
test each that calls vLLM's Triton kernel (in its own process, Triton's interpreter on) on the
captured record read from the data file, and checks the ids the kernel wrote and that it wrote
nothing past its buffers; a fixed kernel passes.

Cheap: the kernels here are stand-ins written with vLLM's pointer arithmetic (a fake
``vllm.v1.worker.gpu.input_batch``, a module in memory), run in this process; one test runs the
generated file under plain pytest with the stand-ins as a package, to check the case's own
process (Triton's interpreter on, no GPU visible, forensics unimportable). The same file on the
real vLLM 0.33.0 (and with ``data/patches/v2-index-guard.diff`` applied) is the check the
report of this change records (no vLLM import here: each costs ~10 s).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import types
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

import forensics
from forensics.present.tables import findings_table
from forensics.share.repro import case_data, chain_record, origin_record, script_text
from tests.conftest import DATA

#: vLLM's two V2 kernels as plain torch, with the kernels' pointer arithmetic (a write lands
#: where the kernel's would, past a view's end included); ``FIXED``: the bundled guard's rule
#: (negative drafts written as 0; sampled ids outside the vocabulary neither counted nor stored)
KERNELS = '''
import os

import torch

FIXED = False


def _at(tensor, offset):
    """The element ``offset`` elements past ``tensor``'s start, as the kernel's pointer."""
    return torch.as_strided(tensor, (1,), (1,), tensor.storage_offset() + int(offset))


def _interpreted():
    if os.environ.get("TRITON_INTERPRET") != "1" or os.environ.get("CUDA_VISIBLE_DEVICES") != "":
        raise RuntimeError("not in Triton's interpreter without a GPU")


def combine_sampled_and_draft_tokens(input_ids, idx_mapping, last_sampled_tokens,
                                     query_start_loc, seq_lens, prefill_len, draft_tokens,
                                     cu_num_logits, num_logits, num_new_sampled_tokens=1):
    _interpreted()
    for i, slot in enumerate(idx_mapping.tolist()):
        n = int(cu_num_logits[i + 1] - cu_num_logits[i])
        k, end = n - num_new_sampled_tokens, int(query_start_loc[i + 1])
        if int(seq_lens[i]) <= int(_at(prefill_len, slot)):
            continue
        if num_new_sampled_tokens and int(seq_lens[i]) - n >= int(_at(prefill_len, slot)):
            _at(input_ids, end - n)[0] = _at(last_sampled_tokens, slot)[0]
        for j in range(k):
            draft = int(_at(draft_tokens, slot * draft_tokens.stride(0) + j))
            _at(input_ids, end - k + j)[0] = max(draft, 0) if FIXED else draft


def _post_update(idx_mapping, num_computed_tokens, last_sampled_tokens, output_bin_counts,
                 sampled_tokens, num_sampled, num_rejected, query_start_loc, all_token_ids,
                 total_len, draft_tokens=None, draft_tokens_out=None, vocab_size=None):
    _interpreted()
    for i, slot in enumerate(idx_mapping.tolist()):
        if slot < 0:
            continue
        ids = sampled_tokens[i, :int(num_sampled[i])].tolist()
        if vocab_size is not None:
            valid = [0 <= t < vocab_size for t in ids] + [False]
            ids = ids[:valid.index(False)]
        length = int(_at(total_len, slot))
        if ids:
            _at(last_sampled_tokens, slot)[0] = ids[-1]
            _at(total_len, slot)[0] = length + len(ids)
        for j, token in enumerate(ids):
            _at(all_token_ids, slot * all_token_ids.stride(0) + length + j)[0] = token
            if output_bin_counts is not None:
                _at(output_bin_counts, slot * output_bin_counts.stride(0) + token)[0] += 1


if FIXED:
    def post_update(idx_mapping, num_computed_tokens, last_sampled_tokens, output_bin_counts,
                    sampled_tokens, num_sampled, num_rejected, query_start_loc, all_token_ids,
                    total_len, draft_tokens=None, draft_tokens_out=None, vocab_size=None):
        _post_update(idx_mapping, num_computed_tokens, last_sampled_tokens, output_bin_counts,
                     sampled_tokens, num_sampled, num_rejected, query_start_loc, all_token_ids,
                     total_len, draft_tokens, draft_tokens_out, vocab_size)
else:
    def post_update(idx_mapping, num_computed_tokens, last_sampled_tokens, output_bin_counts,
                    sampled_tokens, num_sampled, num_rejected, query_start_loc, all_token_ids,
                    total_len, draft_tokens=None, draft_tokens_out=None):
        _post_update(idx_mapping, num_computed_tokens, last_sampled_tokens, output_bin_counts,
                     sampled_tokens, num_sampled, num_rejected, query_start_loc, all_token_ids,
                     total_len, draft_tokens, draft_tokens_out)
'''
#: vLLM's gather_draft_sampled as plain torch; ``FIXED``: a draft id outside the vocabulary
#: (32000 here) handed on as -1, as the patched model does
GATHER = KERNELS + '''

def gather_draft_sampled(input_ids, positions, logits_indices, expanded_idx_mapping,
                         expanded_local_pos, prefill_len):
    _interpreted()
    token = logits_indices.long()
    draft, pos = input_ids[token].clone(), positions[token].clone()
    local = expanded_local_pos.long()
    draft[(local > 0) & (pos - local < prefill_len[expanded_idx_mapping.long()])] = -1
    if FIXED:
        draft[(local > 0) & (draft >= 32000)] = -1
    return draft, pos
'''
#: the module path of the stand-ins (vLLM's)
PACKAGES = ("vllm", "vllm.v1", "vllm.v1.worker", "vllm.v1.worker.gpu")


def _first_cases(capture: str, sites: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """The data file's case of each site's first out-of-bounds finding in ``capture`` under
    the upstream model (what ``forensics repro`` writes, less the real code's replay; the
    embedding's with its origin record, as for a V2 capture)."""
    result = forensics.replay(DATA / capture, ["upstream"])
    table = findings_table(result)
    failing = {int(i) for i in table[table["kind"] == "out_of_bounds"]["record"]}
    found = {}
    for site in sites:
        rows = table[(table["site"] == site) & (table["kind"] == "out_of_bounds")
                     & table["index_tensor"].notna()].sort_values(["step", "rank"])
        finding = rows.iloc[0].to_dict()
        record = result.records[int(finding["record"])]
        if site == "embedding":
            origin = origin_record(result.records, record, finding["origin"])
            finding["origin_record"] = origin
            if origin is not None:
                finding["chain_record"] = chain_record(result.records, origin, failing)
        elif site == "combine_tokens":  # an origin's site: its case carries its chain too
            finding["chain_record"] = chain_record(result.records, record, failing)
        found[site] = case_data(record, finding, dict(result.capture.manifest))
    return found


@pytest.fixture(scope="module")
def cases() -> dict[str, dict[str, Any]]:
    vocab = _first_cases("v2-vocab-sample.capture", ("post_update", "combine_tokens",
                                                     "embedding"))
    return {**_first_cases("v2-negative-draft.capture", ("combine_tokens", "embedding")),
            "post_update": vocab["post_update"], "combine_vocab": vocab["combine_tokens"],
            "embedding_vocab": vocab["embedding"]}


def _data(cases: list[dict[str, Any]]) -> dict[str, Any]:
    return {"format": 1, "vllm": {"needed": "0.33", "capture": "0.33.0"}, "deadline_s": 60,
            "cases": cases}


def _generated(folder: Path, cases: list[dict[str, Any]], name: str) -> types.ModuleType:
    """The generated file with ``cases`` as its data, imported as module ``name``."""
    (folder / "test_repro.py").write_text(script_text())
    (folder / "test_repro.json").write_text(json.dumps(_data(cases)))
    spec = importlib.util.spec_from_file_location(name, folder / "test_repro.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stand_ins(monkeypatch: pytest.MonkeyPatch, fixed: bool, text: str = KERNELS) -> None:
    """The stand-in kernels as ``vllm.v1.worker.gpu.input_batch`` in this process, in Triton's
    interpreter's environment."""
    kernels = types.ModuleType("vllm.v1.worker.gpu.input_batch")
    exec(compile(text.replace("FIXED = False", f"FIXED = {fixed}"), "kernels", "exec"),
         kernels.__dict__)
    parent = None
    for name in PACKAGES:
        package = types.ModuleType(name)
        monkeypatch.setitem(sys.modules, name, package)
        if parent is not None:
            setattr(parent, name.rsplit(".", 1)[1], package)
        parent = package
    sys.modules["vllm"].__version__ = "0.33.0"  # type: ignore[attr-defined]
    assert parent is not None
    parent.input_batch = kernels  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, kernels.__name__, kernels)
    gather = types.ModuleType("vllm.v1.worker.gpu.spec_decode.rejection_sampler")
    exec(compile(GATHER.replace("FIXED = False", f"FIXED = {fixed}"), "gather", "exec"),
         gather.__dict__)
    monkeypatch.setitem(sys.modules, "vllm.v1.worker.gpu.spec_decode",
                        types.ModuleType("vllm.v1.worker.gpu.spec_decode"))
    sys.modules["vllm.v1.worker.gpu.spec_decode"].rejection_sampler = gather  # type: ignore
    parent.spec_decode = sys.modules["vllm.v1.worker.gpu.spec_decode"]  # type: ignore
    monkeypatch.setitem(sys.modules, gather.__name__, gather)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


def _outcome(module: types.ModuleType, monkeypatch: pytest.MonkeyPatch) -> str:
    """The generated test on the module's one case, its kernel run in this process: "passed"
    or the failure's message."""
    case = module.DATA["cases"][0]
    monkeypatch.setattr(module, "run_in_interpreter", lambda index, seconds, part="--case":
                        module.RUNNERS[case["site"]](module.record(case)))
    try:
        module.test_index_stays_in_range(case)
    except (AssertionError, pytest.fail.Exception) as failed:
        return str(failed)
    return "passed"


def test_the_data_of_a_v2_case_is_the_record_and_the_element(
        cases: dict[str, dict[str, Any]]) -> None:
    combine, post = cases["combine_tokens"], cases["post_update"]
    assert (combine["function"], combine["step"]) == (
        "vllm.v1.worker.gpu.input_batch.combine_sampled_and_draft_tokens", 7)
    assert combine["finding"] | {"text": ""} == {
        "text": "", "tensor": "out.input_ids", "element": 1, "value": -1, "lower": 0,
        "upper": 151936, "indexed": "vocabulary"}
    assert combine["record"]["draft_tokens"]["kind"] == "tensor"  # read from data, not code
    assert (post["function"], post["step"]) == ("vllm.v1.worker.gpu.input_batch.post_update", 11)
    assert post["facts"] == {"vocab_size": 151936}
    assert "TRITON_SITES = frozenset(('combine_tokens', 'post_update', 'rejection_drafts'))" \
        in script_text()


@pytest.mark.parametrize(("site", "fails"), [
    ("combine_tokens", "vllm.v1.worker.gpu.input_batch.combine_sampled_and_draft_tokens wrote "
                       "input_ids[1] = -1, outside the vocabulary [0, 151936)"),
    ("post_update", "vllm.v1.worker.gpu.input_batch.post_update wrote last_sampled_tokens[")])
def test_a_v2_case_fails_on_the_kernel_and_passes_once_fixed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cases: dict[str, dict[str, Any]],
        site: str, fails: str) -> None:
    module = _generated(tmp_path, [cases[site]], f"repro_v2_{site}")
    _stand_ins(monkeypatch, fixed=False)
    message = _outcome(module, monkeypatch)
    assert fails in message, message
    assert ", outside the vocabulary [0, 151936)" in message
    _stand_ins(monkeypatch, fixed=True)
    assert _outcome(module, monkeypatch) == "passed"


def _run_case(module: types.ModuleType, monkeypatch: pytest.MonkeyPatch, index: int,
              calls: list[tuple[int, str]]) -> str:
    """The generated test on case ``index``, each Triton call (a case's or an origin's) run in
    this process and noted in ``calls``: "passed" or the failure's message."""
    def in_process(at: int, seconds: int, part: str = "--case") -> Any:
        calls.append((at, part))
        case = module.DATA["cases"][at]
        case = case["origin"] if part == "--origin" else case
        return module.RUNNERS[case["site"]](module.inputs(case))

    monkeypatch.setattr(module, "run_in_interpreter", in_process)
    try:
        module.test_index_stays_in_range(module.DATA["cases"][index])
    except (AssertionError, pytest.fail.Exception) as failed:
        return str(failed)
    return "passed"


def test_a_v2_embedding_reads_the_ids_its_origin_writes_so_a_fixed_kernel_passes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cases: dict[str, dict[str, Any]]
) -> None:
    """The embedding of ``v2-negative-draft.capture`` (input_ids[1] = -1, written at step 7
    by ``combine_sampled_and_draft_tokens``): its test runs the combine kernel on the
    origin's recorded inputs (the record in the data file), and checks the ids it writes; the
    fixed kernel writes 0 there, and the test passes, though the recorded id is -1."""
    combine, embedding = cases["combine_tokens"], cases["embedding"]
    assert embedding["origin"] is not None
    assert (embedding["origin"]["site"], embedding["origin"]["step"]) == ("combine_tokens", 7)
    assert embedding["origin"]["record"] == combine["record"]
    assert embedding["record"]["input_ids"]["value"]["values"][1] == -1
    module = _generated(tmp_path, [embedding], "repro_v2_embedding")
    _stand_ins(monkeypatch, fixed=False)
    calls: list[tuple[int, str]] = []
    message = _run_case(module, monkeypatch, 0, calls)
    assert ("the input_ids vllm.v1.worker.gpu.input_batch.combine_sampled_and_draft_tokens "
            "writes on the capture's step-7 combine_tokens record (rank 0), run on the "
            "installed vLLM: input_ids[1] = -1 is outside the vocabulary [0, 151936) "
            "(1 such ids") in message, message
    assert calls == [(0, "--origin")]
    _stand_ins(monkeypatch, fixed=True)
    module.WRITTEN.clear()  # the session's runs were of the unfixed kernel
    assert _run_case(module, monkeypatch, 0, calls) == "passed"
    both = _generated(tmp_path, [combine, embedding], "repro_v2_both")  # origin = case 0
    calls.clear()
    assert [_run_case(both, monkeypatch, i, calls) for i in (0, 1)] == ["passed", "passed"]
    assert calls == [(0, "--case")]  # the embedding reused the combine case's run


def test_a_v2_embedding_carries_a_fix_two_calls_back_through_post_update(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cases: dict[str, dict[str, Any]]
) -> None:
    """``v2-vocab-sample.capture``: the id reaches ``combine_tokens`` (step 12) through the
    ``last_sampled_tokens`` ``post_update`` stored at step 11 (slots 0, 1 and 3 of its
    ``idx_mapping``); the data file holds that record as the origin's chain, and the test runs
    ``post_update`` on it first, then the combine kernel on the values it stores: with the
    combine kernel fixed, the unfixed ``post_update`` still fails the test (naming both calls),
    the fixed one passes it."""
    embedding = cases["embedding_vocab"]
    chain = embedding["origin"]["chain"]
    assert (chain["site"], chain["step"], chain["rank"], chain["field"], chain["slots"]) == (
        "post_update", 11, 0, "last_sampled_tokens", [0, 1, 3])
    assert chain["record"] == cases["post_update"]["record"]
    module = _generated(tmp_path, [embedding], "repro_v2_two_back")
    fixed_combine = KERNELS.replace("max(draft, 0) if FIXED else draft", "max(draft, 0)")
    _stand_ins(monkeypatch, fixed=False, text=fixed_combine)
    message = _run_case(module, monkeypatch, 0, [])
    assert ("combine_sampled_and_draft_tokens writes on the capture's step-12 combine_tokens "
            "record (rank 0), its last_sampled_tokens at slots [0, 1, 3] being what "
            "vllm.v1.worker.gpu.input_batch.post_update stores there on the capture's step-11 "
            "post_update record (rank 0), run first, run on the installed vLLM: input_ids[4] = "
            "151936 is outside the vocabulary [0, 151936)") in message, message
    _stand_ins(monkeypatch, fixed=True)
    module.WRITTEN.clear()
    assert _run_case(module, monkeypatch, 0, []) == "passed"
    unchained = {**embedding, "origin": {k: v for k, v in embedding["origin"].items()
                                         if k != "chain"}}
    module = _generated(tmp_path, [unchained], "repro_v2_one_back")  # the recorded ids
    assert "input_ids[4] = 151936" in _run_case(module, monkeypatch, 0, [])


def test_a_v2_combine_case_carries_the_fix_of_the_post_update_that_stored_its_input(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cases: dict[str, dict[str, Any]]
) -> None:
    """``v2-vocab-sample``'s ``combine_tokens`` case (step 12) holds the embedding origin's
    chain (the step-11 ``post_update``): with the combine kernel fixed, the unfixed
    ``post_update`` fails its test naming the tensor, element, value, bound and both calls, the
    fixed one passes it; the embedding reuses the case's run; without the chain the recorded
    ``last_sampled_tokens`` fail it even then."""
    combine, embedding = cases["combine_vocab"], cases["embedding_vocab"]
    assert combine["chain"] == embedding["origin"]["chain"]
    assert "chain" not in cases["combine_tokens"]  # v2-negative-draft: no post_update stored it
    assert combine["finding"]["tensor"] == "out.input_ids"
    fixed_combine = KERNELS.replace("max(draft, 0) if FIXED else draft", "max(draft, 0)")
    _stand_ins(monkeypatch, fixed=False, text=fixed_combine)
    module = _generated(tmp_path, [combine, embedding], "repro_v2_combine_chain")
    message = _run_case(module, monkeypatch, 0, [])
    assert message.startswith(
        "vllm.v1.worker.gpu.input_batch.combine_sampled_and_draft_tokens wrote input_ids[4] = "
        "151936, outside the vocabulary [0, 151936)"), message
    assert message.endswith(
        "; it ran on the capture's step-12 combine_tokens record (rank 0), its "
        "last_sampled_tokens at slots [0, 1, 3] being what vllm.v1.worker.gpu.input_batch."
        "post_update stores there on the capture's step-11 post_update record (rank 0), run "
        "first"), message
    _stand_ins(monkeypatch, fixed=True)
    module.WRITTEN.clear()
    calls: list[tuple[int, str]] = []
    assert [_run_case(module, monkeypatch, i, calls) for i in (0, 1)] == ["passed", "passed"]
    assert calls == [(0, "--case")]  # the embedding reused the combine case's run
    unchained = {k: v for k, v in combine.items() if k != "chain"}
    module = _generated(tmp_path, [unchained], "repro_v2_combine_unchained")
    assert "wrote input_ids[4] = 151936, outside the vocabulary" in _run_case(
        module, monkeypatch, 0, [])


def test_a_chain_call_leaving_its_buffers_fails_naming_both_calls(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cases: dict[str, dict[str, Any]]
) -> None:
    """A ``post_update`` counting an id past ``output_bin_counts``, run first as the chain of
    ``v2-vocab-sample``'s embedding: the test fails naming the combine call, the post_update
    call and its record."""
    wild = KERNELS.replace("slot * output_bin_counts.stride(0) + token",
                           "output_bin_counts.numel() + 0 * token")
    module = _generated(tmp_path, [cases["embedding_vocab"]], "repro_v2_chain_wild")
    _stand_ins(monkeypatch, fixed=True, text=wild)
    message = _run_case(module, monkeypatch, 0, [])
    assert message.startswith(
        "out-of-range access in vllm.model_executor.layers.vocab_parallel_embedding."
        "VocabParallelEmbedding.forward: in vllm.v1.worker.gpu.input_batch.combine_sampled_and_"
        "draft_tokens, run on the capture's step-12 combine_tokens record (rank 0), its "
        "last_sampled_tokens at slots [0, 1, 3] being what"), message
    assert ("to derive the embedding's input_ids: in vllm.v1.worker.gpu.input_batch.post_update, "
            "run first on the capture's step-11 post_update record (rank 0) to derive "
            "last_sampled_tokens: the call counted 6 sampled id(s) outside the 4 rows of "
            "output_bin_counts; the capture's input_ids[4] = 151936 is outside [0, 151936)"
            ) in message, message


def test_a_bad_chain_in_the_data_file_is_refused_naming_the_field(
        tmp_path: Path, cases: dict[str, dict[str, Any]]) -> None:
    embedding = cases["embedding_vocab"]
    bad = {**embedding, "origin": {**embedding["origin"], "chain": {
        **embedding["origin"]["chain"], "field": "not_a_field"}}}
    with pytest.raises(Exception, match=r"cases\[0\]\.origin\.chain\.field: 'not_a_field' is "
                                        "no tensor of both records"):
        _generated(tmp_path, [bad], "repro_v2_bad_chain")


def test_a_v2_embedding_without_its_origin_record_says_it_cannot_carry_a_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cases: dict[str, dict[str, Any]]
) -> None:
    module = _generated(tmp_path, [{**cases["embedding"], "origin": None}], "repro_v2_no_origin")
    _stand_ins(monkeypatch, fixed=True)
    message = _run_case(module, monkeypatch, 0, [])
    assert message.startswith(
        "the recorded input_ids (the capture's replay finds no record of the call that wrote "
        "them, so this test checks the recorded ids and cannot carry a fix to vLLM forward): "
        "input_ids[1] = -1 is outside the vocabulary [0, 151936)"), message


def _tensor(values: list[int]) -> dict[str, Any]:
    return {"kind": "tensor", "value": {"dtype": "int64", "shape": [len(values)],
                                        "values": values}}


def test_rejection_drafts_checks_the_draft_ids_it_hands_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One request, 2 drafts past its prompt: the second draft (logits row 2) is the
    vocabulary's size; a negative draft in a prompt row is the kernels' own rejection."""
    case = {"site": "rejection_drafts",
            "function": "vllm.v1.worker.gpu.spec_decode.rejection_sampler.gather_draft_sampled",
            "step": 3, "rank": 0, "facts": {"vocab_size": 32000},
            "record": {"input_ids": _tensor([5, 9, 32000]),
                       "positions": _tensor([10, 11, 12]),
                       "logits_indices": _tensor([0, 1, 2]),
                       "expanded_idx_mapping": _tensor([0, 0, 0]),
                       "expanded_local_pos": _tensor([0, 1, 2]),
                       "prefill_len": _tensor([4]), "vocab_size": {"kind": "int", "value": 32000}},
            "finding": {"text": "", "tensor": "draft_sampled", "element": 2, "value": 32000,
                        "lower": 0, "upper": 32000, "indexed": "target_logits"}}
    module = _generated(tmp_path, [case], "repro_v2_drafts")
    _stand_ins(monkeypatch, fixed=False)
    message = _outcome(module, monkeypatch)
    assert "gather_draft_sampled wrote draft_sampled[2] = 32000, outside the vocabulary " \
           "[0, 32000) (1 such ids" in message, message
    _stand_ins(monkeypatch, fixed=True)
    assert _outcome(module, monkeypatch) == "passed"


def test_post_update_names_the_slot_and_every_stored_id(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cases: dict[str, dict[str, Any]]
) -> None:
    module = _generated(tmp_path, [cases["post_update"]], "repro_v2_ids")
    _stand_ins(monkeypatch, fixed=False)
    r = module.record(module.DATA["cases"][0])
    (_, last, _), (_, stored, _) = module.RUNNERS["post_update"](r)
    slot = int(r["idx_mapping"][cases["post_update"]["finding"]["element"]])
    assert last[f"[{slot}]"] == 151936
    assert 151936 in stored.values() and all(key.count(",") == 1 for key in stored)


def test_a_write_past_a_buffer_fails_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cases: dict[str, dict[str, Any]]
) -> None:
    """A kernel writing one id past ``input_ids``' end, and one counting an id one row past
    ``output_bin_counts``: both fail, naming the buffer (the spare rows caught the write)."""
    past = KERNELS.replace("_at(input_ids, end - k + j)[0] =",
                           "_at(input_ids, input_ids.numel() + j)[0] =")
    module = _generated(tmp_path, [cases["combine_tokens"]], "repro_v2_past")
    _stand_ins(monkeypatch, fixed=False, text=past)
    message = _outcome(module, monkeypatch)
    assert "out-of-range access in vllm.v1.worker.gpu.input_batch.combine_sampled_and_draft_" \
           "tokens: the call wrote 3 cell(s) past the end of input_ids (12 elements): the first, " \
           "24305, at input_ids[12]" in message, message
    assert "in the capture's replay the call wrote input_ids[1] = -1, outside [0, 151936), " \
           "the valid indices of vocabulary" in message
    wild = KERNELS.replace("slot * output_bin_counts.stride(0) + token",
                           "output_bin_counts.numel() + 0 * token")
    module = _generated(tmp_path, [cases["post_update"]], "repro_v2_counts")
    _stand_ins(monkeypatch, fixed=False, text=wild)
    message = _outcome(module, monkeypatch)
    assert "sampled id(s) outside the" in message and "rows of output_bin_counts" in message


def test_an_index_the_interpreter_cannot_observe_is_checked_from_the_data_saying_so(
        tmp_path: Path, cases: dict[str, dict[str, Any]]) -> None:
    """A finding on a record field (a slot past the per-slot buffers): Triton's interpreter
    does not check the read, so the test checks the captured value and says it does."""
    combine = cases["combine_tokens"]
    module = _generated(tmp_path, [combine], "repro_v2_unobserved")
    r = module.record(module.DATA["cases"][0])
    slots = len(r["prefill_len"])
    wild = {**combine, "finding": {"text": "", "tensor": "idx_mapping", "element": 0,
                                   "value": slots, "lower": 0, "upper": slots,
                                   "indexed": "prefill_len"}}
    assert module.read_unobserved(wild, r) == ""  # the captured slot is in range
    r["idx_mapping"][0] = slots
    assert module.read_unobserved(wild, r) == (
        "vllm.v1.worker.gpu.input_batch.combine_sampled_and_draft_tokens uses an index outside "
        "its buffer, which Triton's interpreter does not check: checked from the record instead "
        f"(no fix to vLLM changes this check), the capture's idx_mapping[0] = {slots} is "
        f"outside [0, {slots}), the valid indices of prefill_len")
    assert module.read_unobserved(combine, r) == ""  # an id it wrote: the kernel's run shows it


def test_a_case_process_killed_by_a_signal_fails_naming_the_signal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cases: dict[str, dict[str, Any]]
) -> None:
    module = _generated(tmp_path, [cases["combine_tokens"]], "repro_v2_signal")
    _stand_ins(monkeypatch, fixed=False)
    answers = iter([subprocess.CompletedProcess([], -11, "", ""),
                    subprocess.CompletedProcess([], -35, "", ""),  # no name in Python
                    subprocess.CompletedProcess([], 0, "INFO vllm says hello\n"
                                                f"{module.OUTCOME}{{\"index_error\": \"x\"}}\n",
                                                "")])
    monkeypatch.setattr(module.subprocess, "run", lambda *a, **k: next(answers))
    with pytest.raises(module.Crashed, match="its process was killed by SIGSEGV"):
        module.run_in_interpreter(0, 5)
    with pytest.raises(module.Crashed, match="its process was killed by signal 35$"):
        module.run_in_interpreter(0, 5)
    with pytest.raises(IndexError, match="^x$"):
        module.run_in_interpreter(0, 5)


def test_the_case_runs_in_its_own_interpreted_process_without_forensics(
        tmp_path: Path, cases: dict[str, dict[str, Any]]) -> None:
    """Plain pytest on the generated file with the stand-ins as an installed package and
    ``forensics`` unimportable: the combine case fails in its own process (which the stand-in
    checks runs Triton's interpreter without a GPU) on the id it wrote."""
    site = tmp_path / "site" / "vllm" / "v1" / "worker" / "gpu"
    site.mkdir(parents=True)
    (tmp_path / "site" / "vllm" / "__init__.py").write_text("__version__ = '0.33.0'\n")
    for folder in (site.parent.parent, site.parent, site):
        (folder / "__init__.py").write_text("")
    (site / "input_batch.py").write_text(KERNELS)
    (tmp_path / "test_repro.py").write_text(script_text())
    (tmp_path / "test_repro.json").write_text(json.dumps(_data([cases["combine_tokens"]])))
    launcher = ("import sys; sys.modules['forensics'] = None; import pytest; "
                "sys.exit(pytest.main(sys.argv[1:]))")
    run = subprocess.run([sys.executable, "-c", launcher, "-p", "no:forensics", "-p",
                          "no:cacheprovider", "-q", "--junitxml=junit.xml", "test_repro.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                              "PYTHONPATH": str(tmp_path / "site")})
    assert run.returncode == 1 and "1 failed" in run.stdout, run.stdout[-3000:]
    failure = next(ET.parse(tmp_path / "junit.xml").getroot().iter("failure"))
    assert "combine_sampled_and_draft_tokens wrote input_ids[1] = -1, outside the " \
           "vocabulary [0, 151936)" in (failure.get("message") or ""), failure.get("message")


# ------------------------------------------------ the real vLLM, with the bundled fix applied

#: imported by every Python the test starts: a case (or origin) process whose index is in
#: PATCHED_CASES imports the patched copies of vLLM's files under PATCHED_ROOT in place of the
#: installed ones (the vllm+PATH.diff machinery's finder), and notes the kernels' file it ran
SITECUSTOMIZE = '''
import atexit
import importlib.abc
import os
import sys
from pathlib import Path


def _patched():
    return (sys.argv[1:2] in (["--case"], ["--origin"])
            and sys.argv[2] in os.environ["PATCHED_CASES"].split(","))


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if not (name.startswith("vllm") and _patched()):
            return None
        from forensics.variants.triton_worker import PatchedFinder

        return PatchedFinder(Path(os.environ["PATCHED_ROOT"])).find_spec(name, path, target)


def _note():
    module = sys.modules.get("vllm.v1.worker.gpu.input_batch")
    if sys.argv[1:2] in (["--case"], ["--origin"]) and module is not None:
        with open(os.environ["RAN_LOG"], "a") as log:
            log.write(f"{sys.argv[2]} {module.__file__}\\n")


sys.meta_path.insert(0, _Finder())
atexit.register(_note)
'''


def test_on_vllm_the_v2_cases_fail_and_pass_once_the_bundled_fix_is_in(
        tmp_path: Path, cases: dict[str, dict[str, Any]]) -> None:
    """The one run of the real vLLM here (each case's process imports it: ~10 s each). Case 0,
    ``post_update`` on the installed vLLM 0.33.0, fails on the sampled id it stores; on the
    kernels of ``data/patches/v2-index-guard.diff`` (applied to private copies of vLLM's
    files) the others pass: case 1, ``v2-vocab-sample``'s ``combine_tokens``, whose process
    runs the patched ``post_update`` on its chain record (case 0's record: the id 151936 it
    stores unpatched is what the combine call writes at input_ids[4]), then the patched
    combine kernel on the values it stored; case 2, that capture's embedding, whose origin is
    case 1's record with the same chain (its run reused: no process of its own); case 3,
    ``v2-negative-draft``'s ``combine_tokens``; and case 4, the embedding whose recorded
    input_ids[1] is -1: its ids are what the patched combine kernel writes on its origin
    record (case 3's, whose run it reuses)."""
    from forensics.variants.vllm_diff import patched_sources

    root = tmp_path / "patched"
    for path, text in patched_sources(DATA / "patches" / "v2-index-guard.diff").items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    work = tmp_path / "work"
    work.mkdir()
    (work / "test_repro.py").write_text(script_text())
    (work / "test_repro.json").write_text(json.dumps(_data(
        [cases["post_update"], cases["combine_vocab"], cases["embedding_vocab"],
         cases["combine_tokens"], cases["embedding"]])))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(tmp_path / "site"),
           "PATCHED_ROOT": str(root), "PATCHED_CASES": "1,2,3,4", "RAN_LOG": str(tmp_path / "ran")}
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:forensics", "-p",
                          "no:cacheprovider", "-q", "--junitxml=junit.xml", "test_repro.py"],
                         cwd=work, capture_output=True, text=True, timeout=900, env=env)
    assert "1 failed, 4 passed" in run.stdout, run.stdout[-3000:]
    failures = [f.get("message") or "" for f in
                ET.parse(work / "junit.xml").getroot().iter("failure")]
    assert len(failures) == 1 and "post_update wrote last_sampled_tokens[" in failures[0]
    assert "= 151936, outside the vocabulary [0, 151936)" in failures[0]
    ran = dict(line.split(" ", 1) for line in (tmp_path / "ran").read_text().splitlines())
    assert cases["embedding_vocab"]["origin"]["chain"]["record"] == cases["post_update"]["record"]
    assert cases["combine_vocab"]["chain"] == cases["embedding_vocab"]["origin"]["chain"]
    assert ran["1"].strip() == ran["3"].strip() == str(root / "vllm/v1/worker/gpu/input_batch.py")
    assert ran["0"].strip() != ran["1"].strip()  # the installed kernels
    assert "2" not in ran and "4" not in ran  # the embeddings' origin runs were cases 1 and 3
