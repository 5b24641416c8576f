"""Round 18, fix 18c: ``replay --variant vllm+PATH.diff`` of the embedding's module (a copy that
registers vLLM's layers again) and per site (a site whose code the diff leaves as installed)."""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import pytest

from forensics.cli import main

DATA = Path(__file__).resolve().parents[2] / "data"
PATCHES = DATA / "patches"
INCIDENT_B = DATA / "incident-b-vocab-sentinel.capture"
EMBEDDING_FILE = "model_executor/layers/vocab_parallel_embedding.py"
#: the tensor-parallel-1 lookup of the installed embedding
LOOKUP = "return self.quant_method.embedding(self, input_.long())"


def _diff_of(path: str, old: str, new: str) -> str:
    """A unified diff of the installed vLLM's ``path`` with ``old`` made ``new``."""
    from forensics.variants.vllm_diff import vllm_root

    text = (vllm_root() / "vllm" / path).read_text(encoding="utf-8")
    assert old in text
    return "".join(difflib.unified_diff(text.splitlines(True),
                                        text.replace(old, new, 1).splitlines(True),
                                        f"a/vllm/{path}", f"b/vllm/{path}"))


def _embedding_statuses(capture: Path, variant: str) -> list[str]:
    """The outcome statuses of ``capture``'s embedding records replayed under ``variant``."""
    from forensics.replaying import replay

    out = replay(capture, [variant]).outcomes
    return list(out[(out["variant"] == variant) & (out["site"] == "embedding")]["status"])


def test_a_diff_of_the_embeddings_module_loads_and_runs(tmp_path: Path) -> None:
    """T106a: a diff of ``vocab_parallel_embedding.py`` alone. Its patched copy registered
    vLLM's layer ``vocab_parallel_embedding`` a second time, so every replay with it said "the
    patched copy ... fails to import (AssertionError: Duplicate op name: vocab_parallel_embedding);
    fix the diff" of a diff that is fine. Now a diff that masks an out-of-range id (clamps it
    into the table) replays: incident B's step-14 embedding no longer raises IndexError under
    it; a diff that merely comments a line replays as the installed code; and vLLM's
    registration functions are vLLM's again after it."""
    from vllm.model_executor import custom_op

    clamp = tmp_path / "clamp.diff"
    clamp.write_text(_diff_of(EMBEDDING_FILE, LOOKUP, LOOKUP.replace(
        "input_.long()", "input_.long().clamp(0, self.weight.shape[0] - 1)")), encoding="utf-8")
    comment = tmp_path / "comment.diff"
    comment.write_text(_diff_of(EMBEDDING_FILE, "def get_masked_input_and_mask(",
                                "def get_masked_input_and_mask(  # patched"), encoding="utf-8")
    installed = _embedding_statuses(INCIDENT_B, "vllm")
    registered = dict(custom_op.op_registry)  # the installed modules' layers, imported
    assert "index_error" in installed
    assert _embedding_statuses(INCIDENT_B, f"vllm+{comment}") == installed
    assert _embedding_statuses(INCIDENT_B, f"vllm+{clamp}") == ["ok"] * len(installed)
    assert custom_op.op_registry == registered
    assert "register" in custom_op.PluggableLayer.__dict__
    with pytest.raises(AssertionError, match="Duplicate op name"):
        custom_op.PluggableLayer.register("vocab_parallel_embedding")(type("X", (), {}))
