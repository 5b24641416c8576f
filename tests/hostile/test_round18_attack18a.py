"""Round 18, attack 18a: the output side (``replay --variant vllm+PATH.diff``, ``repro``,
``report``, ``triage``'s outputs, ``known``, ``findings``, ``summary``) held to what it says."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.cli import main

DATA = Path(__file__).resolve().parents[2] / "data"

#: a diff that changes a vLLM module no V1 site's replay runs (the sampler), nothing else
SAMPLER_DIFF = (
    "--- a/vllm/v1/sample/sampler.py\n+++ b/vllm/v1/sample/sampler.py\n"
    "@@ -3,3 +3,4 @@\n"
    ' """A layer that samples the next tokens from the model\'s outputs."""\n'
    " \n import torch\n+# the fix of the sentinel, where no V1 site's replay runs it\n")


def test_a_diff_no_v1_site_runs_is_refused_not_judged_as_the_installed_code(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """T101a: ``replay --variant vllm+sampler.diff`` of a V1 capture, the diff changing only
    ``vllm/v1/sample/sampler.py`` (which no V1 site's replay loads): the replay ran the
    installed code under the diff's name and concluded "vllm+sampler.diff leaves async_output,
    embedding in violation and resolves 0 of 2 vllm out-of-bounds findings", a verdict of a
    diff never run. As Model Runner V2's sites do (a diff missing the kernels' file), it is one
    line naming the diff, the files the V1 sites run and the one it changes; exit 2."""
    diff = tmp_path / "sampler.diff"
    diff.write_text(SAMPLER_DIFF, encoding="utf-8")
    code = main(["replay", str(DATA / "incident-b-vocab-sentinel.capture"),
                 "--variant", f"vllm+{diff}"])
    out, err = capsys.readouterr()
    assert code == 2
    assert "resolves" not in out and "violation" not in out
    line = " ".join(err.split())
    assert "sampler.diff: site 'batch_change' runs vLLM's code in" in line
    assert "vllm/v1/worker/gpu_input_batch.py" in line
    assert "it changes vllm/v1/sample/sampler.py" in line
    assert "replay this site with 'vllm'" in line
    assert len(err.strip().splitlines()) == 1


def test_a_model_runner_v2_diff_is_refused_on_a_v1_capture_and_runs_on_its_own(
        capsys: pytest.CaptureFixture[str]) -> None:
    """T101a: the V2 guard (``data/patches/v2-index-guard.diff``, V2's kernel files only)
    replayed on a V1 capture is the same one line (it replayed the installed V1 code under
    its name); on a V2 capture it still runs, its ``embedding`` records (the sink both runners
    share) through the installed code."""
    guard = f"vllm+{DATA / 'patches' / 'v2-index-guard.diff'}"
    assert main(["replay", str(DATA / "stale-prev-row.capture"), "--variant", guard]) == 2
    line = " ".join(capsys.readouterr().err.split())
    assert "v2-index-guard.diff: site 'batch_change' runs vLLM's code in" in line
    assert main(["replay", str(DATA / "v2-vocab-sample.capture"), "--variant", guard]) == 0
    out, err = capsys.readouterr()
    assert "embedding" in out and not err


def _diff_of(path: str, old: str, new: str) -> str:
    """A unified diff of the installed vLLM's ``path`` (``v1/utils.py``) with ``old`` made
    ``new``."""
    import difflib

    from forensics.variants.vllm_diff import vllm_root

    text = (vllm_root() / "vllm" / path).read_text(encoding="utf-8")
    assert old in text
    return "".join(difflib.unified_diff(text.splitlines(True),
                                        text.replace(old, new, 1).splitlines(True),
                                        f"a/vllm/{path}", f"b/vllm/{path}"))


def test_a_helper_the_patched_module_imports_from_a_file_the_diff_changes_is_named(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """T101b: the vocabulary guard written as a pull request would write it: a helper
    ``sampled_count`` added to ``vllm/v1/utils.py`` for ``gpu_input_batch.py``,
    which imports it. The replay loads the diff's copies of the V1 sites' modules alone, each
    importing the installed vLLM's other modules, so it said "the patched copy of
    vllm/v1/worker/gpu_input_batch.py fails to import (ImportError: ...); fix the diff" of a
    diff that applies and imports in vLLM (and, had the helper been there already, would have
    run the installed one). Now one line says which change the replay would not run and why."""
    copy = "    return to_tensor[:length].copy_(from_tensor[:length], non_blocking=True)\n"
    helper = _diff_of("v1/utils.py", copy, copy + (
        "\n\ndef sampled_count(new_ids: list[int], vocab_size: int) -> int:\n"
        '    """The ids up to the first outside the vocabulary."""\n'
        "    return next((i for i, t in enumerate(new_ids) if not 0 <= t < vocab_size),\n"
        "                len(new_ids))\n"))
    batch = "v1/worker/gpu_input_batch.py"
    call = _diff_of(batch, "from vllm.v1.utils import copy_slice\n",
                    "from vllm.v1.utils import copy_slice, sampled_count\n")
    diff = tmp_path / "helper.diff"
    diff.write_text(helper + call, encoding="utf-8")
    code = main(["replay", str(DATA / "incident-b-vocab-sentinel.capture"),
                 "--variant", f"vllm+{diff}"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2
    assert "fix the diff" not in err and "fails to import" not in err
    assert ("helper.diff: the patched vllm/v1/worker/gpu_input_batch.py imports vllm.v1.utils, "
            "which the diff also changes (vllm/v1/utils.py)") in err
    assert "that change would not run" in err


def test_the_imports_of_a_module_are_named_with_relative_ones_resolved() -> None:
    """T101b: what a patched copy imports, as its import statements name it."""
    from forensics.variants.vllm_diff import imported_modules

    text = ("import os\nfrom vllm.v1.utils import copy_slice\nfrom . import block_table\n"
            "from ..sample import sampler as s\n")
    assert imported_modules(text, "vllm.v1.worker.gpu_input_batch") == {
        "os", "vllm.v1.utils", "vllm.v1.utils.copy_slice", "vllm.v1.worker",
        "vllm.v1.worker.block_table", "vllm.v1.sample", "vllm.v1.sample.sampler"}
    assert "vllm.v1.worker.x" in imported_modules("from . import x\n", "vllm.v1.worker", True)
    assert imported_modules("def (:\n", "vllm.x") == set()


def test_the_findings_a_diff_cannot_see_are_counted_of_the_baselines_own(
        capsys: pytest.CaptureFixture[str]) -> None:
    """T101c: ``replay --variant vllm --variant vllm+stale-prev-rows.diff`` of incident A: the
    real code raises once per record (4 ``vllm`` findings) where the models name each tensor a
    stale row indexes (12 findings). The conclusion said "vllm+stale-prev-rows.diff cannot see
    12 of the 4 vllm out-of-bounds findings": the count of the models' findings over the
    baseline's total. It now counts the baseline's own (4 of the 4) and says the models make
    them 12 findings."""
    capture = DATA / "incident-a-stale-prev-rows-confirmed.capture"
    diff = f"vllm+{DATA / 'patches' / 'stale-prev-rows.diff'}"
    assert main(["replay", str(capture), "--variant", "vllm", "--variant", diff]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "cannot see 12 of the 4" not in text
    assert "stale-prev-rows.diff cannot see 4 of the 4 vllm out-of-bounds findings" in text
    assert "only the models see them, as 12 findings: batch_change at step 20" in text


#: the vocabulary guard's fix alone (``data/patches/vocab-guard.diff``'s effect), as a conftest
VOCAB_FIX = '''
from vllm.v1.worker.gpu_input_batch import InputBatch

_update = InputBatch.update_async_output_token_ids


def update(self):
    self.sampled_token_ids_cpu[self.sampled_token_ids_cpu >= self.vocab_size] = -1
    return _update(self)


InputBatch.update_async_output_token_ids = update
'''


def test_a_v1_embeddings_repro_says_a_fix_of_the_writer_does_not_pass_it(
        tmp_path: Path) -> None:
    """T101d: ``forensics repro`` of incident B (V1) with the sentinel's fix in vLLM: the
    async_output test passes; the embedding's test runs the embedding on the ids as recorded
    (its V1 case carries no origin), so no fix of the call that wrote them passes it. Its
    failure read as the fix's failure ("index out of range ...; the capture's input_ids[5] =
    248320 is outside [0, 248320)"), and the file's docstring said each test "passes once a fix
    keeps it in range". Both now say a fix to the writer does not pass this test."""
    import subprocess
    import sys

    script = tmp_path / "test_repro.py"
    assert main(["repro", str(DATA / "incident-b-vocab-sentinel.capture"), "-o",
                 str(script)]) == 0
    (tmp_path / "conftest.py").write_text(VOCAB_FIX, encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:forensics", "-p",
                          "no:cacheprovider", "-q", "test_repro.py"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=900)
    out = " ".join(run.stdout.split())
    assert "1 failed, 1 passed" in out, run.stdout[-3000:]
    assert ("the capture's input_ids[5] = 248320 is outside [0, 248320), the valid indices of "
            "embedding rows; the embedding ran on the input_ids as recorded: a fix to the call "
            "that wrote them does not pass this test") in out
    head = " ".join(script.read_text(encoding="utf-8").split("import contextlib")[0].split())
    assert ("a V1 embedding's test runs the embedding on the ids as recorded: a fix to the "
            "call that wrote them passes that call's test, not this one") in head


@pytest.mark.parametrize("command", ["replay", "summary", "report"])
def test_the_variant_vllm_plus_nothing_names_no_diff_file(
        command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """T101e: ``--variant vllm+`` (no path after it): ``replay`` and ``summary`` said "diff file
    '.' is not a regular file (a FIFO, device, socket or directory); refused. Replace it with
    the file", ``report`` "no diff file at '/the/working/folder'": a file nobody named. Now
    one line says the variant names no diff file, exit 2."""
    args = [command, str(DATA / "clean.capture"), "--variant", "vllm+"]
    if command == "report":
        args += ["-o", str(tmp_path / "r.html")]
    assert main(args) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "the variant 'vllm+' names no diff file; give the path of a unified diff" in err
    assert "'.'" not in err and "regular file" not in err and "no diff file at" not in err
    assert not (tmp_path / "r.html").exists()
