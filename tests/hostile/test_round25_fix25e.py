"""Round 25 of hostile input, fix 25e: the verdicts of a padded embedding's wrong tokens, and the
conclusions of an engine that died without a crash event."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.hostile.test_round2 import run_cli

DATA = Path(__file__).resolve().parents[2] / "data"

# ------------------------------ T165a: a wrong token whose origin the patch resolves


def _padded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A vocab-sentinel capture whose embedding (and manifest) has 32064 rows: the sentinel
    32000 reaches the embedding in range, a wrong token fed (``substituted``), no bounds
    finding there."""
    import forensics
    from forensics.records import Record
    from forensics.store.writer import write_capture

    plain = tmp_path / "vs.capture"
    code, _, err = run_cli(capsys, "simulate", "vocab-sentinel", "-o", plain, "--steps", "80")
    assert code == 0, err
    capture = forensics.load(plain)
    records = [Record(r.site, r.step, r.rank, {**r.fields, **(
        {"num_embeddings": 32064} if r.site == "embedding" else {})})
        for r in capture.records()]
    manifest = dict(capture.manifest)
    manifest["model"] = dict(manifest["model"], num_embeddings=32064)
    padded = tmp_path / "pad.capture"
    write_capture(padded, records, manifest=manifest)
    return padded


def test_a_wrong_token_whose_origin_the_patch_resolves_is_resolved(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Of 32064 embedding rows, the sentinel 32000 that upstream's async_output writes reaches
    the embedding as a wrong token (``substituted``), no bounds finding: replay said "patched
    leaves embedding in violation and resolves 3 of 3 upstream out-of-bounds findings", the
    wrong tokens held against patched with no origin, though patched no longer writes the
    value at async_output. Each wrong token names its origin (async_output), resolved there
    by patched, not by upstream; patched leaves no site in violation, in every output."""
    import forensics

    capture = _padded(tmp_path, capsys)
    result = forensics.replay(capture, ["upstream", "patched"])
    tokens = result.findings[result.findings["kind"] == "substituted"]
    assert len(tokens) == 6
    assert set(tokens["origin"]) == {"async_output"}
    assert list(tokens.groupby("variant")["resolved"].agg(lambda r: set(r)).items()) == [
        ("patched", {True}), ("upstream", {False})]
    assert result.verdicts["patched"]["embedding"] == "ok"
    assert result.verdicts["upstream"]["embedding"] == "violation"
    code, out, err = run_cli(capsys, "replay", capture)
    assert code == 0, err
    said = " ".join(out.split())
    assert "patched leaves no site in violation and resolves 3 of 3" in said, said
    assert "patched: ok 320, index_error 0, error 0; 3 findings (3 resolved" in said, said
    code, out, err = run_cli(capsys, "summary", capture)
    assert code == 0, err
    assert "patched leaves no site in violation" in out
    assert "| embedding | violation | ok |" in out
    code, _, err = run_cli(capsys, "findings", capture, "-o", tmp_path / "f.jsonl")
    assert code == 0, err
    rows = [json.loads(line) for line in (tmp_path / "f.jsonl").read_text().splitlines()]
    assert [(row["variant"], row["origin"], row["resolved"]) for row in rows
            if row["kind"] == "substituted"] == [("upstream", "async_output", False),
                                                  ("patched", "async_output", True)] * 3


def test_a_wrong_token_of_no_origin_still_leaves_its_site_in_violation() -> None:
    """A wrong token whose value no origin record wrote out of range (none to resolve) is a
    fact of the capture whatever replays it: every variant's verdict holds it a violation."""
    import pandas as pd

    from forensics.judge.findings import _verdicts, with_continuity

    token = {"site": "embedding", "step": 3, "rank": 0, "kind": "substituted", "value": 7,
             "req_id": "r", "effect": "verified"}
    for resolved, verdict in ((None, "violation"), (False, "violation"), (True, "ok")):
        table = with_continuity(
            pd.DataFrame(), [token], ["upstream", "patched"], pd.DataFrame().to_numpy(),
            lambda _v, t, r=resolved: {**t, "origin": "async_output", "resolved": r})
        got = _verdicts(["embedding"], {"upstream": set(), "patched": set()}, table)
        assert got["patched"]["embedding"] == verdict, resolved


# ------------------------------ T165b: an engine that died with no crash event is not "a crash"


def _died(tmp_path: Path) -> Path:
    """The bundled clean capture whose one event is a ``probe_start``: a probe that never
    stopped (its process killed or crashed), no crash event."""
    capture = tmp_path / "d.capture"
    shutil.copytree(DATA / "clean.capture", capture)
    (capture / "expected.json").unlink()
    (capture / "events-w0.jsonl").write_text(json.dumps(
        {"kind": "probe_start", "process": "w0", "pid": 5, "rank": 0, "step": 1}) + "\n")
    return capture


DIED = ("Not explained: the engine died without the probe's stop (killed or crashed: the "
        "capture does not say which), yet no variant finds a captured value out of range, so "
        "the captured values do not explain its death")


@pytest.mark.parametrize("command", ["replay", "known", "summary"])
def test_an_engine_that_died_with_no_crash_event_is_said_to_have_died(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    """A clean capture of a probe that started and never stopped, no crash event, was
    concluded "Not explained: the capture holds a crash, yet ... do not explain the crash",
    the draft titled "engine crash": a process killed is no crash. Every conclusion says the
    engine died (killed or crashed: the capture does not say which), none calls it a crash."""
    capture = _died(tmp_path)
    code, out, err = run_cli(capsys, command, capture)
    assert code == 0, err
    said = " ".join(out.split())
    assert DIED in said, said
    assert "holds a crash" not in said and "the crash " not in said, said
    assert "no failure" not in said and "engine crash" not in said, said
    if command == "summary":
        assert "**Title**: [Bug]: engine died (killed or crashed) with every captured index " \
               "value in range" in out, out


def test_triage_says_an_engine_that_died_with_no_crash_event_died(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """triage titled such a capture's group "unexplained crash"; its conclusion column stays
    "unexplained" (no crash event explained), its group "unexplained death (killed or
    crashed)"; a capture holding a crash event is an "unexplained crash" as before."""
    capture = _died(tmp_path)
    code, out, err = run_cli(capsys, "triage", capture, "--format", "json")
    assert code == 0, err
    got = json.loads(out)
    assert [row["conclusion"] for row in got["rows"]] == ["unexplained"]
    assert got["groups"][0]["title"].endswith(": unexplained death (killed or crashed)")
    assert "crash" not in got["groups"][0]["title"].replace("(killed or crashed)", "")
    (capture / "events-w0.jsonl").write_text(json.dumps(
        {"kind": "engine_exception", "process": "w0", "pid": 5, "rank": 0, "step": 3,
         "message": "boom"}) + "\n")
    code, out, err = run_cli(capsys, "triage", capture, "--format", "json")
    assert code == 0, err
    assert json.loads(out)["groups"][0]["title"].endswith(": unexplained crash")


def test_a_probe_start_s_step_is_no_crash_step(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The next step "The crash step lacks a record" took every event's step for a crash's:
    of an engine that died, its ``probe_start`` at step 3, where the embedding's record is
    missing, it said "The crash step lacks a record (step 3 rank 0 has no embedding record)".
    Only crash events' steps are crash steps."""
    import forensics
    from forensics.store.writer import write_capture

    clean = forensics.load(DATA / "clean.capture")
    capture = tmp_path / "gap.capture"
    write_capture(capture, [r for r in clean.records()
                            if not (r.site == "embedding" and r.step == 3)],
                  manifest=dict(clean.manifest))
    (capture / "events-w0.jsonl").write_text(json.dumps(
        {"kind": "probe_start", "process": "w0", "pid": 5, "rank": 0, "step": 3}) + "\n")
    code, out, err = run_cli(capsys, "replay", capture)
    assert code == 0, err
    said = " ".join(out.split())
    assert DIED in said, said
    assert "crash step" not in said, said
