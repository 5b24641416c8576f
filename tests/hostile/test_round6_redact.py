"""Hostile input, round 6, on what ``redact`` keeps of error text (T37e): an allow-list of
vLLM's, torch's and CUDA's own words (``forensics/share/error_words.txt``), not a block-list of
shapes. Free text a block-list cannot know (a user's name, a host without a domain or port, an
API token, a prompt's words) goes; the messages maintainers search for stay word for word."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from forensics.records import Record
from forensics.share.error_text import UNKNOWN_WORD, error_words, known_word, public_error_text
from forensics.store.writer import write_capture

#: free text of an event that no pattern has a shape for; each must leave the capture
PRIVATE = ("alice", "Wojciechowski", "gpu-node-17", "dgx42", "hf_kQzVbWmXyTnPaLsDfGhJkLqWeRt",
           "sk-proj-AbC123xYz987QwErTy", "diagnosis", "oncology", "Zürich", "東京")
#: real error lines of vLLM 0.32/0.33, torch and CUDA (INCIDENTS.md, tests/data logs)
PUBLIC = (
    "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
    "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace"
    " (above) for the root cause.",
    "Indexing.cu:1515: indexSelectSmallIndex: block: [0,0,0], thread: [0,0,0] Assertion "
    "`srcIndex < srcSelectDimSize` failed.",
    "RuntimeError: CUDA error: device-side assert triggered",
    "CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    "IndexError: index 151936 is out of bounds for dimension 0 with size 151936",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
)


@pytest.mark.parametrize("line", PUBLIC)
def test_vllm_torch_and_cuda_error_lines_are_kept_word_for_word(line: str) -> None:
    """The allow-list knows every word of the messages maintainers search for."""
    assert public_error_text(line) == line


@pytest.mark.parametrize("private", PRIVATE)
def test_a_word_no_error_text_uses_becomes_text(private: str) -> None:
    """A block-list of shapes let these through (``user alice``, a bare host, a token)."""
    kept = public_error_text(f"ValueError: user {private} failed")
    assert private not in kept and UNKNOWN_WORD in kept, kept
    assert kept.startswith("ValueError: user ") and kept.endswith(" failed"), kept


def test_a_random_looking_identifier_is_not_known_though_its_parts_are_words() -> None:
    """An API key's camel-case parts may each be a word (``Ab``, ``Xy``); its shape gives it
    away. vLLM's long names are kept."""
    assert not known_word("hf_AbXyAbXyAbXyAbXy")
    assert known_word("update_num_computed_tokens_for_batch_change")
    assert known_word("indexSelectLargeIndex") and known_word("EngineCore_DP0")


def test_the_vocabulary_holds_no_names_of_people_or_places() -> None:
    """Model classes (``AliceAIForCausalLM``) and docstring examples are not read into it."""
    words = error_words()
    assert len(words) > 5000
    assert not {"alice", "bob", "carol", "john", "smith", "zurich", "tokyo"} & words


def test_redact_leaves_no_free_text_word_in_any_file(tmp_path: Path) -> None:
    """End to end: the words of :data:`PRIVATE` in every error field of an event are in no file
    of the redacted capture, and its vLLM message is kept."""
    from forensics.share.redaction import redact

    records = [Record("embedding", step, 0, {
        "input_ids": np.array([5, 6], dtype=np.int64), "num_embeddings": 32000})
        for step in range(2)]
    text = " ".join(PRIVATE)
    events = [{"kind": "index_error", "step": 1, "rank": 0, "message": f"{PUBLIC[0]} ({text})",
               "detail": text, "exception": f"KeyError: '{text}'", "function": PRIVATE[0],
               "location": f"{PRIVATE[1]}.cu:12"}]
    capture = write_capture(tmp_path / "s.capture", records, events=events)
    out = redact(capture, tmp_path / "r.capture").path
    for file in out.rglob("*"):
        if file.is_file():
            data = file.read_bytes()
            assert not [p for p in PRIVATE if p.encode() in data], file.name
    kept = json.loads(next(out.glob("events*.jsonl")).read_text().splitlines()[0])
    assert kept["message"].startswith(PUBLIC[0]), kept
