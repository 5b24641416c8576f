"""Round 23 of hostile input, attack 23c: false sentences of ``known``, ``summary`` and the
commands that state a crash verdict's grounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile.test_round2 import check_said, run_cli

TESTS_DATA = Path(__file__).resolve().parents[1] / "data"


# ------------------------------ T142a: a replay that ran no record raises nothing of it


def test_a_replay_of_summary_records_alone_is_not_said_to_raise_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A log's probe lines import as summary records (a least and a greatest value), which no
    variant runs: the crash verdict's grounds said "the upstream replay raises nothing" of a
    replay that ran none of them. They say it ran none, and why."""
    capture = tmp_path / "s.capture"
    code, _, err = run_cli(capsys, "import", TESTS_DATA / "sm70_engine.log", "-o", capture)
    assert code == 0, err
    code, out, _ = run_cli(capsys, "summary", capture, "--format", "text")
    assert code == 0
    assert "raises nothing" not in out, out
    assert ("the upstream replay runs none of its 3 record(s) (summary records: each a least "
            "and a greatest value, judged by its bounds alone)") in out, out
    code, out, _ = run_cli(capsys, "known", capture, "--json")
    assert code == 0 and "raises nothing" not in out, out


# ------------------------------ T142b: the histogram draws no resolved or unjudged value as open


def test_the_histogram_draws_no_value_a_variant_resolves_or_cannot_judge_as_out_of_bounds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``plot --kind histogram --variant patched`` and the report's SVG histogram drew the
    embedding's 248320, which patched resolves at its origin (its verdict there ``ok``; the
    timeline draws it "resolved by patched"), and a log's summary value, which patched cannot
    judge (``unjudged``), as red bars "out of bounds (every element)". The bars out of bounds
    are those the variant leaves out of bounds; a note counts the others."""
    import xml.etree.ElementTree as ET

    import forensics
    from forensics.present.scene.histogram import histogram_data
    from forensics.present.svg import views

    incident = Path(__file__).resolve().parents[2] / "data" / "incident-b-vocab-sentinel.capture"
    result = forensics.replay(incident, ["upstream", "patched"])
    assert result.verdicts["patched"]["embedding"] == "ok"
    patched = histogram_data(result, "embedding", "patched")
    assert patched.outside is None or int(patched.outside.sum()) == 0
    assert "1 value(s) out of bounds not drawn: the variant resolves them" in \
        patched.hidden_note()
    upstream = histogram_data(result, "embedding", "upstream")
    assert upstream.outside is not None and int(upstream.outside.sum()) == 1
    assert "not drawn" not in upstream.hidden_note()
    root = ET.fromstring(views.figure("histogram", result, site="embedding",
                                      variant="patched").to_svg())
    assert not [e for e in root.iter() if "open" in (e.get("class") or "").split()]

    capture = tmp_path / "s.capture"
    code, _, err = run_cli(capsys, "import", TESTS_DATA / "sm70_engine.log", "-o", capture)
    assert code == 0, err
    summary = forensics.replay(capture, ["upstream", "patched"])
    assert summary.verdicts["patched"]["async_output"] == "unjudged"
    unjudged = histogram_data(summary, "async_output", "patched")
    assert unjudged.outside is None or int(unjudged.outside.sum()) == 0
    assert unjudged.hidden_note() == ("1 value(s) out of bounds not drawn: the variant cannot "
                                      "judge them")


# ------------------------------ T142c: the draft of a capture whose engine died says so


def test_the_draft_of_a_capture_whose_engine_died_says_it_died(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A probe that started and never stopped (its process killed or crashed) leaves an
    unexplained crash with no crash event: the draft of a new issue, titled "engine crash",
    said only "What happened: the capture holds no crash event". It says the engine stopped
    without the probe's stop, and after which step."""
    import json
    import shutil

    capture = tmp_path / "d.capture"
    shutil.copytree(Path(__file__).resolve().parents[2] / "data" / "clean.capture", capture)
    (capture / "expected.json").unlink()
    (capture / "events-w0.jsonl").write_text(json.dumps(
        {"kind": "probe_start", "process": "w0", "pid": 5, "rank": 0, "step": 1}) + "\n")
    code, out, _ = run_cli(capsys, "summary", capture)
    assert code == 0
    (happened,) = [line for line in out.splitlines() if line.startswith("**What happened**")]
    assert happened.endswith("The engine stopped without the probe's stop (killed or crashed) "
                             "after step 200: the capture holds what was recorded up to "
                             "then."), happened


# ------------------------------ T142d: simulate's own fields are names of ours


def test_redact_names_and_keeps_simulate_s_own_fields(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``redact`` of a capture ``simulate`` wrote said "dropped: creator, notes, simulation.*,
    simulation.faults.* (*: fields of names forensics does not write, not named here)": the
    fault names and ``injected`` are simulate's own. They are kept, as its ``clamps`` is."""
    import json

    source, out = tmp_path / "s.capture", tmp_path / "r.capture"
    code, _, err = run_cli(capsys, "simulate", "vocab-sentinel", "-o", source, "--steps", "40")
    assert code == 0, err
    code, text, err = run_cli(capsys, "redact", source, "-o", out)
    assert code == 0, err
    assert "*" not in text and "does not write" not in text, text
    simulation = json.loads((out / "manifest.json").read_text())["simulation"]
    assert simulation["injected"] == {"vocab_sentinel": 1}
    assert simulation["faults"]["vocab_sentinel"] == 0.05


# ------------------------------ T142e: a summary record's min above its max


def test_a_summary_record_whose_min_is_above_its_max_is_judged_on_both(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A summary record names two values, its ``min`` and its ``max``; one of ``min = 9`` and
    ``max = -1`` (against 100 embedding rows) had only its ``min`` held to the lower bound and
    its ``max`` to the upper: -1 was judged in range, and the capture "shows no failure to
    report". Both values are held to the whole range."""
    import torch

    dump = tmp_path / "inv.pt"
    torch.save([{"site": "embedding", "step": 15, "summary": True, "min": 9, "max": -1,
                 "num_embeddings": 100}], dump)
    capture = tmp_path / "inv.capture"
    code, _, err = run_cli(capsys, "import", dump, "-o", capture)
    assert code == 0, err
    code, out, _ = run_cli(capsys, "summary", capture, "--format", "text")
    assert code == 0
    assert out.startswith("upstream: violation at embedding; first embedding at step 15, rank "
                          "0: value -1 of `input_ids` is outside the embedding rows (100 rows)"), \
        out


# ------------------------------ T142f: a record a child's deadline cut is no exception raised


@pytest.mark.parametrize(("message", "said"), [
    ("timed out after 1 s", "the vllm replay of step 5 (post_update, rank 0) ended unjudged: "
                            "timed out after 1 s"),
    ("not judged: the overall deadline of 9 s passed",
     "the vllm replay of step 5 (post_update, rank 0) ended unjudged: not judged: the overall "
     "deadline of 9 s passed"),
    ("IndexError: index 7 is out of bounds", "the vllm replay raises IndexError at step 5 "
                                             "(post_update, rank 0)")])
def test_a_record_cut_by_a_deadline_is_not_said_to_raise(message: str, said: str) -> None:
    """The ``vllm`` variant's V2 kernel worker ends a record past ``FORENSICS_CHILD_TIMEOUT``
    (``error: timed out after N s``) and those an overall deadline leaves (``not judged:
    ...``): the crash verdict's grounds read the message's head as the exception raised, "the
    vllm replay raises timed out after 1 s at step 5", "raises not judged at step 5". They say
    the record ended unjudged, and why; an exception's name is said as before."""
    from types import SimpleNamespace

    import pandas as pd

    from forensics.known.answer import what_was_seen
    from forensics.known.evidence import Evidence

    outcomes = pd.DataFrame([{"record": 0, "variant": "vllm", "site": "post_update", "step": 5,
                              "rank": 0, "status": "error", "message": message}])
    evidence = Evidence(findings=pd.DataFrame(), baseline="vllm", events=[])
    seen = what_was_seen(evidence, SimpleNamespace(outcomes=outcomes, records=[None]))  # type: ignore[arg-type]
    assert seen == f"no crash event in the capture; {said}", seen


# ------------------------------ T142g: a summary record holding its site's values is refused


def test_a_summary_record_holding_its_site_s_values_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A dump's summary record judged by its ``min`` (0) and ``max`` (5) alone left the
    ``input_ids = [5, 200]`` it also held (100 embedding rows) unjudged: "upstream: no
    violation". Such a record is refused in one line naming the record, the field and the fix,
    nothing written."""
    import torch

    dump = tmp_path / "both.pt"
    torch.save([{"site": "embedding", "step": 15, "summary": True, "min": 0, "max": 5,
                 "num_embeddings": 100, "input_ids": torch.tensor([5, 200])}], dump)
    capture = tmp_path / "both.capture"
    code, _, err = run_cli(capsys, "import", dump, "-o", capture)
    assert code == 2 and not capture.exists()
    assert err.count("\n") == 1 and ("record 0 in '" in err and "summary record holds the "
                                     "field 'input_ids'" in err and "drop 'summary'" in err), err


# ------------------------------ T142h: summary records are no reads inside an allocation


def test_values_of_summary_records_are_not_said_to_be_reads_inside_an_allocation(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Replayed through ``patched`` then ``vllm`` (no baseline of the engine's code), a log's
    summary records leave the crash not judged: the lead said their values "lie where it
    cannot see (an access inside an allocation, which Triton's interpreter does not flag)",
    of values no variant read at all. It says they are summary records' values."""
    capture = tmp_path / "s.capture"
    code, _, err = run_cli(capsys, "import", TESTS_DATA / "sm70_engine.log", "-o", capture)
    assert code == 0, err
    code, out, _ = run_cli(capsys, "summary", capture, "--variant", "patched",
                           "--variant", "vllm")
    assert code == 0
    assert "an access inside an allocation" not in out, out
    assert ("3 value(s) out of range that the models find lie where it cannot see (the least "
            "and greatest values of summary records, which no variant but the baseline judges: "
            "nothing there is replayed)") in out, out


# ------------------------------ T142i: a dump's summary records are no log's


def test_a_dump_s_summary_records_are_not_called_a_log_s(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The conclusion said a site of a ``.pt`` dump's summary records held "summary records
    only (a log's min/max, no tensors)" and that "only the logged values" stood: no log was
    read. It names a log's or a dump's min/max, and the recorded values."""
    import torch

    dump = tmp_path / "s.pt"
    torch.save([{"site": "embedding", "step": 15, "summary": True, "min": 0, "max": 100,
                 "num_embeddings": 100}], dump)
    capture = tmp_path / "s.capture"
    code, _, err = run_cli(capsys, "import", dump, "-o", capture)
    assert code == 0, err
    check_said(capsys, ("replay", capture),
               "embedding holds summary records only (a log's or a dump's min/max, no tensors): "
               "nothing there can be replayed, so patched cannot be judged there (unjudged); "
               "only the recorded values against their bound (upstream) stand.",
               ("a log's min/max", "logged values"))


# ------------------------------ T142j: no known issue matched on a value the variant cannot judge


def test_a_known_issue_is_not_matched_on_a_value_the_variant_cannot_judge(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Replayed through ``patched`` then ``vllm``, a signature is looked for in ``vllm``'s
    findings: a log's summary values, which ``vllm`` cannot judge (its verdict ``unjudged``),
    matched ``vocab-size-sentinel-counted`` as "vllm finds async_output step 0: value 248320".
    The entry is not judged, saying ``vllm`` cannot judge the value."""
    capture = tmp_path / "s.capture"
    code, _, err = run_cli(capsys, "import", TESTS_DATA / "sm70_engine.log", "-o", capture)
    assert code == 0, err
    code, out, _ = run_cli(capsys, "known", capture, "--variant", "patched", "--variant", "vllm")
    assert code == 0
    text = " ".join(out.split())
    assert "MATCH vocab-size-sentinel-counted" not in text and "vllm finds" not in text, text
    assert ("? vocab-size-sentinel-counted: not judged: vllm cannot judge async_output step 0: "
            "value 248320 used at out.output_token_ids (vocab_size)") in text, text
