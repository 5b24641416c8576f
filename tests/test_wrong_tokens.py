"""Ids out of range that reached the model changed (clamped): wrong tokens, no crash."""

from __future__ import annotations

import numpy as np

from forensics.judge.wrong_tokens import describe, silent_inputs
from forensics.records import Record


def _prepared(step: int, after: list[int]) -> Record:
    return Record("prepare_input_ids", step, fields={
        "input_ids_device_after": np.array(after, np.int32), "vocab_size": 10})


def _embedded(step: int, ids: list[int]) -> Record:
    return Record("embedding", step, fields={"input_ids": np.array(ids, np.int32),
                                             "num_embeddings": 16})


def test_a_clamped_placeholder_is_a_silent_wrong_token() -> None:
    records = [_prepared(3, [4, -1, 5]), _embedded(3, [4, 0, 5, 0])]
    (slot,) = silent_inputs(records)
    assert slot == {"step": 3, "rank": 0, "element": 1, "written": -1, "fed": 0,
                    "vocab_size": 10, "site": "prepare_input_ids"}
    assert describe(slot) == ("step 3 rank 0: prepare_input_ids left id -1 at input_ids[1] "
                              "(outside [0, 10)) and the model was fed token 0 there instead: "
                              "a wrong token, silently, not a crash")


def test_an_id_that_reaches_the_embedding_unchanged_is_not_silent() -> None:
    """Without a clamp (no speculative config, or a vLLM that does not clamp) the -1 reaches the
    embedding: that is a sink finding (a crash)."""
    assert silent_inputs([_prepared(3, [4, -1]), _embedded(3, [4, -1])]) == []
    assert silent_inputs([_prepared(3, [4, 99]), _embedded(3, [4, 99])]) == []


def test_other_steps_and_ranks_do_not_pair_up() -> None:
    other_rank = Record("embedding", 3, rank=1, fields={"input_ids": np.array([4, 0]),
                                                        "num_embeddings": 16})
    assert silent_inputs([_prepared(3, [4, -1]), _embedded(4, [4, 0]), other_rank]) == []


def test_the_conclusion_says_when_the_model_was_fed_a_wrong_token_silently() -> None:
    """The bundled leak ran on vLLM 0.33.0, which clamps: its -1 reached the embedding as token
    0, and the conclusion that replay, summary and the report print says so (issue 40)."""
    from pathlib import Path

    import forensics
    from forensics.present.conclusion import conclude

    capture = Path(__file__).resolve().parents[1] / "data" / "placeholder-leak.capture"
    conclusion = conclude(forensics.replay(capture))
    assert len(conclusion.silent) == 9
    assert ("The model was fed 9 wrong token(s) silently, without a crash; the first at step 39 "
            "rank 0: prepare_input_ids left id -1 at input_ids[30]") in conclusion.paragraph()
    assert ("`out.input_ids_device[30] = -1` (step 39, request 'req-18', position 6) was clamped "
            "to token 0 before the embedding") in conclusion.paragraph()
