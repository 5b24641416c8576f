"""``forensics import`` states the incident's facts or ``unknown``, never the importing
machine's; ``--set`` fills them in; the importing tool and time sit under ``imported``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from importer_helpers import SM70_LOG

from forensics.cli import main
from forensics.store.reader import load
from forensics.versions import module_version

DUMP = {"site": "embedding", "step": 0, "input_ids": torch.arange(3, dtype=torch.int32),
        "num_embeddings": 10}


def _import(tmp_path: Path, *extra: str) -> tuple[int, str]:
    torch.save([DUMP], tmp_path / "dump.pt")
    (tmp_path / "engine.log").write_text(SM70_LOG)
    return main(["import", str(tmp_path / "dump.pt"), str(tmp_path / "engine.log"),
                 "-o", str(tmp_path / "o.capture"), *extra]), str(tmp_path / "o.capture")


def test_unstated_facts_are_unknown_not_this_machines(tmp_path: Path) -> None:
    code, out = _import(tmp_path)
    manifest = load(out).manifest
    assert code == 0
    assert manifest["versions"]["vllm"] == manifest["versions"]["torch"] == "unknown"
    assert manifest["versions"]["python"] == "unknown" and manifest["created"] == "unknown"
    assert manifest["model"]["name"] == "unknown"
    here = {module_version("torch"), module_version("vllm")} - {None}
    stated = json.dumps({k: v for k, v in manifest.items() if k != "imported"})
    assert here and not any(version in stated for version in here), stated
    imported = manifest["imported"]
    assert imported["command"] == "forensics import" and imported["tool"].startswith(
        "vllm-forensics") and imported["time"].endswith("Z")
    assert imported["sources"] == ["dump.pt", "engine.log"]


def test_set_fills_facts_and_the_summary_states_them(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _import(tmp_path, "--set", "versions.vllm=0.31.0", "--set",
                        "model.name=Qwen/Qwen3-8B", "--set", "model.vocab_size=248320")
    manifest = load(out).manifest
    assert code == 0 and manifest["versions"]["vllm"] == "0.31.0"
    assert manifest["model"] == {"name": "Qwen/Qwen3-8B", "vocab_size": 248320}
    assert manifest["versions"]["torch"] == "unknown"
    capsys.readouterr()
    assert main(["inspect", out]) == 0
    text = capsys.readouterr().out
    assert "vllm: 0.31.0" in text and "torch: unknown" in text and "Qwen/Qwen3-8B" in text


@pytest.mark.parametrize("setting, says", [
    ("version.vllm=1", "unknown key 'version.vllm'"),
    ("versions.vllm", "expected KEY=VALUE"),
    ("model.vocab_size=big", "model.vocab_size is not a vocabulary size (1 to 2147483647)"),
    ("model.async_scheduling=maybe", "true or false"),
])
def test_bad_set_is_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         setting: str, says: str) -> None:
    code, out = _import(tmp_path, "--set", setting)
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and says in err, err
    assert setting.split("=")[0] in err and not Path(out).exists()
