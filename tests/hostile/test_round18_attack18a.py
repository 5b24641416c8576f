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
