"""Engine-log text in the format of vLLM's ``dump_engine_exception``, written by the installed
vLLM's own code (``prepare_object_to_dump``, ``VllmConfig.__str__``,
``SpeculativeConfig.__repr__``) on stand-in objects; the log prefix is vLLM's logger format.

``python tests/importers/vllm_dump_text.py`` rewrites the fixtures under tests/data.
"""

from __future__ import annotations

import types
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data"
PREFIX = "(EngineCore pid=196) ERROR 12-02 10:46:44 [dump_input.py:72] "
CORE = "(EngineCore pid=196) ERROR 12-02 10:46:44 [core.py:1586] "


def _ns(**kwargs: object) -> types.SimpleNamespace:
    return types.SimpleNamespace(**kwargs)


def config_text(method: str = "mtp", num_spec: int = 4, tp: int = 1) -> str:
    """``str(VllmConfig)`` as vLLM writes it, through its own ``__str__``."""
    from vllm.config import VllmConfig
    from vllm.config.speculative import SpeculativeConfig

    spec = _ns(method=method, num_speculative_tokens=num_spec,
               draft_model_config=_ns(model="/models/Qwen3.8-27B"))

    class Spec:
        def __repr__(self) -> str:
            return SpeculativeConfig.__repr__(spec)  # type: ignore[arg-type]

    model = _ns(model="/models/Qwen3.8-27B", tokenizer="/models/Qwen3.8-27B",
                skip_tokenizer_init=False, tokenizer_mode="auto", revision=None,
                tokenizer_revision=None, trust_remote_code=True, dtype="torch.bfloat16",
                max_model_len=262144, quantization=None, quantization_config=None,
                enforce_eager=False, seed=0, served_model_name="/models/Qwen3.8-27B",
                pooler_config=None)
    config = _ns(model_config=model, speculative_config=Spec(),
                 load_config=_ns(download_dir=None, load_format="auto"),
                 parallel_config=_ns(tensor_parallel_size=tp, pipeline_parallel_size=1,
                                     data_parallel_size=1, decode_context_parallel_size=1,
                                     dcp_comm_backend="ag_rs",
                                     disable_custom_all_reduce=False),
                 aux_output_config=None, cache_config=_ns(cache_dtype="fp8",
                                                          enable_prefix_caching=True),
                 device_config=_ns(device="cuda"), structured_outputs_config=None,
                 observability_config=None, scheduler_config=_ns(enable_chunked_prefill=True),
                 compilation_config=None, kernel_config=None)
    return VllmConfig.__str__(config)  # type: ignore[arg-type]


def scheduler_output_text(spec_tokens: dict[str, list[int]], scheduled: dict[str, int]) -> str:
    """``prepare_object_to_dump(SchedulerOutput)`` with these requests, as vLLM dumps it."""
    from vllm.logging_utils.dump_input import prepare_object_to_dump
    from vllm.v1.core.sched.output import CachedRequestData, SchedulerOutput

    ids = list(scheduled)
    output = SchedulerOutput.make_empty()
    output.scheduled_cached_reqs = CachedRequestData(
        req_ids=ids, resumed_req_ids=set(), new_token_ids=[[] for _ in ids],
        all_token_ids={}, new_block_ids=[None for _ in ids],
        num_computed_tokens=[23997 - 800 * i for i in range(len(ids))],
        num_output_tokens=[812 - 40 * i for i in range(len(ids))])
    output.num_scheduled_tokens = dict(scheduled)
    output.total_num_scheduled_tokens = sum(scheduled.values())
    output.scheduled_spec_decode_tokens = dict(spec_tokens)
    return prepare_object_to_dump(output)


def engine_log(spec_tokens: dict[str, list[int]], exception: str,
               source_line: str = "self.prepare_inputs_event.synchronize()",
               version: str = "0.33.0", dump: bool = True,
               where: str = "v1/worker/gpu_model_runner.py\", line 3575, in synchronize_input_prep"
               ) -> str:
    """A whole engine-log excerpt: the three dump lines (when ``dump``), then the fatal error's
    traceback."""
    scheduled = {req: 1 + len(ids) for req, ids in spec_tokens.items()}
    dumped = [
        "(APIServer pid=1) INFO 12-02 10:46:43 [loggers.py:271] Engine 000: Running: 2 reqs",
        f"{PREFIX}Dumping input data for V1 LLM engine (v{version}) with config: "
        f"{config_text()}, ",
        f"{PREFIX}Dumping scheduler output for model execution: "
        f"{scheduler_output_text(spec_tokens, scheduled)}",
        f"{PREFIX}Dumping scheduler stats: SchedulerStats(num_running_reqs=2, "
        "num_waiting_reqs=0, kv_cache_usage=0.07)",
    ]
    lines = [*(dumped if dump else dumped[:1]),
        f"{CORE}EngineCore encountered a fatal error.",
        f"{CORE}Traceback (most recent call last):",
        f'{CORE}  File "/usr/lib/python3.12/site-packages/vllm/{where}',
        f"{CORE}    {source_line}",
        f"{CORE}{exception}",
    ]
    return "\r\n".join(lines) + "\r\n"


ILLEGAL = "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"


def main() -> None:
    """Rewrite the crash-dump fixtures."""
    placeholders = {"chatcmpl-a1": [-1, -1, -1, -1], "chatcmpl-b2": [-1, -1, -1, -1]}
    mixed = {"chatcmpl-a1": [1187, 2204, -1, -1], "chatcmpl-b2": [5, 6, 7, 8]}
    real = {"chatcmpl-a1": [1187, 2204, 3, 4], "chatcmpl-b2": [5, 6, 7, 8]}
    (DATA / "vllm_dump_all_placeholder.log").write_text(engine_log(placeholders, ILLEGAL))
    (DATA / "vllm_dump_some_placeholder.log").write_text(engine_log(mixed, ILLEGAL))
    (DATA / "vllm_dump_no_placeholder.log").write_text(engine_log(real, ILLEGAL))
    (DATA / "vllm_dump_output_placeholders.log").write_text(engine_log(
        real, "AssertionError", "assert request.num_output_placeholders >= 0", dump=False,
        where='v1/core/sched/async_scheduler.py", line 63, in _update_request_with_output'))
    (DATA / "vllm_gdn_illegal_access.log").write_text(engine_log(
        real, ILLEGAL, "o = fused_recurrent_gated_delta_rule_fwd_kernel[grid](", dump=False,
        where='model_executor/layers/fla/ops/fused_recurrent.py", line 117, in '
              'fused_recurrent_gated_delta_rule_fwd'))
    (DATA / "vllm_logits_processor_error.log").write_text(engine_log(
        real, "IndexError: list index out of range", "last = output_tok_ids[-1]", dump=False,
        where='v1/sample/logits_processor/state.py", line 88, in update_state'))


if __name__ == "__main__":
    main()
