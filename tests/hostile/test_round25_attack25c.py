"""Round 25 of hostile input, attack 25c: the sentences outputs print, read against what the
capture holds (the draft title's guard claims, the next steps of a capture taken in guard mode,
redact's line of the fields it dropped)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.hostile.test_round2 import run_cli
from tests.hostile.test_round21_lead import says_a_foreign_field_is_dropped

# ------------------------------ T160a: a guard claim's row is the batch's row, no element


def _raised_at(capture: Path, *calls: tuple[int, list[int]]) -> None:
    """``capture``'s events: per call (step, the batch's cumulative token counts) the guard's
    ``guard_violation`` of input_ids[5] = 70000 as the probe writes it (``check_ids``)."""
    from forensics.probe.guard import bounds_error, check_ids

    events = []
    for step, cumulative in calls:
        ids = np.zeros(cumulative[-1], dtype=np.int64)
        ids[5] = 70000
        found = check_ids("embedding", "input_ids", ids, 32000, np.array(cumulative))
        assert found is not None
        events.append({"kind": "guard_violation", "process": "w0", "pid": 5, "rank": 0,
                       "step": step, "site": found.site, "row": found.row,
                       "tensor": found.tensor, "value": found.value, "bound": found.upper,
                       "message": str(bounds_error(found, step, 0, capture))})
    (capture / "events-w0.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))


def test_the_draft_title_names_a_guard_claim_s_row_as_the_batch_s_row(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The guard raised on input_ids[5] = 70000 at two steps, in the batch's rows 2 and 1 (its
    events' ``row``; the element is in the tensor's name): the draft was titled "input_ids[5][2]
    = 70000 at embedding (guard_violation), input_ids[5][1] = 70000 ...", an element of a
    two-dimensional tensor no event names (of ``out.draft_tokens_out``, row 0 read as its
    element 0). The row is named as the guard's message names it: "at embedding row 2"."""
    from test_round23_fix23a import _title

    capture = tmp_path / "c.capture"
    code, _, err = run_cli(capsys, "simulate", "clean", "-o", capture, "--steps", "8")
    assert code == 0, err
    _raised_at(capture, (3, [2, 4, 8]), (7, [3, 6, 9]))
    title = _title(capsys, capture)
    assert "[5][" not in title, title
    assert title.endswith(
        "its 2 guard events name values out of range: input_ids[5] = 70000 at embedding row 2 "
        "(guard_violation), input_ids[5] = 70000 at embedding row 1 (guard_violation)"), title


# ------------------------------ T160b: a capture taken in guard mode is not told to rerun in it


@pytest.mark.parametrize("mode", ["guard", "record"])
def test_the_next_steps_of_a_capture_taken_in_guard_mode_do_not_ask_for_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str) -> None:
    """A clean capture with a device's assert, whose manifest says the probe ran in guard mode
    (``probe.mode``, as the probe writes it) and whose events hold no guard_violation, was
    told "rerun with the probe in guard mode, which raises where an index is about to be used
    out of range": the run was in guard mode, and its guard raised nothing. The step says so;
    a capture taken in record mode is asked for guard mode as before."""
    capture = tmp_path / "c.capture"
    code, _, err = run_cli(capsys, "simulate", "clean", "-o", capture, "--steps", "8")
    assert code == 0, err
    manifest = json.loads((capture / "manifest.json").read_text())
    manifest["probe"] = {"mode": mode, "sites": ["embedding"], "ring": 4096,
                         "flush_every": 256, "handoff": "record"}
    (capture / "manifest.json").write_text(json.dumps(manifest))
    events = [{"kind": "probe_start", "process": "w0", "pid": 5, "rank": 0, "step": 0},
              {"kind": "cuda_assert", "process": "w0", "pid": 5, "rank": 0, "step": 8,
               "message": "indexSelectSmallIndex: Assertion `srcIndex < srcSelectDimSize` "
                          "failed."}]
    (capture / "events-w0.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    code, out, err = run_cli(capsys, "replay", capture)
    assert code == 0, err
    said = " ".join(out.split())
    asked = "rerun with the probe in guard mode, which raises" in said
    assert asked == (mode == "record"), said
    assert (("the capture's manifest says the probe already ran in guard mode (probe.mode), and "
             "its events hold no guard_violation (the guard's raise): rerunning in guard mode is "
             "what this run did.") in said) == (mode == "guard"), said


# ------------------------------ T160c: redact names the fields of ours it drops, keeps the mode


def test_redact_names_the_probe_s_own_fields_it_drops_and_keeps_its_mode(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The manifest and events the probe writes (its ``engine_id``, ``probe`` settings,
    ``process.tag``, ``model.speculative_config``, ``probe_start``'s ``started``) and an
    import's ``imported`` entry were dropped as ``*``, "fields of names forensics does not
    write": names it writes. Those are named; the probe's settings (its mode: whether the run
    was in guard mode) are kept; a foreign name is still ``*``, said as what it is."""
    capture = tmp_path / "c.capture"
    code, _, err = run_cli(capsys, "simulate", "clean", "-o", capture, "--steps", "4")
    assert code == 0, err
    manifest = json.loads((capture / "manifest.json").read_text())
    manifest.update({"engine_id": "e3b0c44298fc", "imported": {"sources": ["engine.log"]},
                     "probe": {"mode": "guard", "sites": ["embedding"], "ring": 4096,
                               "flush_every": 256, "handoff": "record"},
                     "process": {"rank": 0, "pid": 42, "host": "h", "tag": "h-42"}})
    manifest["model"].update({"speculative_config": {"method": "mtp", "model": "/m"},
                              "async_spec_decode": True})
    (capture / "manifest.json").write_text(json.dumps(manifest))
    start = {"kind": "probe_start", "process": "h-42", "pid": 42, "rank": 0, "step": 0,
             "started": 1.5, "first_write_step": 1, "mode": "guard", "kernels": False,
             "engine_cpus": [0, 1], "writer_cpus": [2]}
    (capture / "events-h-42.jsonl").write_text(json.dumps(start) + "\n")
    code, out, err = run_cli(capsys, "redact", capture, "-o", tmp_path / "a.capture")
    assert code == 0, err
    assert "*" not in out and "does not write" not in out, out
    for name in ("engine_id", "imported", "process.tag", "model.speculative_config.model",
                 "model.async_spec_decode", "events.started", "events.engine_cpus"):
        assert f" {name}," in out or f" {name} (" in out, (name, out)
    kept = json.loads((tmp_path / "a.capture" / "manifest.json").read_text())
    assert kept["probe"]["mode"] == "guard" and kept["probe"]["handoff"] == "record", kept
    assert kept["model"]["speculative_config"] == {"method": "mtp"}, kept
    says_a_foreign_field_is_dropped(capsys, capture, tmp_path / "b.capture", "creator, engine_id,")


# ------------------------------ T160d: the probe's speculative method is read where it writes it


def test_a_probe_s_speculative_method_and_model_are_capture_facts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The probe writes the model as ``model.model`` and the speculative method and draft
    tokens under ``model.speculative_config`` (forensics/probe/manifest.py), where no reader
    looked: a probe's capture of an MTP engine listed no speculative method among its facts
    (while its draft said its facts, "model, speculative method, ...", were listed), and
    ``known`` said "speculative not recorded" of it. They are read there where the fields the
    readers name are absent."""
    from forensics.known.evidence import facts_of

    capture = tmp_path / "c.capture"
    code, _, err = run_cli(capsys, "simulate", "clean", "-o", capture, "--steps", "4")
    assert code == 0, err
    manifest = json.loads((capture / "manifest.json").read_text())
    model = {key: manifest["model"][key] for key in ("vocab_size", "tensor_parallel_size")}
    manifest["model"] = {**model, "model": "org/model", "async_scheduling": True,
                         "speculative_config": {"method": "mtp", "num_speculative_tokens": 3}}
    (capture / "manifest.json").write_text(json.dumps(manifest))
    assert facts_of(manifest)["speculative"] == "mtp"
    assert facts_of(manifest)["num_speculative_tokens"] == 3
    code, out, err = run_cli(capsys, "replay", capture)
    assert code == 0, err
    assert "Capture: model org/model; vocabulary 32000; speculative method mtp; speculative " \
           "tokens 3; async scheduling on;" in " ".join(out.split()), out


# ------------------------------ T160e: a guard claim alone is no finding in the draft's title


def test_the_draft_title_of_a_guard_claim_alone_says_no_findings(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A clean capture of no crash whose one guard event (a guard_passed_on) claims a value
    out of range its records do not show, with no finding of any replay, was drafted "[Bug]:
    no crash, findings with no captured index value out of range, though ...": findings it
    has none of. Its title says "no crash"; a capture of no crash with a finding is titled
    "no crash, findings" as before (test_round22_attack22c)."""
    from test_round23_fix23a import _title

    capture = tmp_path / "c.capture"
    code, _, err = run_cli(capsys, "simulate", "clean", "-o", capture, "--steps", "6")
    assert code == 0, err
    passed = {"kind": "guard_passed_on", "process": "w0", "pid": 5, "rank": 0, "step": 3,
              "site": "async_output", "row": 1, "tensor": "out.output_token_ids",
              "value": 32000, "bound": 32000}
    stop = {"kind": "probe_stop", "process": "w0", "pid": 5, "rank": 0, "step": 6}
    (capture / "events-w0.jsonl").write_text(json.dumps(passed) + "\n" + json.dumps(stop) + "\n")
    code, out, _ = run_cli(capsys, "findings", capture, "-o", tmp_path / "f.csv")
    assert code == 0 and out.startswith("0 findings"), out
    assert _title(capsys, capture) == (
        "**Title**: [Bug]: no crash with no captured index value out of range, though its "
        "guard_passed_on event names out.output_token_ids = 32000 out of range at async_output")
