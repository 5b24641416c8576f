"""`forensics replay`: the JSON object of DESIGN.md (schema test), the table, --fail-on."""

from __future__ import annotations

import json

import numpy as np
import pytest
from incident_records import VOCAB, clean_step

from forensics.cli import main
from forensics.judge.findings import COLUMNS
from tests.conftest import DATA

VERDICTS = {"violation", "error", "suspect", "ok"}
SITES = {"batch_change", "prepare_input_ids", "async_output", "post_update", "combine_tokens",
         "embedding"}


def _capture(make_capture, bad: bool):
    records = clean_step(0, ["a", "b"]) + clean_step(1, ["a", "b"])
    if bad:
        records[-1].fields["input_ids"] = np.array([1] * 9 + [VOCAB], np.int64)
    return make_capture("bad" if bad else "good", records)


def _check_schema(data: dict) -> None:
    assert isinstance(data["capture"], str) and isinstance(data["records"], int)
    assert isinstance(data["variants"], list) and all(isinstance(v, str)
                                                      for v in data["variants"])
    assert set(data["verdicts"]) == set(data["variants"])
    for sites in data["verdicts"].values():
        assert set(sites) <= SITES and set(sites.values()) <= VERDICTS
    assert set(data["outcomes"]) == set(data["variants"])
    for counts in data["outcomes"].values():
        assert set(counts) == {"ok", "index_error", "error"}
        assert all(isinstance(c, int) for c in counts.values())
    for finding in data["findings"]:
        assert list(finding) == list(COLUMNS)
        assert finding["kind"] in ("out_of_bounds", "misattributed", "unwritten_input")
        for key in ("step", "rank", "record"):
            assert isinstance(finding[key], int)
        for key in ("row", "element", "value", "lower", "upper"):
            assert finding[key] is None or isinstance(finding[key], int)
        assert finding["resolved"] in (None, True, False)


@pytest.mark.parametrize("bad", [False, True])
def test_json_output_follows_the_schema(make_capture, capsys, bad: bool) -> None:
    path = _capture(make_capture, bad)
    assert main(["replay", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    _check_schema(data)
    assert data["records"] == 8 and data["variants"] == ["upstream", "patched"]
    assert bool(data["findings"]) == bad
    assert data["verdicts"]["upstream"]["embedding"] == ("violation" if bad else "ok")


def test_variants_are_chosen_and_fail_on_adds_its_variant(make_capture, capsys) -> None:
    path = _capture(make_capture, True)
    assert main(["replay", str(path), "--variant", "patched", "--json",
                 "--fail-on", "upstream"]) == 1
    assert json.loads(capsys.readouterr().out)["variants"] == ["patched", "upstream"]
    assert main(["replay", str(path), "--fail-on", "patched"]) == 1  # no origin: unresolved


def test_table_names_sites_variants_and_the_first_finding(make_capture, capsys) -> None:
    assert main(["replay", str(_capture(make_capture, True))]) == 0
    out = capsys.readouterr().out
    assert "embedding" in out and "violation" in out and "upstream" in out
    assert "first violation: embedding at step 1, rank 0" in out
    assert "conclusion:" in out and "upstream leaves embedding in violation" in out


def test_vllm_import_noise_stays_out_unless_verbose() -> None:
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("vllm")
    root = Path(__file__).resolve().parents[1]
    command = [str(Path(sys.executable).parent / "forensics"), "replay",
               "data/incident-b-vocab-sentinel.capture", "--variant", "vllm"]
    env = {k: v for k, v in __import__("os").environ.items()
           if k not in ("TORCH_LOGS", "VLLM_LOGGING_LEVEL", "PYTHONWARNINGS")}
    quiet = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True,
                           timeout=600, check=True)
    assert quiet.stderr == "" and "vllm" in quiet.stdout
    loud = subprocess.run([*command, "-v"], cwd=root, env=env, capture_output=True, text=True,
                          timeout=600, check=True)
    assert "torch" in loud.stderr  # the same run shows torch's import warnings with -v


def test_json_first_finding_says_resolved_with_its_bound_and_origin(capsys) -> None:
    """Issue 16 point 1: incident B's patched finding (embedding, step 14) is shown resolved,
    with its bound and the site its value came from; upstream's is not resolved. Issue 42
    point 3: ``first_finding`` is the conclusion's first violation, so patched's is null (the
    text says "no unresolved out-of-bounds finding") and its resolved finding is in
    ``findings``."""
    assert main(["replay", str(DATA / "incident-b-vocab-sentinel.capture"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    first = data["first_finding"]
    assert first["patched"] is None
    patched = [f for f in data["findings"] if f["variant"] == "patched"
               and f["kind"] == "out_of_bounds"]
    assert [(f["site"], f["step"]) for f in patched] == [("embedding", 14)]
    assert patched[0]["resolved"] is True
    assert patched[0]["origin"] == "async_output"
    assert (patched[0]["lower"], patched[0]["upper"]) == (0, 248320)
    assert first["upstream"]["resolved"] is not True
    assert first["upstream"]["req_id"] == "req-1"


def test_text_says_the_patched_finding_is_resolved(capsys) -> None:
    """Issue 16 point 1: incident B's patched replay has one finding, resolved, and no
    unresolved violation; the text says so instead of only 'index_error 1'."""
    assert main(["replay", str(DATA / "incident-b-vocab-sentinel.capture")]) == 0
    lines = capsys.readouterr().out.splitlines()
    patched = next(line for line in lines if line.startswith("patched: "))
    assert "1 findings (1 resolved at their origin); no unresolved out-of-bounds finding" in patched
