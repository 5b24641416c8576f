"""Round 19's attack19c (issue 38): what `findings`, `triage`, `summary` and the API say of
hostile or odd-but-legal captures (T112a-)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_round2 import run_cli

from forensics.records import Record
from forensics.store.writer import write_capture

INCIDENT = Path(__file__).resolve().parents[2] / "data" / "incident-b-vocab-sentinel.capture"


# ------------------------------ T112a: findings --request of findings whose records name no request


def _unnamed(tmp_path: Path) -> Path:
    """Incident B with its embedding records' ``req_ids`` (optional) left out: the embedding's
    findings name no request, the async_output's names ``req-1``."""
    import forensics

    records = [Record(r.site, r.step, r.rank,
                      {k: v for k, v in r.fields.items()
                       if not (r.site == "embedding" and k == "req_ids")})
               for r in forensics.load(INCIDENT).records()]
    manifest = json.loads((INCIDENT / "manifest.json").read_text())
    return write_capture(tmp_path / "unnamed.capture", records, manifest)


@pytest.mark.parametrize("site", [[], ["--site", "embedding"]])
def test_findings_of_a_request_says_the_findings_that_name_none(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], site: list[str]) -> None:
    """``findings --request req-1`` of a capture whose embedding records hold no request ids
    left the embedding's 3 findings out in silence ("no findings" with ``--site embedding``),
    read as the request's rows judged clean. A line now says how many findings name no
    request, so --request could not select them."""
    capture = _unnamed(tmp_path)
    code, out, err = run_cli(capsys, "findings", capture, "--request", "req-1", *site)
    assert code == 0, err
    assert "not selected: 3 finding(s) name no request (their records hold no request ids), "\
        "so --request 'req-1' cannot say whether they are its" in out, out
    if site:
        assert out.startswith("no findings\n"), out


def test_findings_of_a_request_says_nothing_more_where_every_finding_names_one(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Every finding of incident B names its request: no extra line."""
    code, out, err = run_cli(capsys, "findings", INCIDENT, "--request", "req-1")
    assert code == 0, err
    assert "not selected" not in out and "req-1" in out, out
