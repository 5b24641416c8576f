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


def _write_repro(factory: pytest.TempPathFactory, capture: Path, folder: str) -> Path:
    """``forensics repro`` of ``capture`` into a fresh ``folder``'s test_repro.py."""
    written = factory.mktemp(folder) / "test_repro.py"
    assert main(["repro", str(capture), "-o", str(written)]) == 0
    return written


@pytest.fixture(scope="module")
def repro(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_repro(tmp_path_factory, INCIDENT, "repro")


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
    assert main(["repro", str(DATA / "clean.capture"), "-o", str(tmp_path / "t.py")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "nothing to reproduce" in err
    assert not (tmp_path / "t.py").exists()


# ------------------------------------------------------------------ the V1 sites end to end

#: batch_change and prepare_input_ids both read past the previous batch at step 20 (row 1)
V1_SITES = DATA / "incident-a-stale-prev-rows-confirmed.capture"
#: the message each repro's test fails with: its own assertion of the out-of-range access
V1_FAILURES = {
    "test_batch_change_step_20_rank_0": "Failed: out-of-range access in "
    "update_num_computed_tokens_for_batch_change: index 4 is out of bounds for dimension 0 "
    "with size 4",
    "test_prepare_input_ids_step_20_rank_0": "Failed: out-of-range access in "
    "GPUModelRunner._prepare_input_ids: index 4 is out of bounds for dimension 0 with size 4"}
#: runs pytest with ``forensics`` unimportable: any import of it fails the run
WITHOUT_FORENSICS = ("import sys; sys.modules['forensics'] = None; import pytest; "
                     "sys.exit(pytest.main(sys.argv[1:]))")


@pytest.fixture(scope="module")
def v1_repro(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_repro(tmp_path_factory, V1_SITES, "repro-v1")


def test_the_v1_repro_comments_name_the_tensor_holding_the_bad_index(v1_repro: Path) -> None:
    source = v1_repro.read_text()
    assert "None[None]" not in source
    comments = [line.strip() for line in source.splitlines() if line.strip().startswith("# vllm.")]
    assert len(comments) == 2, comments
    assert "update_num_computed_tokens_for_batch_change: " in comments[0]
    assert "`prev_positions[1] = 4` indexes `valid_sampled_token_count` (4 elements): a stale " \
           "previous row" in comments[0]
    assert "GPUModelRunner._prepare_input_ids: " in comments[1]
    assert "`prev_positions[1] = 4` indexes `prev_sampled_token_ids` (4 rows)" in comments[1]


def test_the_v1_repro_fails_on_its_out_of_range_access_without_forensics(
        v1_repro: Path) -> None:
    """Plain pytest on the repro of a capture with batch_change and prepare_input_ids findings,
    in its own folder outside the repository, with ``forensics`` unimportable: each test fails
    on its asserted out-of-range access (not on an ImportError or a NameError)."""
    import xml.etree.ElementTree as ET

    assert not v1_repro.resolve().is_relative_to(DATA.parent)
    run = subprocess.run([sys.executable, "-X", "importtime", "-c", WITHOUT_FORENSICS,
                          "-p", "no:forensics", "-p", "no:cacheprovider", "-q", "-s",
                          "--junitxml=junit.xml", "test_repro.py"], cwd=v1_repro.parent,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 1 and "2 failed" in run.stdout, run.stdout[-3000:]
    cases = ET.parse(v1_repro.parent / "junit.xml").getroot().iter("testcase")
    failures = {case.get("name"): case.find("failure") for case in cases}
    assert set(failures) == set(V1_FAILURES)
    for name, failure in failures.items():
        assert failure is not None and failure.get("message") == V1_FAILURES[name], \
            (name, None if failure is None else failure.get("message"))
        assert "IndexError: index 4 is out of bounds" in (failure.text or "")
    imported = [line.split("|")[-1].strip() for line in run.stderr.splitlines()
                if line.startswith("import time:")]
    assert "vllm" in imported
    assert not [m for m in imported if m.split(".")[0] == "forensics"]
