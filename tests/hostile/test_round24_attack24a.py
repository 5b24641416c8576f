"""Round 24, attack24a: hostile logs and captures (issue 38, round 3 of hostile input)."""

from __future__ import annotations

from pathlib import Path

# ------------- T148a: a line of no prefix between a worker's traceback lines pauses its chain

#: a tensor-parallel worker's traceback as vLLM logs it, each line with the worker's prefix
WORKER = ["Traceback (most recent call last):",
          '  File "/v/vllm/v1/worker/gpu_model_runner.py", line 3575, in execute_model',
          "    self.prepare_inputs_event.synchronize()",
          "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"]
PREFIX = "(Worker_TP0 pid=100) ERROR 12-02 10:46:44 [multiproc.py:9] "
#: another process's plain stderr (NCCL's debug line), no vLLM prefix
NCCL = "node1:200:300 [1] NCCL INFO comm 0x5581 rank 1 nranks 2 - Abort COMPLETE"
ASSERT = ("/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [0,0,0], "
          "thread: [0,0,0] Assertion `idx < size` failed.")


def _crashes(tmp_path: Path, lines: list[str]) -> list[tuple[str, str | None, int]]:
    """The events ``import`` reads of a log of ``lines``: (kind, exception, first line)."""
    from forensics.importers import read_source

    log = tmp_path / "engine.log"
    log.write_text("\n".join(lines) + "\n")
    return [(e["kind"], e.get("exception"), e.get("first_line", e["line"]))
            for e in read_source(log).events]


def test_a_line_of_no_prefix_inside_a_workers_traceback_ends_no_crash(tmp_path: Path) -> None:
    """Another process's plain stderr line (NCCL's) between a worker's prefixed traceback
    lines pauses the chain, as a line of another prefix does: one crash, its exception read.
    It ended the chain: "2 crash event(s)" of one crash, an engine_exception of no exception
    and an illegal_memory_access of no traceback."""
    lines = [PREFIX + line for line in WORKER]
    alone = _crashes(tmp_path, lines)
    assert alone == [("illegal_memory_access", WORKER[-1], 1)]
    assert _crashes(tmp_path, lines[:2] + [NCCL] + lines[2:]) == alone
    assert _crashes(tmp_path, [x for line in lines for x in (line, NCCL)]) == alone
    # a device's assert (no prefix) between them is its own event; the chain still one crash
    mixed = _crashes(tmp_path, lines[:2] + [ASSERT] + lines[2:])
    assert sorted(mixed) == [("cuda_assert", None, 3), ("illegal_memory_access", WORKER[-1], 1)]


# ---------- T148b: two workers' tracebacks interleaved after a device assert are two crashes

#: a worker's traceback of the assert (torch's error after the device's assert)
ASSERTED = ["Traceback (most recent call last):",
            '  File "/v/vllm/v1/worker/gpu_model_runner.py", line 3575, in execute_model',
            "    self.prepare_inputs_event.synchronize()",
            "torch.AcceleratorError: CUDA error: device-side assert triggered"]


def _events(tmp_path: Path, lines: list[str]) -> list[tuple[object, ...]]:
    """The events ``import`` reads of a log of ``lines``: (kind, count, exception, links)."""
    from forensics.importers import read_source

    log = tmp_path / "engine.log"
    log.write_text("\n".join(lines) + "\n")
    return [(e["kind"], e["count"], e.get("exception"), e.get("links"))
            for e in read_source(log).events]


def test_two_workers_tracebacks_after_an_assert_interleaved_are_two_crashes(
        tmp_path: Path) -> None:
    """A device's assert, then two workers' tracebacks interleaved line by line: the first
    chain is the assert's exception, the second a crash of its own, as written one after the
    other. Both joined the assert (each opened while it held no exception yet): one event of
    "2 links" (no chain holds a link), "1 crash event(s)" of two workers' crashes."""
    one, two = ([f"(Worker_TP{r} pid={100 + r}) ERROR 12-02 10:46:44 [multiproc.py:9] {line}"
                 for line in ASSERTED] for r in (0, 1))
    apart = _events(tmp_path, [ASSERT, ASSERT, *one, *two])
    assert [(kind, links) for kind, _, _, links in apart] == [("cuda_assert", 1),
                                                               ("cuda_error", 1)], apart
    mixed = [line for pair in zip(one, two, strict=True) for line in pair]
    assert _events(tmp_path, [ASSERT, ASSERT, *mixed]) == apart
    assert _events(tmp_path, [ASSERT, *mixed]) == _events(tmp_path, [ASSERT, *one, *two])


# --------- T148c: a report's chain with a worker's traceback inside it is the crash's report

#: the API server's report of the engine's death, as its chain ends
REPORT = ["Traceback (most recent call last):",
          '  File "/v/vllm/entrypoints/openai/serving_chat.py", line 1, in create',
          "    async for res in result_generator:",
          "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See "
          "stack trace (above) for the root cause."]


def test_a_report_with_a_workers_traceback_inside_it_counts_no_crash(tmp_path: Path) -> None:
    """A worker's crash, then the API server's EngineDeadError traceback with a second
    worker's traceback written inside it (interleaved): two crash events, the report kept as
    a crash's ``engine_dead``, as when written after both. The report's chain was not the
    last event at its exception line, so it stood as a crash of its own: "3 crash event(s)"
    of 2, one an ``engine_dead``."""
    from forensics.importers import read_source

    one, two = ([f"(Worker_TP{r} pid={100 + r}) ERROR 12-02 10:46:44 [multiproc.py:9] {line}"
                 for line in WORKER] for r in (0, 1))
    api = [f"(APIServer pid=1) ERROR 12-02 10:46:45 [serving_chat.py:1] {line}"
           for line in REPORT]
    for lines in ([*one, *two, *api], [*one, api[0], *two, *api[1:]],
                  [*one, *(x for pair in zip(api, two, strict=True) for x in pair)]):
        log = tmp_path / "engine.log"
        log.write_text("\n".join(lines) + "\n")
        events = read_source(log).events
        assert [e["kind"] for e in events] == ["illegal_memory_access"] * 2, events
        assert sum("engine_dead" in e for e in events) == 1, events


# ------------- T148d: the timeline's note names its step's largest (smallest) value as such


def test_the_timeline_note_says_its_value_is_the_steps_extreme(tmp_path: Path) -> None:
    """A step holding ids 20, 23, 21 past 10 rows (its first finding ``input_ids[2] = 20``,
    as replay says) is noted "first: step 5, largest value 23", and one holding -5 below 0
    "smallest value -5" (matplotlib and SVG alike): the note said "value 23" beside replay's
    first violation of value 20, naming the step's largest value as the first finding's."""
    import numpy as np
    from matplotlib.text import Text

    from forensics import plots
    from forensics.present.svg import views
    from forensics.records import Record
    from forensics.replaying import replay
    from forensics.store.writer import write_capture

    for ids, note in (([1, 2, 20, 23, 21], "first: step 5, largest value 23"),
                      ([1, -5, 2], "first: step 5, smallest value -5")):
        records = [Record("embedding", s, 0, {
            "input_ids": np.array(ids if s == 5 else [0, 1], dtype=np.int32),
            "num_embeddings": 10}) for s in range(8)]
        result = replay(write_capture(tmp_path / f"c{len(ids)}.capture", records))
        svg = views.figure("timeline", result, site="embedding", variant="upstream").to_svg()
        assert note in svg, note
        ax = plots.plot(result, "timeline", site="embedding", variant="upstream")
        ax.figure.canvas.draw()
        texts = [t.get_text() for t in ax.figure.findobj(Text)]
        plots.close(ax)
        assert note in texts, texts
