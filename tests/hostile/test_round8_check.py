"""Round 8 (the lead's): ``check`` refuses a variant it cannot build, replayed or not.

``check --variant vllm+missing.diff`` on a capture whose ``expected.json`` does not name that
variant replayed nothing for it and said "variant ... is not in expected.json; regenerate it
with ... vllm+missing.diff", advice that could only fail, and wrote ``expected.obtained.json``
into the capture; ``replay`` refuses the same name in one line.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from forensics.cli import main

ROOT = Path(__file__).resolve().parents[2]
INCIDENT = ROOT / "data" / "incident-b-vocab-sentinel.capture"


@pytest.mark.parametrize("variant", ["vllm+missing.diff", "no-such-variant"])
def test_check_refuses_a_variant_it_cannot_build_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], variant: str) -> None:
    capture = tmp_path / "c.capture"
    shutil.copytree(INCIDENT, capture)
    code = main(["check", str(capture), "--variant", "upstream", "--variant", variant])
    out = capsys.readouterr()
    lines = (out.out + out.err).strip().splitlines()
    assert code == 2, lines
    assert len(lines) == 1 and variant.removeprefix("vllm+") in lines[0], lines
    assert "regenerate" not in lines[0]
    assert not (capture / "expected.obtained.json").exists()


def test_check_of_a_variant_it_can_build_but_expected_lacks_still_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A diff that exists and applies, not in expected.json: the advice to regenerate stands."""
    capture = tmp_path / "c.capture"
    shutil.copytree(INCIDENT, capture)
    variant = f"vllm+{ROOT / 'data' / 'patches' / 'vocab-guard.diff'}"
    code = main(["check", str(capture), "--variant", "upstream", "--variant", variant])
    out = capsys.readouterr().out
    assert code == 1, out
    assert f"variant '{variant}' is not in expected.json; regenerate it" in out, out
