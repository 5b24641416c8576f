"""Hostile input, round 18 (the lead's): one word, one meaning on one page."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

DATA = Path(__file__).resolve().parents[2] / "data"

# ------------------------------------------ T103a: "resolved" says which of its two meanings


def test_replays_resolved_count_is_not_the_conclusions_resolves(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Incident B's page said "1 findings (1 resolved)" of ``patched`` above "resolves 2 of 2
    upstream out-of-bounds findings": two meanings of one word (a sink finding whose origin's
    replay no longer writes its value; a baseline finding the patch made go away). The first
    now says "resolved at their origin", and no line uses the bare count."""
    from forensics.cli import main

    assert main(["replay", str(DATA / "incident-b-vocab-sentinel.capture")]) == 0
    out = capsys.readouterr().out
    patched = next(line for line in out.splitlines() if line.startswith("patched: "))
    assert "1 findings (1 resolved at their origin)" in patched
    assert "resolves 2 of 2 upstream out-of-bounds findings" in out
    assert " resolved)" not in out and " resolved," not in out

# ------------------------------------------ T103b: no writer makes a batch no command reads


def test_a_batch_past_the_readers_limit_is_written_as_several(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``write_capture`` and the probe's writer wrote each flush as one batch, whatever its
    size; every command refuses a batch past ``MAX_READ_BYTES`` (1 GiB: 16,384 records of
    64 KiB), so records the tool itself wrote could not be read. Both limits are scaled down
    here (the writer's stays a quarter of the reader's): 64 records of 64 KiB are written as
    batches the reader takes, every record read back in order."""
    import numpy as np

    from forensics.cli import main
    from forensics.records import Record
    from forensics.store import segment, writer
    from forensics.store.writer import write_capture

    assert writer.MAX_BATCH_BYTES * 4 == segment.MAX_READ_BYTES
    monkeypatch.setattr(segment, "MAX_READ_BYTES", 1 << 20)
    monkeypatch.setattr(writer, "MAX_BATCH_BYTES", 1 << 18)
    records = [Record("embedding", step, 0, {"input_ids": np.full(8192, step % 7),
                                             "num_embeddings": 8})
               for step in range(64)]
    capture = write_capture(tmp_path / "big.capture", records)
    assert main(["inspect", str(capture)]) == 0
    assert "64 records" in capsys.readouterr().out
    from forensics.store.reader import load

    read = list(load(capture))
    assert [r.step for r in read] == list(range(64))
    assert all(int(r["input_ids"][0]) == r.step % 7 for r in read)

# ------------------------------------------ T103c: the plugin's pass says what it left


def test_the_plugins_pass_says_the_obtained_result_it_could_not_remove(
        tmp_path: Path, pytester: pytest.Pytester) -> None:
    """A stale ``expected.obtained.json`` that cannot be removed (here a folder of that name,
    a file in it): ``forensics check`` says on stderr that it was left; the pytest plugin's
    pass dropped that note and passed in silence. It passes with a warning saying it."""
    import shutil

    capture = tmp_path / "caps" / "stale-prev-row.capture"
    shutil.copytree(DATA / "stale-prev-row.capture", capture)
    (capture / "expected.obtained.json").mkdir()
    (capture / "expected.obtained.json" / "x").touch()
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-o", "forensics_captures=",
                                          "--forensics-captures", str(capture.parent))
    result.assert_outcomes(passed=1, warnings=1)
    text = " ".join(line.strip() for line in result.outlines)
    assert "expected.obtained.json" in text
