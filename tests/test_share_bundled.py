"""shrink and redact on every bundled capture (two ranks, imported events, larger
vocabularies): the same verdicts and first findings as the original."""

from __future__ import annotations

from pathlib import Path

import pytest

import forensics
from forensics.share.shrinking import NothingToKeepError

DATA = Path(__file__).resolve().parent.parent / "data"
CAPTURES = sorted(DATA.glob("*.capture"))


def _place(finding: dict | None) -> dict | None:
    """A first finding as the evidence compares it: a ``substituted`` id is an in-range token,
    which redaction maps to another by design (kind and place must hold)."""
    if finding is None or finding["kind"] != "substituted":
        return finding
    return {k: v for k, v in finding.items() if k != "value"}


def _same_evidence(a: Path, b: Path) -> None:
    ra, rb = forensics.replay(a), forensics.replay(b)
    assert ra.verdicts == rb.verdicts
    assert [_place(ra.first_finding(v)) for v in ra.variants] == [
        _place(rb.first_finding(v)) for v in rb.variants]


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.stem)
def test_shrink_then_redact_keep_the_evidence(capture: Path, tmp_path: Path) -> None:
    has_findings = not forensics.replay(capture).findings.empty
    small = tmp_path / "small.capture"
    if not has_findings:
        with pytest.raises(NothingToKeepError):
            forensics.shrink(capture, small)
        small = capture
    else:
        result = forensics.shrink(capture, small)
        assert result.records_kept < result.records_before
        _same_evidence(capture, small)
    shared = forensics.redact(small, tmp_path / "shared.capture")
    _same_evidence(capture, shared.path)
    assert forensics.load(shared.path).manifest["redaction"]["redacted"] is True
