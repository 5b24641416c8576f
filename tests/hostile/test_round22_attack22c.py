"""Round 22 of hostile input, attack 22c: false sentences of ``known``, ``summary``, ``check``,
``triage``'s facts and ``redact``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.hostile.test_round2 import run_cli

DATA = Path(__file__).resolve().parents[2] / "data"


def _passed_on(tmp_path: Path) -> Path:
    """Incident B's records, as a guard-mode run whose engine went on: a ``guard_passed_on``
    event at step 12 (the sentinel only written, warned of) and the probe's stop at step 14,
    no crash event."""
    capture = tmp_path / "g.capture"
    shutil.copytree(DATA / "incident-b-vocab-sentinel.capture", capture)
    (capture / "expected.json").unlink()
    events = [{"kind": "probe_start", "process": "w0", "pid": 5, "rank": 0, "step": 0},
              {"kind": "guard_passed_on", "process": "w0", "rank": 0, "step": 12,
               "site": "async_output", "row": 1, "tensor": "out.output_token_ids",
               "value": 248320, "bound": 248320,
               "message": "forensics guard: site 'async_output' step 12 rank 0 row 1 wrote "
                          "out.output_token_ids value 248320"},
              {"kind": "probe_stop", "process": "w0", "pid": 5, "rank": 0, "step": 14}]
    (capture / "events-w0.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return capture


# ------------------------------ T134a: a value a guard passed on is no crash


def test_a_guard_passed_on_event_is_no_crash(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Guard mode warns of a value a call only wrote (``guard_passed_on``) and the engine goes
    on: ``known`` said "crash verdict unexplained (1 crash event(s) in the capture, the first
    guard_passed_on at step 12 ...)", ``summary`` "Not explained: the capture holds a crash"
    and "1 crash event(s)", ``check --accept`` wrote "unexplained" and triage's row
    ``crashed``, of an engine whose probe stopped. No crash is said of it."""
    capture = _passed_on(tmp_path)
    code, out, err = run_cli(capsys, "known", capture)
    text = " ".join(out.split())
    assert code in (0, 1), err
    assert "crash verdict no crash (no crash event in the capture" in text, text
    assert "vocab-size-sentinel-counted: matches" in text, text  # the finding still stands
    code, out, err = run_cli(capsys, "summary", capture)
    assert code in (0, 1), err
    assert "holds a crash" not in out and "1 crash event(s)" not in out, out
    assert "0 crash event(s)" in out, out
    code, out, err = run_cli(capsys, "check", capture, "--accept")
    assert code == 0, err
    assert json.loads((capture / "expected.json").read_text())["crash_verdict"] == "no crash"
    import forensics
    from forensics.fleet.facts import capture_facts

    facts = capture_facts(forensics.load(capture))
    assert facts["crashed"] is False and "guard_passed_on" in facts["guard_events"], facts


def test_a_guard_violation_is_still_a_crash_and_redact_keeps_the_passed_on_event(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The guard that raised (``guard_violation`` at step 14, the embedding's index) stopped
    the engine: a crash the values explain, as before; ``redact`` keeps the kind of a
    ``guard_passed_on`` event (a word of ours), as it kept it when it was a crash kind."""
    capture = _passed_on(tmp_path)
    events = capture / "events-w0.jsonl"
    lines = events.read_text().splitlines()
    raised = {"kind": "guard_violation", "process": "w0", "rank": 0, "step": 14,
              "site": "embedding", "row": 0, "tensor": "input_ids", "value": 248320,
              "bound": 248320, "message": "IndexBoundsError"}
    events.write_text("\n".join([*lines[:2], json.dumps(raised), lines[2]]) + "\n")
    code, out, err = run_cli(capsys, "known", capture)
    assert code in (0, 1), err
    assert "crash verdict explained (1 crash event(s) in the capture, the first " \
        "guard_violation at step 14" in " ".join(out.split()), out
    shared = tmp_path / "s.capture"
    code, out, err = run_cli(capsys, "redact", capture, "-o", shared)
    assert code == 0, err
    kinds = [json.loads(line)["kind"] for line in
             (shared / "events-w0.jsonl").read_text().splitlines()]
    assert "guard_passed_on" in kinds and "guard_violation" in kinds, kinds


# ------------------------------ T134b: the draft issue's title of a capture of no crash


def _fed_another_id(tmp_path: Path) -> Path:
    """The bundled clean capture (no crash event, every value in range) with the first id the
    embedding received at step 5 changed to another id in range: the model read an id that
    ``prepare_input_ids`` did not write (an ``unwritten_input`` finding), and nothing crashed."""
    import dataclasses

    import numpy as np

    import forensics
    from forensics.store.writer import write_capture

    source = forensics.load(DATA / "clean.capture")
    records = []
    for record in source.records():
        fields = dict(record.fields)
        if record.site == "embedding" and record.step == 5:
            ids = np.array(fields["input_ids"]).copy()
            ids[0] = (int(ids[0]) + 7) % 1000 + 1
            fields["input_ids"] = ids
        records.append(dataclasses.replace(record, fields=fields))
    capture = tmp_path / "fed.capture"
    write_capture(capture, records, manifest=source.manifest, events=source.events)
    return capture


def test_the_draft_of_a_capture_of_no_crash_is_not_titled_engine_crash(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A capture of no crash whose only finding is an id the model read that no recorded site
    wrote: ``summary`` drafts a new issue (no signature matches) and titled it "[Bug]: engine
    crash with every captured index value in range" above "What happened: the capture holds
    no crash event". The title says no crash; a crashed capture's title is as before."""
    code, out, err = run_cli(capsys, "summary", _fed_another_id(tmp_path))
    assert code in (0, 1), err
    assert "the embedding received input_ids[0]" in out, out  # the one finding
    assert "engine crash" not in out, out
    assert ("**Title**: [Bug]: no crash, findings with every captured index value in range"
            in out), out


# ------------------------------ T134c: check names the variants it replayed


def test_check_does_not_say_it_replayed_a_variant_expected_json_lacks(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``check --variant vllm --variant patched`` of incident B, whose expected.json holds
    upstream and patched: vllm is not in the file, so it is not replayed (a difference says
    so). The check said "(replayed: vllm, patched)" and that the crash verdict was not judged
    because "the values out of range the models find lie where its variants of the engine's
    code cannot see"; with ``--variant vllm`` alone "(replayed: vllm)" of no replay. It names
    what it replayed (patched; none) and why the crash verdict is unjudged (no variant of the
    engine's code was replayed)."""
    capture = tmp_path / "b.capture"
    shutil.copytree(DATA / "incident-b-vocab-sentinel.capture", capture)
    code, out, err = run_cli(capsys, "check", capture, "--variant", "vllm", "--variant",
                             "patched")
    assert code == 1, err
    assert "variant 'vllm' is not in expected.json" in out, out
    assert "in expected.json (replayed: patched);" in out, out
    assert ("its crash verdict 'explained', which this replay does not judge (it replayed no "
            "variant of the engine's code, upstream or vllm)") in out, out
    code, out, err = run_cli(capsys, "check", capture, "--variant", "vllm")
    assert code == 1, err
    assert "(replayed: none)" in out and "replayed: vllm" not in out, out
    code, out, err = run_cli(capsys, "check", capture, "--variant", "patched")
    assert code == 0 and "(replayed: patched)" in out, out  # as before


# ------------------------------ T134d: import_sources of one source given alone

LOG = ("Indexing.cu:1515: indexSelectSmallIndex: block: [0,0,0], thread: [0,0,0] Assertion "
       "`srcIndex < srcSelectDimSize` failed.\n")


@pytest.mark.parametrize("as_path", [False, True])
def test_import_sources_takes_one_source_given_alone(tmp_path: Path, as_path: bool) -> None:
    """``forensics.import_sources("engine.log", out)``: a string was read as its characters
    ("'/' is the same file as '/' (named twice, or a link to it)") and a ``Path`` was a
    ``TypeError``; one source given alone is that one file, as in a list."""
    import forensics

    log = tmp_path / "engine.log"
    log.write_text(LOG)
    alone = forensics.import_sources(log if as_path else str(log), tmp_path / "a.capture")
    listed = forensics.import_sources([log], tmp_path / "b.capture")
    kinds = [[e["kind"] for e in forensics.load(p).summary()["events"]]
             for p in (alone, listed)]
    assert kinds[0] == kinds[1] and "cuda_assert" in kinds[0], kinds


def test_a_guard_passed_on_event_is_a_failure_to_report(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The clean capture with a guard's ``guard_passed_on`` event (async_output wrote 32000,
    outside [0, 32000)) that its records do not show: no crash, and not "the capture shows no
    failure to report" either (the probe's guard found a value out of range); a reason to
    file a new issue."""
    events = [json.loads(line) for line in
              (_passed_on(tmp_path) / "events-w0.jsonl").read_text().splitlines()]
    capture = tmp_path / "clean.capture"
    shutil.copytree(DATA / "clean.capture", capture)
    (capture / "expected.json").unlink(missing_ok=True)
    events[1].update(value=32000, bound=32000, message="async_output wrote 32000")
    (capture / "events-w0.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    code, out, err = run_cli(capsys, "known", capture)
    text = " ".join(out.split())
    assert code in (0, 1), err
    assert "crash verdict no crash" in text, text
    assert "shows no failure to report" not in text, text
    assert "No known signature matches: a reason to file a new issue" in text, text


# ------------------------------ T134e: an MTP method of the model's own name is MTP

DUMP = DATA.parent / "tests" / "data" / "vllm_dump_all_placeholder.log"


@pytest.mark.parametrize(("method", "matches"), [("deepseek_mtp", True), ("qwen3_next_mtp", True),
                                                 ("ngram", False)])
def test_an_mtp_method_of_its_models_name_is_mtp(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], method: str, matches: bool) -> None:
    """A crash dump of an MTP engine whose config line names the method ``deepseek_mtp`` (an
    MTP method vLLM reads as ``mtp``; older vLLMs print the model's own name): ``known`` said
    "all-placeholder-drafts-race: does not match: speculative is deepseek_mtp, not mtp" of it,
    where the same dump reading ``mtp`` matches. It matches; ``ngram`` still does not."""
    log = tmp_path / "engine.log"
    log.write_text(DUMP.read_text().replace("SpeculativeConfig(method='mtp'",
                                            f"SpeculativeConfig(method='{method}'"))
    capture = tmp_path / "d.capture"
    code, _, err = run_cli(capsys, "import", log, "-o", capture)
    assert code == 0, err
    code, out, err = run_cli(capsys, "known", capture)
    text = " ".join(out.split())
    assert code in (0, 1), err
    said = "all-placeholder-drafts-race: matches" if matches else \
        "all-placeholder-drafts-race: does not match: speculative is ngram, not mtp"
    assert said in text, text


# ------------------------------ T134f: why a capture holds no record, by its origin

#: the two reasons, each true of one origin only
IMPORTED = "it was imported from logs or crash dumps alone"
PROBED = "the probe saw no call, or its segments were removed"


def test_why_a_capture_holds_no_record_is_said_of_its_origin(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An imported crash dump (no record) was said to hold none because "the probe saw no
    call, or its segments were removed" (``summary``, ``known``'s unexplained crash), and a
    probe's capture whose segments are gone matched a signature for "(a log or crash dump
    alone)". Each says the reason its manifest tells: an ``imported`` entry, or the probe."""
    capture = tmp_path / "d.capture"
    code, _, err = run_cli(capsys, "import", DUMP, "-o", capture)
    assert code == 0, err
    for command in ("known", "summary"):
        code, out, err = run_cli(capsys, command, capture)
        text = " ".join(out.split())
        assert code in (0, 1), err
        assert IMPORTED in text and "the probe saw no call" not in text, text
    probed = tmp_path / "p.capture"
    probed.mkdir()
    for name in ("manifest.json", "events-w0.jsonl"):
        shutil.copy(DATA / "incident-b-vocab-sentinel.capture" / name, probed / name)
    for command in ("known", "summary"):
        code, out, err = run_cli(capsys, command, probed)
        text = " ".join(out.split())
        assert code in (0, 1), err
        assert PROBED in text and "dumps alone" not in text and "dump alone" not in text, text
