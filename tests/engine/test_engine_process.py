"""The engine process killed mid-generation, and an engine refused for a bad setting."""

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
