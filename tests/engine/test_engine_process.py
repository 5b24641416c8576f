"""The engine process killed mid-generation, an engine refused for a bad setting, and an
engine whose worker holds a model runner the probe does not know."""

from __future__ import annotations

from engine_runs import Run


def test_a_sigkilled_worker_leaves_every_flushed_record_readable(killed: Run) -> None:
    import forensics

    run = killed
    assert run.extra["killed_pid"] is not None, run.log[-3000:]
    before = run.extra["records_before_kill"]
    assert before >= 48
    capture = forensics.load(run.capture)
    records = list(capture)
    assert len(records) >= before
    assert capture.summary()["sites"].keys() == {"batch_change", "prepare_input_ids",
                                                 "async_output", "embedding"}
    for site in ("prepare_input_ids", "embedding"):
        steps = sorted(r.step for r in records if r.site == site)
        assert steps == list(range(steps[0], steps[-1] + 1)), site  # no hole
    assert run.error is not None  # the engine died with its worker


def test_a_bad_setting_stops_the_engine_with_one_line(bad_setting: Run) -> None:
    run = bad_setting
    assert run.error is not None and run.error["type"] == "ConfigurationError"
    assert run.error["message"] == (
        "FORENSICS_MODE='loud' is not a mode; expected one of ['record', 'guard'], or unset it "
        "for 'record'")
    assert "EngineCore" not in run.log and run.capture is None


def test_an_unknown_runner_gives_the_probe_unsupported_event_and_one_warning(
        off: Run, unknown_runner: Run) -> None:
    """The harness puts the worker's runner inside a class the probe does not know
    (``FORENSICS_HARNESS_UNKNOWN_RUNNER``): the capture holds a ``probe_unsupported`` event
    naming vLLM's version and that class, the engine's log one warning saying what to set,
    and the engine serves as with the probe off."""
    import forensics

    run = unknown_runner
    assert run.error is None, run.log[-3000:]
    runner = "forensics_harness.ModelRunnerV3"
    assert [f["runner"] for f in run.faults if f.get("event") == "unknown_runner"] == [runner]
    assert run.capture is not None, run.log[-3000:]
    (event,) = [e for e in forensics.load(run.capture).events
                if e["kind"] == "probe_unsupported"]
    assert (event["runner"], event["vllm"]) == (runner, "0.32.0")
    warned = [line for line in run.log.splitlines()
              if "forensics probe:" in line and runner in line]
    assert len(warned) == 1, warned
    assert "vLLM 0.32.0" in warned[0] and "VLLM_USE_V2_MODEL_RUNNER=0" in warned[0], warned
    assert run.result["token_ids"] == off.result["token_ids"]
