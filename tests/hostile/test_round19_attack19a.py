"""Round 19's attack19a (issue 38, "Hostile input, round 3"): what `repro`, `known`, `check` and
the pytest plugin said of captures the earlier rounds did not cover (T109a.. of
docs/threat-model.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_round2 import run_cli
from test_round18_attack18b import _cut_capture

DATA = Path(__file__).resolve().parents[2] / "data"
pytest_plugins = ["pytester"]

#: a vLLM log whose one crash is an illegal access in a GDN kernel: no step, no record
GDN_LOG = """\
INFO 12-01 10:00:00 [core.py:100] starting
ERROR 12-01 10:00:05 [core.py:200] EngineCore encountered a fatal error.
Traceback (most recent call last):
  File "/usr/lib/python3/site-packages/vllm/v1/engine/core.py", line 700, in run_engine_core
    engine_core.run_busy_loop()
  File "/usr/lib/python3/site-packages/vllm/model_executor/layers/fla/ops/fused_recurrent.py", \
line 10, in fused_recurrent_gated_delta_rule
    raise RuntimeError("CUDA error: an illegal memory access was encountered")
RuntimeError: CUDA error: an illegal memory access was encountered
"""


def _imported_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """The capture `forensics import` makes of :data:`GDN_LOG`: one crash event, no record."""
    log = tmp_path / "engine.log"
    log.write_text(GDN_LOG)
    out = tmp_path / "log.capture"
    code, _, err = run_cli(capsys, "import", log, "-o", out)
    assert code == 0, err
    return out


# ------------------------------------------------------------------ T109a: known, "at step None"


def test_known_says_no_step_of_an_event_that_has_none(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A signature matched on an event imported from a log (which has no step) said "event
    illegal_memory_access mentioning 'fused_recurrent' at step None", in `known` and in every
    conclusion that states known issues: a step that is not known reads as one named None."""
    capture = _imported_log(tmp_path, capsys)
    code, said, err = run_cli(capsys, "known", capture)
    assert code == 0, err
    flat = " ".join(said.split())
    assert "MATCH gdn-accepted-count-race" in flat, said
    assert "event illegal_memory_access mentioning 'fused_recurrent'" in flat, said
    assert "None" not in flat, said
    code, said, err = run_cli(capsys, "summary", capture)
    assert code == 0 and "None" not in said, said


# ------------------------------------------------------------------ T109b: repro, nothing judged


def test_repro_of_a_capture_of_no_records_says_it_holds_none(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`repro` of a capture imported from a log (no record) said "the installed vLLM's code
    leaves no index out of range in 'log.capture'": the code ran on nothing."""
    capture = _imported_log(tmp_path, capsys)
    code, _, err = run_cli(capsys, "repro", capture, "-o", tmp_path / "t.py")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "holds no record the installed vLLM's code could replay" in err, err
    assert "leaves no index out of range" not in err, err
    assert not (tmp_path / "t.py").exists() and not (tmp_path / "t.json").exists()


def test_repro_of_a_capture_cut_short_names_what_was_not_judged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`repro` of a capture whose last batch was cut short (its writer killed while it flushed),
    the one id past its rows in that batch, said "the installed vLLM's code leaves no index out
    of range in 'cut.capture'", where `known` says whether it shows a failure is not known: it
    says the records judged hold none, and names the end not read."""
    capture = _cut_capture(tmp_path)
    code, _, err = run_cli(capsys, "repro", capture, "-o", tmp_path / "t.py")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "in the records it judged (not judged: the end of segment " \
           "'embedding.r0.w0.0000.arrows'" in err, err


# ------------------------------------------------------------------ T109c: check's advice


def _accepted_with(tmp_path: Path, capsys: pytest.CaptureFixture[str], *variants: str) -> Path:
    """Incident B's capture, its expected.json accepted through ``variants`` only."""
    import shutil

    capture = tmp_path / "b.capture"
    shutil.copytree(DATA / "incident-b-vocab-sentinel.capture", capture)
    words = [word for name in variants for word in ("--variant", name)]
    code, _, err = run_cli(capsys, "check", capture, "--accept", *words)
    assert code == 0, err
    return capture


def test_check_advice_for_a_missing_variant_keeps_the_others(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A check through upstream and patched of a capture whose expected.json holds upstream
    only said "variant 'patched' is not in expected.json; regenerate it with forensics check
    --accept --variant patched": run, that wrote patched alone, and the next check said the
    same of upstream. The command it gives now accepts every variant checked, and the check
    passes once it ran."""
    import shlex

    capture = _accepted_with(tmp_path, capsys, "upstream")
    both = ["--variant", "upstream", "--variant", "patched"]
    code, said, _ = run_cli(capsys, "check", capture, *both)
    assert code == 1, said
    line = next(line for line in said.splitlines() if "is not in expected.json" in line)
    assert "regenerate it with forensics check --accept (in a test suite: --forensics-regen)" \
        in line, line
    advice = line.split("regenerate it with forensics check ", 1)[1].split(" (in a test", 1)[0]
    code, _, err = run_cli(capsys, "check", capture, *shlex.split(advice))
    assert code == 0, err
    code, said, _ = run_cli(capsys, "check", capture, *both)
    assert code == 0 and "matches expected.json" in said, said


def test_check_advice_names_every_variant_checked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Checked through upstream and the real vLLM code, an expected.json of upstream alone is
    regenerated through both (and the test suite's regeneration adds the real code's)."""
    capture = _accepted_with(tmp_path, capsys, "upstream")
    code, said, _ = run_cli(capsys, "check", capture, "--variant", "upstream",
                            "--variant", "vllm")
    assert code == 1, said
    assert ("variant 'vllm' is not in expected.json; regenerate it with forensics check "
            "--accept --variant upstream --variant vllm (in a test suite: --forensics-regen "
            "--forensics-variant vllm)") in said, said


# ---------------------------------------------------------- T109d: check, what was not read


NOT_READ = ("not checked: the end of segment 'embedding.r0.w0.0000.arrows', a batch or line "
            "cut short as its writer stopped while writing it; no variant judged what they held")


def test_check_of_a_capture_cut_short_says_its_end_was_not_checked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`check --accept` then `check` of a capture whose last batch was cut short (the one id
    past its rows in it) said "cut.capture: matches expected.json" alone, and the pytest
    plugin passed in silence, where `known` says whether it shows a failure is not known: the
    match now says it covers the records read and names the end not read, `--accept` warns
    of it, and `--json` holds it."""
    import json

    capture = _cut_capture(tmp_path)
    code, said, err = run_cli(capsys, "check", capture, "--accept")
    assert code == 0 and NOT_READ in " ".join(err.split()), err
    code, said, _ = run_cli(capsys, "check", capture)
    assert code == 0, said
    assert said.startswith("cut.capture: matches expected.json in the records read; "), said
    assert NOT_READ in said, said
    code, said, _ = run_cli(capsys, "check", capture, "--json")
    assert code == 0 and "the end of segment" in json.loads(said)["not_read"], said


def test_check_of_records_the_probe_never_wrote_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A capture whose probe counted 100 records it never wrote (its ``probe_stop``'s
    ``dropped``) matched its expected.json with no word of them."""
    import numpy as np

    from forensics.records import Record
    from forensics.store.writer import write_capture

    records = [Record("embedding", step, 0, {"input_ids": np.array([1, 2], np.int64),
                                             "num_embeddings": 10}) for step in range(3)]
    events = [{"kind": "probe_start", "process": "w0", "step": 0},
              {"kind": "probe_stop", "process": "w0", "step": 2, "dropped": 100}]
    capture = write_capture(tmp_path / "dropped.capture", records, events=events)
    code, _, err = run_cli(capsys, "check", capture, "--accept")
    assert code == 0, err
    code, said, _ = run_cli(capsys, "check", capture)
    assert code == 0, said
    assert ("matches expected.json in the records read; not checked: 100 record(s) recorded by "
            "the probe and never written") in said, said


def test_the_plugin_warns_of_a_capture_cut_short_that_matches(
        tmp_path: Path, pytester: pytest.Pytester) -> None:
    """The pytest plugin passed a capture cut short with no word: it passes, warning that its
    end was not checked."""
    capture = _cut_capture(tmp_path)
    run = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--forensics-captures",
                                       str(capture), "--forensics-regen")
    run.assert_outcomes(passed=1)
    run = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--forensics-captures",
                                       str(capture))
    run.assert_outcomes(passed=1, warnings=1)
    assert "matches expected.json in the records read; not checked: the end of segment" \
        in " ".join(run.stdout.str().split()), run.stdout.str()


# ---------------------------------------------------------- T109e: repro, the function named


def test_the_repro_names_the_function_it_ran_whatever_the_data_file_says(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A data file forged to name another vLLM function for a case (`function`, checked as
    words only) made the generated test say the out-of-range access, or the ids written, came
    from that function: its failure named a function it never ran. Each message names the
    function the file runs for the case's site."""
    import json
    import subprocess
    import sys

    script = tmp_path / "test_repro.py"
    code, _, err = run_cli(capsys, "repro", DATA / "incident-b-vocab-sentinel.capture", "-o",
                           script)
    assert code == 0, err
    data_file = script.with_suffix(".json")
    data = json.loads(data_file.read_text())
    forged = "vllm.v1.sample.rejection_sampler.rejection_sample"
    for case in data["cases"]:
        case["function"] = forged
    data_file.write_text(json.dumps(data))
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:forensics", "-p",
                          "no:cacheprovider", "-q", script.name], cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 1 and "2 failed" in run.stdout, run.stdout[-3000:]
    said = [line for line in run.stdout.splitlines()  # pytest shows the case's data too
            if not line.startswith("case = {")]
    assert not [line for line in said if forged in line], run.stdout[-3000:]
    assert ("out-of-range access in vllm.model_executor.layers.vocab_parallel_embedding."
            "VocabParallelEmbedding.forward: index out of range in self") in run.stdout
    assert ("vllm.v1.worker.gpu_input_batch.InputBatch.update_async_output_token_ids wrote "
            "output_token_ids[") in run.stdout


# ---------------------------------------------------------- T109f: shrink, the steps kept


def test_shrink_names_the_steps_kept_in_one_short_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`shrink` printed every step it kept as a Python list: a search stopped by --deadline
    keeps the whole capture, and of one of 20,000 steps the line ran to 129 KB (a million
    steps: 7 MB on one line). It names up to three steps, else their count and ends, as the
    conclusion does. (The search is stubbed: the words matter.)"""
    from forensics.share import shrinking

    def stopped(capture: object, out: Path, *args: object, **kwargs: object
                ) -> shrinking.ShrinkResult:
        evidence = shrinking.Evidence({}, {})
        return shrinking.ShrinkResult(Path(out), 80000, 80000, list(range(1, 20001)), 1, 12.0,
                                      evidence, stopped="the search stopped at the overall "
                                      "deadline of 12 s")

    monkeypatch.setattr(shrinking, "shrink", stopped)
    code, said, err = run_cli(capsys, "shrink", DATA / "clean.capture", "-o",
                              tmp_path / "s.capture")
    assert code == 0, err
    first = said.splitlines()[0]
    assert first.endswith("kept 80000 of 80000 records (100%), 20000 steps from 1 to 20000; "
                          "1 replays, 12.0 s"), first[-300:]
    monkeypatch.undo()
    code, said, err = run_cli(capsys, "shrink", DATA / "incident-b-vocab-sentinel.capture",
                              "-o", tmp_path / "small.capture")
    assert code == 0 and ": kept 4 of 56 records (7.14%), steps 13 and 14; " in said, said


# ---------------------------------------------------------- T109g: shrink, where the engine stopped


def _killed(tmp_path: Path) -> Path:
    """A capture of 200 embedding records (the id at step 5 past the rows) whose process
    started the probe and never stopped it: killed after step 200."""
    import numpy as np

    from forensics.records import Record
    from forensics.store.writer import new_capture

    records = [Record("embedding", step, 0, {
        "input_ids": np.array([50 if step == 5 else 1, 2], np.int64), "num_embeddings": 10})
        for step in range(1, 201)]
    path = tmp_path / "killed.capture"
    with new_capture(path, {"versions": {"vllm": "0.33.0"}}) as writer:
        writer.extend(records)
        writer.add_event({"kind": "probe_start", "process": "w0", "step": 1})
    return path


def test_a_shrunk_capture_says_where_its_engine_stopped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The shrink of a capture whose engine was killed after step 200 keeps step 5 alone; its
    summary said "The engine stopped without the probe's stop (killed or crashed) after step
    5: the capture holds what was recorded up to then", the step it kept read as the engine's
    last, and so did the redacted copy shared from it (shrink, then redact: the README's
    workflow), which dropped the shrink entry whole. Both say step 200."""
    stopped = "The engine stopped without the probe's stop (killed or crashed) after step "
    original = _killed(tmp_path)
    code, said, err = run_cli(capsys, "summary", original)
    assert code == 0 and stopped + "200:" in said, said
    small, shared = tmp_path / "small.capture", tmp_path / "shared.capture"
    code, said, err = run_cli(capsys, "shrink", original, "-o", small)
    assert code == 0 and "step 5;" in said, said
    code, said, err = run_cli(capsys, "redact", small, "-o", shared)
    assert code == 0, err
    for capture in (small, shared):
        code, said, err = run_cli(capsys, "summary", capture)
        assert code == 0 and stopped + "200:" in said and stopped + "5:" not in said, said


def test_summary_says_why_there_is_no_reproducer_of_what_was_not_judged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`summary` (Markdown) of a log's capture and of one cut short said "No standalone
    reproducer: no variant leaves an index out of range at a site `forensics repro` writes a
    test for", as `repro` did (T109b): of no record it says the capture holds none, of one cut
    short that the records judged hold none, naming the end not read."""
    capture = _imported_log(tmp_path, capsys)
    code, said, err = run_cli(capsys, "summary", capture)
    assert code == 0, err
    assert "No standalone reproducer: the capture holds no record to replay" in said, said
    assert "no variant leaves an index out of range" not in said, said
    code, said, err = run_cli(capsys, "summary", _cut_capture(tmp_path))
    assert code == 0, err
    assert ("No standalone reproducer: in the records judged, no variant leaves an index out "
            "of range") in said and "(not judged: the end of segment " in said, said


# ---------------------------------------------------------- T109h: summary --format text, not read


def test_summary_text_says_what_was_not_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`summary --format text` (one line per variant, for CI logs) of a capture whose last
    batch, holding its one id past the rows, was cut short said "upstream: no violation",
    "patched: no violation" and "known issues: none" alone, where its Markdown and `replay`
    say the end was not read (T102b): each variant's line says it, as it says the records of a
    site not known here; so do the records the probe never wrote."""
    code, said, err = run_cli(capsys, "summary", _cut_capture(tmp_path), "--format", "text")
    assert code == 0, err
    lines = said.splitlines()
    for line, variant in zip(lines, ("upstream", "patched"), strict=False):
        assert line.startswith(f"{variant}: no violation") and (
            "; not read: the end of segment 'embedding.r0.w0.0000.arrows'") in line, said
    import numpy as np

    from forensics.records import Record
    from forensics.store.writer import write_capture

    records = [Record("embedding", step, 0, {"input_ids": np.array([1, 2], np.int64),
                                             "num_embeddings": 10}) for step in range(3)]
    events = [{"kind": "probe_start", "process": "w0", "step": 0},
              {"kind": "probe_stop", "process": "w0", "step": 2, "dropped": 100}]
    capture = write_capture(tmp_path / "dropped.capture", records, events=events)
    code, said, err = run_cli(capsys, "summary", capture, "--format", "text")
    assert code == 0, err
    assert said.startswith("upstream: no violation; not read: 100 record(s) recorded by the "
                           "probe and never written"), said
