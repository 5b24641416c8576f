"""Round 15 (lead): the vLLM version a capture's verdicts rest on, said when it is unknown
(issue 38, hostile input; "facts we do not have are unknown").

Whether a leaked ``-1`` is clamped to token 0 (vLLM 0.32 and later) or reaches the embedding as
an out-of-range index depends on the engine's vLLM version. A manifest that refused its version
said "vllm unknown"; one that left the version out said nothing at all, and the conclusion
named the models' verdicts (on vLLM 0.33.0's code) as if they were the engine's.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import forensics
from forensics.present.capture_facts import facts_lines
from forensics.present.conclusion import conclude

DATA = Path(__file__).resolve().parents[2] / "data"


def _without_version(tmp_path: Path, drop: str) -> Path:
    """A copy of the stale-row capture whose manifest lacks ``versions.vllm`` (``drop``:
    ``"vllm"`` the one key, ``"versions"`` the whole object)."""
    copy = tmp_path / "v.capture"
    shutil.copytree(DATA / "stale-prev-row.capture", copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    if drop == "versions":
        manifest.pop("versions", None)
    else:
        manifest["versions"].pop("vllm", None)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    return copy


@pytest.mark.parametrize("drop", ["vllm", "versions"])
def test_a_capture_without_its_vllm_version_says_it_is_unknown(tmp_path: Path,
                                                               drop: str) -> None:
    """T78a: the conclusion says the version is unknown and that the models' code may not be
    the engine's (it said nothing: the fact was left out), and ``inspect`` lists it."""
    capture = _without_version(tmp_path, drop)
    text = conclude(forensics.replay(capture)).paragraph()
    assert "vllm unknown;" in text, text
    assert ("The vLLM version of the capture is unknown (its manifest's versions.vllm), while "
            "upstream, patched replay the code of vLLM 0.33.0") in text, text
    assert "  vllm: unknown" in facts_lines(forensics.load(capture).summary())


def test_a_capture_of_the_models_version_says_nothing_of_it(tmp_path: Path) -> None:
    """T78a: a capture of vLLM 0.33.0 gets no version sentence (nothing to warn of)."""
    text = conclude(forensics.replay(DATA / "stale-prev-row.capture")).paragraph()
    assert "vllm 0.33.0;" in text and "vLLM version of the capture" not in text
