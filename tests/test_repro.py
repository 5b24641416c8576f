"""``forensics repro``: a standalone pytest file from a bundled incident fails under plain pytest
with the installed vLLM, passes once a fix is in (a stand-in, and the bundled diff applied to a
private copy of vLLM's files), and imports only the standard library, torch, vllm and pytest."""

from __future__ import annotations

import ast
import json
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


def _cases(repro: Path) -> list[dict]:
    """The test cases of the data file beside ``repro``."""
    return json.loads(repro.with_suffix(".json").read_text(encoding="utf-8"))["cases"]


def test_the_repro_imports_only_torch_vllm_and_pytest(repro: Path) -> None:
    tree = ast.parse(repro.read_text())
    roots = {alias.name.split(".")[0] for node in ast.walk(tree)
             if isinstance(node, ast.Import) for alias in node.names}
    roots |= {node.module.split(".")[0] for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom) and node.module}
    assert roots - set(sys.stdlib_module_names) == {"torch", "vllm", "pytest"}
    cases = _cases(repro)
    assert [(c["site"], c["step"]) for c in cases] == [("async_output", 13), ("embedding", 14)]
    assert cases[0]["facts"] == {"vocab_size": 248320}


def test_the_repro_fails_on_the_installed_vllm_without_forensics(repro: Path) -> None:
    run = _pytest(repro.parent)
    assert run.returncode == 1, run.stdout[-3000:]
    assert "2 failed" in run.stdout, run.stdout[-3000:]
    assert "out-of-range access in vllm.model_executor.layers.vocab_parallel_embedding." \
           "VocabParallelEmbedding.forward: index out of range in self; the capture's " \
           "input_ids[" in run.stdout
    assert "InputBatch.update_async_output_token_ids wrote output_token_ids[" in run.stdout
    assert "= 248320, outside the vocabulary [0, 248320)" in run.stdout
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
    assert not (tmp_path / "t.py").exists() and not (tmp_path / "t.json").exists()


# ------------------------------------------------------------------ the V1 sites end to end

#: batch_change and prepare_input_ids both read past the previous batch at step 20 (row 1)
V1_SITES = DATA / "incident-a-stale-prev-rows-confirmed.capture"
#: the message each repro's test fails with: vLLM's IndexError and the element the capture holds
V1_FAILURES = {
    "test_index_stays_in_range[batch_change-step20-rank0]": "out-of-range access in "
    "vllm.v1.spec_decode.utils.update_num_computed_tokens_for_batch_change: index 4 is out of "
    "bounds for dimension 0 with size 4; the capture's prev_positions[1] = 4 is outside [0, "
    "4), the valid indices of valid_sampled_token_count",
    "test_index_stays_in_range[prepare_input_ids-step20-rank0]": "out-of-range access in "
    "vllm.v1.worker.gpu_model_runner.GPUModelRunner._prepare_input_ids: index 4 is out of "
    "bounds for dimension 0 with size 4; the capture's prev_positions[1] = 4 is outside [0, "
    "4), the valid indices of prev_sampled_token_ids"}
#: the fix of both: a row at or past the previous batch's rows is not gathered
STALE_ROWS_FIX = DATA / "patches" / "stale-prev-rows.diff"
#: runs pytest with ``forensics`` unimportable: any import of it fails the run
WITHOUT_FORENSICS = ("import sys; sys.modules['forensics'] = None; import pytest; "
                     "sys.exit(pytest.main(sys.argv[1:]))")


@pytest.fixture(scope="module")
def v1_repro(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_repro(tmp_path_factory, V1_SITES, "repro-v1")


def test_the_v1_repro_data_names_the_tensor_holding_the_bad_index(v1_repro: Path) -> None:
    cases = _cases(v1_repro)
    assert [c["site"] for c in cases] == ["batch_change", "prepare_input_ids"]
    texts = [c["finding"]["text"] for c in cases]
    assert "`prev_positions[1] = 4` indexes `valid_sampled_token_count` (4 elements): a stale " \
           "previous row" in texts[0]
    assert "`prev_positions[1] = 4` indexes `prev_sampled_token_ids` (4 rows)" in texts[1]
    assert cases[1]["finding"] | {"text": ""} == {
        "text": "", "tensor": "prev_positions", "element": 1, "value": 4, "lower": 0,
        "upper": 4, "indexed": "prev_sampled_token_ids"}
    # the ids _prepare_input_ids writes are checked against the vocabulary, not [0, 4)
    assert cases[1]["facts"] == {"vocab_size": 129280}


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
        assert failure is not None and V1_FAILURES[name] in (failure.get("message") or ""), \
            (name, None if failure is None else failure.get("message"))
    imported = [line.split("|")[-1].strip() for line in run.stderr.splitlines()
                if line.startswith("import time:")]
    assert "vllm" in imported
    assert not [m for m in imported if m.split(".")[0] == "forensics"]


#: runs pytest with the patched copies of vLLM's files under argv[1] imported in place of the
#: installed ones (the vllm+PATH.diff machinery's finder), then names the files it ran
WITH_PATCHED_VLLM = """import sys
from pathlib import Path
from forensics.variants.triton_worker import PatchedFinder
sys.meta_path.insert(0, PatchedFinder(Path(sys.argv[1])))
import pytest
code = pytest.main(sys.argv[2:])
from vllm.v1.spec_decode import utils
from vllm.v1.worker import gpu_model_runner
print("ran", utils.__file__, gpu_model_runner.__file__)
sys.exit(code)
"""


def test_the_v1_repro_passes_on_vllm_with_the_bundled_fix_applied(
        v1_repro: Path, tmp_path: Path) -> None:
    """The bundled diff applied to private copies of vLLM's files (as ``vllm+PATH.diff`` does),
    imported in place of the installed ones: both tests pass (they fail on the installed vLLM,
    above)."""
    from forensics.variants.vllm_diff import patched_sources

    root = tmp_path / "patched"
    for path, text in patched_sources(STALE_ROWS_FIX).items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    run = subprocess.run([sys.executable, "-c", WITH_PATCHED_VLLM, str(root), "-p",
                          "no:forensics", "-p", "no:cacheprovider", "-q", "test_repro.py"],
                         cwd=v1_repro.parent, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0 and "2 passed" in run.stdout, run.stdout[-3000:]
    ran = run.stdout.split("ran ", 1)[1].split()
    assert ran == [str(root / "vllm/v1/spec_decode/utils.py"),
                   str(root / "vllm/v1/worker/gpu_model_runner.py")]
