"""Hostile input, round 18 (attack 18c): the probe's settings as a hostile environment sets
them.

Each test is a setting that was accepted and silently did nothing (or not what it said), the
engine running without what the user asked for. No test here starts the writer process or
imports vLLM: the settings are read from a mapping, the plugin is started with the thread
writer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.errors import ConfigurationError
from forensics.probe import kernel_selection, kernels, settings

#: the kernels an installed vLLM is taken to hold (the selection is checked against them)
INSTALLED = [("vllm.v1.worker.gpu.input_batch", "_compute_slot_mappings_kernel")]


def _env(tmp_path: Path, **values: str) -> dict[str, str]:
    """A probe environment: ``FORENSICS_DIR`` in ``tmp_path`` and ``values``."""
    return {"FORENSICS_DIR": str(tmp_path / "caps"), **values}


# ------------------------------------- 1. a misspelt setting's name


@pytest.mark.parametrize("name, meant", [("FORENSICS_KERNEL", "FORENSICS_KERNELS"),
                                         ("FORENSICS_MODES", "FORENSICS_MODE"),
                                         ("VLLM_FORENSICS_SITE", "FORENSICS_SITES"),
                                         ("FORENSICS_KERNEL_KEEP", "FORENSICS_KERNELS_KEEP"),
                                         ("FORENSICS_FLUSHEVERY", "FORENSICS_FLUSH_EVERY")])
def test_a_misspelt_setting_is_refused(tmp_path: Path, name: str, meant: str) -> None:
    """``FORENSICS_KERNEL=all`` (for ``FORENSICS_KERNELS``) or ``FORENSICS_MODES=guard``
    started the engine without the flight recorder or without guard mode, and nothing said
    so. The name is refused in one line naming the setting it resembles."""
    with pytest.raises(ConfigurationError) as caught:
        settings.from_env(_env(tmp_path, **{name: "guard"}))
    line = str(caught.value)
    assert "\n" not in line and repr(name) in line and f"did you mean {meant}?" in line


def test_a_name_of_another_tool_is_left_alone(tmp_path: Path) -> None:
    """A ``FORENSICS_*`` name like none of the probe's (another tool's, a test harness's) is
    not taken for a misspelling; nor are the commands' own settings."""
    found = settings.from_env(_env(tmp_path, FORENSICS_HARNESS_FAULTS="draft@2:1",
                                   FORENSICS_MAX_ALLOC="1G", FORENSICS_CHILD_TIMEOUT="5",
                                   FORENSICS_KERNELS_BUDGET="10"))
    assert found is not None and found.mode == "record"


# ------------------------------------- 2. the recorder's settings under their older names


@pytest.mark.parametrize("setting, value, read", [
    ("FORENSICS_KERNELS", "all", lambda env: kernel_selection.selection(env, INSTALLED)),
    ("FORENSICS_KERNELS_KEEP", "all", kernel_selection.keep_steps),
    ("FORENSICS_KERNELS_BUDGET", "7", kernel_selection.budget)])
def test_the_recorders_older_names_are_read(setting: str, value: str, read: object) -> None:
    """The README says the older ``VLLM_FORENSICS_*`` names still work; the flight recorder's
    three were never read under them: ``VLLM_FORENSICS_KERNELS=all`` recorded nothing,
    unsaid. Each is read as its new name is, and passed down to the engine's processes under
    the new name."""
    assert callable(read)
    new, old = read({setting: value}), read({"VLLM_" + setting: value})
    assert old == new and new != read({})
    env = {"VLLM_" + setting: value}
    settings.export(settings.Settings(directory=Path("/d"), capture=Path("/d/x.capture")), env)
    assert env.get(setting) == value and "VLLM_" + setting not in env


# ------------------------------------- 3. a selection of no kernel


@pytest.mark.parametrize("value", [",", " , ,"])
def test_a_selection_of_no_kernel_is_refused(value: str) -> None:
    """``FORENSICS_KERNELS=,`` is neither off nor any kernel: the recorder was installed
    (its wrappers, exit and signal handlers) with no glob, recorded nothing, and said nothing.
    It is refused in one line."""
    with pytest.raises(ConfigurationError, match="FORENSICS_KERNELS=.* names no kernel"):
        kernel_selection.selection({"FORENSICS_KERNELS": value}, INSTALLED)


# ------------------------------------- 4. the recorder's settings with the recorder off


@pytest.mark.parametrize("name, value", [("FORENSICS_KERNELS_KEEP", "all"),
                                         ("FORENSICS_KERNELS_BUDGET", "1048576"),
                                         ("VLLM_FORENSICS_KERNELS_KEEP", "8")])
@pytest.mark.parametrize("kernels_value", ["", "off"])
def test_a_recorder_setting_with_the_recorder_off_is_refused(name: str, value: str,
                                                            kernels_value: str) -> None:
    """``FORENSICS_KERNELS_KEEP=all`` without ``FORENSICS_KERNELS`` was accepted (a bad value
    too) and no launch recorded: the user, who asked for every step's launches, got none and
    no word. The probe refuses it before it starts anything, naming the missing setting."""
    env = {name: value, "FORENSICS_KERNELS": kernels_value}
    with pytest.raises(ConfigurationError) as caught:
        kernels.settings(env)
    line = str(caught.value)
    assert "\n" not in line and line.startswith(f"{name}=") and "FORENSICS_KERNELS" in line
    assert kernels.settings({"FORENSICS_KERNELS": kernels_value}) is None


def test_the_plugin_refuses_a_misspelt_setting_before_it_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the plugin's entry point: the engine does not start (the ConfigurationError is
    raised from ``register()``), and no capture folder is made."""
    from forensics.probe import plugin

    for name in (*settings.ENV_NAMES, "FORENSICS_KERNEL"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv("VLLM_" + name, raising=False)
    monkeypatch.setenv("FORENSICS_DIR", str(tmp_path / "caps"))
    monkeypatch.setenv("FORENSICS_WRITER", "thread")
    monkeypatch.setenv("FORENSICS_KERNEL", "all")
    try:
        with pytest.raises(ConfigurationError, match="did you mean FORENSICS_KERNELS"):
            plugin.register()
        assert plugin.session() is None and not (tmp_path / "caps").exists()
    finally:
        plugin.stop()


# ------------------------------------- 5. the hand-off a thread writer does not do


def test_record_handoff_asked_of_the_writer_thread_is_refused(tmp_path: Path) -> None:
    """``FORENSICS_HANDOFF=record`` with ``FORENSICS_WRITER=thread`` was accepted and ignored:
    the writer thread takes records in batches (a crash of the engine loses every record it
    holds), and the manifest said ``handoff: record``. Refused in one line; left unset, the
    thread writer's hand-off reads ``batch``."""
    with pytest.raises(ConfigurationError) as caught:
        settings.from_env(_env(tmp_path, FORENSICS_WRITER="thread", FORENSICS_HANDOFF="record"))
    line = str(caught.value)
    assert "\n" not in line and line.startswith("FORENSICS_HANDOFF='record'")
    assert "FORENSICS_WRITER='thread'" in line
    thread = settings.from_env(_env(tmp_path, FORENSICS_WRITER="thread"))
    assert thread is not None and thread.handoff == "batch"
    default = settings.from_env(_env(tmp_path))
    assert default is not None and default.handoff == "record"


def test_the_manifest_states_the_handoff_its_writer_does(tmp_path: Path) -> None:
    """A session whose records a thread of the engine writes (the writer thread, a system with
    no writer process, one lost) said ``handoff: record`` in its manifest and ``probe_start``
    event, the crash-safe hand-off it does not do. Both state ``batch``."""
    import json

    import forensics
    from forensics.probe.session import ProbeSession
    from forensics.probe.settings import Settings

    capture = tmp_path / "t-1.capture"
    session = ProbeSession(Settings(directory=tmp_path, capture=capture, writer="thread",
                                    handoff="record", flush_every=1, ring=8))
    try:
        pending = session.new_record("embedding")
        session.add(pending)
        session.flush(wait=True)
    finally:
        session.close()
    manifest = json.loads((capture / "manifest.json").read_text())
    assert manifest["probe"]["handoff"] == "batch"
    starts = [e for e in forensics.load(capture).events if e.get("kind") == "probe_start"]
    assert [e["handoff"] for e in starts] == ["batch"]


# ------------------------------------- 6. a SIGTERM the engine does not die of


def _records_after_sigterm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                           previous: object) -> tuple[list[str], list[str]]:
    """Start the plugin (the writer thread) with ``previous`` as SIGTERM's handler, record one
    ``batch_change`` call, send this process SIGTERM, record another; the sites recorded, and
    the kinds of the events."""
    import os
    import signal

    import forensics
    from forensics.probe import plugin

    for name in settings.ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv("VLLM_" + name, raising=False)
    monkeypatch.setenv("FORENSICS_DIR", str(tmp_path / "caps"))
    monkeypatch.setenv("FORENSICS_WRITER", "thread")
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "probe"))
    from probe_fakes import record_batch_changes

    original = signal.signal(signal.SIGTERM, previous)  # type: ignore[arg-type]
    try:
        plugin.register()
        session = plugin.session()
        assert session is not None
        record_batch_changes(session, [[0, 1]])
        os.kill(os.getpid(), signal.SIGTERM)  # handled here, in the main thread
        recording = session.wants("batch_change")
        record_batch_changes(session, [[0, 1]])
        capture = session.settings.capture
    finally:
        plugin.stop()
        signal.signal(signal.SIGTERM, original)
    loaded = forensics.load(capture)
    assert recording, "the probe stopped recording in a process that went on"
    return [r.site for r in loaded], [e["kind"] for e in loaded.events]


def test_a_sigterm_ignored_does_not_stop_the_probe(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine that ignores SIGTERM (``SIG_IGN`` when the plugin loads) goes on after one;
    the probe's handler closed its session all the same, and every record after it was
    dropped, unsaid (no event, no count). It flushes now, and records on."""
    import signal

    sites, kinds = _records_after_sigterm(tmp_path, monkeypatch, signal.SIG_IGN)
    assert sites == ["batch_change", "batch_change"] and kinds.count("probe_stop") == 1


def test_a_graceful_sigterm_handler_does_not_stop_the_probe(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIGTERM handler of the engine's that lets it go on (a graceful shutdown that finishes
    the requests in flight) is called, and the probe records those requests too."""
    called: list[int] = []
    sites, _ = _records_after_sigterm(tmp_path, monkeypatch,
                                      lambda signum, frame: called.append(signum))
    assert called and sites == ["batch_change", "batch_change"]


# ------------------------------------- 7. a guard finding on a full disk


@pytest.mark.parametrize("fail", [1, 0])
def test_a_guard_error_says_where_its_records_are_only_when_they_are(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail: int) -> None:
    """Guard mode's ``IndexBoundsError`` said "records up to this call are in CAPTURE" after
    the waited flush that was to put them there failed (a full disk: 0 written, 2 dropped):
    the investigator was sent to a capture that holds none of them. It says they could not
    all be written, and where to read why; the same for the ``guard_violation`` event."""
    from forensics.errors import IndexBoundsError
    from forensics.probe import hooks
    from forensics.probe.session import ProbeSession

    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "probe"))
    from probe_fakes import FakeWriter, batch_args, make_settings, plain_batch_change

    writer = FakeWriter(fail_flush=fail)
    session = ProbeSession(make_settings(tmp_path, ring=8, flush_every=4, mode="guard"),
                           writer_factory=lambda s: writer)
    hooks.activate(session)
    try:
        wrapped = hooks.wrap_batch_change(plain_batch_change)
        wrapped(*batch_args([0]))
        with pytest.raises(IndexBoundsError) as caught:
            wrapped(*batch_args([0, 3], valid_rows=3))
    finally:
        hooks.activate(None)
    text = str(caught.value)
    said = [e["message"] for e in writer.events if e["kind"] == "guard_violation"]
    assert said == [text] and "\n" not in text
    if fail:
        assert session.counts["written"] == 0 and "are in" not in text
        assert "could not all be written to" in text and "t-1.capture" in text
    else:
        assert len(writer.flushed) == 2 and "records up to this call are in" in text


# ------------------------------------- 8. sites the engine's runner never calls


def _runner(module: str) -> object:
    """A runner whose class is vLLM's of ``module`` (by name: no vLLM is imported)."""
    cls = type("GPUModelRunner", (), {})
    cls.__module__ = module
    return cls()


@pytest.mark.parametrize("module, sites, warned", [
    ("vllm.v1.worker.gpu.model_runner", ("batch_change",), True),
    ("vllm.v1.worker.gpu_model_runner", ("post_update", "combine_tokens"), True),
    ("vllm.v1.worker.gpu.model_runner", ("batch_change", "post_update"), False),
    ("vllm.v1.worker.gpu_model_runner", ("embedding",), False)])
def test_sites_the_runner_never_calls_are_said(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                               module: str, sites: tuple[str, ...],
                                               warned: bool) -> None:
    """``FORENSICS_SITES=batch_change`` under Model Runner V2 (or V2's sites under V1) was
    accepted and recorded nothing; with nothing recorded the probe writes no capture and no
    event, and removes the empty folder: nothing said so. Once the worker has loaded its
    runner, one warning names the setting and the sites that runner calls."""
    import logging

    from forensics.probe import hooks, v2_hooks
    from forensics.probe.session import ProbeSession

    capture = tmp_path / "t-1.capture"
    session = ProbeSession(settings.Settings(directory=tmp_path, capture=capture,
                                             sites=sites, writer="thread"),
                           writer_factory=lambda s: None)
    worker = type("Worker", (), {"model_runner": _runner(module)})()
    hooks.activate(session)
    try:
        with caplog.at_level(logging.WARNING, logger="forensics.probe"):
            v2_hooks.wrap_load_model(lambda self: None)(worker)
    finally:
        hooks.activate(None)
    lines = [r.getMessage() for r in caplog.records if "FORENSICS_SITES" in r.getMessage()]
    assert len(lines) == int(warned), lines
    if warned:
        runs = "post_update" if ".gpu." in module else "batch_change"
        assert "nothing is recorded" in lines[0] and runs in lines[0]
    assert session.counts["errors"] == 0


# ------------------------------------- 9. an expectation the check does not replay

pytest_plugins = ["pytester"]


def _with_vllm_expectation(root: Path) -> Path:
    """A bundled capture whose expected.json also holds verdicts of the ``vllm`` variant (as
    ``--forensics-regen --forensics-variant vllm`` writes them), all ``ok``."""
    import json
    import shutil

    capture = root / "caps" / "stale-prev-row.capture"
    shutil.copytree(Path(__file__).parents[2] / "data" / "stale-prev-row.capture", capture)
    path = capture / "expected.json"
    data = json.loads(path.read_text())
    data["verdicts"]["vllm"] = {site: "ok" for site in data["verdicts"]["upstream"]}
    data["first_finding"]["vllm"] = None
    path.write_text(json.dumps(data))
    return capture


def test_a_check_of_fewer_variants_says_which_it_did_not_check(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``forensics check CAP --variant upstream`` printed "matches expected.json" (exit 0)
    though expected.json's ``patched`` and ``vllm`` verdicts were not replayed. The line says
    which it checked and which not, with the command that checks them all; ``--json`` lists
    them."""
    from forensics.cli import main

    capture = _with_vllm_expectation(tmp_path)
    assert main(["check", str(capture), "--variant", "upstream"]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith("stale-prev-row.capture: matches expected.json for upstream only; "
                          "not checked: the verdicts of variant(s) patched, vllm"), out
    assert f"forensics check {capture} --variant upstream --variant patched --variant vllm" in out
    assert main(["check", str(capture), "--variant", "upstream", "--json"]) == 0
    assert '"variants_not_checked": [\n    "patched",\n    "vllm"\n  ]' in capsys.readouterr().out


def test_the_plugins_pass_names_the_variants_it_did_not_check(
        tmp_path: Path, pytester: pytest.Pytester) -> None:
    """The pytest plugin replays the built-in models (and ``--forensics-variant``s): of a
    capture whose expected.json holds the ``vllm`` variant's verdicts (never replayed without
    ``--forensics-variant vllm``), its item passed in silence, vouching for expectations it
    never checked. It passes (what it replayed matches) with a warning naming them and the
    option that checks them."""
    capture = _with_vllm_expectation(tmp_path)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-o", "forensics_captures=",
                                          "--forensics-captures", str(capture.parent))
    result.assert_outcomes(passed=1, warnings=1)
    text = " ".join(line.strip() for line in result.outlines)
    assert "matches expected.json for upstream, patched only" in text
    assert "not checked: the verdicts of variant(s) vllm" in text
    assert "add --forensics-variant vllm" in text
