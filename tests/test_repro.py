"""``forensics repro``: a standalone pytest file from a bundled incident fails under plain pytest
with the installed vLLM, passes once a fix is in, and imports only torch, vllm and pytest."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from forensics.cli import main
from tests.conftest import DATA

INCIDENT = DATA / "incident-b-vocab-sentinel.capture"
#: a stand-in for a fix, loaded beside the repro: the sentinel is never written as a token and
#: the embedding clamps its ids (imports only torch and vllm, like the repro)
FIX = '''
import torch
from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding
from vllm.v1.worker.gpu_input_batch import InputBatch

_update, _forward = InputBatch.update_async_output_token_ids, VocabParallelEmbedding.forward


def update(self):
    self.sampled_token_ids_cpu[self.sampled_token_ids_cpu >= self.vocab_size] = -1
    return _update(self)


def forward(self, input_):
    return _forward(self, input_.clamp(0, self.weight.shape[0] - 1))


InputBatch.update_async_output_token_ids = update
VocabParallelEmbedding.forward = forward
'''


def _pytest(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Plain pytest on ``folder``'s test_repro.py in a subprocess, this package's plugin off,
    with every import listed on stderr."""
    return subprocess.run([sys.executable, "-X", "importtime", "-m", "pytest", "-p",
                           "no:forensics", "-p", "no:cacheprovider", "-q", "-s", "test_repro.py",
                           *args], cwd=folder, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def repro(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("vllm")
    folder = tmp_path_factory.mktemp("repro")
    assert main(["repro", str(INCIDENT), "-o", str(folder / "test_repro.py")]) == 0
    return folder / "test_repro.py"


def test_the_repro_imports_only_torch_vllm_and_pytest(repro: Path) -> None:
    tree = ast.parse(repro.read_text())
    roots = {alias.name.split(".")[0] for node in ast.walk(tree)
             if isinstance(node, ast.Import) for alias in node.names}
    roots |= {node.module.split(".")[0] for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom) and node.module}
    assert roots == {"torch", "vllm", "pytest"}
    source = repro.read_text()
    assert "248320" in source and "def test_async_output_step_13" in source
    assert "def test_embedding_step_14" in source


def test_the_repro_fails_on_the_installed_vllm_without_forensics(repro: Path) -> None:
    run = _pytest(repro.parent)
    assert run.returncode == 1, run.stdout[-3000:]
    assert "2 failed" in run.stdout, run.stdout[-3000:]
    assert "out-of-range access in VocabParallelEmbedding.forward" in run.stdout
    assert "output ids written out of [0, 248320)" in run.stdout
    imported = [line.split("|")[-1].strip() for line in run.stderr.splitlines()
                if line.startswith("import time:")]
    assert "vllm" in imported and not [m for m in imported if m.split(".")[0] == "forensics"]


def test_the_repro_passes_once_a_fix_is_in(repro: Path) -> None:
    (repro.parent / "conftest.py").write_text(FIX)
    try:
        run = _pytest(repro.parent)
    finally:
        (repro.parent / "conftest.py").unlink()
    assert run.returncode == 0 and "2 passed" in run.stdout, run.stdout[-3000:]


def test_summary_markdown_links_the_repro(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", str(INCIDENT)]) == 0
    text = capsys.readouterr().out
    reproduce = text.split("### Reproduce", 1)[1]
    assert f"forensics repro {INCIDENT} -o test_repro.py" in reproduce
    assert "pytest test_repro.py" in reproduce


def test_a_capture_the_real_code_passes_has_nothing_to_reproduce(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("vllm")
    assert main(["repro", str(DATA / "clean.capture"), "-o", str(tmp_path / "t.py")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "nothing to reproduce" in err
    assert not (tmp_path / "t.py").exists()
