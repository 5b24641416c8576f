"""Hostile input, round 4: ``forensics repro``'s Model Runner V2 chain (the embedding's origin,
the ``post_update`` that stored the origin's input) and the generated file's own bookkeeping,
and ``forensics shrink``'s window, attacked as a hostile capture author (or a hostile data
file attached to a bug thread) would.

No test here imports vLLM: the real code's replay is stood in for by the upstream model's
findings (``_as_if_vllm``), and the generated file's vLLM calls by plain stand-ins.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest

import forensics
from forensics.cli import main
from forensics.share.repro import script_text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_repro_data import BREAKERS, HOSTILE, _all_text  # noqa: E402
from test_repro_v2 import _data as _v2_data  # noqa: E402
from test_repro_v2 import _first_cases, _generated, _run_case, _stand_ins  # noqa: E402

from tests.conftest import DATA  # noqa: E402

#: a folder name holding a lone surrogate (a file name that is no UTF-8), bidi controls,
#: format braces and the two docstring quotes (under 255 bytes)
HOSTILE_NAME = ("x\udcff\u202e{0}%s#" + BREAKERS[0] + BREAKERS[1])[:120] + ".capture"


def _hostile_v2(root: Path) -> Path:
    """``v2-vocab-sample.capture`` with every request id, the folder's name, the manifest's
    names, versions, host and notes, and an ``expected.json`` of hostile text."""
    from forensics.store.writer import write_capture

    source = DATA / "v2-vocab-sample.capture"
    records = list(forensics.load(source))
    for record in records:
        if "req_ids" in record.fields:
            record.fields["req_ids"] = [f"{i}-{HOSTILE}" for i, _ in
                                        enumerate(record.fields["req_ids"])]
    manifest = json.loads((source / "manifest.json").read_text())
    manifest.update({"notes": HOSTILE, "host": HOSTILE, HOSTILE: HOSTILE,
                     "versions": {**manifest["versions"], "vllm": HOSTILE},
                     "model": {**manifest["model"], "name": HOSTILE, HOSTILE: 1}})
    capture = write_capture(root / HOSTILE_NAME, records, manifest=manifest)
    (capture / "expected.json").write_text(json.dumps({HOSTILE: HOSTILE, "verdicts": HOSTILE}))
    return capture


class _AsIfVllm:
    """A replay through ``upstream`` only, its findings also labelled ``vllm``: the real code's
    replay of a V2 capture costs ~30 s of Triton's interpreter; the repro's choice of records,
    origins and chains from those findings is what is under test."""

    def __init__(self, result: Any) -> None:
        import pandas as pd

        self._result = result
        up = result.findings[result.findings["variant"] == "upstream"]
        self.findings = pd.concat([up.assign(variant="vllm"), up], ignore_index=True)
        self.variants = ["vllm", "upstream"]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._result, name)


@pytest.fixture
def as_if_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    """``forensics repro`` with :class:`_AsIfVllm` for the real code's replay, vLLM 0.33.0."""
    import forensics.variants.vllm_adapters as adapters

    replay = forensics.replay
    monkeypatch.setattr(adapters, "require_vllm", lambda: "0.33.0")
    monkeypatch.setattr(forensics, "replay", lambda capture, variants=None, **kw:
                        _AsIfVllm(replay(capture, variants=["upstream"], **kw)))


def _import(script: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ----------------------------------------------- T12: the V2 chain is data, never code


def test_the_repro_of_a_hostile_v2_capture_holds_its_chain_as_data_and_runs_only_the_repro(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, as_if_vllm: None,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Every string of a V2 capture hostile: the pytest file is the fixed text, the data file
    is ASCII JSON holding the ids exactly, the embedding's origin and the origin's chain (the
    ``post_update`` record) among them; imported in a sandbox folder it writes nothing, and
    its tests run on the stand-in kernels, failing on the ids, no payload run."""
    capture = _hostile_v2(tmp_path)
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    script = sandbox / "test_repro.py"
    assert main(["repro", str(capture), "-o", str(script)]) == 0
    out = capsys.readouterr().out
    assert "PWNED" not in out and out.isascii() and out.count("\n") == 1, out
    source = script.read_text(encoding="utf-8")
    assert source == script_text()
    assert not [text for text in _all_text(source) if "PWNED" in text]
    raw = script.with_suffix(".json").read_bytes()
    assert raw.isascii()  # every control, bidi and surrogate escaped as JSON text
    data = json.loads(raw)
    assert data["vllm"] == {"needed": "0.33", "capture": None}  # no version: unknown (T55c)
    sites = [case["site"] for case in data["cases"]]
    assert sites == ["post_update", "combine_tokens", "embedding"], sites
    embedding = data["cases"][2]
    chain = embedding["origin"]["chain"]
    assert (chain["site"], chain["field"]) == ("post_update", "last_sampled_tokens")
    assert chain["record"]["req_ids"]["value"][0] == f"0-{HOSTILE}"
    assert data["cases"][1]["chain"] == chain
    monkeypatch.chdir(sandbox)
    module = _import(script, "repro_round4_hostile_v2")
    _stand_ins(monkeypatch, fixed=False)
    messages = [_run_case(module, monkeypatch, i, []) for i in range(3)]
    assert all("outside the vocabulary [0, 151936)" in m for m in messages), messages
    assert not [m for m in messages if "PWNED" in m or "req" in m or "\u202e" in m]
    assert sorted(p.name for p in sandbox.iterdir()) == ["test_repro.json", "test_repro.py"]
    assert not list(tmp_path.rglob("PWNED")) and not list(Path.cwd().glob("PWNED"))


def test_a_bad_capture_with_a_hostile_name_is_one_line_exit_2(
        tmp_path: Path, as_if_vllm: None, capsys: pytest.CaptureFixture[str]) -> None:
    """A capture the replay cannot read (its manifest is text no JSON reader takes), under a
    hostile folder name: one escaped line, exit 2, nothing written."""
    capture = tmp_path / HOSTILE_NAME
    capture.mkdir()
    (capture / "manifest.json").write_text('"""\n' + "open('PWNED', 'w')")
    assert main(["repro", str(capture), "-o", str(tmp_path / "t.py")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.isascii() and err.startswith("forensics repro: error:")
    assert not (tmp_path / "t.py").exists() and not (tmp_path / "t.json").exists()


# --------------------------------- the generated file allocates nothing sized by a claimed number


def _tensor(values: list[Any], dtype: str = "int64") -> dict[str, Any]:
    rows = values and isinstance(values[0], list)
    flat = [v for row in values for v in row] if rows else values
    shape = [len(values), len(values[0])] if rows else [len(values)]
    return {"kind": "tensor", "value": {"dtype": dtype, "shape": shape, "values": flat}}


def _int(value: int) -> dict[str, Any]:
    return {"kind": "int", "value": value}


def _case(site: str, record: dict[str, Any], vocab: int | None = 100) -> dict[str, Any]:
    return {"site": site, "function": f"vllm.{site}", "step": 2, "rank": 0, "record": record,
            "facts": {"vocab_size": vocab},
            "finding": {"text": "", "tensor": None, "element": None, "value": None,
                        "lower": None, "upper": None, "indexed": None}}


def _fake_vllm(monkeypatch: pytest.MonkeyPatch, modules: dict[str, dict[str, Any]]) -> None:
    """``vllm`` 0.33.0 and ``modules`` (name: attributes) in ``sys.modules``."""
    names = {"vllm": {"__version__": "0.33.0"}, **modules}
    for name, attributes in names.items():
        module = types.ModuleType(name)
        module.__dict__.update(attributes)
        monkeypatch.setitem(sys.modules, name, module)


class _InputBatch:
    """vLLM 0.33's ``InputBatch.update_async_output_token_ids``, noting each list's length."""

    seen: list[int] = []

    @staticmethod
    def update_async_output_token_ids(self: Any) -> None:
        sampled = self.sampled_token_ids_cpu.tolist()
        for index, req_id in enumerate(self.req_ids):
            ids = self.sampling_metadata.output_token_ids[index]
            _InputBatch.seen.append(len(ids))
            prev = self.prev_req_id_to_index.get(req_id)
            if prev is None or not ids or ids[-1] != -1:
                continue
            first = len(ids)
            while first > 0 and ids[first - 1] == -1:
                first -= 1
            ids[first:] = sampled[prev][:len(ids) - first]


def test_an_async_output_case_builds_no_list_of_output_len_ids(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``output_len`` is capped per row (2**24) but not per record: a record of many rows at
    the cap once made the generated test build lists of rows x 2**24 ids (gigabytes), where the
    replay builds one filler id per row. The test now builds the same lists as the replay, and
    still names the element by its place in the full list."""
    n = 2**20
    record = {"req_ids": {"kind": "str_list", "value": ["a", "b"]},
              "prev_req_ids": {"kind": "opt_str_list", "value": ["a", "b"]},
              "sampled_token_ids_cpu": _tensor([[100], [7]]),
              "output_tail": {"kind": "ragged", "value": [[5, -1], [-1]]},
              "output_len": _tensor([n, n]), "vocab_size": _int(100)}
    module = _generated(tmp_path, [_case("async_output", record)], "repro_round4_async")
    _fake_vllm(monkeypatch, {"vllm.v1.worker.gpu_input_batch": {"InputBatch": _InputBatch}})
    _InputBatch.seen = []
    with pytest.raises(AssertionError) as failed:
        module.test_index_stays_in_range(module.DATA["cases"][0])
    assert _InputBatch.seen == [3, 2], _InputBatch.seen[:2]  # filler, tail: not 2**20 ids
    assert str(failed.value).startswith(
        "vllm.v1.worker.gpu_input_batch.InputBatch.update_async_output_token_ids wrote "
        f"output_token_ids[0][{n - 1}] = 100, outside the vocabulary "
        "[0, 100) (1 such ids"), failed.value


def test_an_embedding_case_allocates_no_weight_of_num_embeddings_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``num_embeddings`` at its cap (2**24) in the data file: the weight is one row seen as
    that many (as the replay's), so the test fails on the id, not on an allocation (2**62, past
    the cap, is refused as the reader refuses it: round 14's T74a)."""
    import torch

    def forward(layer: Any, input_: Any) -> Any:
        assert layer.weight.untyped_storage().nbytes() == layer.weight.element_size()
        return torch.nn.functional.embedding(input_, layer.weight)

    record = {"input_ids": _tensor([3, -1]), "num_embeddings": _int(2**24)}
    module = _generated(tmp_path, [_case("embedding", record)], "repro_round4_embedding")
    _fake_vllm(monkeypatch, {
        "vllm.model_executor.layers.vocab_parallel_embedding": {
            "UnquantizedEmbeddingMethod": object,
            "VocabParallelEmbedding": types.SimpleNamespace(forward=forward)}})
    with pytest.raises(pytest.fail.Exception,  # the site's function, not the data's (T109e)
                       match=r"out-of-range access in vllm\.model_executor\.layers\."
                             r"vocab_parallel_embedding\.VocabParallelEmbedding\.forward: "
                             "index out of range in self"):
        module.test_index_stays_in_range(module.DATA["cases"][0])


def _post_update(**change: Any) -> dict[str, Any]:
    record = {"idx_mapping": _tensor([0]), "num_computed_tokens": _tensor([4]),
              "last_sampled_tokens": _tensor([1]), "sampled_tokens": _tensor([[5, 6]]),
              "num_sampled": _tensor([1]), "num_rejected": _tensor([0]),
              "total_len": _tensor([4]), "all_token_ids_width": _int(8),
              "bin_counts_rows": _int(2), "bin_counts_width": _int(100),
              "vocab_size": _int(100)}
    return {**record, **change}


def _combine(**change: Any) -> dict[str, Any]:
    record = {"input_ids": _tensor([0, 0]), "idx_mapping": _tensor([0]),
              "last_sampled_tokens": _tensor([1]), "query_start_loc": _tensor([0, 2]),
              "seq_lens": _tensor([9]), "prefill_len": _tensor([4]),
              "draft_tokens": _tensor([[3]]), "cu_num_logits": _tensor([0, 2]),
              "num_new_sampled_tokens": _int(1), "vocab_size": _int(100)}
    return {**record, **change}


def _unreachable(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("vLLM's call ran on buffers past the allocation budget")


def _logits(input_ids: Any, idx_mapping: Any, last: Any, qsl: Any, seq_lens: Any,
            prefill_len: Any, drafts: Any, cu_num_logits: Any, num_logits: int,
            num_new: int = 1) -> Any:
    """vLLM's combine kernel's own allocation (``logits_indices``), then the kernel."""
    import torch

    torch.empty(num_logits, dtype=torch.int64)
    _unreachable()


@pytest.mark.parametrize(("site", "record", "says"), [
    ("post_update", _post_update(bin_counts_width=_int(2**40)),
     "bin_counts_rows x bin_counts_width: 4 x 1099511627776 would allocate 17592186044416 "
     "bytes, past the allocation budget of 1073741824 bytes"),
    ("post_update", _post_update(all_token_ids_width=_int(2**40)),
     "len(num_computed_tokens) x all_token_ids_width: 2 x 1099511627776 would allocate"),
    ("combine_tokens", _combine(cu_num_logits=_tensor([0, 2**40])),
     "cu_num_logits[-1]: 1099511627776 would allocate 8796093022208 bytes"),
    ("prepare_input_ids", {"num_draft_tokens": _tensor([2**40]), "cu_num_tokens": _tensor([1]),
                           "input_ids": _tensor([1]), "prev_positions": _tensor([-1]),
                           "prev_sampled_token_ids": _tensor([[1]]),
                           "prev_num_spec_tokens": _int(0), "vocab_size": _int(100)},
     "num_draft_tokens: 1099511627776 would allocate 8796093022208 bytes"),
])
def test_a_number_in_the_data_file_sizes_no_buffer_past_the_budget(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        site: str, record: dict[str, Any], says: str) -> None:
    """A data file (attached to a bug thread, say) whose widths, logit count or draft count
    would make the test allocate terabytes: the call is refused with one BadData line naming
    the field, its value and the budget (``FORENSICS_MAX_ALLOC``, as ``forensics`` reads it);
    a Triton case's process prints it as its outcome."""
    monkeypatch.delenv("FORENSICS_MAX_ALLOC", raising=False)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    module = _generated(tmp_path, [_case(site, record)], f"repro_round4_budget_{site}")
    kernels = {"post_update": _unreachable, "combine_sampled_and_draft_tokens": _logits}
    _fake_vllm(monkeypatch, {
        "vllm.v1.worker.gpu.input_batch": kernels,
        "vllm.v1.worker.gpu_model_runner": {
            "GPUModelRunner": types.SimpleNamespace(_prepare_input_ids=_unreachable)}})
    monkeypatch.setitem(sys.modules, "vllm.v1.worker.gpu", types.SimpleNamespace(
        input_batch=sys.modules["vllm.v1.worker.gpu.input_batch"]))
    monkeypatch.setitem(sys.modules, "vllm.v1.worker", types.SimpleNamespace(
        gpu_model_runner=sys.modules["vllm.v1.worker.gpu_model_runner"]))
    with pytest.raises(module.BadData) as refused:
        module.RUNNERS[site](module.record(module.DATA["cases"][0]))
    assert str(refused.value) == (f"test_repro.json: {says}" + str(refused.value).split(says)[1])
    assert "\n" not in str(refused.value) and "FORENSICS_MAX_ALLOC" in str(refused.value)
    if site in module.TRITON_SITES:
        module.case_process(0)
        outcome = json.loads(capsys.readouterr().out.split(module.OUTCOME, 1)[1])
        assert outcome == {"bad_data": str(refused.value)}
    monkeypatch.setenv("FORENSICS_MAX_ALLOC", "32T")
    assert module.max_alloc() == 1 << 30  # what forensics would refuse is the default
    monkeypatch.setenv("FORENSICS_MAX_ALLOC", "64G")
    assert module.max_alloc() == 64 << 30


# ------------------------------------------ the chain's records must agree with what runs on them


@pytest.fixture(scope="module")
def vocab_cases() -> dict[str, dict[str, Any]]:
    """The data file's cases of ``v2-vocab-sample.capture`` (upstream's findings)."""
    return _first_cases("v2-vocab-sample.capture", ("post_update", "combine_tokens",
                                                    "embedding"))


def test_a_chain_record_that_disagrees_with_its_call_is_bad_data_not_a_vllm_bug(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        vocab_cases: dict[str, dict[str, Any]]) -> None:
    """The chain's ``post_update`` record holds 2 ``last_sampled_tokens`` though its call
    writes slot 3 (4 slots of ``num_computed_tokens``): the test once wrote that cell into the
    2 values and reported the IndexError as an out-of-range access of vLLM's embedding; it is
    now the data file's fault, named (the record, the field, the cell), on fixed kernels and
    unfixed alike."""
    embedding = json.loads(json.dumps(vocab_cases["embedding"]))
    chain = embedding["origin"]["chain"]
    assert (chain["site"], chain["slots"]) == ("post_update", [0, 1, 3])
    stored = chain["record"]["last_sampled_tokens"]["value"]
    stored.update(shape=[2], values=stored["values"][:2])
    module = _generated(tmp_path, [embedding], "repro_round4_short_chain")
    for fixed in (True, False):
        _stand_ins(monkeypatch, fixed=fixed)
        module.WRITTEN.clear()
        with pytest.raises(module.BadData, match=re.escape(
                "test_repro.json: the capture's step-11 post_update record (rank 0): "
                "last_sampled_tokens: the call wrote the cell [3], outside the record's [2] "
                "values;")):
            _run_case(module, monkeypatch, 0, [])


@pytest.mark.parametrize("cell", ["[-1]", "[4]", "[1e3]", "[\u00b2]", "[3", "[1, 2]", "[]",
                                  "[0x3]", 12345678901234567890, "[3]\n[0]"])
def test_a_cell_the_call_could_not_write_is_refused(
        tmp_path: Path, cell: Any) -> None:
    """Negative, past the buffer, not an integer, not a cell, or of the wrong rank: BadData
    naming the cell in ASCII, never an index used as it is (``-1`` once wrote the last
    value)."""
    module = _generated(tmp_path, [], f"repro_round4_cell_{abs(hash(str(cell)))}")
    with pytest.raises(module.BadData, match="^test_repro.json: w: ") as refused:
        module._cell(cell, "w", (4,))
    assert str(refused.value).isascii() and "\n" not in str(refused.value)
    assert module._cell("[3]", "w", (4,)) == (3,)
    assert module._cell("[1, 2]", "w", (2, 3)) == (1, 2)
    assert module._cell("[5]", "w", (2, 3)) == (5,)  # a flat index inside 2 x 3


# ------------------------------------- the words the test prints are the ones the generator wrote

#: a terminal escape (clear the screen, set the window's title), a bidi override, a lone
#: surrogate and a line separator: what a forged data file could make pytest print
ESCAPES = ("\x1b[2J\x1b]0;owned\x07", "\u202e", "\udcff", "\u2028", "\x85")


def _forged(case: dict[str, Any], where: str, text: str) -> dict[str, Any]:
    """``case`` with ``text`` put into the printed string at ``where`` (a dotted path)."""
    forged = json.loads(json.dumps(case))
    *path, key = where.split(".")
    holder = forged
    for part in path:
        holder = holder[part]
    holder[key] = f"{holder[key]}{text}"
    return forged


@pytest.mark.parametrize("where", ["function", "finding.text", "finding.tensor",
                                   "finding.indexed", "origin.function", "origin.chain.field",
                                   "origin.chain.function"])
def test_a_forged_data_file_cannot_make_the_test_print_escapes(
        tmp_path: Path, vocab_cases: dict[str, dict[str, Any]], where: str) -> None:
    """The strings the generated test prints in its messages (function names, the finding's
    words, tensor names, the chain's field) are refused at load, naming the field, when they
    hold a character ``forensics repro`` escapes (it writes every such string escaped); the
    generator's own data of a hostile capture loads (above)."""
    case = vocab_cases["embedding"]
    for text in ESCAPES:
        data = _v2_data([_forged(case, where, text)])
        (tmp_path / "test_repro.py").write_text(script_text())
        (tmp_path / "test_repro.json").write_text(json.dumps(data))
        with pytest.raises(Exception) as refused:
            _import(tmp_path / "test_repro.py", "repro_round4_forged")
        message = str(refused.value)
        assert type(refused.value).__name__ == "BadData", message
        assert message.startswith(f"test_repro.json: cases[0].{where}: holds "), message
        assert message.isascii() and "\n" not in message
    if where != "origin.chain.field":  # (a field name both records must hold)
        ok = _generated(tmp_path, [_forged(case, where, " \u00e9\u4e2d")], "repro_round4_ok")
        assert ok.DATA["cases"][0]["site"] == "embedding"  # printable text of any script loads


def test_a_forged_needed_version_cannot_make_the_skip_print_escapes(tmp_path: Path) -> None:
    (tmp_path / "test_repro.py").write_text(script_text())
    (tmp_path / "test_repro.json").write_text(json.dumps(
        {"format": 1, "vllm": {"needed": "0.33\x1b[2J", "capture": "\x1b[2J"},
         "deadline_s": 5, "cases": []}))
    with pytest.raises(Exception, match=r"^test_repro.json: vllm.needed: holds '\\x1b'"):
        _import(tmp_path / "test_repro.py", "repro_round4_needed")


def test_a_duplicate_chain_record_does_not_drop_the_chain_by_its_place_in_the_capture() -> None:
    """Two ``post_update`` records at step 11 (rank 0), one of them with no sampled id (it
    stores nothing ``combine_tokens`` read and has no finding): the chain is the one that
    stored what was read, whichever comes first in the capture, its steps in order or not
    (the first one once decided, and the chain was dropped when the empty one came first)."""
    import copy

    from forensics.present.tables import findings_table
    from forensics.share.repro import chain_record, origin_record

    records = list(forensics.load(DATA / "v2-vocab-sample.capture"))
    real = next(r for r in records if r.site == "post_update" and r.step == 11)
    empty = copy.deepcopy(real)
    empty.fields["num_sampled"] = empty.fields["num_sampled"] * 0
    for listed in ([empty, *records], [*records, empty], [*records[::-1], empty]):
        result = forensics.replay(listed, ["upstream"])
        table = findings_table(result)
        failing = {int(i) for i in table[table["kind"] == "out_of_bounds"]["record"]}
        sink = next(r for r in result.records if r.site == "embedding" and r.step == 12)
        origin = origin_record(result.records, sink, "combine_tokens")
        assert origin is not None
        chain = chain_record(result.records, origin, failing)
        assert chain is not None and chain[0].step == 11
        assert chain[0].fields["num_sampled"].sum() > 0  # the real one, not the empty one
        assert chain[1:] == ("last_sampled_tokens", [0, 1, 3])


@pytest.mark.parametrize("text", ["[" * 200_000 + "]" * 200_000,
                                  '{"format": ' + "{\"a\": " * 100_000 + "1" + "}" * 100_001])
def test_a_data_file_nested_too_deep_is_bad_data(tmp_path: Path, text: str) -> None:
    """JSON nested deeper than Python's parser recurses: the loader once let the
    RecursionError through (a traceback at import); it is one BadData line like any other
    text that is no JSON."""
    (tmp_path / "test_repro.py").write_text(script_text())
    (tmp_path / "test_repro.json").write_text(text)
    with pytest.raises(Exception) as refused:
        _import(tmp_path / "test_repro.py", "repro_round4_deep")
    assert type(refused.value).__name__ == "BadData", repr(refused.value)[:300]
    assert str(refused.value).startswith("test_repro.json: the file: not JSON (maximum recursion")


@pytest.mark.parametrize(("change", "says"), [
    ({"site": ["embedding"]}, "cases[0].site: not a site this file can run"),
    ({"site": {"embedding": 1}}, "cases[0].site: not a site this file can run"),
])
def test_an_unhashable_site_is_bad_data(tmp_path: Path, change: dict[str, Any],
                                        says: str) -> None:
    """A site that is a list or an object once raised TypeError (unhashable) at import."""
    case = {**_case("embedding", {"input_ids": _tensor([1])}), **change}
    (tmp_path / "test_repro.py").write_text(script_text())
    (tmp_path / "test_repro.json").write_text(json.dumps(_v2_data([case])))
    with pytest.raises(Exception) as refused:
        _import(tmp_path / "test_repro.py", "repro_round4_site")
    assert type(refused.value).__name__ == "BadData" and says in str(refused.value)


@pytest.mark.parametrize(("field", "says"), [
    (_tensor([300], "int8"), "record['input_ids'].values: 300 is outside [-128, 127]"),
    (_tensor([-1], "uint8"), "record['input_ids'].values: -1 is outside [0, 255]"),
    (_tensor([2**64]), "record['input_ids'].values: 18446744073709551616 is outside"),
    (_tensor([2], "bool"), "record['input_ids'].values: 2 is outside [0, 1]"),
    ({"kind": "tensor", "value": {"dtype": ["int64"], "shape": [1], "values": [1]}},
     "record['input_ids']: dtype ['int64'] is not one of"),
])
def test_a_tensor_value_outside_its_dtype_is_bad_data_not_wrapped(
        tmp_path: Path, field: dict[str, Any], says: str) -> None:
    """-1 as uint8 once became 255 without a word, 2 as bool True; 300 as int8 and 2**64 a
    RuntimeError / ValueError from torch, an unhashable dtype a TypeError: each is now BadData
    naming the field (the generator writes each value in its array's dtype)."""
    module = _generated(tmp_path, [_case("embedding", {"input_ids": field})],
                        "repro_round4_dtype")
    with pytest.raises(module.BadData) as refused:
        module.record(module.DATA["cases"][0])
    assert says in str(refused.value), refused.value


def test_a_v2_capture_whose_manifest_says_no_runner_keeps_the_combine_cases_chain(
        tmp_path: Path, as_if_vllm: None) -> None:
    """The manifest's ``runner`` is a claim: without it (or with "v1") the embedding's origin
    still carried its chain, but the ``combine_tokens`` case lost its own, so the same record
    was run two ways; both now carry it."""
    from forensics.store.writer import write_capture

    source = DATA / "v2-vocab-sample.capture"
    manifest = json.loads((source / "manifest.json").read_text())
    capture = write_capture(tmp_path / "v1-claim.capture", list(forensics.load(source)),
                            manifest={**manifest, "runner": "v1"})
    script = tmp_path / "test_repro.py"
    assert main(["repro", str(capture), "-o", str(script)]) == 0
    cases = json.loads(script.with_suffix(".json").read_text())["cases"]
    combine, embedding = cases[1], cases[2]
    assert (combine["site"], embedding["site"]) == ("combine_tokens", "embedding")
    assert combine.get("chain") is not None
    assert combine["chain"] == embedding["origin"]["chain"]


def test_a_duplicate_origin_record_is_chosen_by_its_finding_not_its_place() -> None:
    """Two ``combine_tokens`` records at the embedding's step 12, one of them writing nothing
    (no row past its prompt, no finding): the embedding's origin is the one the replay finds
    out of range, whichever comes first in the capture."""
    import copy

    from forensics.present.tables import findings_table
    from forensics.share.repro import origin_record

    records = list(forensics.load(DATA / "v2-vocab-sample.capture"))
    real = next(r for r in records if r.site == "combine_tokens" and r.step == 12)
    idle = copy.deepcopy(real)
    idle.fields["seq_lens"] = idle.fields["seq_lens"] * 0  # every row still in its prompt
    for listed in ([idle, *records], [*records, idle]):
        result = forensics.replay(listed, ["upstream"])
        table = findings_table(result)
        failing = {int(i) for i in table[table["kind"] == "out_of_bounds"]["record"]}
        sink = next(r for r in result.records if r.site == "embedding" and r.step == 12)
        origin = origin_record(result.records, sink, "combine_tokens", failing)
        assert origin is not None and origin.step == 12
        assert origin.fields["seq_lens"].sum() > 0  # the real one, not the idle one
