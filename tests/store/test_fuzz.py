"""Mutation fuzzing of segments, indexes, manifests and events: only ForensicsError escapes.

The cases run in a forked child under RLIMIT_AS, so a crash, a hang or a huge allocation fails
the test naming the case, instead of taking the suite down.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import numpy as np
import pytest
from store_helpers import mutate, run_fuzz_cases, valid_records

from forensics.store.index import MAGIC
from forensics.store.reader import load
from forensics.store.writer import CaptureWriter


def exercise(path: Path) -> None:
    """Everything a user does with a capture: open, summarise, read, tabulate."""
    capture = load(path)
    capture.summary()
    for record in capture:
        for name in record.fields:
            if isinstance(record[name], np.ndarray):
                record.tensor(name).sum()
    for site in capture.sites:
        capture.to_frame(site)
    assert len(capture.steps) <= len(capture)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fuzz") / "base.capture"
    with CaptureWriter(path, {"notes": "fuzz base", "attachments": []}, process="f") as writer:
        for _ in range(2):
            for record in valid_records():
                writer.append(record)
            writer.flush()
        writer.add_event({"kind": "cuda_assert", "line": 3})
    exercise(path)  # the unmutated capture is fine
    return path


def _hot_offsets(segment: Path) -> list[int]:
    index = segment.with_name(segment.name + ".idx")
    entries = np.frombuffer(index.read_bytes()[len(MAGIC):], dtype="<i8").reshape(-1, 5)
    return entries[:, 0].tolist()


def _cases(base: Path, out: Path, count: int, seed: int, pick: str) -> list[Path]:
    rng = random.Random(seed)
    files = sorted(base.glob(pick))
    cases = []
    for n in range(count):
        case = out / f"{pick.replace('*', 'x')}-{n}.capture"
        shutil.copytree(base, case)
        target = case / rng.choice(files).name
        hot = _hot_offsets(target) if target.suffix == ".arrows" else None
        data = target.read_bytes()
        for _ in range(rng.choice([1, 1, 2, 3])):
            data = mutate(data, rng, hot)
        target.write_bytes(data)
        cases.append(case)
    return cases


def test_fuzzed_segments(base: Path, tmp_path: Path) -> None:
    run_fuzz_cases(_cases(base, tmp_path, 300, 1, "*.arrows"), exercise)


def test_fuzzed_indexes_events_and_manifests(base: Path, tmp_path: Path) -> None:
    cases = (_cases(base, tmp_path, 60, 2, "*.idx") + _cases(base, tmp_path, 60, 3, "*.json")
             + _cases(base, tmp_path, 30, 4, "events-*.jsonl"))
    run_fuzz_cases(cases, exercise)


def test_fuzz_harness_catches_escapes(tmp_path: Path) -> None:
    """The harness itself fails on a non-ForensicsError and on a huge allocation."""
    with pytest.raises(AssertionError, match="status"):
        run_fuzz_cases([1], lambda case: {}[case])
    with pytest.raises(AssertionError, match="MemoryError|status"):
        run_fuzz_cases([1], lambda case: np.ones(1 << 33, dtype=np.uint8).sum())
