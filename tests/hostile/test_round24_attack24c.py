"""Round 24 of hostile input, attack 24c: sentences a capture can make false (a wrong sentence
is worse than none)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.hostile.test_round2 import run_cli

# ------------------------------ T150a: redact states no fact of this machine as the engine's


def test_redact_does_not_give_an_unknown_version_this_machine_s(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A log imported alone names no version, no creator and no time ("unknown"): its
    redacted copy named the installed vLLM and torch, this machine's Python and the time of
    the redaction ("Capture: vllm 0.33.0; torch 2.14.0; created <now>"), which its summary
    stated as the engine's, while its own ``dropped`` listed ``versions.vllm``."""
    source, out = tmp_path / "s.capture", tmp_path / "r.capture"
    log = tmp_path / "engine.log"
    log.write_text("SM70-TEMB: rows=1000 input=(4,) dtype=torch.int32 min=5 max=1000 step=3\n"
                   "RuntimeError: CUDA error: device-side assert triggered\n")
    code, _, err = run_cli(capsys, "import", log, "-o", source)
    assert code == 0, err
    code, text, err = run_cli(capsys, "redact", source, "-o", out, "--variant", "upstream")
    assert code == 0, err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["versions"] == {"forensics": "unknown", "python": "unknown",
                                    "torch": "unknown", "vllm": "unknown"}, manifest
    assert manifest["created"] == "unknown" and manifest["creator"] == "unknown", manifest
    assert "versions.vllm" not in text, text
    code, out_text, _ = run_cli(capsys, "summary", out, "--variant", "upstream")
    assert code == 0
    assert "vllm: `unknown`" in out_text and "0.33.0`" not in out_text, out_text


def test_redact_does_not_put_this_machine_s_version_in_place_of_a_build_tag(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A version of a local build (``0.32.0+cpu``, vLLM's CPU build; ``2.13.0+cpu``, its
    torch) is dropped, as a build tag may be private: its place was taken by the installed
    version (``0.33.0``, ``2.14.0``), another release than the engine's. It is unknown."""
    import shutil

    source, out = tmp_path / "s.capture", tmp_path / "r.capture"
    shutil.copytree(Path(__file__).resolve().parents[2] / "data" / "clean.capture", source)
    (source / "expected.json").unlink()
    path = source / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["versions"] = {"vllm": "0.32.0+cpu", "torch": "2.13.0+cpu", "python": "3.11.7"}
    path.write_text(json.dumps(manifest))
    code, text, err = run_cli(capsys, "redact", source, "-o", out, "--variant", "upstream")
    assert code == 0, err
    versions = json.loads((out / "manifest.json").read_text())["versions"]
    assert versions == {"vllm": "unknown", "torch": "unknown", "python": "3.11.7",
                        "forensics": "unknown"}, versions
    assert "versions.vllm" in text and "versions.torch" in text, text

