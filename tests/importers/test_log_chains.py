"""Log import is true (issue 42, point 4): each event carries its own line, one exception chain
is one crash event, and probe start/stop are never crash events.

The logs are vLLM engine logs as vLLM writes them: its logger prefix on every line of a logged
traceback, the device's assert lines without prefix, the API server's EngineDeadError after.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from forensics.importers import read_source
from forensics.importers.crash_dump import read as read_dump
from forensics.present.capture_facts import summary_facts
from forensics.records import Record
from forensics.store.reader import load
from forensics.store.writer import write_capture

CORE = "(EngineCore_DP0 pid=1234) ERROR 12-02 10:46:44 [core.py:866] "
API = "(APIServer pid=1000) ERROR 12-02 10:46:44 [async_llm.py:480] "
SITE = "/usr/local/lib/python3.12/dist-packages/vllm"
ASSERT = ("/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1515: indexSelectSmallIndex: block: "
          "[0,0,0], thread: [{t},0,0] Assertion `srcIndex < srcSelectDimSize` failed.")
CHAIN = [
    f"{CORE}EngineCore encountered a fatal error.",
    f"{CORE}Traceback (most recent call last):",
    f'{CORE}  File "{SITE}/v1/engine/core.py", line 857, in run_engine_core',
    f"{CORE}    engine_core.run_busy_loop()",
    f'{CORE}  File "{SITE}/v1/worker/gpu_model_runner.py", line 2385, in execute_model',
    f"{CORE}    inputs_embeds = self.model.embed_input_ids(input_ids)",
    f"{CORE}torch.AcceleratorError: CUDA error: device-side assert triggered",
    f"{CORE}CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.",
    f"{CORE}For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    f"{CORE}Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
    f"{CORE}",
    f"{CORE}",
    f"{CORE}During handling of the above exception, another exception occurred:",
    f"{CORE}",
    f"{CORE}Traceback (most recent call last):",
    f'{CORE}  File "{SITE}/v1/engine/core.py", line 870, in run_engine_core',
    f"{CORE}    engine_core.shutdown()",
    f"{CORE}RuntimeError: CUDA error: device-side assert triggered",
]
DEAD = [
    f"{API}AsyncLLM output_handler failed.",
    f"{API}Traceback (most recent call last):",
    f'{API}  File "{SITE}/v1/engine/async_llm.py", line 439, in output_handler',
    f"{API}    outputs = await engine_core.get_output_async()",
    f"{API}vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack "
    "trace (above) for the root cause.",
]
INFO = "(APIServer pid=1000) INFO 12-02 10:46:43 [loggers.py:271] Engine 000: Running: 2 reqs"


def _read(tmp_path: Path, lines: list[str]) -> tuple[list[dict], list[str]]:
    path = tmp_path / "engine.log"
    path.write_text("\n".join(lines) + "\n")
    return read_source(path).events, lines


def _own_line(event: dict, lines: list[str]) -> None:
    """The event's message is the text of its own line."""
    assert event["message"] == lines[event["line"] - 1].strip()


def test_a_chained_traceback_is_one_event_on_its_own_line(tmp_path: Path) -> None:
    events, lines = _read(tmp_path, [INFO, *CHAIN, INFO])
    assert len(events) == 1
    (chain,) = events
    assert chain["kind"] == "cuda_error" and chain["links"] == 2
    assert chain["exception"] == "torch.AcceleratorError: CUDA error: device-side assert triggered"
    assert chain["final"] == "RuntimeError: CUDA error: device-side assert triggered"
    assert chain["line"] == 8 and (chain["first_line"], chain["last_line"]) == (3, 19)
    assert chain["location"].endswith("line 2385, in execute_model")
    assert chain["source_line"] == "inputs_embeds = self.model.embed_input_ids(input_ids)"
    _own_line(chain, lines)


def test_assert_then_chain_then_engine_dead_is_one_crash(tmp_path: Path) -> None:
    """The device's asserts, the EngineCore chain and the API server's EngineDeadError: one
    crash event, on the assert's own line, holding the chain and the EngineDeadError's line."""
    events, lines = _read(tmp_path, [INFO, ASSERT.format(t=0), ASSERT.format(t=1), *CHAIN,
                                     *DEAD])
    assert [e["kind"] for e in events] == ["cuda_assert"]
    (crash,) = events
    assert crash["detail"] == "srcIndex < srcSelectDimSize" and crash["count"] == 2
    assert crash["location"].endswith("Indexing.cu:1515")
    assert crash["function"] == "indexSelectSmallIndex"
    assert crash["exception"].startswith("torch.AcceleratorError") and crash["links"] == 2
    assert crash["engine_dead"]["line"] == len(lines)
    assert "EngineDeadError" in crash["engine_dead"]["message"]
    _own_line(crash, lines)


def test_engine_dead_alone_is_its_own_event(tmp_path: Path) -> None:
    events, lines = _read(tmp_path, [INFO, *DEAD])
    assert [e["kind"] for e in events] == ["engine_dead"]
    _own_line(events[0], lines)


def test_two_crashes_are_two_events(tmp_path: Path) -> None:
    """A new traceback without a link line starts a new chain."""
    events, lines = _read(tmp_path, [*CHAIN, INFO, *CHAIN])
    assert [e["line"] for e in events] == [7, 26]
    for event in events:
        _own_line(event, lines)


def test_a_plain_stderr_traceback_is_one_event(tmp_path: Path) -> None:
    """Without a logger prefix: the chain ends at a line that is an event by itself."""
    plain = [line.removeprefix(CORE) for line in CHAIN]
    events, lines = _read(tmp_path, [*plain, ASSERT.format(t=5)])
    assert [(e["kind"], e["line"]) for e in events] == [("cuda_error", 7), ("cuda_assert", 19)]
    for event in events:
        _own_line(event, lines)


def test_each_event_of_the_sm70_log_holds_its_own_line() -> None:
    data = Path(__file__).resolve().parents[1] / "data"
    for name in ("sm70_engine.log", "vllm_gdn_illegal_access.log",
                 "vllm_logits_processor_error.log", "vllm_dump_output_placeholders.log"):
        lines = (data / name).read_text().splitlines()
        for event in read_dump(data / name).events:
            _own_line(event, lines)


def test_a_dump_takes_in_its_chain(tmp_path: Path) -> None:
    """A crash dump and the traceback after it are one crash event (the dump's)."""
    data = Path(__file__).resolve().parents[1] / "data"
    events = read_dump(data / "vllm_dump_some_placeholder.log").events
    assert [e["kind"] for e in events] == ["crash_dump"]
    assert events[0]["exception"].endswith("an illegal memory access was encountered")


def test_probe_start_and_stop_are_not_crash_events(tmp_path: Path) -> None:
    """A probe capture's start and stop events are not counted as crash events."""
    record = Record("embedding", 0, 0, {"input_ids": np.arange(4, dtype=np.int32),
                                        "num_embeddings": 10})
    events = [{"kind": "probe_start", "step": 0, "rank": 0},
              {"kind": "cuda_assert", "step": 0, "rank": 0, "message": "assert"},
              {"kind": "probe_stop", "step": 0, "rank": 0}]
    path = write_capture(tmp_path / "c.capture", [record], events=events)
    facts = summary_facts(load(path).summary())
    assert facts["events"] == ["cuda_assert at step 0 rank 0: assert"]
