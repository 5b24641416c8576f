"""Linear time (issue 38, point 6): every parser and check over a capture or a log runs in time
linear in its input. Each test counts the instructions of an adversarial input and of the same
input 4x larger (callgrind, :mod:`tests.instructions`: the same count on any load) and asks for
under 6x: a quadratic parse takes about 16x. No time is measured.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from forensics.errors import CaptureFormatError
from forensics.importers import crash_dump
from forensics.importers import logs as plain_logs
from forensics.records import Record
from forensics.store.duplicates import find_duplicate
from forensics.store.reader import load
from forensics.store.writer import CaptureWriter, write_capture
from tests.instructions import assert_linear, scaling

#: the sizes measured (and 4x each): a line's characters, a log's lines, a capture's segments
LINE_BASE, LOG_BASE, SEGMENTS_BASE = 4000, 300, 300
DUMP = ("(EngineCore_DP0 pid=1) ERROR 12-02 10:46:44 [dump_input.py:72] Dumping scheduler output "
        "for model execution: ")


def _log_of(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / f"engine-{len(lines)}-{sum(map(len, lines))}.log"
    path.write_text("\n".join(lines) + "\n")
    return path


#: one long log line each (its length is what grows), read by the crash-dump importer: a
#: regex that retries at every opener and rescans the rest of the line is quadratic in it
DUMP_LINES: dict[str, Callable[[int], str]] = {
    "new requests without a comma": lambda n: DUMP + "NewRequestData(req_id=" * (n // 22),
    "cached requests without a bracket": lambda n: DUMP + "CachedRequestData(req_ids=[" * (n // 27),
    "dicts without a brace": lambda n: DUMP + "num_scheduled_tokens={a: " * (n // 25),
    "spec tokens without a bracket": lambda n: DUMP + "scheduled_spec_decode_tokens={a: [1, "
                                               * (n // 37),
    "quoted ids without a quote": lambda n: DUMP + "CachedRequestData(req_ids=['" + "a'" * (n // 2),
    "config of openers": lambda n: ("INFO Dumping input data for V1 LLM engine (v1) with config: "
                                    + "SpeculativeConfig(method='x" * (n // 27)),
    "assert openers without failed": lambda n: "Assertion " * (n // 10),
    "failed without a space": lambda n: "Assertion `x" + "xfailed" * (n // 7),
    "a file prefix without .cu": lambda n: "a/" * (n // 2) + " Assertion `x` failed",
    "a dotted exception name": lambda n: "a." * (n // 2) + "Error",
    "error words without an end": lambda n: "Error" * (n // 5) + " x",
    "probe line openers": lambda n: "SM70-TEMB: rows=1 input=(" * (n // 25),
    "out path openers": lambda n: "OUT-PATH out-of-range sampled ids [1] (" * (n // 39),
}


@pytest.mark.parametrize("shape", list(DUMP_LINES))
def test_a_long_line_parses_in_linear_time(ratios: dict[str, float], shape: str) -> None:
    """A line 4x longer (4,000 -> 16,000 characters) costs under 6x the
    instructions, through the plain log reader and the crash-dump reader over it."""
    assert_linear(ratios[f"line:{shape}"])


#: a whole log's worth of lines (their number is what grows), each short
LOG_SHAPES: dict[str, Callable[[int], list[str]]] = {
    "a crash dump then a traceback, repeated": lambda n: [
        DUMP + "SchedulerOutput(scheduled_spec_decode_tokens={r: [-1, -1]}, "
        "num_scheduled_tokens={r: 3}, total_num_scheduled_tokens=3)",
        "(EngineCore_DP0 pid=1) ERROR [core.py:1] EngineCore encountered a fatal error.",
        "(EngineCore_DP0 pid=1) ERROR [core.py:1] Traceback (most recent call last):",
        '(EngineCore_DP0 pid=1) ERROR [core.py:1]   File "x.py", line 1, in f',
        "(EngineCore_DP0 pid=1) ERROR [core.py:1]     f()",
        "(EngineCore_DP0 pid=1) ERROR [core.py:1] RuntimeError: CUDA error: device-side assert "
        "triggered"] * (n // 2),
    "an endless traceback": lambda n: ["Traceback (most recent call last):"] + [
        '  File "x.py", line 1, in f', "    f()"] * (3 * n),
    "assert lines": lambda n: [
        "/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1515: indexSelectSmallIndex: block: "
        f"[0,0,0], thread: [{i},0,0] Assertion `srcIndex < srcSelectDimSize` failed."
        for i in range(2 * n)],
    "probe lines": lambda n: ["SM70-TEMB: rows=1000 input=(4,) dtype=torch.int32 min=0 max=9"]
                             * (n // 2),
}


@pytest.mark.parametrize("shape", list(LOG_SHAPES))
def test_a_long_log_parses_in_linear_time(ratios: dict[str, float], shape: str) -> None:
    """A log of 4x the lines costs under 6x the instructions."""
    assert_linear(ratios[f"log:{shape}"])


def _segments(root: Path, count: int) -> Path:
    """A capture of ``count`` one-record segments of one process whose batch tables are all
    equal and whose bytes all differ (the duplicate check's worst case: every table is a
    candidate; segments of two processes are none, T157c)."""
    if root.exists():
        shutil.rmtree(root)
    record = Record("embedding", 0, 0, {"input_ids": np.array([1, 2, 3, 4], np.int32),
                                        "num_embeddings": 1 << 20})
    path = write_capture(root, [record])
    for k in range(1, count):  # the process's next segment each time
        with CaptureWriter(path, process="w0") as writer:
            writer.append(Record("embedding", 0, 0, {
                "input_ids": np.array([1, 2, 3, 4 + k], np.int32), "num_embeddings": 1 << 20}))
    return path


def test_the_duplicate_segment_check_is_linear(ratios: dict[str, float]) -> None:
    """Segments with equal batch tables and different bytes: 4x the segments cost under 6x the
    instructions of the check."""
    assert_linear(ratios["segments"])


#: the size each case is measured at, and 4x it
BASES = {**{f"line:{shape}": LINE_BASE for shape in DUMP_LINES},
         **{f"log:{shape}": LOG_BASE for shape in LOG_SHAPES}, "segments": SEGMENTS_BASE}


def make_work(case: str, size: int, scratch: Path) -> Callable[[], object]:
    """The work of ``case`` over an input of ``size`` (run by :mod:`tests.instructions`)."""
    kind, _, shape = case.partition(":")
    if kind == "segments":
        segments = load(scratch / f"c{size}.capture")._segments
        assert len(segments) == size and find_duplicate(segments) is None
        return lambda: find_duplicate(segments)
    lines = [DUMP_LINES[shape](size)] * 12 if kind == "line" else LOG_SHAPES[shape](size)
    path = _log_of(scratch, lines)
    if kind == "line":
        return lambda: crash_dump.read(path)
    return lambda: (plain_logs.read(path), crash_dump.read(path))


@pytest.fixture(scope="module")
def ratios(tmp_path_factory: pytest.TempPathFactory) -> dict[str, float]:
    """Every case's instructions at 4x its base size over those at its base size, counted in
    one child process (this file's tests run on one worker)."""
    scratch = tmp_path_factory.mktemp("linear")
    for count in (SEGMENTS_BASE // 4, SEGMENTS_BASE, 4 * SEGMENTS_BASE):
        _segments(scratch / f"c{count}.capture", count)
    return scaling(__file__, BASES, scratch)


def test_the_duplicate_check_still_finds_a_copy_among_many(tmp_path: Path) -> None:
    """The linear check finds a byte-for-byte copy among segments whose tables all agree."""
    path = _segments(tmp_path / "c.capture", 50)
    seg = sorted(path.glob("*.w0.0007.arrows"))[0]
    copy = path / seg.name.replace(".0007.", ".0050.")  # its process's next segment
    copy.write_bytes(seg.read_bytes())
    Path(f"{copy}.idx").write_bytes(Path(f"{seg}.idx").read_bytes())
    with pytest.raises(CaptureFormatError, match="hold the same batches") as raised:
        load(path)
    assert f"'{seg.name}' and '{copy.name}'" in str(raised.value)
