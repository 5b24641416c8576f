"""The probe's Model Runner V2 pieces that need no engine: which runner a worker holds, the
``probe_unsupported`` event and warning for one it does not know, the manifest's ``runner``,
and the guard's check of a V2 call with the site's own model."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from probe_fakes import FakeWriter, make_settings

from forensics.probe import hooks, v2_hooks
from forensics.probe.manifest import build_manifest
from forensics.probe.session import ProbeSession


def _runner_class(module: str, name: str = "GPUModelRunner", base: type = object) -> type:
    return type(name, (base,), {"__module__": module, "vocab_size": 50})


V1 = _runner_class("vllm.v1.worker.gpu_model_runner")
V2 = _runner_class("vllm.v1.worker.gpu.model_runner")


@pytest.mark.parametrize(("runner", "kind"), [
    (V1(), "v1"), (V2(), "v2"),
    (_runner_class("vllm.v1.worker.cpu.model_runner", "CPUModelRunner", V2)(), "v2"),
    (_runner_class("vllm.v1.worker.gpu_v3.model_runner")(), None)])
def test_the_runner_kind_comes_from_the_class_and_its_bases(runner: Any, kind: str | None
                                                            ) -> None:
    assert v2_hooks.runner_kind(runner) == kind


def _session(tmp_path: Path, writer: FakeWriter) -> ProbeSession:
    return ProbeSession(make_settings(tmp_path), writer_factory=lambda s: writer)


def test_an_unknown_runner_gives_an_event_and_one_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    writer = FakeWriter()
    session = _session(tmp_path, writer)
    hooks.activate(session)
    unknown = _runner_class("vllm.v1.worker.gpu_v3.model_runner", "ModelRunnerV3")

    class Worker:
        def load_model(self) -> None:
            self.model_runner = unknown()

    load = v2_hooks.wrap_load_model(Worker.load_model)
    try:
        with caplog.at_level(logging.WARNING, logger="forensics.probe"):
            load(Worker())
    finally:
        hooks.activate(None)
    (event,) = [e for e in writer.events if e["kind"] == "probe_unsupported"]
    assert event["runner"] == "vllm.v1.worker.gpu_v3.model_runner.ModelRunnerV3"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert ("vLLM " in warnings[0] and "ModelRunnerV3" in warnings[0]
            and "VLLM_USE_V2_MODEL_RUNNER=0" in warnings[0]), warnings
    assert build_manifest(session)["runner"] == "unknown"


def test_a_known_runner_gives_no_event_and_names_itself_in_the_manifest(tmp_path: Path) -> None:
    writer = FakeWriter()
    session = _session(tmp_path, writer)
    hooks.activate(session)

    class Worker:
        def load_model(self) -> None:
            self.model_runner = V2()

    try:
        v2_hooks.wrap_load_model(Worker.load_model)(Worker())
    finally:
        hooks.activate(None)
    assert not [e for e in writer.events if e["kind"] == "probe_unsupported"]
    assert build_manifest(session)["runner"] == "v2"


def test_the_guard_prefers_an_index_the_kernel_uses_over_an_id_it_writes() -> None:
    fields = dict(
        input_ids=np.full(6, 9, np.int32), idx_mapping=np.array([3, 9], np.int64),
        last_sampled_tokens=np.array([1, 2, 3, -1], np.int64),
        query_start_loc=np.array([0, 3, 4], np.int32), seq_lens=np.array([10, 7], np.int32),
        prefill_len=np.array([4, 0, 0, 5], np.int32), draft_tokens=np.zeros((4, 2), np.int64),
        cu_num_logits=np.array([0, 3, 4], np.int32), num_new_sampled_tokens=1, vocab_size=50)
    found = v2_hooks.violation_of("combine_tokens", fields)
    assert found is not None and found.used
    assert (found.tensor, found.row, found.value, found.upper) == ("prefill_len", 1, 9, 4)
    fields["idx_mapping"] = np.array([3, 0], np.int64)
    written = v2_hooks.violation_of("combine_tokens", fields)
    assert written is not None and not written.used
    assert (written.tensor, written.row, written.value) == ("out.input_ids", 0, -1)


def _v2_call_tensors() -> dict[str, Any]:
    import torch

    g = torch.Generator().manual_seed(1)
    i32, i64 = torch.int32, torch.int64
    return dict(
        input_ids=torch.randint(0, 50, (12,), generator=g, dtype=i32),
        idx_mapping=torch.tensor([3, 0], dtype=i32),
        last_sampled_tokens=torch.randint(0, 50, (4, 1), generator=g, dtype=i64),
        query_start_loc=torch.tensor([0, 3, 6, 0, 0], dtype=i32),
        seq_lens=torch.tensor([9, 8, 0, 0], dtype=i32), prefill_len=torch.full((4,), 5, dtype=i32),
        draft_tokens=torch.randint(0, 50, (4, 2), generator=g, dtype=i64),
        cu_num_logits=torch.tensor([0, 3, 6], dtype=i32),
        num_computed_tokens=torch.tensor([7, 1, 2, 8], dtype=i32),
        output_bin_counts=torch.zeros(4, 50, dtype=i32),
        sampled_tokens=torch.randint(0, 50, (2, 3), generator=g, dtype=i64),
        num_sampled=torch.tensor([2, 3], dtype=i32), num_rejected=torch.tensor([1, 0], dtype=i32),
        all_token_ids=torch.zeros(4, 16, dtype=i32),
        total_len=torch.tensor([9, 2, 3, 8], dtype=i32),
        new_drafts=torch.randint(0, 50, (2, 2), generator=g, dtype=i64))


@pytest.mark.parametrize("mode", ["record", "guard"])
def test_the_v2_wrappers_record_each_tensor_with_its_values_dtype_and_shape(
        tmp_path: Path, mode: str) -> None:
    """Through the writer process into a real capture: each recorded tensor (the inputs
    joined into one copy, post_update's outputs into another) comes back as it was."""
    import forensics

    t = _v2_call_tensors()
    before = {name: value.clone() for name, value in t.items()}
    session = ProbeSession(make_settings(tmp_path, mode=mode))
    session.runner = V2()
    session.runner._forensics_batch_req_ids = ["a", "b"]
    combine = v2_hooks.wrap_combine(lambda *args: None)
    post_update = v2_hooks.wrap_post_update(lambda *args: t["total_len"].add_(1))
    hooks.activate(session)
    try:
        session.begin_step()
        combine(t["input_ids"], t["idx_mapping"], t["last_sampled_tokens"], t["query_start_loc"],
                t["seq_lens"], t["prefill_len"], t["draft_tokens"], t["cu_num_logits"], 6, 1)
        post_update(t["idx_mapping"], t["num_computed_tokens"], t["last_sampled_tokens"],
                    t["output_bin_counts"], t["sampled_tokens"], t["num_sampled"],
                    t["num_rejected"], t["query_start_loc"], t["all_token_ids"], t["total_len"],
                    t["new_drafts"], t["draft_tokens"])
    finally:
        hooks.activate(None)
        session.close()
    assert session.counts["written"] == 2 and session.counts["errors"] == 0
    got = {r.site: r.fields for r in forensics.load(session.settings.capture)}
    n = 2
    want_combine = dict(
        input_ids=before["input_ids"], idx_mapping=before["idx_mapping"],
        last_sampled_tokens=before["last_sampled_tokens"].reshape(-1),
        query_start_loc=before["query_start_loc"][:n + 1], seq_lens=before["seq_lens"][:n],
        prefill_len=before["prefill_len"], draft_tokens=before["draft_tokens"],
        cu_num_logits=before["cu_num_logits"][:n + 1], input_ids_after=before["input_ids"])
    want_post = dict(
        idx_mapping=before["idx_mapping"], num_computed_tokens=before["num_computed_tokens"],
        last_sampled_tokens=before["last_sampled_tokens"].reshape(-1),
        total_len=before["total_len"], draft_tokens_out=before["draft_tokens"],
        sampled_tokens=before["sampled_tokens"], num_sampled=before["num_sampled"],
        num_rejected=before["num_rejected"], query_start_loc=before["query_start_loc"][:n + 1],
        draft_tokens=before["new_drafts"], total_len_after=before["total_len"] + 1,
        num_computed_tokens_after=before["num_computed_tokens"],
        last_sampled_tokens_after=before["last_sampled_tokens"].reshape(-1),
        draft_tokens_out_after=before["draft_tokens"])
    for site, want in (("combine_tokens", want_combine), ("post_update", want_post)):
        fields = got[site]
        for name, tensor in want.items():
            value = np.asarray(fields[name])
            assert value.dtype == tensor.numpy().dtype and value.shape == tuple(tensor.shape), \
                (site, name, value.dtype, value.shape)
            assert np.array_equal(value, tensor.numpy()), (site, name)
        assert fields["req_ids"] == ["a", "b"] and fields["vocab_size"] == 50
    assert got["post_update"]["all_token_ids_width"] == 16
    assert got["post_update"]["bin_counts_width"] == 50


GATHER = "vllm.v1.worker.gpu.spec_decode.rejection_sampler:gather_draft_sampled"


def _gather_args(draft: int) -> tuple[Any, ...]:
    """Arguments of ``gather_draft_sampled``: request "a" (slot 1) verifies one draft
    (``draft``), request "b" (slot 0) decodes."""
    import torch

    return (torch.tensor([5, draft, 8], dtype=torch.int32), torch.tensor([7, 8, 6]),
            torch.tensor([0, 1, 2]), torch.tensor([1, 1, 0]),
            torch.tensor([0, 1, 0], dtype=torch.int32), torch.tensor([4, 5], dtype=torch.int32))


def _wrapped_gather(calls: list[int]) -> Any:
    """A stand-in of vLLM's ``gather_draft_sampled`` (its signature), wrapped by the probe's
    wrapper of the V2 hook the registry names; ``calls`` counts its runs."""
    def gather_draft_sampled(input_ids: Any, positions: Any, logits_indices: Any,
                             expanded_idx_mapping: Any, expanded_local_pos: Any,
                             prefill_len: Any) -> Any:
        calls.append(1)
        return input_ids[logits_indices], positions[logits_indices]

    assert GATHER in v2_hooks.v2_hooks()
    return v2_hooks.wrap_by_fields(GATHER)(gather_draft_sampled)


def test_a_v2_hook_without_a_wrapper_of_its_own_is_recorded_by_its_field_names(
        tmp_path: Path) -> None:
    writer, calls = FakeWriter(), []
    session = _session(tmp_path, writer)
    session.runner = V2()
    session.runner._forensics_batch_req_ids = ["a", "b"]
    hooks.activate(session)
    try:
        session.begin_step()
        _wrapped_gather(calls)(*_gather_args(9))
    finally:
        hooks.activate(None)
    session.close()
    (record,) = writer.flushed
    assert calls == [1] and record.site == "rejection_drafts"
    assert {name: np.asarray(v).tolist() for name, v in record.fields.items()} == {
        "input_ids": [5, 9, 8], "positions": [7, 8, 6], "logits_indices": [0, 1, 2],
        "expanded_idx_mapping": [1, 1, 0], "expanded_local_pos": [0, 1, 0],
        "prefill_len": [4, 5], "vocab_size": 50, "req_ids": ["a", "b"]}


def test_guard_mode_raises_before_a_draft_past_the_vocabulary_reaches_the_rejection_kernels(
        tmp_path: Path) -> None:
    from forensics.errors import IndexBoundsError

    calls: list[int] = []
    session = ProbeSession(make_settings(tmp_path, mode="guard"),
                           writer_factory=lambda s: FakeWriter())
    session.runner = V2()
    hooks.activate(session)
    try:
        session.begin_step()
        _wrapped_gather(calls)(*_gather_args(7))  # in the vocabulary: runs
        with pytest.raises(IndexBoundsError) as info:
            _wrapped_gather(calls)(*_gather_args(50))
    finally:
        hooks.activate(None)
        session.close()
    assert calls == [1]
    assert (info.value.site, info.value.row, info.value.value, info.value.bound) == (
        "rejection_drafts", 0, 50, 50)
