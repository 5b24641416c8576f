"""``embedding_guard()`` for eager models outside vLLM."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import forensics
from forensics.errors import ConfigurationError, IndexBoundsError
from forensics.probe import embedding_guard


def test_guard_raises_before_the_lookup(tmp_path: Path) -> None:
    layer = torch.nn.Embedding(5, 2)
    capture = tmp_path / "eager.capture"
    with embedding_guard(capture) as state:
        layer(torch.tensor([0, 4]))
        with pytest.raises(IndexBoundsError) as info:
            layer(torch.tensor([[1, 5]]))
    assert (info.value.step, info.value.value, info.value.bound) == (1, 5, 5)
    assert state.calls == 2 and torch.nn.functional.embedding.__name__ == "embedding"
    records = list(forensics.load(capture))
    assert [r["input_ids"].tolist() for r in records] == [[0, 4], [1, 5]]
    assert records[0]["num_embeddings"] == 5


def test_record_mode_collects_and_lets_torch_decide() -> None:
    with embedding_guard(mode="record") as state:
        with pytest.raises(IndexError):
            torch.nn.functional.embedding(torch.tensor([-1]), torch.zeros(3, 1))
    assert [(v.value, v.upper) for v in state.violations] == [(-1, 3)]


def test_bad_mode() -> None:
    with pytest.raises(ConfigurationError, match="'loud'"):
        with embedding_guard(mode="loud"):
            pass
