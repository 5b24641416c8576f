"""Crash safety and concurrency: SIGKILLed writers, four processes writing one capture."""

from __future__ import annotations

import functools
import os
import random
import signal
import time
from pathlib import Path

import numpy as np
import pytest
from store_helpers import assert_records_equal, embedding, fork, read_all, read_line, write_forever

from forensics.store.index import MAGIC
from forensics.store.reader import load
from forensics.store.writer import CaptureWriter


def start(capture: Path, process: str, count: int, batch: int, size: int) -> tuple[int, int]:
    return fork(functools.partial(write_forever, capture, process, count, batch, size))


def check_prefix(capture_path: Path, process: str, flushed: int, size: int) -> bool:
    """Every flushed record reads back, equal; beyond them only whole later records."""
    capture = load(capture_path)
    base = int(process[1:]) * 1_000_000
    for rank in (0, 1):
        got = list(capture.records(rank=rank))
        assert len(got) >= len(range(rank, flushed, 2)), (rank, len(got), flushed)
        for record in got:
            assert_records_equal(record, embedding(record.step, rank, size, base,
                                                   f"{process}-{record.step}"))
        assert [r.step for r in got] == list(range(rank, 2 * len(got) + rank, 2))
    return bool(capture.truncated)


def test_sigkill_at_random_moments_loses_no_flushed_record(tmp_path: Path) -> None:
    rng = random.Random(20240501)
    runs, truncated_seen = 24, 0
    for run in range(runs):
        capture = tmp_path / f"k{run}.capture"
        size = rng.choice([16, 4000])
        pid, fd = start(capture, "p1", 10**9, rng.choice([1, 7, 20]), size)
        assert read_line(fd) == "ready\n"
        time.sleep(rng.uniform(0.0, 0.25))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        counts = [int(line) for line in read_all(fd).split() if line.isdigit()]
        truncated_seen += check_prefix(capture, "p1", max(counts, default=0), size)
    print(f"{runs} SIGKILLed writers, {truncated_seen} with a cut-short tail ignored")


def test_four_processes_write_one_capture(tmp_path: Path) -> None:
    capture = tmp_path / "shared.capture"
    children = [start(capture, f"c{k}", 150, 10, 16) for k in range(4)]
    for pid, fd in children:
        output = read_all(fd)
        _, status = os.waitpid(pid, 0)
        assert status == 0 and output.strip().endswith("done"), output
    loaded = load(capture)
    assert len(loaded) == 600 and not loaded.truncated
    assert loaded.manifest["notes"] in {f"written by c{k}" for k in range(4)}
    seen: set[str] = set()
    for record in loaded:
        (req,) = record["req_ids"]
        process, i = req.split("-")
        assert record.step == int(i) and record.rank == int(i) % 2
        assert_records_equal(record, embedding(int(i), int(i) % 2, 16,
                                               int(process[1:]) * 1_000_000, req))
        seen.add(req)
    assert seen == {f"c{k}-{i}" for k in range(4) for i in range(150)}
    assert len(loaded.segments) == 8  # one per (site, rank, process)


def _segment_with_batches(path: Path, batches: int) -> Path:
    with CaptureWriter(path, process="t") as writer:
        for b in range(batches):
            for s in range(3):
                writer.append(embedding(b * 3 + s, size=5))
            writer.flush()
    (segment,) = sorted(path.glob("*.arrows"))
    return segment


@pytest.mark.parametrize("with_index", [True, False])
def test_every_cut_of_the_last_batch_is_ignored_and_reported(tmp_path: Path,
                                                             with_index: bool) -> None:
    segment = _segment_with_batches(tmp_path / "src.capture", 3)
    data = segment.read_bytes()
    index = np.frombuffer(segment.with_name(segment.name + ".idx").read_bytes()[len(MAGIC):],
                          dtype="<i8").reshape(-1, 5)
    last_start, last_end = int(index[-1, 0]), int(index[-1, 0] + index[-1, 1])
    cuts = sorted(set(range(last_start + 1, last_end, max(1, (last_end - last_start) // 40)))
                  | {last_start + 1, last_start + 8, last_end - 1})
    for cut in cuts:
        target = tmp_path / f"cut{cut}.capture"
        target.mkdir()
        (target / "manifest.json").write_bytes((segment.parent / "manifest.json").read_bytes())
        (target / segment.name).write_bytes(data[:cut])
        if with_index:
            idx = segment.with_name(segment.name + ".idx").read_bytes()
            (target / (segment.name + ".idx")).write_bytes(idx[: len(MAGIC) + 2 * 40])
        capture = load(target)
        assert len(capture) == 6, cut
        assert capture.truncated == [segment.name], cut
        assert [r.step for r in capture] == list(range(6))
    whole = tmp_path / "whole.capture"
    whole.mkdir()
    (whole / "manifest.json").write_bytes((segment.parent / "manifest.json").read_bytes())
    (whole / segment.name).write_bytes(data[:last_end])  # complete, no EOS, index lost
    assert len(load(whole)) == 9 and not load(whole).truncated


def test_cut_events_line_is_ignored_and_reported(tmp_path: Path) -> None:
    with CaptureWriter(tmp_path / "ev.capture", process="e") as writer:
        writer.add_event({"kind": "a"})
        writer.add_event({"kind": "b"})
    events = tmp_path / "ev.capture" / "events-e.jsonl"
    events.write_bytes(events.read_bytes()[:-5])
    capture = load(tmp_path / "ev.capture")
    assert [e["kind"] for e in capture.events] == ["a"]
    assert capture.truncated == ["events-e.jsonl"]
