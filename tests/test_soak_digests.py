"""benchmarks/soak_digests.py: one line per digest, the same on every run of one tree, and a
digest that moves when a result does."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import soak_digests  # noqa: E402

SOAK_LINES = ("soak", "findings", "findings_core", "verdicts", "first_findings", "outcomes",
              "bounds")


def _lines(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    assert soak_digests.main(["--scale", "tiny", *args]) == 0
    return capsys.readouterr().out.splitlines()


def test_the_digests_of_one_tree_are_the_same_on_every_run(
        capsys: pytest.CaptureFixture[str]) -> None:
    first = _lines(capsys)
    assert _lines(capsys, "--no-bundled") == first[:len(SOAK_LINES)]
    assert tuple(line.split()[0] for line in first[:len(SOAK_LINES)]) == SOAK_LINES
    assert first[0] == "soak steps=250 records=1000 batch=64 drafts=4 seed=0"
    bundled = [line.split() for line in first[len(SOAK_LINES):]]
    names = sorted(p.name for p in (ROOT / "data").glob("*.capture"))
    assert [b[0] for b in bundled] == ["bundled"] * len(names)
    assert [b[2] for b in bundled] == names
    assert len({b[1] for b in bundled}) > 1  # the captures' evidence differs


def test_a_changed_value_changes_the_digest_and_column_order_does_not() -> None:
    frame = pd.DataFrame({"site": ["embedding", "async_output"], "value": [5, 7]})
    digest = soak_digests.frame_digest(frame)
    assert soak_digests.frame_digest(frame[["value", "site"]]) == digest
    changed = frame.copy()
    changed.loc[1, "value"] = 8
    assert soak_digests.frame_digest(changed) != digest
    assert soak_digests.frame_digest(frame.iloc[::-1]) != digest  # the rows' order counts
    assert soak_digests.json_digest({"a": {"b": 1}}) != soak_digests.json_digest({"a": {"b": 2}})
