"""Judged or not judged (issue 29, point 2): a variant that shows no accesses (the real code, a
user callable) and raises nothing cannot see a silent read inside an allocation (the fast
path's broadcast of a one-row source). It leaves those findings ``not judged``, never
resolved, and the conclusion names what only the models see."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import forensics
from forensics.cli import main
from forensics.outcome import Outcome
from forensics.present.conclusion import conclude, next_steps
from forensics.records import Record

VOCAB = 248320


def broadcast_record() -> Record:
    """The fast path copies ``prev_sampled_token_ids[:3, 0]`` from a one-row source: rows 1
    and 2 read past it, and nothing raises."""
    return Record("prepare_input_ids", 7, 0, {
        "prev_positions": np.array([0, 1, 2], np.int64),
        "prev_sampled_token_ids": np.array([[42]], np.int32),
        "input_ids": np.zeros(3, np.int32), "cu_num_tokens": np.array([1, 2, 3], np.int32),
        "num_draft_tokens": np.zeros(3, np.int32), "prev_num_spec_tokens": 0,
        "vocab_size": VOCAB})


def _blind(record: Record) -> Outcome:
    """Code that raises nothing and shows no accesses (as the real code on the broadcast)."""
    return Outcome("ok", "", {"input_ids_device": np.full(3, 42, np.int32)}, None)


def test_a_blind_variant_leaves_silent_reads_not_judged() -> None:
    result = forensics.replay([broadcast_record()], {"upstream": None, "blind": _blind})
    mine = result.findings[result.findings["variant"] == "blind"]
    assert len(mine) == 2 and not mine["judged"].any()
    assert set(result.findings.loc[result.findings["variant"] == "upstream", "judged"]) == {True}
    assert result.verdicts["blind"] == {"prepare_input_ids": "unjudged"}
    conclusion = conclude(result)
    patch = conclusion.patch("blind")
    assert patch is not None and (patch.resolved, patch.total, patch.not_judged) == (0, 2, 2)
    text = conclusion.paragraph()
    assert "resolves 2" not in text
    assert "blind cannot see 2 of the 2 upstream out-of-bounds findings" in text
    assert "only the models see prepare_input_ids at step 7, rank 0, row 1" in text
    assert any("does not say whether blind is affected" in s for s in next_steps(conclusion))


def test_a_blind_variant_that_raises_is_judged() -> None:
    def raising(record: Record) -> Outcome:
        return Outcome("index_error", "IndexError: index 1 is out of bounds for dimension 0 "
                       "with size 1", {}, None)

    result = forensics.replay([broadcast_record()], {"upstream": None, "raising": raising})
    mine = result.findings[result.findings["variant"] == "raising"]
    assert mine["judged"].all() and result.verdicts["raising"] == {
        "prepare_input_ids": "violation"}


@pytest.mark.timeout(900)
def test_vllm_on_a_fast_path_broadcast_is_not_judged(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("vllm")
    from forensics.store.writer import write_capture

    path = write_capture(tmp_path / "broadcast.capture", [broadcast_record()], manifest={})
    assert main(["replay", str(path), "--variant", "upstream", "--variant", "vllm",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdicts"]["vllm"] == {"prepare_input_ids": "unjudged"}
    unseen = [f for f in out["findings"] if f["variant"] == "vllm"]
    assert len(unseen) == 2 and all(f["judged"] is False for f in unseen)
