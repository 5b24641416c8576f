"""The probe on the real vLLM 0.33.x code, called on CPU tensors and small stand-ins.

One module imports vLLM's runner (slow: tens of seconds cold): every test here shares it.
The compiled ``update_num_computed_tokens_for_batch_change`` is swapped for its plain function
(``_torchdynamo_orig_callable``) before the probe wraps it, as the replay's vllm variant does.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

import forensics
from forensics.errors import ConfigurationError, IndexBoundsError
from forensics.probe import patch, plugin
from forensics.probe.settings import Settings
from forensics.variants.models import UpstreamVariant


@pytest.fixture(scope="module")
def vllm_code() -> SimpleNamespace:
    """The three vLLM modules of the four sites (imported once for this module)."""
    import vllm.plugins
    import vllm.v1.spec_decode.utils as spec_utils
    import vllm.v1.worker.gpu_input_batch as input_batch
    import vllm.v1.worker.gpu_model_runner as runner

    return SimpleNamespace(utils=spec_utils, runner=runner, batch=input_batch,
                           plugins=vllm.plugins)


@pytest.fixture
def probe(vllm_code: SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Start the probe on the real modules; yields a starter taking Settings overrides."""
    compiled = vllm_code.utils.update_num_computed_tokens_for_batch_change
    plain = compiled._torchdynamo_orig_callable
    monkeypatch.setattr(vllm_code.utils, patch.BATCH_CHANGE_FN, plain)
    monkeypatch.setattr(vllm_code.runner, patch.BATCH_CHANGE_FN, plain)
    monkeypatch.setattr(vllm_code.runner, "PIN_MEMORY", False)
    monkeypatch.delenv("VLLM_FORENSICS_CAPTURE", raising=False)
    monkeypatch.delenv("FORENSICS_CAPTURE", raising=False)

    def start(**overrides: Any):
        values: dict[str, Any] = dict(directory=tmp_path, capture=tmp_path / "t-1.capture",
                                      ring=64, flush_every=64)
        values.update(overrides)
        return plugin.start(Settings(**values))

    yield start
    plugin.stop()


class Buf:
    """Stands in for vLLM's CpuGpuBuffer, its "device" side on the CPU."""

    def __init__(self, values: Any, dtype: torch.dtype) -> None:
        self.cpu = torch.tensor(values, dtype=dtype)
        self.np = self.cpu.numpy()
        self.gpu = torch.zeros_like(self.cpu)

    def copy_to_gpu(self, n: int | None = None) -> torch.Tensor:
        n = self.cpu.shape[0] if n is None else n
        return self.gpu[:n].copy_(self.cpu[:n])


def prepare_runner(prev_positions: list[int], prev_sampled: list[int], staged: list[int],
                   req_ids: list[str], draft: list[list[int]] | None = None,
                   device_before: list[int] | None = None) -> SimpleNamespace:
    """A stand-in carrying what ``GPUModelRunner._prepare_input_ids`` reads."""
    input_ids = Buf(staged, torch.int32)
    input_ids.gpu.copy_(torch.tensor(device_before or [0] * len(staged), dtype=torch.int32))
    return SimpleNamespace(
        _pp_recv_work=None, enable_prompt_embeds=False, device=torch.device("cpu"),
        input_ids=input_ids, prev_positions=Buf(prev_positions, torch.int64),
        prev_num_spec_tokens=0 if draft is None else len(draft[0]),
        _draft_token_ids=None if draft is None else torch.tensor(draft, dtype=torch.int64),
        input_batch=SimpleNamespace(req_ids=req_ids, vocab_size=100,
                                    prev_sampled_token_ids=torch.tensor(
                                        prev_sampled, dtype=torch.int32).reshape(-1, 1)))


def run_prepare(vllm_code: SimpleNamespace, runner: SimpleNamespace, cu: list[int],
                spec: dict[str, list[int]]) -> None:
    scheduler_output = SimpleNamespace(scheduled_spec_decode_tokens=spec)
    vllm_code.runner.GPUModelRunner._prepare_input_ids(
        runner, scheduler_output, len(cu), cu[-1], np.array(cu, dtype=np.int32))


def async_batch(outputs: list[list[int]], sampled: list[list[int]],
                prev: dict[str, int]) -> SimpleNamespace:
    """A stand-in carrying what ``InputBatch.update_async_output_token_ids`` reads."""
    return SimpleNamespace(
        sampling_metadata=SimpleNamespace(output_token_ids=outputs),
        sampled_token_ids_cpu=torch.tensor(sampled, dtype=torch.int32),
        async_copy_ready_event=SimpleNamespace(synchronize=lambda: None),
        prev_req_id_to_index=prev, req_ids=[f"r{i}" for i in range(len(outputs))],
        vocab_size=100)


class TinyModel(torch.nn.Module):
    """A model whose forward embeds ``input_ids`` (10 rows)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(10, 1)

    def forward(self, input_ids: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        return self.embed_tokens(input_ids)


def embed_runner(req_ids: list[str], cu: list[int]) -> SimpleNamespace:
    model = TinyModel()
    return SimpleNamespace(model=model, get_model=lambda: model,
                           query_start_loc=Buf([0, *cu], torch.int32),
                           input_batch=SimpleNamespace(num_reqs=len(cu), req_ids=req_ids))


def exercise_all_sites(vllm_code: SimpleNamespace) -> dict[str, Any]:
    """One call of each site through the installed wrappers; returns what each call changed."""
    i32 = torch.int32
    changed: dict[str, Any] = {}
    num_computed = torch.arange(8, dtype=i32) * 10
    accepted = torch.ones(3, dtype=i32)
    vllm_code.runner.update_num_computed_tokens_for_batch_change(
        num_computed, accepted, torch.tensor([1, -1, 0]), torch.tensor([2, 3], dtype=i32),
        torch.tensor([1, 0, 1, 0, 0, 0, 0, 0], dtype=i32), torch.tensor([7, 8, 9], dtype=i32))
    changed["batch_change"] = (num_computed.clone(), accepted.clone())
    runner = prepare_runner([1, -1, 0], [11, 12], [0, 0, 40, 41, 42, 0, 0], ["a", "b", "c"],
                            draft=[[21], [22]], device_before=[9] * 7)
    run_prepare(vllm_code, runner, [2, 5, 7], {"a": [0], "c": [0]})
    changed["prepare_input_ids"] = runner.input_ids.gpu.clone()
    batch = async_batch([[5, 6, -1], [7], [8, -1, -1], []], [[30, -1], [31, 32], [33, 34]],
                        {"r0": 0, "r2": 1, "r3": 2})
    vllm_code.batch.InputBatch.update_async_output_token_ids(batch)
    changed["async_output"] = [list(o) for o in batch.sampling_metadata.output_token_ids]
    runner = embed_runner(["a", "b"], [2, 3])
    vllm_code.runner.GPUModelRunner._model_forward(runner, input_ids=torch.tensor([1, 2, 3]),
                                                   positions=torch.tensor([7, 8, 4]))
    return changed


def test_records_of_the_real_functions_replay_to_the_same_outputs(vllm_code, probe) -> None:
    session = probe()
    changed = exercise_all_sites(vllm_code)
    assert changed["prepare_input_ids"].tolist() == [12, 22, 40, 41, 42, 11, 21]
    assert changed["async_output"] == [[5, 6, 30], [7], [8, 31, 32], []]
    session.close()
    capture = forensics.load(session.settings.capture)
    records = {r.site: r for r in capture}
    assert sorted(records) == sorted(["batch_change", "prepare_input_ids", "async_output",
                                      "embedding"])
    np.testing.assert_array_equal(records["batch_change"]["num_computed_tokens_after"],
                                  changed["batch_change"][0].numpy())
    np.testing.assert_array_equal(records["prepare_input_ids"]["input_ids_device_after"],
                                  changed["prepare_input_ids"].numpy())
    assert records["async_output"]["output_tail_after"] == [[6, 30], [7], [8, 31, 32], []]
    assert records["embedding"]["num_embeddings"] == 10
    assert records["embedding"]["req_ids"] == ["a", "b"]
    assert records["embedding"]["positions"].tolist() == [7, 8, 4]  # token continuity
    result = forensics.replay(list(capture), variants=("upstream",))
    outcomes = [UpstreamVariant().run(record) for record in result.records]
    for record, outcome in zip(result.records, outcomes, strict=True):
        assert outcome.status == "ok", (record.site, outcome.message)
        for name, value in outcome.outputs.items():
            expected = record[f"{name}_after"]
            if isinstance(expected, np.ndarray):
                np.testing.assert_array_equal(np.asarray(value), expected, err_msg=name)
            else:
                assert value == expected, (record.site, name)


def test_both_references_of_batch_change_are_wrapped(vllm_code, probe) -> None:
    probe(sites=("batch_change",))
    for module in (vllm_code.utils, vllm_code.runner):
        assert getattr(module, patch.BATCH_CHANGE_FN).__forensics_original__ is not None
    runner_class = vllm_code.runner.GPUModelRunner
    assert hasattr(runner_class.execute_model, "__forensics_original__")
    assert not hasattr(runner_class._prepare_input_ids, "__forensics_original__")
    assert not hasattr(vllm_code.batch.InputBatch.update_async_output_token_ids,
                       "__forensics_original__")


def test_wrapper_keeps_the_plain_function_behind_torch_compile(vllm_code) -> None:
    from forensics.probe import hooks

    compiled = vllm_code.utils.update_num_computed_tokens_for_batch_change
    wrapped = hooks.wrap_batch_change(compiled)
    assert wrapped._torchdynamo_orig_callable is compiled._torchdynamo_orig_callable


def test_step_counts_model_executions(vllm_code, probe) -> None:
    session = probe()
    standin = SimpleNamespace(execute_model_state="pending")
    for expected in (0, 1):
        with pytest.raises(RuntimeError, match="State error"):
            vllm_code.runner.GPUModelRunner.execute_model(standin, None)
        assert session.step == expected
    exercise_all_sites(vllm_code)
    session.close()
    capture = forensics.load(session.settings.capture)
    assert {r.step for r in capture} == {1}
    assert any(e["kind"] == "engine_exception" for e in capture.events)


def test_guard_stale_row_raises_before_index_error(vllm_code, probe) -> None:
    session = probe(mode="guard")
    exercise_all_sites(vllm_code)
    runner = prepare_runner([0, 2], [11, 12], [0, 0], ["a", "b"])
    before = runner.input_ids.gpu.clone()
    with pytest.raises(IndexBoundsError) as info:
        run_prepare(vllm_code, runner, [1, 2], {})
    error = info.value
    assert (error.site, error.row, error.value, error.bound, error.rank) == (
        "prepare_input_ids", 1, 2, 2, 0)
    assert str(session.settings.capture) in str(error)
    assert torch.equal(runner.input_ids.gpu, before)
    on_disk = list(forensics.load(session.settings.capture))  # flushed before raising
    stale = [r for r in on_disk if r.site == "prepare_input_ids" and len(r["prev_positions"]) == 2]
    assert len(on_disk) == 5 and stale[0]["prev_positions"].tolist() == [0, 2]
    with pytest.raises(IndexBoundsError, match="valid_sampled_token_count"):
        vllm_code.runner.update_num_computed_tokens_for_batch_change(
            torch.zeros(4, dtype=torch.int32), torch.ones(1, dtype=torch.int32),
            torch.tensor([3]), torch.ones(2, dtype=torch.int32),
            torch.ones(4, dtype=torch.int32), torch.zeros(1, dtype=torch.int32))


def test_guard_passes_a_written_sentinel_on_and_raises_on_a_stale_row(
        vllm_code, probe, caplog: pytest.LogCaptureFixture) -> None:
    """A vocab_size sentinel is only written by update_async_output_token_ids (vLLM's output
    path drops it, its penalties treat it as padding): guard mode records and flushes it, warns
    once, and the call runs. A previous row past the sampled ids is read: guard mode raises."""
    session = probe(mode="guard")
    batch = async_batch([[5, -1]], [[100, -1]], {"r0": 0})
    with caplog.at_level("WARNING", logger="forensics.probe"):
        vllm_code.batch.InputBatch.update_async_output_token_ids(batch)
        vllm_code.batch.InputBatch.update_async_output_token_ids(
            async_batch([[5, -1]], [[100, -1]], {"r0": 0}))
    assert batch.sampling_metadata.output_token_ids == [[5, 100]]  # the call ran
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1  # once, though it happened twice
    assert ("forensics guard: site 'async_output' step 0 rank 0 row 0 wrote "
            "out.output_token_ids value 100 outside [0, 100)") in warnings[0]
    flushed = list(forensics.load(session.settings.capture))  # flushed at once, not at close
    assert [r.site for r in flushed] == ["async_output", "async_output"]
    assert flushed[0]["sampled_token_ids_cpu"].tolist() == [[100, -1]]
    assert session.drain(timeout=30)  # events go to the writer process without a wait
    events = forensics.load(session.settings.capture).summary()["events"]
    assert [e["kind"] for e in events].count("guard_passed_on") == 2
    batch = async_batch([[5, -1]], [[7, -1]], {"r0": 3})
    with pytest.raises(IndexBoundsError, match="sampled_token_ids_cpu"):
        vllm_code.batch.InputBatch.update_async_output_token_ids(batch)
    assert session.counts["violations"] == 3


def test_guard_embedding_ids(vllm_code, probe) -> None:
    probe(mode="guard")
    runner = embed_runner(["a", "b"], [2, 3])
    with pytest.raises(IndexBoundsError) as info:
        vllm_code.runner.GPUModelRunner._model_forward(runner, input_ids=torch.tensor([1, 2, 10]))
    assert (info.value.site, info.value.row, info.value.value, info.value.bound) == (
        "embedding", 1, 10, 10)


def test_record_mode_keeps_the_crashing_call(vllm_code, probe) -> None:
    session = probe()
    runner = prepare_runner([0, 2], [11, 12], [0, 0, 0], ["a", "b"], device_before=[5, 5, 5])
    with pytest.raises(IndexError):
        run_prepare(vllm_code, runner, [1, 3], {})
    records = list(forensics.load(session.settings.capture))
    assert [r.site for r in records] == ["prepare_input_ids"]
    assert "input_ids_device_after" not in records[0]


def _clean_probe_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset every probe setting, both names (monkeypatch restores them, and removes what the
    plugin exports, after the test)."""
    from forensics.probe.settings import ENV_NAMES, LEGACY_PREFIX

    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(LEGACY_PREFIX + name, raising=False)


def test_vllm_plugin_loader_finds_and_calls_the_plugin(vllm_code, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm_code.plugins, "plugins_loaded", False)
    monkeypatch.setenv("VLLM_PLUGINS", "forensics")
    _clean_probe_env(monkeypatch)
    monkeypatch.setenv("FORENSICS_DIR", str(tmp_path))
    try:
        vllm_code.plugins.load_general_plugins()
        session = plugin.session()
        assert session is not None and session.settings.directory == tmp_path
        import os

        assert os.environ["FORENSICS_CAPTURE"] == str(session.settings.capture)
    finally:
        plugin.stop()
    monkeypatch.setattr(vllm_code.plugins, "plugins_loaded", False)
    monkeypatch.setenv("FORENSICS_RING", "many")
    with pytest.raises(ConfigurationError, match="FORENSICS_RING='many'"):
        vllm_code.plugins.load_general_plugins()


def test_legacy_names_still_work_and_are_passed_down_under_the_new_ones(
        vllm_code, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """VLLM_FORENSICS_* (the old names) turn the probe on; the plugin passes them down as
    FORENSICS_* and removes the old ones, so vLLM in the child processes has nothing to warn
    about (vLLM warns about, or refuses, unknown VLLM_* variables)."""
    import os

    monkeypatch.setattr(vllm_code.plugins, "plugins_loaded", False)
    monkeypatch.setenv("VLLM_PLUGINS", "forensics")
    _clean_probe_env(monkeypatch)
    monkeypatch.setenv("VLLM_FORENSICS_DIR", str(tmp_path))
    monkeypatch.setenv("VLLM_FORENSICS_MODE", "guard")
    try:
        vllm_code.plugins.load_general_plugins()
        session = plugin.session()
        assert session is not None and session.settings.guard
        assert os.environ["FORENSICS_DIR"] == str(tmp_path)
        assert os.environ["FORENSICS_MODE"] == "guard"
        assert os.environ["FORENSICS_CAPTURE"] == str(session.settings.capture)
        assert not [name for name in os.environ if name.startswith("VLLM_FORENSICS_")]
    finally:
        plugin.stop()
    monkeypatch.setattr(vllm_code.plugins, "plugins_loaded", False)
    _clean_probe_env(monkeypatch)
    monkeypatch.setenv("VLLM_FORENSICS_DIR", str(tmp_path))
    monkeypatch.setenv("VLLM_FORENSICS_SITES", "embedding,nowhere")
    with pytest.raises(ConfigurationError, match="VLLM_FORENSICS_SITES='embedding,nowhere'"):
        vllm_code.plugins.load_general_plugins()
