"""Round 18, fix 18c: ``replay --variant vllm+PATH.diff`` of the embedding's module (a copy that
registers vLLM's layers again) and per site (a site whose code the diff leaves as installed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forensics.cli import main
from tests.hostile.test_round18_fix18b import _diff_of

DATA = Path(__file__).resolve().parents[2] / "data"
PATCHES = DATA / "patches"
INCIDENT_B = DATA / "incident-b-vocab-sentinel.capture"
EMBEDDING_FILE = "model_executor/layers/vocab_parallel_embedding.py"
#: the tensor-parallel-1 lookup of the installed embedding
LOOKUP = "return self.quant_method.embedding(self, input_.long())"


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


def test_a_site_the_diff_leaves_as_installed_is_marked_per_site(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """T106b: incident B under the bundled ``vocab-guard.diff`` (it changes
    ``gpu_input_batch.py`` alone). T101a checks the diff, not the site, so ``batch_change``,
    ``prepare_input_ids`` and the embedding replayed the installed code under the diff's name
    and the verdict table showed their verdicts as the diff's. Now the table says "(as
    installed)" beside each, the variant's line names them, ``--json`` lists them under
    ``as_installed``, and summary's table marks them too; ``async_output``, whose module the
    diff changes, is not marked, and the ``vllm`` variant is not."""
    guard = f"vllm+{PATCHES / 'vocab-guard.diff'}"
    assert main(["replay", str(INCIDENT_B), "--variant", "vllm", "--variant", guard]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: " ".join(line.split()[1:]) for line in out.splitlines()[2:6]}
    assert rows == {"batch_change": "ok ok (as installed)",
                    "prepare_input_ids": "ok ok (as installed)",
                    "async_output": "violation ok",
                    "embedding": "violation ok (as installed)"}
    assert ("every other vLLM module as installed (so batch_change, prepare_input_ids, "
            "embedding ran as installed: the diff does not change their code)") \
        in " ".join(out.split())
    assert main(["replay", str(INCIDENT_B), "--variant", "vllm", "--variant", guard,
                 "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["as_installed"]
    assert shown == {guard: ["batch_change", "prepare_input_ids", "embedding"]}
    assert main(["summary", str(INCIDENT_B), "--variant", "vllm", "--variant", guard]) == 0
    text = capsys.readouterr().out
    assert "| vllm+vocab-guard.diff@" in text
    assert "| batch_change | ok | ok (as installed) |" in text
    assert "| async_output | violation | ok |" in text
    from forensics.present.conclusion import conclude
    from forensics.present.report import header_data
    from forensics.replaying import replay

    result = replay(INCIDENT_B, ["vllm", guard])
    rows = {row["site"]: row["verdicts"] for row in header_data(result, conclude(result))[
        "verdicts"]}  # the report's header table
    assert rows["prepare_input_ids"] == ["ok", "ok (as installed)"]
    assert rows["async_output"] == ["violation", "ok"]


def test_the_sites_of_the_modules_a_diff_changes_are_not_marked(
        capsys: pytest.CaptureFixture[str]) -> None:
    """T106b: incident A under ``stale-prev-rows.diff`` (it changes the batch change's and the
    runner's modules): ``async_output`` and the embedding ran the installed code and are
    marked, ``batch_change`` and ``prepare_input_ids`` are not."""
    capture = DATA / "incident-a-stale-prev-rows-confirmed.capture"
    guard = f"vllm+{PATCHES / 'stale-prev-rows.diff'}"
    assert main(["replay", str(capture), "--variant", guard, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["as_installed"] == {
        guard: ["async_output", "embedding"]}
